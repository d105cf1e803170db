// Package telegramtest is a fake Telegram Bot API server for tests. It speaks
// the wire protocol (https://core.telegram.org/bots/api#making-requests):
// POST /bot<token>/<method> with multipart, urlencoded or JSON parameters,
// and GET /file/bot<token>/<file_path> for downloads. It records every call,
// rejects message text that real Telegram would reject (see ValidateHTML),
// can be scripted to fail with 429 retry_after or any other error, or to
// refuse every HTML message (RefuseHTML), and serves
// getFile for the file_ids in shared/data/telegram/updates.jsonl.
package telegramtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Bot identity answered by getMe; it matches the sample updates.
const (
	BotID       = 42
	BotUsername = "tendril_test_bot"
	Token       = "42:TEST-TOKEN" // a token whose bot id matches BotID
)

// Call is one recorded Bot API request.
type Call struct {
	Method string            // as requested, e.g. "sendMessage"
	Params map[string]string // form fields; nested objects stay JSON text
	Status int               // HTTP status answered
	Error  string            // description when not ok
}

// Message is a sendMessage the server accepted.
type Message struct {
	ChatID      int64
	MessageID   int
	Text        string // as sent (HTML when ParseMode is HTML)
	ParseMode   string
	ReplyMarkup string // JSON text of reply_markup, if any
}

// Button is one inline keyboard button of a sent message.
type Button struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
}

// Buttons decodes the inline keyboard of m, row by row.
func (m Message) Buttons() []Button {
	var mk struct {
		InlineKeyboard [][]Button `json:"inline_keyboard"`
	}
	_ = json.Unmarshal([]byte(m.ReplyMarkup), &mk)
	var out []Button
	for _, row := range mk.InlineKeyboard {
		out = append(out, row...)
	}
	return out
}

// File is a file getFile can describe and /file/ can serve.
type File struct {
	Path string
	Size int64 // as reported by getFile; may exceed len(Data) for "huge" files
	Data []byte
}

type failure struct {
	code       int
	desc       string
	retryAfter int
	page       string // when set, the body: not the Bot API's JSON (a proxy's error page)
}

// Server is a running fake Bot API. Its zero value is not usable; call New.
type Server struct {
	*httptest.Server
	// Token, when set, is the only bot token accepted (others get 401
	// Unauthorized); empty accepts any token.
	Token string

	mu       sync.Mutex
	calls    []Call
	messages []Message
	files    map[string]File
	failures map[string][]failure // lower-case method -> queued failures
	refuse   int                  // HTML sendMessages still accepted before refusing all; -1: never refuse
	nextID   int
	changed  chan struct{}
	latency  func(method string) time.Duration // nil: answer at once
}

// New starts a fake server, closed when t ends. It serves the sample
// file_ids with JPEG bytes of the sizes the samples declare.
func New(t testing.TB) *Server {
	s := NewServer()
	t.Cleanup(s.Close)
	return s
}

// NewServer starts a fake server; the caller closes it.
func NewServer() *Server {
	s := &Server{
		files:    map[string]File{},
		failures: map[string][]failure{},
		nextID:   1000,
		refuse:   -1,
		changed:  make(chan struct{}),
	}
	for id, size := range map[string]int{
		"AgACAgIAAxkBAAIBsmall": 1402, "AgACAgIAAxkBAAIBmedium": 18221, "AgACAgIAAxkBAAIBlarge": 121503,
		"AgACAgIAAxkBAAIalbum1": 90000, "AgACAgIAAxkBAAIalbum2": 90001, "AgACAgIAAxkBAAIalbum3": 90002,
		"CAACAgIAAxkBAAIsticker": 2048,
	} {
		s.AddFile(id, JPEG(size))
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// JPEG returns n bytes that start with a JPEG signature, so content
// sniffing reports image/jpeg.
func JPEG(n int) []byte {
	b := make([]byte, max(n, 4))
	copy(b, []byte{0xFF, 0xD8, 0xFF, 0xE0})
	for i := 4; i < len(b); i++ {
		b[i] = byte(i * 31)
	}
	return b
}

// AddFile makes fileID downloadable with the given bytes.
func (s *Server) AddFile(fileID string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[fileID] = File{Path: "photos/" + fileID + ".jpg", Size: int64(len(data)), Data: data}
}

// AddHugeFile registers fileID as size bytes; getFile then answers
// "Bad Request: file is too big" as Telegram does above 20 MB.
func (s *Server) AddHugeFile(fileID string, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[fileID] = File{Path: "photos/" + fileID + ".jpg", Size: size}
}

// Fail queues n failures for method: each of its next n calls answers code
// with description desc and, when retryAfter > 0, parameters.retry_after.
func (s *Server) Fail(method string, n, code int, desc string, retryAfter int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := strings.ToLower(method)
	for range n {
		s.failures[k] = append(s.failures[k], failure{code: code, desc: desc, retryAfter: retryAfter})
	}
}

// FailPage makes the next n calls of method answer with HTTP status code
// and page as a text/html body instead of the Bot API's JSON, as a proxy
// or load balancer in front of Telegram does ("502 Bad Gateway").
func (s *Server) FailPage(method string, n, code int, page string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := strings.ToLower(method)
	for range n {
		s.failures[k] = append(s.failures[k], failure{code: code, desc: page, page: page})
	}
}

// RefuseHTML makes every later sendMessage with parse_mode HTML fail, as
// Telegram does for HTML it cannot parse, with 400 "Bad Request: can't parse
// entities: ..." whatever the text; messages without a parse mode are
// unaffected. RefuseHTML(false) restores normal validation.
func (s *Server) RefuseHTML(on bool) {
	if on {
		s.RefuseHTMLAfter(0)
		return
	}
	s.RefuseHTMLAfter(-1)
}

// RefuseHTMLAfter accepts the next n valid HTML messages and then refuses
// every HTML message as RefuseHTML(true) does; n < 0 refuses none.
func (s *Server) RefuseHTMLAfter(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = max(n, -1)
}

// SetLatency makes the server wait f(method) after handling each Bot API
// call and before answering it (method as requested, e.g. "sendMessage"):
// a slow Telegram, whose effects (an accepted message) are visible before
// the client has the answer. nil restores immediate answers.
func (s *Server) SetLatency(f func(method string) time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = f
}

// RateLimit queues n "429 Too Many Requests: retry after N" answers.
func (s *Server) RateLimit(method string, n, retryAfter int) {
	s.Fail(method, n, http.StatusTooManyRequests, fmt.Sprintf("Too Many Requests: retry after %d", retryAfter), retryAfter)
}

// Calls returns every recorded call, optionally only those of the named
// methods (case-insensitive).
func (s *Server) Calls(methods ...string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if len(methods) == 0 || containsFold(methods, c.Method) {
			out = append(out, c)
		}
	}
	return out
}

// Messages returns the accepted sendMessage calls for chatID, in order.
func (s *Server) Messages(chatID int64) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.messages {
		if m.ChatID == chatID {
			out = append(out, m)
		}
	}
	return out
}

// AllMessages returns every accepted sendMessage, in order.
func (s *Server) AllMessages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// WaitFor polls cond after every recorded call until it holds or timeout
// passes, then fails t.
func (s *Server) WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("telegramtest: timed out after %v waiting for %s; calls: %v", timeout, what, s.Calls())
		}
	}
}

// WaitMessages waits until chatID has at least n messages and returns them.
func (s *Server) WaitMessages(t testing.TB, chatID int64, n int) []Message {
	t.Helper()
	s.WaitFor(t, 20*time.Second, fmt.Sprintf("%d messages in chat %d", n, chatID), func() bool {
		return len(s.Messages(chatID)) >= n
	})
	return s.Messages(chatID)
}

func containsFold(list []string, s string) bool {
	for _, l := range list {
		if strings.EqualFold(l, s) {
			return true
		}
	}
	return false
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if rest, ok := strings.CutPrefix(path, "/file/bot"); ok {
		s.serveFile(w, rest)
		return
	}
	rest, ok := strings.CutPrefix(path, "/bot")
	if !ok {
		http.NotFound(w, r)
		return
	}
	token, method, ok := strings.Cut(rest, "/")
	if !ok || method == "" {
		writeError(w, http.StatusNotFound, "Not Found", 0)
		return
	}
	params, err := parseParams(r)
	call := Call{Method: method, Params: params}
	defer func() {
		s.mu.Lock()
		s.calls = append(s.calls, call)
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	}()
	if s.Token != "" && token != s.Token {
		call.Status, call.Error = http.StatusUnauthorized, "Unauthorized"
		writeError(w, call.Status, call.Error, 0)
		return
	}
	if err != nil {
		call.Status, call.Error = http.StatusBadRequest, "Bad Request: "+err.Error()
		writeError(w, call.Status, call.Error, 0)
		return
	}
	s.mu.Lock()
	if q := s.failures[strings.ToLower(method)]; len(q) > 0 {
		f := q[0]
		s.failures[strings.ToLower(method)] = q[1:]
		s.mu.Unlock()
		call.Status, call.Error = f.code, f.desc
		if f.page != "" {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(f.code)
			io.WriteString(w, f.page)
			return
		}
		writeError(w, f.code, f.desc, f.retryAfter)
		return
	}
	s.mu.Unlock()
	result, status, desc := s.dispatch(strings.ToLower(method), params)
	call.Status, call.Error = status, desc
	s.mu.Lock()
	latency := s.latency
	s.mu.Unlock()
	if latency != nil {
		if d := latency(method); d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
			}
		}
	}
	if status != http.StatusOK {
		writeError(w, status, desc, 0)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "result": result})
}

func (s *Server) dispatch(method string, p map[string]string) (any, int, string) {
	switch method {
	case "getme":
		return map[string]any{"id": BotID, "is_bot": true, "first_name": "Tendril", "username": BotUsername}, 200, ""
	case "sendmessage":
		chatID, err := strconv.ParseInt(p["chat_id"], 10, 64)
		if err != nil {
			return nil, 400, "Bad Request: chat not found"
		}
		text := p["text"]
		switch strings.ToLower(p["parse_mode"]) {
		case "html":
			if _, err := ValidateHTML(text); err != nil {
				return nil, 400, err.Error()
			}
			s.mu.Lock()
			refuse := s.refuse == 0
			if s.refuse > 0 {
				s.refuse--
			}
			s.mu.Unlock()
			if refuse {
				return nil, 400, ErrParseEntities.Error() + ": Can't find end of the entity starting at byte offset 0"
			}
		case "":
			if strings.TrimSpace(text) == "" {
				return nil, 400, "Bad Request: message text is empty"
			}
			if utf16Len(text) > MaxMessageUnits {
				return nil, 400, "Bad Request: message is too long"
			}
		default:
			return nil, 400, "Bad Request: unsupported parse_mode " + p["parse_mode"]
		}
		if rm := p["reply_markup"]; rm != "" && !json.Valid([]byte(rm)) {
			return nil, 400, "Bad Request: can't parse reply keyboard markup JSON object"
		}
		s.mu.Lock()
		s.nextID++
		m := Message{ChatID: chatID, MessageID: s.nextID, Text: text, ParseMode: p["parse_mode"], ReplyMarkup: p["reply_markup"]}
		s.messages = append(s.messages, m)
		s.mu.Unlock()
		return map[string]any{"message_id": m.MessageID, "date": time.Now().Unix(), "chat": map[string]any{"id": chatID, "type": "private"}, "text": text}, 200, ""
	case "getfile":
		s.mu.Lock()
		f, ok := s.files[p["file_id"]]
		s.mu.Unlock()
		if !ok {
			return nil, 400, "Bad Request: invalid file_id"
		}
		if f.Size > 20<<20 {
			return nil, 400, "Bad Request: file is too big"
		}
		return map[string]any{"file_id": p["file_id"], "file_unique_id": "u" + p["file_id"], "file_size": f.Size, "file_path": f.Path}, 200, ""
	case "sendchataction", "answercallbackquery", "editmessagereplymarkup", "setwebhook", "deletewebhook":
		return true, 200, ""
	case "getwebhookinfo":
		return map[string]any{"url": "", "pending_update_count": 0}, 200, ""
	}
	return nil, 404, "Not Found: method not found"
}

func (s *Server) serveFile(w http.ResponseWriter, rest string) {
	token, path, _ := strings.Cut(rest, "/")
	s.mu.Lock()
	var data []byte
	found := false
	for _, f := range s.files {
		if f.Path == path && f.Data != nil {
			data, found = f.Data, true
		}
	}
	s.calls = append(s.calls, Call{Method: "file", Params: map[string]string{"file_path": path}, Status: 200})
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	if s.Token != "" && token != s.Token || !found {
		http.NotFound(w, nil)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(data)
}

func writeError(w http.ResponseWriter, code int, desc string, retryAfter int) {
	body := map[string]any{"ok": false, "error_code": code, "description": desc}
	if retryAfter > 0 {
		body["parameters"] = map[string]any{"retry_after": retryAfter}
	}
	writeJSON(w, code, body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// parseParams reads Bot API parameters from the query string and a
// multipart, urlencoded or JSON body. Nested objects are kept as JSON text.
func parseParams(r *http.Request) (map[string]string, error) {
	p := map[string]string{}
	for k, v := range r.URL.Query() {
		p[k] = v[0]
	}
	if r.Body == nil {
		return p, nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return p, err
	}
	if len(body) == 0 { // go-telegram/bot sends no body for methods without parameters
		return p, nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "multipart/form-data":
		if err := r.ParseMultipartForm(32 << 20); err != nil {
			return p, fmt.Errorf("bad multipart body: %w", err)
		}
		for k, v := range r.MultipartForm.Value {
			p[k] = v[0]
		}
	case "application/x-www-form-urlencoded":
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return p, err
		}
		q, err := url.ParseQuery(string(b))
		if err != nil {
			return p, err
		}
		for k, v := range q {
			p[k] = v[0]
		}
	case "application/json":
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			return p, fmt.Errorf("bad JSON body: %w", err)
		}
		for k, v := range m {
			switch v := v.(type) {
			case string:
				p[k] = v
			default:
				b, _ := json.Marshal(v)
				p[k] = strings.Trim(string(b), `"`)
			}
		}
	}
	return p, nil
}
