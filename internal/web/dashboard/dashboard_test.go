package dashboard

import (
	"bytes"
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/state"
)

func get(t *testing.T, c *http.Client, u string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func postForm(t *testing.T, c *http.Client, u string, form url.Values, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfRE = regexp.MustCompile(`name="csrf-token" content="([0-9a-f]+)"`)

func noRedirect(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Every page answers with the strict CSP, in English or Korean by
// Accept-Language, and every page renders for an empty home.
func TestPagesHeadersAndLanguage(t *testing.T) {
	ap := newApp(t)
	c := noRedirect(nil)
	for _, p := range []string{"/", "/sessions", "/memory", "/memory?actor=web:owner", "/approvals", "/state", "/state?actor=web:owner", "/schedules", "/settings", "/signin"} {
		resp, body := get(t, c, ap.srv.URL+p, map[string]string{"Accept-Language": "ko-KR,ko;q=0.9,en;q=0.5"})
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, body)
		}
		cspv := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(cspv, "script-src 'self'") || strings.Contains(cspv, "unsafe-inline") || !strings.Contains(cspv, "default-src 'none'") {
			t.Fatalf("%s: CSP %q", p, cspv)
		}
		if !strings.Contains(body, `<html lang="ko">`) || !strings.Contains(body, "채팅") {
			t.Fatalf("%s: not Korean:\n%s", p, body)
		}
		if strings.Contains(body, "<script>") || strings.Contains(body, " style=") || strings.Contains(body, " onclick") {
			t.Fatalf("%s: inline script or style in the page", p)
		}
	}
	_, body := get(t, c, ap.srv.URL+"/", map[string]string{"Accept-Language": "en-US,en"})
	if !strings.Contains(body, `<html lang="en">`) || !strings.Contains(body, ">Stop<") {
		t.Fatalf("English chat page lacks Stop:\n%s", body)
	}
}

// Without a token: a non-loopback Host or a foreign Origin is refused; a
// form post needs the CSRF token bound to the browser's cookie.
func TestLoopbackAndCSRF(t *testing.T) {
	ap := newApp(t)
	jar, _ := cookiejar.New(nil)
	c := noRedirect(jar)
	var resp *http.Response
	req, _ := http.NewRequest("GET", ap.srv.URL+"/", nil)
	req.Host = "evil.example"
	if r, err := c.Do(req); err != nil || r.StatusCode != http.StatusForbidden {
		t.Fatalf("rebinding Host: %v %v", err, r)
	}
	resp, _ = get(t, c, ap.srv.URL+"/", map[string]string{"Origin": "http://evil.example"})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign Origin: %d", resp.StatusCode)
	}
	_, body := get(t, c, ap.srv.URL+"/approvals", nil)
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token in the page")
	}
	form := url.Values{"minutes": {"5"}}
	if resp, _ := postForm(t, c, ap.srv.URL+"/approvals/yolo", form, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("post without CSRF: %d", resp.StatusCode)
	}
	form.Set("csrf", m[1])
	if resp, _ := postForm(t, c, ap.srv.URL+"/approvals/yolo", form, map[string]string{"Origin": "http://localhost:1"}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("post from another origin: %d", resp.StatusCode)
	}
	// A token from another browser (another CSRF cookie) does not count.
	jar2, _ := cookiejar.New(nil)
	if resp, _ := postForm(t, noRedirect(jar2), ap.srv.URL+"/approvals/yolo", form, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("post with another browser's token: %d", resp.StatusCode)
	}
	if resp, body := postForm(t, c, ap.srv.URL+"/approvals/yolo", form, map[string]string{"Origin": ap.srv.URL}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("good post: %d %s", resp.StatusCode, body)
	}
	if _, ok := ap.a.Gate().YoloUntil(); !ok {
		t.Fatal("YOLO window not open after the form post")
	}
}

// With a token every page needs it: a bearer header, or the session cookie
// from the sign-in form or a one-time link.
func TestTokenSignIn(t *testing.T) {
	ap := newApp(t, func(cfg *config.Config) { cfg.AuthToken = "s3cret-token-value" })
	jar, _ := cookiejar.New(nil)
	c := noRedirect(jar)
	resp, _ := get(t, c, ap.srv.URL+"/memory", nil)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/signin") {
		t.Fatalf("unauthenticated page: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := get(t, c, ap.srv.URL+"/memory", map[string]string{"Authorization": "Bearer s3cret-token-value"}); resp.StatusCode != 200 {
		t.Fatalf("bearer: %d", resp.StatusCode)
	}
	if resp, _ := postForm(t, c, ap.srv.URL+"/signin", url.Values{"token": {"wrong"}}, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", resp.StatusCode)
	}
	resp, _ = postForm(t, c, ap.srv.URL+"/signin", url.Values{"token": {"s3cret-token-value"}, "next": {"/memory"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/memory" {
		t.Fatalf("sign in: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	var sc *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == SessionCookie {
			sc = ck
		}
	}
	if sc == nil || !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %+v", sc)
	}
	if resp, _ := get(t, c, ap.srv.URL+"/memory", nil); resp.StatusCode != 200 {
		t.Fatalf("with cookie: %d", resp.StatusCode)
	}
	// Signing out revokes that cookie: replayed afterwards it does not
	// sign in, while another browser's sign-in stays valid.
	jar2, _ := cookiejar.New(nil)
	c2 := noRedirect(jar2)
	postForm(t, c2, ap.srv.URL+"/signin", url.Values{"token": {"s3cret-token-value"}}, nil)
	_, body := get(t, c, ap.srv.URL+"/settings", nil)
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token in the page")
	}
	if resp, _ := postForm(t, c, ap.srv.URL+"/signout", url.Values{"csrf": {m[1]}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", resp.StatusCode)
	}
	replay := noRedirect(nil)
	req, _ := http.NewRequest("GET", ap.srv.URL+"/settings", nil)
	req.AddCookie(&http.Cookie{Name: SessionCookie, Value: sc.Value})
	if resp, err := replay.Do(req); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("signed-out cookie replayed: %v %v", resp.StatusCode, err)
	}
	if resp, _ := get(t, c2, ap.srv.URL+"/settings", nil); resp.StatusCode != 200 {
		t.Fatalf("the other browser after sign-out: %d", resp.StatusCode)
	}
	// A sign-in link works once.
	link := SignInLink(ap.srv.URL, "s3cret-token-value", time.Now())
	jar3, _ := cookiejar.New(nil)
	c3 := noRedirect(jar3)
	if resp, _ := get(t, c3, link, nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("link: %d", resp.StatusCode)
	}
	if resp, _ := get(t, c3, ap.srv.URL+"/state", nil); resp.StatusCode != 200 {
		t.Fatalf("after link: %d", resp.StatusCode)
	}
	jar4, _ := cookiejar.New(nil)
	if resp, body := get(t, noRedirect(jar4), link, nil); resp.StatusCode != 200 || !strings.Contains(body, "already used") {
		t.Fatalf("link reused: %d", resp.StatusCode)
	}
	// A link signed with another token does not sign in.
	bad := SignInLink(ap.srv.URL, "other-token", time.Now())
	jar5, _ := cookiejar.New(nil)
	if resp, _ := get(t, noRedirect(jar5), bad, nil); resp.StatusCode == http.StatusSeeOther {
		t.Fatal("a link signed with another token signed in")
	}
}

// Replies: text stays text, HTML-looking text is escaped, and an ```svg
// block is drawn only through the allow-list rebuild.
func TestSegments(t *testing.T) {
	in := "Here:\n```svg\n<svg onload=\"alert(1)\"><script>alert(2)</script><circle r=\"5\"/></svg>\n```\n<img src=x onerror=alert(3)> done"
	html := string(replyHTML(in))
	for _, bad := range []string{"onload", "<script", "<img"} {
		if strings.Contains(html, bad) {
			t.Fatalf("%q survived: %s", bad, html)
		}
	}
	if !strings.Contains(html, "<circle") || !strings.Contains(html, "&lt;img src=x onerror=alert(3)&gt;") {
		t.Fatalf("drawing or escaped text missing: %s", html)
	}
	// A block sanitize refuses (no svg root) is shown as text.
	html = string(replyHTML("```svg\n<div>hi</div>\n```"))
	if !strings.Contains(html, "&lt;div&gt;hi&lt;/div&gt;") {
		t.Fatalf("refused block not text: %s", html)
	}
}

// The same state always draws the same figure; a different state draws a
// different one.
func TestFigureIsAFunctionOfState(t *testing.T) {
	s := state.Snapshot{Values: state.Vector{0.6, 0.5, 0.7, 0.4, 0.45, 0.3}, Level: state.Warning, At: time.Unix(1, 0), Turns: 7}
	a, b := DrawFigure(s), DrawFigure(s)
	if a.SVG != b.SVG || a.Digest != b.Digest {
		t.Fatal("DRIFT: the same state drew two figures")
	}
	s2 := s
	s2.At, s2.Turns, s2.ActorID = time.Unix(99, 0), 8, "other" // not inputs of the figure
	if DrawFigure(s2).SVG != a.SVG {
		t.Fatal("the figure depends on something other than the values and the level")
	}
	s2.Values[state.Stability] = 0.9
	if DrawFigure(s2).SVG == a.SVG {
		t.Fatal("a different stability drew the same figure")
	}
	s2 = s
	s2.Level = state.Critical
	if DrawFigure(s2).SVG == a.SVG {
		t.Fatal("a different breaker level drew the same figure")
	}
}

func TestLogBuffer(t *testing.T) {
	ap := newApp(t)
	ap.a.Config() // the app logs through ap.logs
	_, seq, wake := ap.logs.since(1 << 62)
	ap.logs.Add("hello")
	select {
	case <-wake:
	default:
		t.Fatal("Add did not wake the stream")
	}
	lines, _, _ := ap.logs.since(seq)
	if len(lines) != 1 || lines[0] != "hello" {
		t.Fatalf("lines %q", lines)
	}
	_ = context.Background()
}

// /schedules offers Resume for a paused job and Pause for an active one,
// and an expandable run history per job.
func TestSchedulesPauseButtonsAndHistory(t *testing.T) {
	ap := newApp(t)
	ctx := context.Background()
	a, err := ap.a.AddJob(ctx, schedule.JobSpec{Name: "figs", Every: "12h", Task: "water the figs", ActorID: "web:owner"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ap.a.AddJob(ctx, schedule.JobSpec{Name: "basil", Every: "24h", Task: "water the basil", ActorID: "web:owner"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ap.a.PauseJob(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, noRedirect(nil), ap.srv.URL+"/schedules", map[string]string{"Accept-Language": "en"})
	if resp.StatusCode != 200 {
		t.Fatalf("/schedules: %d %s", resp.StatusCode, body)
	}
	for _, want := range []string{
		`action="/schedules/` + a.ID + `/pause"`, `action="/schedules/` + b.ID + `/resume"`,
		`data-status="paused"`, `data-runs="` + a.ID + `"`, "Run history (0)", "No runs yet.",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/schedules lacks %q", want)
		}
	}
	if strings.Contains(body, `action="/schedules/`+a.ID+`/resume"`) || strings.Contains(body, `action="/schedules/`+b.ID+`/pause"`) {
		t.Error("/schedules offers Resume for an active job or Pause for a paused one")
	}
}

// A gate closed by a tampered ledger shows as closed on /approvals, with
// the reason and the reset command, even when the file as it now is
// verifies (its last line was cut off): never "verified".
func TestApprovalsPageShowsClosedGate(t *testing.T) {
	ap := newApp(t)
	ctx := context.Background()
	g := ap.a.Gate()
	for _, d := range []time.Duration{time.Minute, 0} {
		if _, err := g.Yolo(ctx, d, "test"); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(g.Path())
	if err != nil {
		t.Fatal(err)
	}
	last := bytes.LastIndexByte(b[:len(b)-1], '\n')
	if err := os.Truncate(g.Path(), int64(last+1)); err != nil {
		t.Fatal(err)
	}
	if rep, err := approval.VerifyLedger(g.Path()); err != nil || !rep.OK {
		t.Fatalf("the cut ledger should verify as a file: %+v %v", rep, err)
	}
	resp, body := get(t, noRedirect(nil), ap.srv.URL+"/approvals", map[string]string{"Accept-Language": "en"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/approvals: %d %s", resp.StatusCode, body)
	}
	broken := g.Broken()
	if broken == nil {
		t.Fatal("the gate did not close")
	}
	for _, want := range []string{`id="ledger-broken"`, "Ledger broken — gate closed", html.EscapeString(broken.FirstBad.Reason),
		"tendril approvals reset", `<strong class="error">BROKEN</strong>`, "Last good hash"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, ">verified<") || strings.Contains(body, "Head hash") {
		t.Errorf("a closed gate is shown as verified:\n%s", body)
	}
	if t.Failed() {
		t.Logf("page:\n%s", body)
	}
}
