package dashboard

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/tendrilai/tendril/internal/assistant"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/testenv"
)

// chromiumPath is Debian's chromium, installed by .ci/run.
const chromiumPath = "/usr/bin/chromium"

// app is one dashboard over a real assistant (temp home, real stores)
// whose model is a fake OpenAI server speaking the real wire format.
type app struct {
	a    *assistant.Assistant
	d    *Dashboard
	fake *modeltest.Server
	srv  *httptest.Server
	logs *LogBuffer
}

type appOpt func(cfg *config.Config)

func newApp(t *testing.T, opts ...appOpt) *app {
	t.Helper()
	fake := modeltest.NewOpenAI(t)
	t.Setenv("TENDRIL_HOME", t.TempDir())
	t.Setenv("MODEL_ID", "openai/gpt-test")
	t.Setenv("OPENAI_BASE_URL", fake.BaseURL())
	t.Setenv("OPENAI_API_KEY", "sk-test-secret-value")
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Memory.LLMExtraction = false
	for _, o := range opts {
		o(cfg)
	}
	logs := NewLogBuffer(200)
	log := slog.New(logs.Handler(slog.NewTextHandler(io.Discard, nil)))
	a, err := assistant.Open(context.Background(), cfg, assistant.Options{Logger: log, Owner: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background(), assistant.StartOptions{}); err != nil {
		a.Close()
		t.Fatal(err)
	}
	d, err := New(a, Options{AuthToken: cfg.AuthToken, Logger: log, Logs: logs})
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		a.BeginShutdown()
		srv.Close()
		d.Close()
		a.Close()
	})
	return &app{a: a, d: d, fake: fake, srv: srv, logs: logs}
}

// browser is one headless Chromium for the whole package; each test gets
// its own tab.
var browser struct {
	once   sync.Once
	ctx    context.Context
	cancel func()
	err    error
	dir    string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if browser.cancel != nil {
		browser.cancel()
		os.RemoveAll(browser.dir)
	}
	os.Exit(code)
}

// tab opens a new tab in the shared browser, or skips (fails under CI)
// when Chromium is not installed. The tab records JavaScript dialogs and
// requests to origins other than allowed; check them with tab.clean.
func tab(t *testing.T, allowed string) *tabT {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		testenv.Unavailable(t, "%s is missing (apt-get install -y chromium)", chromiumPath)
	}
	browser.once.Do(func() {
		browser.dir, browser.err = os.MkdirTemp("", "tendril-chromium-")
		if browser.err != nil {
			return
		}
		opts := []chromedp.ExecAllocatorOption{
			chromedp.ExecPath(chromiumPath),
			chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.Flag("lang", "en-US"),
			chromedp.UserDataDir(browser.dir),
			chromedp.WindowSize(1100, 900),
		}
		actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, bcancel := chromedp.NewContext(actx)
		if _, err := chromedp.Run(bctx, chromedp.Navigate("about:blank")); err != nil {
			browser.err = err
			bcancel()
			acancel()
			return
		}
		browser.ctx = bctx
		browser.cancel = func() { bcancel(); acancel() }
	})
	if browser.err != nil {
		t.Fatalf("start chromium: %v", browser.err)
	}
	ctx, cancel := chromedp.NewContext(browser.ctx)
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() { cancelT(); cancel() })
	tb := &tabT{t: t, ctx: ctx, allowed: allowed}
	if _, err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Listen(ctx, tb.listen); err != nil {
		t.Fatal(err)
	}
	return tb
}

type tabT struct {
	t       *testing.T
	ctx     context.Context
	allowed string // host:port of the dashboard

	mu       sync.Mutex
	dialogs  []string
	external []string
}

func (tb *tabT) listen(ev any) {
	switch e := ev.(type) {
	case *page.EventJavascriptDialogOpening:
		tb.mu.Lock()
		tb.dialogs = append(tb.dialogs, e.Type.String()+": "+e.Message)
		tb.mu.Unlock()
		// Dismiss from another goroutine (a listener must not run commands).
		go chromedp.Call(tb.ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
	case *network.EventRequestWillBeSent:
		u, err := url.Parse(e.Request.URL)
		if err != nil || (u.Scheme != "about" && u.Scheme != "data" && u.Host != tb.allowed) {
			tb.mu.Lock()
			tb.external = append(tb.external, e.Request.URL)
			tb.mu.Unlock()
		}
	}
}

// clean fails the test if a dialog opened or a request left for another
// origin.
func (tb *tabT) clean() {
	tb.t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.dialogs) > 0 {
		tb.t.Errorf("JavaScript dialogs opened: %q", tb.dialogs)
	}
	if len(tb.external) > 0 {
		tb.t.Errorf("requests left for other origins: %q", tb.external)
	}
}

// do runs actions and fails the test on error.
func (tb *tabT) do(steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, steps...); err != nil {
		tb.t.Fatal(err)
	}
}

func (tb *tabT) text(sel string) string {
	tb.t.Helper()
	s, err := chromedp.Run(tb.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		tb.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func (tb *tabT) eval(js string) string {
	tb.t.Helper()
	s, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", js, err)
	}
	return s
}

// clickButton clicks the first button whose text is label inside the
// element matching scope (CSS).
func (tb *tabT) clickButton(scope, label string) {
	tb.t.Helper()
	xp := "//button[normalize-space(.)='" + label + "']"
	if scope != "" {
		xp = scope + xp
	}
	tb.do(chromedp.Click(chromedp.Search(xp)))
}

// submit clicks a form's button (see clickButton) and waits for the page
// the post leads to.
func (tb *tabT) submit(scope, label string) {
	tb.t.Helper()
	tb.eval(`window.__before = "1"; "ok"`)
	tb.clickButton(scope, label)
	tb.waitFor(`window.__before === undefined`)
}

// waitFor evaluates the JavaScript expression until it is true, across
// page loads (a form post navigates while we wait).
func (tb *tabT) waitFor(js string) {
	tb.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool]("(function(){try{return document.readyState !== 'loading' && !!("+js+")}catch(e){return false}})()"))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) || tb.ctx.Err() != nil {
			body, _ := chromedp.Run(tb.ctx, chromedp.Evaluate[string]("document.body ? document.body.innerText : ''"))
			tb.t.Fatalf("waiting for %s: %v\npage:\n%s", js, err, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (ap *app) host() string { u, _ := url.Parse(ap.srv.URL); return u.Host }

// waitUntil polls cond (an end-to-end wait for background work such as
// extraction, not a timing assertion).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
