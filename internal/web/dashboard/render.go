package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/assistant"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/web/sanitize"
)

// when formats a time.Time or Unix seconds (int64) as UTC, "—" for zero.
func when(ts any) string {
	switch v := ts.(type) {
	case time.Time:
		if v.IsZero() {
			return "—"
		}
		return v.UTC().Format("2006-01-02 15:04:05Z")
	case *time.Time:
		if v == nil {
			return "—"
		}
		return when(*v)
	case int64:
		if v == 0 {
			return "—"
		}
		return time.Unix(v, 0).UTC().Format("2006-01-02 15:04:05Z")
	}
	return fmt.Sprint(ts)
}

func f2(v float64) string { return fmt.Sprintf("%.2f", v) }

func f3(v float64) string { return fmt.Sprintf("%.3f", v) }

// metaJSON is a record's metadata as compact JSON, "" when empty.
func metaJSON(m map[string]any) string {
	if len(m) == 0 {
		return ""
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// deltas lists a state change's non-zero dimensions ("joy +0.120, …").
func deltas(v state.Vector) string {
	var parts []string
	for i, x := range v {
		if x != 0 {
			parts = append(parts, fmt.Sprintf("%s %+.3f", state.Dim(i), x))
		}
	}
	return strings.Join(parts, ", ")
}

// short abbreviates an ID of more than 16 bytes to its first 8 and last
// 6 around "…": a ULID's first characters are its timestamp, so IDs made
// in the same second share them and only the tail tells them apart
// ("msg_01M9…5AA3VT"). idCode shows it with the whole ID as a tooltip.
func short(s string) string {
	if len(s) > 16 {
		return s[:8] + "…" + s[len(s)-6:]
	}
	return s
}

// pageData is what every template gets.
type pageData struct {
	Lang     string
	Title    string
	Nav      string
	CSRF     string
	SignedIn bool
	Auth     bool // a token is configured (show "Sign out")
	Flash    string
	Data     any
}

func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, name, title string, data any) {
	l := lang(r)
	csrf, _ := r.Context().Value(csrfKey).(string)
	signed, _ := r.Context().Value(signedInKey).(bool)
	p := pageData{Lang: l, Title: t(l, title), Nav: name, CSRF: csrf, SignedIn: signed, Auth: d.opt.AuthToken != "",
		Flash: r.URL.Query().Get("done"), Data: data}
	var buf bytes.Buffer
	if err := layout(p, views[name](p)).Render(&buf); err != nil {
		d.log.Error("dashboard template failed", "page", name, "err", err)
		http.Error(w, "template error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Language", l)
	w.Header().Set("Cache-Control", "no-store")
	w.Write(buf.Bytes())
}

// fail renders an error page (or JSON for fetch and EventSource callers)
// with the status the error maps to when status is 0.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	if status == 0 {
		status = errStatus(err)
	}
	if status >= 500 {
		d.log.Error("dashboard request failed", "path", r.URL.Path, "err", err)
	}
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]any{"ok": false, "message": err.Error()})
		return
	}
	w.WriteHeader(status)
	d.render(w, r, "error", "Error", errorData{Status: status, Message: err.Error(), Back: backOf(r.URL.Path)})
}

// backOf is the page an error page's "Back" link returns to: the section
// the failed request belongs to ("/schedules" for POST /schedules/…/run),
// else the chat.
func backOf(p string) string {
	seg, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	switch seg {
	case "sessions", "memory", "approvals", "state", "schedules", "settings":
		return "/" + seg
	}
	return "/"
}

func wantsJSON(r *http.Request) bool {
	a := r.Header.Get("Accept")
	return strings.Contains(a, "application/json") || strings.Contains(a, "text/event-stream")
}

// errStatus maps an application-layer error to an HTTP status.
func errStatus(err error) int {
	switch {
	case errors.Is(err, assistant.ErrInvalid), errors.Is(err, approval.ErrInvalidID):
		return http.StatusBadRequest
	case errors.Is(err, assistant.ErrNotYours):
		return http.StatusForbidden
	case errors.Is(err, memory.ErrNotFound), errors.Is(err, schedule.ErrNotFound), errors.Is(err, approval.ErrNotFound),
		errors.Is(err, assistant.ErrNoSession), errors.Is(err, session.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, approval.ErrAlreadyDecided), errors.Is(err, approval.ErrExpired), errors.Is(err, approval.ErrLedgerBroken),
		errors.Is(err, approval.ErrConsumed), errors.Is(err, approval.ErrRulesChanged):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// done redirects after a successful form post (Post/Redirect/Get), or
// answers JSON to a fetch.
func (d *Dashboard) done(w http.ResponseWriter, r *http.Request, to, msg string, v any) {
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "message": msg, "result": v})
		return
	}
	u, err := url.Parse(to)
	if err != nil {
		u = &url.URL{Path: "/"}
	}
	q := u.Query()
	if msg != "" {
		q.Set("done", msg)
	}
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// back is the page a form returns to: its "back" field when it is a local
// path (see localPath), else fallback.
func back(r *http.Request, fallback string) string {
	if p, ok := localPath(r.PostFormValue("back")); ok {
		return p
	}
	return fallback
}

// localPath cleans b, a redirect target from a form or query, and reports
// whether it is a path on this site. Browsers drop tabs and newlines from
// URLs ("/\t/evil" becomes "//evil") and read a backslash as "/", and
// url.Parse refuses control characters: so b must start with one "/",
// hold no control character, no backslash before its query, and parse
// with no scheme or host.
func localPath(b string) (string, bool) {
	if b == "" || !strings.HasPrefix(b, "/") || strings.HasPrefix(b, "//") || strings.HasPrefix(b, "/\\") {
		return "", false
	}
	p := strings.SplitN(b, "?", 2)[0]
	if strings.ContainsFunc(b, func(c rune) bool { return c < 0x20 || c == 0x7f }) || strings.ContainsRune(p, '\\') {
		return "", false
	}
	out := path.Clean(p) + queryOf(b)
	if u, err := url.Parse(out); err != nil || u.Scheme != "" || u.Host != "" {
		return "", false
	}
	return out, true
}

func queryOf(s string) string {
	if i := strings.IndexByte(s, '?'); i >= 0 {
		return s[i:]
	}
	return ""
}

func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return sanitize.EscapeBidi(string(raw))
	}
	return sanitize.EscapeBidi(unescapeHTMLEscapes(buf.String()))
}

// unescapeHTMLEscapes turns the \u003c, \u003e and \u0026 escapes that Go's
// JSON encoder writes for <, > and & (stored arguments are encoded that
// way) back into the characters inside string literals, so a person
// approving `echo '<b>' && id` reads exactly that. The page's template
// escapes the result for HTML; other escapes are left as they are.
func unescapeHTMLEscapes(s string) string {
	if !strings.Contains(s, `\u00`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		if s[i+1] == 'u' && i+6 <= len(s) {
			switch strings.ToLower(s[i+2 : i+6]) {
			case "003c":
				b.WriteByte('<')
				i += 5
				continue
			case "003e":
				b.WriteByte('>')
				i += 5
				continue
			case "0026":
				b.WriteByte('&')
				i += 5
				continue
			}
		}
		// Any other escape (\\, \", \n, \uXXXX) is copied whole, so an
		// escaped backslash is never read as the start of another escape.
		b.WriteByte(c)
		b.WriteByte(s[i+1])
		i++
	}
	return b.String()
}

// Segment is one part of a reply: text (escaped when rendered) or a
// sanitised SVG drawing.
type Segment struct {
	Text string
	SVG  string // set only from sanitize.SVG's output; rendered unescaped
}

// Segments splits a reply into text and ```svg fenced blocks. Each block
// is rebuilt by sanitize.SVG (the only way an SVG reaches the page); a
// block it refuses is kept as text. Everything else, HTML-looking or not,
// stays text.
func Segments(reply string) []Segment {
	var out []Segment
	rest := reply
	for {
		i := fenceStart(rest)
		if i < 0 {
			break
		}
		body := rest[i:]
		nl := strings.IndexByte(body, '\n')
		if nl < 0 {
			break
		}
		end := strings.Index(body[nl+1:], "```")
		if end < 0 {
			break
		}
		src := body[nl+1 : nl+1+end]
		if pre := rest[:i]; pre != "" {
			out = append(out, Segment{Text: pre})
		}
		if svg, err := sanitize.SVG(src); err == nil {
			out = append(out, Segment{SVG: svg})
		} else {
			out = append(out, Segment{Text: src})
		}
		rest = body[nl+1+end+3:]
		rest = strings.TrimPrefix(rest, "\n")
	}
	if rest != "" {
		out = append(out, Segment{Text: rest})
	}
	return out
}

// fenceStart finds "```svg" at the start of a line.
func fenceStart(s string) int {
	off := 0
	for {
		i := strings.Index(s[off:], "```svg")
		if i < 0 {
			return -1
		}
		i += off
		if i == 0 || s[i-1] == '\n' {
			after := s[i+6:]
			if after == "" || after[0] == '\n' || after[0] == '\r' || after[0] == ' ' {
				return i
			}
		}
		off = i + 6
	}
}

// replyHTML renders a reply as HTML: text escaped, SVG sanitised.
func replyHTML(reply string) string {
	var buf bytes.Buffer
	if err := replyNodes(reply).Render(&buf); err != nil {
		return html.EscapeString(reply)
	}
	return buf.String()
}
