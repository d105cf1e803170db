// Package modeltest provides fake model servers that speak the real wire
// formats of the three providers, for tests:
//
//   - Anthropic Messages: POST /v1/messages
//   - Bedrock Converse:   POST /model/{modelId}/converse (and /converse-stream)
//   - OpenAI Chat Completions: POST /v1/chat/completions (and /chat/completions)
//
// A fake records every request, decoded into a provider-neutral Seen, and
// answers from a script of Replies pushed by the test. With the script
// empty it answers "echo: <last user text>", which is a deterministic test
// reply and nothing else.
//
//	srv := modeltest.NewOpenAI(t)                // httptest server, closed by t.Cleanup
//	t.Setenv("OPENAI_BASE_URL", srv.BaseURL())   // http://127.0.0.1:port/v1
//	srv.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "time", Args: `{}`}}})
//	srv.Push(modeltest.Reply{Text: "done"})
//	... run the agent ...
//	seen := srv.Requests()                       // []modeltest.Seen
//
// Streaming requests ("stream": true for OpenAI and Anthropic, the
// /converse-stream path for Bedrock) get the provider's real streaming wire
// format: SSE chunks or events, or AWS event-stream binary messages, with
// the scripted Text and tool-call Args split into pieces (Reply.StreamChunks)
// and optional mid-stream failures (Reply.StreamCut, StreamErrorType).
// Seen.Stream records that the request asked for it.
//
// NewFake returns the bare http.Handler for use outside httptest.
package modeltest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/model"
)

// Kind names a wire format.
type Kind string

// The three wire formats.
const (
	Anthropic Kind = "anthropic"
	OpenAI    Kind = "openai"
	Bedrock   Kind = "bedrock"
)

// maxBody caps a recorded request body (bytes).
const maxBody = 64 << 20

// ToolCall is one tool call in a scripted reply. Args is a JSON object
// ("" means {}); ID "" gets a generated, provider-styled id.
type ToolCall struct {
	ID, Name, Args string
}

// Reply is one scripted answer. The zero Reply is an empty end_turn answer.
type Reply struct {
	// Model, if set, restricts the reply to requests for that model name
	// (without the provider prefix); other requests skip over it.
	Model string

	Text       string
	ToolCalls  []ToolCall
	StopReason model.StopReason // default: tool_use with ToolCalls, else end_turn
	// InputTokens and OutputTokens default to len(request body)/4 and
	// len(Text)/4+1.
	InputTokens, OutputTokens int

	// Status ≥ 400 answers with that provider's error shape.
	Status int
	// ErrorType, ErrorCode and ErrorMessage override the error body: the
	// Anthropic error.type, the OpenAI error.type / error.code, the Bedrock
	// x-amzn-ErrorType; defaults follow the status.
	ErrorType, ErrorCode, ErrorMessage string
	// Overflow answers with the provider's real context-window error
	// (Anthropic 400 "prompt is too long", OpenAI 400
	// context_length_exceeded, Bedrock 400 ValidationException "Input is
	// too long for requested model.").
	Overflow bool

	// Header is set on the response, e.g. {"Retry-After": "2"}.
	Header map[string]string
	// Body, if set, is written verbatim (status Status, default 200;
	// Content-Type application/json unless Header sets it), e.g. malformed JSON.
	Body string
	// Delay waits before answering, or until the client goes away.
	Delay time.Duration
	// Hold, when not nil, waits until it is closed before answering (after
	// Delay), or until the client goes away: a test decides when the
	// model call ends.
	Hold <-chan struct{}

	// Streaming: requests with "stream": true (OpenAI, Anthropic) are
	// answered in the provider's SSE format, Bedrock /converse-stream in
	// the AWS event-stream binary format, with Text and each tool call's
	// Args split into StreamChunks pieces on rune boundaries (0 means
	// DefaultStreamChunks; fewer for shorter strings).
	StreamChunks int
	// StreamCut > 0 ends the stream after that many text pieces: with the
	// provider's in-stream error event of type StreamErrorType (message
	// ErrorMessage) when set, else by dropping the connection mid-body.
	StreamCut       int
	StreamErrorType string
	// ChunkDelay waits before every stream event after the first text
	// piece, or until the client goes away.
	ChunkDelay time.Duration
}

// Seen is one request as the fake received it, in provider-neutral form.
// Tool results of OpenAI "tool" messages appear as tool_result blocks of a
// user message, merged with the user message that follows them, so Messages
// matches the model.Request the provider was given.
type Seen struct {
	Kind      Kind
	Path      string
	Model     string
	System    string
	Messages  []model.Message
	Tools     []string // tool names, in order
	ToolDefs  []model.ToolDef
	MaxTokens int
	Header    http.Header
	Body      json.RawMessage // the raw request body
	// Stream is true when the request asked for a streamed answer
	// ("stream": true).
	Stream bool
	// DecodeErr is set when the body did not decode; the fake answered 400.
	DecodeErr string
}

// LastUserText returns the text of the last user message: its text blocks,
// or else its tool results, joined by "\n".
func (s Seen) LastUserText() string {
	for i := len(s.Messages) - 1; i >= 0; i-- {
		m := s.Messages[i]
		if m.Role != model.RoleUser {
			continue
		}
		var texts, results []string
		for _, b := range m.Content {
			switch b.Type {
			case model.BlockText:
				texts = append(texts, b.Text)
			case model.BlockToolResult:
				results = append(results, b.Text)
			}
		}
		if len(texts) > 0 {
			return strings.Join(texts, "\n")
		}
		return strings.Join(results, "\n")
	}
	return ""
}

// HasImage reports whether any message carries an image block.
func (s Seen) HasImage() bool {
	for _, m := range s.Messages {
		for _, b := range m.Content {
			if b.Type == model.BlockImage {
				return true
			}
		}
	}
	return false
}

// Fake is the http.Handler behind a fake server. It is safe for concurrent
// use.
type Fake struct {
	kind  Kind
	mu    sync.Mutex
	queue []Reply
	seen  []Seen
	n     int
	// otherwise answers requests when the script is empty (nil: the zero Reply).
	otherwise func(Seen) Reply
}

// Otherwise sets how requests are answered once the script is empty, for
// example an echo of Seen.LastUserText in a load test (nil restores the
// zero Reply).
func (f *Fake) Otherwise(fn func(Seen) Reply) {
	f.mu.Lock()
	f.otherwise = fn
	f.mu.Unlock()
}

// NewFake returns a handler speaking kind's wire format.
func NewFake(kind Kind) *Fake {
	switch kind {
	case Anthropic, OpenAI, Bedrock:
	default:
		panic(fmt.Sprintf("modeltest: unknown kind %q", kind))
	}
	return &Fake{kind: kind}
}

// Kind returns the wire format.
func (f *Fake) Kind() Kind { return f.kind }

// Push appends replies to the script.
func (f *Fake) Push(r ...Reply) {
	f.mu.Lock()
	f.queue = append(f.queue, r...)
	f.mu.Unlock()
}

// Pending returns how many scripted replies are left.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queue)
}

// Requests returns a copy of every request received so far, in order.
func (f *Fake) Requests() []Seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Seen(nil), f.seen...)
}

// Reset drops the script and the recorded requests.
func (f *Fake) Reset() {
	f.mu.Lock()
	f.queue, f.seen = nil, nil
	f.mu.Unlock()
}

// next records s and takes the first reply meant for its model.
func (f *Fake) next(s Seen) (Reply, int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, s)
	f.n++
	for i, r := range f.queue {
		if r.Model == "" || r.Model == s.Model {
			f.queue = append(f.queue[:i:i], f.queue[i+1:]...)
			return r, f.n, true
		}
	}
	if f.otherwise != nil {
		return f.otherwise(s), f.n, true
	}
	return Reply{}, f.n, false
}

// ServeHTTP implements the provider endpoint.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	modelID, ok := f.route(r)
	if !ok {
		f.writeError(w, http.StatusNotFound, Reply{ErrorMessage: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return
	}
	if len(body) > maxBody {
		f.writeError(w, http.StatusRequestEntityTooLarge, Reply{ErrorMessage: "request body too large"})
		return
	}
	s := Seen{Kind: f.kind, Path: r.URL.Path, Model: modelID, Header: r.Header.Clone(), Body: json.RawMessage(body)}
	if f.kind != Bedrock {
		s.Stream = wantsStream(body)
	} else {
		s.Stream = strings.HasSuffix(r.URL.Path, "/converse-stream")
	}
	switch f.kind {
	case Anthropic:
		err = decodeAnthropic(body, &s)
	case OpenAI:
		err = decodeOpenAI(body, &s)
	case Bedrock:
		err = decodeBedrock(body, &s)
	}
	if err != nil {
		s.DecodeErr = err.Error()
	}
	reply, n, scripted := f.next(s)
	if err != nil {
		f.writeError(w, http.StatusBadRequest, Reply{ErrorMessage: "malformed request: " + err.Error()})
		return
	}
	if !scripted {
		reply = Reply{Text: "echo: " + s.LastUserText()}
	}
	if reply.Delay > 0 {
		t := time.NewTimer(reply.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if reply.Hold != nil {
		select {
		case <-reply.Hold:
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	switch {
	case reply.Body != "":
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		status := reply.Status
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		io.WriteString(w, reply.Body)
	case reply.Overflow:
		f.writeOverflow(w, reply)
	case reply.Status >= 400:
		f.writeError(w, reply.Status, reply)
	default:
		if reply.InputTokens == 0 {
			reply.InputTokens = len(body)/4 + 1
		}
		if reply.OutputTokens == 0 {
			reply.OutputTokens = len(reply.Text)/4 + 1
		}
		if reply.StopReason == "" {
			reply.StopReason = model.StopEndTurn
			if len(reply.ToolCalls) > 0 {
				reply.StopReason = model.StopToolUse
			}
		}
		for i := range reply.ToolCalls {
			if reply.ToolCalls[i].ID == "" {
				reply.ToolCalls[i].ID = f.toolID(n, i)
			}
			if strings.TrimSpace(reply.ToolCalls[i].Args) == "" {
				reply.ToolCalls[i].Args = "{}"
			}
		}
		if s.Stream {
			switch f.kind {
			case Anthropic:
				writeAnthropicStream(w, r, n, s.Model, reply)
			case OpenAI:
				writeOpenAIStream(w, r, n, s.Model, body, reply)
			case Bedrock:
				writeBedrockStream(w, r, reply)
			}
			return
		}
		var out any
		switch f.kind {
		case Anthropic:
			out = anthropicReply(n, s.Model, reply)
		case OpenAI:
			out = openAIReply(n, s.Model, reply)
		case Bedrock:
			out = bedrockReply(reply)
		}
		writeJSON(w, http.StatusOK, out)
	}
}

func (f *Fake) route(r *http.Request) (modelID string, ok bool) {
	if r.Method != http.MethodPost {
		return "", false
	}
	p := r.URL.Path
	switch f.kind {
	case Anthropic:
		return "", p == "/v1/messages"
	case OpenAI:
		return "", p == "/v1/chat/completions" || p == "/chat/completions"
	case Bedrock:
		rest, ok := strings.CutPrefix(p, "/model/")
		if !ok {
			return "", false
		}
		id, ok := strings.CutSuffix(rest, "/converse")
		if !ok {
			id, ok = strings.CutSuffix(rest, "/converse-stream")
		}
		return id, ok && id != ""
	}
	return "", false
}

func (f *Fake) toolID(n, i int) string {
	switch f.kind {
	case Anthropic:
		return fmt.Sprintf("toolu_fake_%d_%d", n, i)
	case Bedrock:
		return fmt.Sprintf("tooluse_fake_%d_%d", n, i)
	}
	return fmt.Sprintf("call_fake_%d_%d", n, i)
}

func (f *Fake) writeError(w http.ResponseWriter, status int, r Reply) {
	switch f.kind {
	case Anthropic:
		writeAnthropicError(w, status, r)
	case OpenAI:
		writeOpenAIError(w, status, r)
	case Bedrock:
		writeBedrockError(w, status, r)
	}
}

func (f *Fake) writeOverflow(w http.ResponseWriter, r Reply) {
	switch f.kind {
	case Anthropic:
		r.ErrorType, r.ErrorMessage = "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"
	case OpenAI:
		r.ErrorType, r.ErrorCode = "invalid_request_error", "context_length_exceeded"
		r.ErrorMessage = "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages."
	case Bedrock:
		r.ErrorType, r.ErrorMessage = "ValidationException", "Input is too long for requested model."
	}
	f.writeError(w, http.StatusBadRequest, r)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// Server is a Fake behind an httptest.Server.
type Server struct {
	*Fake
	*httptest.Server
}

// Start starts a fake of kind on 127.0.0.1 and closes it with t.Cleanup.
func Start(t testing.TB, kind Kind) *Server {
	t.Helper()
	f := NewFake(kind)
	s := &Server{Fake: f, Server: httptest.NewServer(f)}
	t.Cleanup(s.Server.Close)
	return s
}

// NewAnthropic starts an Anthropic Messages fake; point ANTHROPIC_BASE_URL
// (or anthropic.Options.BaseURL) at BaseURL().
func NewAnthropic(t testing.TB) *Server { return Start(t, Anthropic) }

// NewOpenAI starts a Chat Completions fake; point OPENAI_BASE_URL (or
// openai.Options.BaseURL) at BaseURL(), which ends in "/v1".
func NewOpenAI(t testing.TB) *Server { return Start(t, OpenAI) }

// NewBedrock starts a Converse fake; point AWS_ENDPOINT_URL_BEDROCK_RUNTIME
// (or bedrock.Options.Endpoint) at BaseURL(). Any static credentials work.
func NewBedrock(t testing.TB) *Server { return Start(t, Bedrock) }

// BaseURL is the value for the provider's base-URL setting: URL+"/v1" for
// OpenAI (whose base includes the version), URL otherwise.
func (s *Server) BaseURL() string {
	if s.Fake.kind == OpenAI {
		return s.Server.URL + "/v1"
	}
	return s.Server.URL
}
