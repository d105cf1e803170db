package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// A chat sent by the page's script (the CSRF token in X-CSRF-Token, the
// fields in the body) is the actor's and session's the page names, not the
// default actor's; an approval card the chat inserts counts down.
func TestChatScriptKeepsActorAndSession(t *testing.T) {
	ap := newApp(t)
	tb := tab(t, ap.host())
	ap.fake.Push(modeltest.Reply{Text: "Hello Alice.", StreamChunks: 3})
	tb.do(chromedp.Navigate(ap.srv.URL + "/?actor=web:alice&session=s1"))
	tb.send("I am Alice")
	tb.waitFor(`document.querySelector('.msg.assistant[data-done]') !== null`)
	if got := tb.eval(`document.querySelector('.msg.assistant[data-done]').dataset.done`); got != "ok" {
		t.Fatalf("turn ended %q: %s", got, tb.text("#transcript"))
	}
	ctx := context.Background()
	k, err := ap.a.ParseSessionKey("", "web:alice~s1")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := ap.a.Session(ctx, k)
	if err != nil {
		t.Fatalf("web:alice~s1: %v", err)
	}
	if len(tree.ActivePath) < 2 || tree.ActivePath[0].Text != "I am Alice" {
		t.Fatalf("alice's session: %+v", tree.ActivePath)
	}
	ko, _ := ap.a.ParseSessionKey("", "web:owner")
	if _, err := ap.a.Session(ctx, ko); err == nil {
		t.Fatal("the chat went to web:owner's session too")
	}

	// The inline approval card's expiry counts down like the one on
	// /approvals.
	ap.fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{ID: "call_9", Name: "notes", Args: `{"action":"add","text":"Alice's roses"}`}}})
	tb.send("Note my roses")
	tb.waitFor(`document.querySelector('#inline-approvals .approval time') !== null`)
	tb.waitFor(`/\(\d+m \d+s\)|\(\d+s\)/.test(document.querySelector('#inline-approvals .approval time').textContent)`)
	tb.clean()
}

// Hostile form input gets a clear 4xx, never a dropped connection: bodies
// over MaxFormBytes, malformed encodings, a NaN YOLO window, "back" fields
// with control characters; and a bogus Last-Event-ID does not wedge the
// turn it names.
func TestHostileFormInput(t *testing.T) {
	ap := newApp(t)
	jar, _ := cookiejar.New(nil)
	c := noRedirect(jar)
	_, body := get(t, c, ap.srv.URL+"/", nil)
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token in the page")
	}
	tok := m[1]

	big := url.Values{"csrf": {tok}, "minutes": {"5"}, "pad": {strings.Repeat("a", MaxFormBytes+1)}}
	if resp, body := postForm(t, c, ap.srv.URL+"/approvals/yolo", big, nil); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized form: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest("POST", ap.srv.URL+"/approvals/yolo", strings.NewReader("csrf="+tok+"&minutes=%zz"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("malformed form: %v %v", err, resp)
	}
	for _, v := range []string{"NaN", "Inf", "-1", "0", "31"} {
		if resp, body := postForm(t, c, ap.srv.URL+"/approvals/yolo", url.Values{"csrf": {tok}, "minutes": {v}}, nil); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("minutes=%s: %d %s", v, resp.StatusCode, body)
		}
	}
	if _, open := ap.a.Gate().YoloUntil(); open {
		t.Fatal("a refused YOLO form opened the window")
	}

	// A node to branch from, so the branch succeeds and "back" is used.
	ap.fake.Push(modeltest.Reply{Text: "hi"})
	if resp, body := postForm(t, c, ap.srv.URL+"/chat", url.Values{"csrf": {tok}, "message": {"hello"}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("chat: %d %s", resp.StatusCode, body)
	}
	k, _ := ap.a.ParseSessionKey("", "web:owner")
	tree, err := ap.a.Session(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"/\t/evil.example", "/\r\nSet-Cookie: x=1", "/\x00", "/a\\..\\/evil.example", "https://evil.example/"} {
		resp, body := postForm(t, c, ap.srv.URL+"/sessions/web:owner/branch", url.Values{"csrf": {tok}, "node": {tree.Leaf}, "back": {b}}, nil)
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/sessions/web:owner?") {
			t.Fatalf("back %q: %d %q %s", b, resp.StatusCode, loc, body)
		}
	}
	if resp, _ := postForm(t, c, ap.srv.URL+"/sessions/web:owner/branch", url.Values{"csrf": {tok}, "node": {tree.Leaf}, "back": {"/memory?actor=web%3Aowner"}}, nil); resp.Header.Get("Location") != "/memory?actor=web%3Aowner&done=The+next+message+continues+from+this+node." {
		t.Fatalf("a good back path was not kept: %q", resp.Header.Get("Location"))
	}

	// A reconnect with an event ID the turn never sent replays the turn
	// from the start, and the turn still finishes.
	ap.fake.Push(modeltest.Reply{Text: "streamed to the end", StreamChunks: 4})
	resp, body := postForm(t, c, ap.srv.URL+"/chat/turns", url.Values{"message": {"again"}}, map[string]string{"X-CSRF-Token": tok, "Accept": "application/json"})
	var started struct {
		OK     bool   `json:"ok"`
		Events string `json:"events"`
	}
	if err := json.Unmarshal([]byte(body), &started); err != nil || !started.OK {
		t.Fatalf("start turn: %d %s", resp.StatusCode, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, "GET", ap.srv.URL+started.Events, nil)
	req.Header.Set("Last-Event-ID", "99999")
	er, err := c.Do(req)
	if err != nil {
		t.Fatalf("events with a bogus Last-Event-ID: %v", err)
	}
	defer er.Body.Close()
	final := ""
	sc := bufio.NewScanner(er.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.Contains(line, `"type":"final"`) {
			final = line
			break
		}
	}
	if !strings.Contains(final, "streamed to the end") {
		t.Fatalf("no final event after a bogus Last-Event-ID (status %d, scan err %v)", er.StatusCode, sc.Err())
	}
}

// After sign-in the redirect stays on this site whatever "next" holds,
// including a tab or newline a browser would drop ("/\t/evil" is
// "//evil" to a browser).
func TestSignInNextStaysLocal(t *testing.T) {
	ap := newApp(t, func(cfg *config.Config) { cfg.AuthToken = "s3cret-token-value" })
	for next, want := range map[string]string{
		"/\t/evil.example":      "/",
		"/\n/evil.example":      "/",
		"/\\evil.example":       "/",
		"//evil.example":        "/",
		"https://evil.example/": "/",
		"javascript:alert(1)":   "/",
		"/a\\b":                 "/",
		"/sessions?x=1":         "/sessions?x=1",
		"/memory/../state":      "/state",
	} {
		jar, _ := cookiejar.New(nil)
		resp, body := postForm(t, noRedirect(jar), ap.srv.URL+"/signin", url.Values{"token": {"s3cret-token-value"}, "next": {next}}, nil)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
			t.Errorf("next %q: %d Location %q, want %q\n%s", next, resp.StatusCode, resp.Header.Get("Location"), want, body)
		}
	}
	// The sign-in page does not carry a hostile next into its form either.
	_, body := get(t, noRedirect(nil), ap.srv.URL+"/signin?next="+url.QueryEscape("/\t/evil.example"), nil)
	if !strings.Contains(body, `name="next" value="/"`) {
		t.Fatalf("sign-in form keeps a hostile next:\n%s", body)
	}
}

// A known path asked with the wrong method is 405 with Allow; an unknown
// path is 404; /static/ lists no directory.
func TestMethodsAndStatic(t *testing.T) {
	ap := newApp(t)
	jar, _ := cookiejar.New(nil)
	c := noRedirect(jar)
	_, body := get(t, c, ap.srv.URL+"/", nil)
	tok := csrfRE.FindStringSubmatch(body)[1]
	for _, tc := range []struct{ method, path, allow string }{
		{"PUT", "/chat", "POST"},
		{"DELETE", "/approvals/yolo", "POST"},
		{"POST", "/sessions", "GET"},
	} {
		req, _ := http.NewRequest(tc.method, ap.srv.URL+tc.path, strings.NewReader(""))
		req.Header.Set("X-CSRF-Token", tok)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(resp.Header.Get("Allow"), tc.allow) {
			t.Errorf("%s %s: %d Allow %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
	for _, p := range []string{"/nope", "/static/", "/static/nope.js"} {
		if resp, _ := get(t, c, ap.srv.URL+p, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d", p, resp.StatusCode)
		}
	}
	if resp, _ := get(t, c, ap.srv.URL+"/static/app.js", nil); resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("app.js: %d", resp.StatusCode)
	}
}

// Stored tool arguments are shown with their real characters, not Go's
// \u003c escapes, and an escaped backslash stays one.
func TestPrettyJSONShowsRealCharacters(t *testing.T) {
	got := prettyJSON(json.RawMessage(`{"cmd":"echo '\u003cb\u003e' \u0026\u0026 id","path":"C:\\u003c"}`))
	if !strings.Contains(got, `"echo '<b>' && id"`) {
		t.Fatalf("escapes left: %s", got)
	}
	if !strings.Contains(got, `"C:\\u003c"`) {
		t.Fatalf("an escaped backslash was read as an escape: %s", got)
	}
}
