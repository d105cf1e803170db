// Package dashboard is Tendril's web dashboard (SPEC §8): server-rendered
// pages over the application layer (package assistant), so every button
// calls the same operation as the CLI and the management API.
//
// Pages: / (Chat on the web channel), /sessions and /sessions/{key},
// /memory, /approvals, /state, /schedules and /settings, plus /signin.
// Every read and every form works without JavaScript; /static/app.js (our
// own, embedded, no third-party code) adds streaming over EventSource,
// "Stop", inline approvals, countdowns, the "Numbers" toggle and the live
// log. Text is English or Korean, chosen by Accept-Language.
//
// Untrusted output: pages are built with gomponents (views.go), which
// escapes every text node and attribute value; a ```svg block in a reply
// is drawn only through sanitize.SVG's allow-list rebuild, and nothing
// else is treated as markup. Every response carries a strict Content-Security-Policy (scripts
// and styles from this origin only, no inline script, no other origin).
//
// Access: with no auth token (loopback only, as the runtime enforces) the
// request must name a loopback Host, and a browser's Origin must be
// loopback. With a token every page needs it, as "Authorization: Bearer
// <token>" or as the HttpOnly, SameSite=Strict session cookie the sign-in
// form (or a link from `tendril dashboard`) sets. Every state-changing
// request from a browser carries a CSRF token (form field "csrf" or header
// X-CSRF-Token, bound to a per-browser cookie) and passes a same-origin
// check; bearer requests, which a browser never sends on its own, need
// only the token.
package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tendrilai/tendril/internal/assistant"
	"github.com/tendrilai/tendril/internal/tool"
)

//go:embed static
var staticFS embed.FS

// Cookie names.
const (
	SessionCookie = "tendril_session" // proof of sign-in (token mode)
	CSRFCookie    = "tendril_csrf"    // the per-browser secret CSRF tokens are bound to
)

// SessionTTL is how long a sign-in lasts.
const SessionTTL = 12 * time.Hour

// LinkTTL is how long a sign-in link from SignInLink stays valid.
const LinkTTL = 10 * time.Minute

// MaxFormBytes bounds the body of a state-changing request (a form post or
// a fetch from /static/app.js); a larger body is refused with 413.
const MaxFormBytes = 1 << 20

// DefaultActor is the chat's actor when ?actor= is not given.
const DefaultActor = "web:owner"

// ToolInfo describes one tool for /settings.
type ToolInfo struct {
	Name        string
	Description string
	Class       tool.Class
	Server      string // MCP server name, "" for built-in tools
}

// Options configure New. The zero value is usable.
type Options struct {
	// AuthToken is TENDRIL_AUTH_TOKEN; "" means loopback-only access.
	AuthToken string
	Logger    *slog.Logger
	// Logs, when set, feeds the live log on /settings (wrap the process
	// logger's handler with Logs.Handler).
	Logs *LogBuffer
	// Tools, when set, lists the active tools (built-in and MCP) for
	// /settings.
	Tools func(ctx context.Context) ([]ToolInfo, error)
	// TurnTimeout bounds one chat turn; default 5 minutes.
	TurnTimeout time.Duration
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// Dashboard is the dashboard's http.Handler. Create it with New; Close
// stops turns still running.
type Dashboard struct {
	a   *assistant.Assistant
	opt Options
	log *slog.Logger
	mux *http.ServeMux
	key []byte // HMAC key for CSRF tokens (per process)

	turns   turnRegistry
	usedMu  sync.Mutex
	used    map[string]time.Time // sign-in link codes already used
	revoked map[string]time.Time // signed-out session cookies, until their expiry (usedMu)
	signins signinThrottle       // wrong tokens at POST /signin, per IP
	closing chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

// New builds the dashboard over a.
func New(a *assistant.Assistant, opt Options) (*Dashboard, error) {
	if a == nil {
		return nil, errors.New("dashboard: an Assistant is required")
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.TurnTimeout <= 0 {
		opt.TurnTimeout = 5 * time.Minute
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	d := &Dashboard{a: a, opt: opt, log: opt.Logger, mux: http.NewServeMux(), used: map[string]time.Time{},
		closing: make(chan struct{}), turns: turnRegistry{m: map[string]*liveTurn{}}}
	d.key = make([]byte, 32)
	if _, err := rand.Read(d.key); err != nil {
		return nil, err
	}
	d.routes()
	return d, nil
}

// Handler is New for wiring in one line; it panics on error (New fails only
// for a nil Assistant or no randomness).
func Handler(a *assistant.Assistant, opt Options) *Dashboard {
	d, err := New(a, opt)
	if err != nil {
		panic(err)
	}
	return d
}

// Close cancels chat turns still running and waits for them.
func (d *Dashboard) Close() {
	d.once.Do(func() { close(d.closing) })
	d.wg.Wait()
}

func (d *Dashboard) routes() {
	static, _ := fs.Sub(staticFS, "static")
	fileServer := http.StripPrefix("/static/", http.FileServer(http.FS(static)))
	d.mux.Handle("GET /static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") { // no directory listings
			d.fail(w, r, http.StatusNotFound, errors.New(t(lang(r), "No such page.")))
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		fileServer.ServeHTTP(w, r)
	}))
	d.mux.HandleFunc("GET /signin", d.signinPage)
	d.mux.HandleFunc("POST /signin", d.signin)
	d.mux.HandleFunc("POST /signout", d.signout)

	d.mux.HandleFunc("GET /{$}", d.chatPage)
	d.mux.HandleFunc("POST /chat", d.chatSend)
	d.mux.HandleFunc("POST /chat/turns", d.turnStart)
	d.mux.HandleFunc("GET /chat/turns/{id}/events", d.turnEvents)
	d.mux.HandleFunc("POST /chat/turns/{id}/stop", d.turnStop)
	d.mux.HandleFunc("GET /chat/deliveries", d.deliveries)

	d.mux.HandleFunc("GET /sessions", d.sessionsPage)
	d.mux.HandleFunc("GET /sessions/{key}", d.sessionPage)
	d.mux.HandleFunc("POST /sessions/{key}/branch", d.sessionBranch)
	d.mux.HandleFunc("GET /sessions/{key}/export", d.sessionExport)

	d.mux.HandleFunc("GET /memory", d.memoryPage)
	d.mux.HandleFunc("POST /memory/staging/{id}/approve", d.stagingDecide(true))
	d.mux.HandleFunc("POST /memory/staging/{id}/reject", d.stagingDecide(false))
	d.mux.HandleFunc("GET /memory/forget", d.forgetConfirm)
	d.mux.HandleFunc("POST /memory/forget", d.forget)

	d.mux.HandleFunc("GET /approvals", d.approvalsPage)
	d.mux.HandleFunc("POST /approvals/{id}/approve", d.approvalDecide(true))
	d.mux.HandleFunc("POST /approvals/{id}/deny", d.approvalDecide(false))
	d.mux.HandleFunc("POST /approvals/yolo", d.yolo)

	d.mux.HandleFunc("GET /state", d.statePage)

	d.mux.HandleFunc("GET /schedules", d.schedulesPage)
	d.mux.HandleFunc("POST /schedules", d.scheduleAdd)
	d.mux.HandleFunc("POST /schedules/{ref}/remove", d.scheduleRemove)
	d.mux.HandleFunc("POST /schedules/{ref}/run", d.scheduleRun)
	d.mux.HandleFunc("POST /schedules/{ref}/pause", d.schedulePause)
	d.mux.HandleFunc("POST /schedules/{ref}/resume", d.scheduleResume)

	d.mux.HandleFunc("GET /settings", d.settingsPage)
	d.mux.HandleFunc("GET /settings/log", d.logStream)
	// GET only: a path some route serves, asked with another method,
	// gets the mux's 405 with an Allow header rather than this 404.
	d.mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		d.fail(w, r, http.StatusNotFound, errors.New(t(lang(r), "No such page.")))
	})
}

// csp is the Content-Security-Policy of every response: nothing from
// another origin, no inline script or style, no plugins, no framing.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

type ctxKey int

const (
	csrfKey ctxKey = iota
	bearerKey
	signedInKey
)

// ServeHTTP applies the security headers, access checks and CSRF checks,
// then routes.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")

	if d.opt.AuthToken == "" {
		if !loopbackHost(r.Host) {
			d.fail(w, r, http.StatusForbidden, fmt.Errorf("Host %q is not a loopback name; set TENDRIL_AUTH_TOKEN to serve other hosts", r.Host))
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			if o == "null" || err != nil || !loopbackHost(u.Host) {
				d.fail(w, r, http.StatusForbidden, errors.New("cross-origin request refused"))
				return
			}
		}
	}
	ctx := r.Context()
	bearer := d.bearerOK(r)
	ctx = context.WithValue(ctx, bearerKey, bearer)
	signed := d.opt.AuthToken == "" || bearer || d.cookieOK(r)
	ctx = context.WithValue(ctx, signedInKey, signed)

	// The CSRF secret cookie: set on first sight.
	secret := ""
	if c, err := r.Cookie(CSRFCookie); err == nil && validSecret(c.Value) {
		secret = c.Value
	} else {
		secret = randomHex(32)
		http.SetCookie(w, &http.Cookie{Name: CSRFCookie, Value: secret, Path: "/", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	}
	ctx = context.WithValue(ctx, csrfKey, d.csrfToken(secret))
	r = r.WithContext(ctx)

	public := strings.HasPrefix(r.URL.Path, "/static/") || r.URL.Path == "/signin"
	if !signed && !public {
		if r.Method == http.MethodGet && !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		d.fail(w, r, http.StatusUnauthorized, errors.New(t(lang(r), "Sign in first: the dashboard needs the auth token.")))
		return
	}
	if unsafeMethod(r.Method) {
		// Parse the form once, bounded, before the CSRF check and the
		// handlers: a fetch that sends its token in X-CSRF-Token must still
		// have its fields (actor, session, message) read.
		r.Body = http.MaxBytesReader(w, r.Body, MaxFormBytes)
		err := r.ParseForm() // ParseMultipartForm hides its errors behind ErrNotMultipart
		if err == nil {
			if err = r.ParseMultipartForm(MaxFormBytes); errors.Is(err, http.ErrNotMultipart) {
				err = nil
			}
		}
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				d.fail(w, r, http.StatusRequestEntityTooLarge, fmt.Errorf("the form is over %d bytes", MaxFormBytes))
				return
			}
			d.fail(w, r, http.StatusBadRequest, fmt.Errorf("%w: the form could not be read: %v", assistant.ErrInvalid, err))
			return
		}
	}
	if unsafeMethod(r.Method) && !bearer {
		if err := sameOrigin(r); err != nil {
			d.fail(w, r, http.StatusForbidden, err)
			return
		}
		// Sign-in has no session yet; it is protected by the token itself.
		if r.URL.Path != "/signin" && !d.csrfOK(r, secret) {
			d.fail(w, r, http.StatusForbidden, errors.New(t(lang(r), "The form expired or came from elsewhere (CSRF check failed); reload the page and try again.")))
			return
		}
	}
	d.mux.ServeHTTP(w, r)
}

func unsafeMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// sameOrigin checks that a state-changing request came from this origin:
// the Origin header, else Sec-Fetch-Site, else the Referer, must name this
// Host. A request with none of them (not a browser) passes; it still needs
// the CSRF token.
func sameOrigin(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || o == "null" || !strings.EqualFold(u.Host, r.Host) {
			return errors.New("cross-origin request refused")
		}
		return nil
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return errors.New("cross-site request refused")
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		u, err := url.Parse(ref)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return errors.New("cross-origin request refused")
		}
	}
	return nil
}

func (d *Dashboard) bearerOK(r *http.Request) bool {
	if d.opt.AuthToken == "" {
		return false
	}
	got := r.Header.Get("Authorization")
	if len(got) <= 7 || !strings.EqualFold(got[:7], "bearer ") {
		return false
	}
	return tokenEqual(got[7:], d.opt.AuthToken)
}

// tokenEqual compares tokens in constant time, whatever their lengths.
func tokenEqual(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

func mac(key []byte, parts ...string) string {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// sessionValue is the cookie proving a sign-in:
// "<expiry unix>.<nonce>.<HMAC(token, "session", expiry.nonce)>". The
// random nonce makes every sign-in's cookie its own, so signing out
// revokes that one alone.
func (d *Dashboard) sessionValue(exp time.Time) string {
	n := make([]byte, 12)
	rand.Read(n)
	payload := strconv.FormatInt(exp.Unix(), 10) + "." + hex.EncodeToString(n)
	return payload + "." + mac([]byte(d.opt.AuthToken), "session", payload)
}

func (d *Dashboard) cookieOK(r *http.Request) bool {
	if d.opt.AuthToken == "" {
		return false
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil || !d.checkSigned(c.Value, "session") {
		return false
	}
	d.usedMu.Lock()
	defer d.usedMu.Unlock()
	_, revoked := d.revoked[c.Value]
	return !revoked
}

// revoke records a signed-out session cookie until it would have expired.
// Revocation is this process's: another instance behind the same token
// still takes the cookie until its expiry (changing TENDRIL_AUTH_TOKEN
// revokes every cookie everywhere).
func (d *Dashboard) revoke(v string) {
	e, _, _ := strings.Cut(v, ".")
	exp, err := strconv.ParseInt(e, 10, 64)
	if err != nil {
		return
	}
	now := d.opt.Now()
	d.usedMu.Lock()
	defer d.usedMu.Unlock()
	if d.revoked == nil {
		d.revoked = map[string]time.Time{}
	}
	for c, until := range d.revoked {
		if now.After(until) {
			delete(d.revoked, c)
		}
	}
	d.revoked[v] = time.Unix(exp, 0)
}

// checkSigned verifies "<expiry>[.<more>].<HMAC(token, purpose,
// expiry[.more])>" and that the expiry has not passed.
func (d *Dashboard) checkSigned(v, purpose string) bool {
	i := strings.LastIndexByte(v, '.')
	if i < 0 {
		return false
	}
	payload, sig := v[:i], v[i+1:]
	e, _, _ := strings.Cut(payload, ".")
	exp, err := strconv.ParseInt(e, 10, 64)
	if err != nil || d.opt.Now().Unix() > exp {
		return false
	}
	want := mac([]byte(d.opt.AuthToken), purpose, payload)
	return subtle.ConstantTimeCompare([]byte(sig), []byte(want)) == 1
}

// BaseURL is the browser's address of a server listening on addr
// (host:port): a wildcard host (0.0.0.0, ::, "") is reached on 127.0.0.1.
func BaseURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// SignInLink returns a link that signs a browser in to the dashboard at
// base (e.g. "http://127.0.0.1:8080") once, within LinkTTL of now: base +
// "/signin?code=<expiry>.<HMAC-SHA256(token, "link", expiry)>". With no
// token it is base + "/" (nothing to sign in to).
func SignInLink(base, token string, now time.Time) string {
	base = strings.TrimRight(base, "/")
	if token == "" {
		return base + "/"
	}
	e := strconv.FormatInt(now.Add(LinkTTL).Unix(), 10)
	return base + "/signin?code=" + e + "." + mac([]byte(token), "link", e)
}

func (d *Dashboard) csrfToken(secret string) string { return mac(d.key, "csrf", secret) }

func (d *Dashboard) csrfOK(r *http.Request, secret string) bool {
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(d.csrfToken(secret))) == 1
}

func validSecret(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// loopbackHost reports whether a Host header value names loopback.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (d *Dashboard) signinPage(w http.ResponseWriter, r *http.Request) {
	if code := r.URL.Query().Get("code"); code != "" && d.opt.AuthToken != "" {
		if d.checkSigned(code, "link") && d.useCode(code) {
			d.setSession(w, r)
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		d.render(w, r, "signin", "Sign in", signinData{Next: "/", Error: t(lang(r), "This sign-in link is expired or was already used; run tendril dashboard again.")})
		return
	}
	d.render(w, r, "signin", "Sign in", signinData{Next: safeNext(r.URL.Query().Get("next")), NoToken: d.opt.AuthToken == ""})
}

// useCode marks a link code used; false when it already was.
func (d *Dashboard) useCode(code string) bool {
	d.usedMu.Lock()
	defer d.usedMu.Unlock()
	now := d.opt.Now()
	for c, exp := range d.used {
		if now.After(exp) {
			delete(d.used, c)
		}
	}
	if _, ok := d.used[code]; ok {
		return false
	}
	d.used[code] = now.Add(LinkTTL + time.Minute)
	return true
}

func (d *Dashboard) setSession(w http.ResponseWriter, r *http.Request) {
	exp := d.opt.Now().Add(SessionTTL)
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: d.sessionValue(exp), Path: "/", Expires: exp,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

func (d *Dashboard) signin(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.PostFormValue("next"))
	if d.opt.AuthToken == "" {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	ip, now := clientIP(r), d.opt.Now()
	if wait := d.signins.wait(ip, now); wait > 0 {
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		w.WriteHeader(http.StatusTooManyRequests)
		d.render(w, r, "signin", "Sign in", signinData{Next: next, Error: fmt.Sprintf(t(lang(r), "Too many wrong tokens: try again in %d s."), secs)})
		return
	}
	// The token is trimmed as TENDRIL_AUTH_TOKEN is (a pasted newline is
	// no part of it); blank never matches. Comparing digests keeps the
	// time independent of the token's length too.
	got := strings.TrimSpace(r.PostFormValue("token"))
	if got == "" || !tokenEqual(got, d.opt.AuthToken) {
		d.signins.fail(ip, now)
		w.WriteHeader(http.StatusUnauthorized)
		d.render(w, r, "signin", "Sign in", signinData{Next: next, Error: t(lang(r), "Wrong token.")})
		return
	}
	d.signins.ok(ip)
	d.setSession(w, r)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (d *Dashboard) signout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil && d.checkSigned(c.Value, "session") {
		d.revoke(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// safeNext keeps a post-sign-in redirect on this site.
func safeNext(n string) string {
	if p, ok := localPath(n); ok {
		return p
	}
	return "/"
}
