package mgmt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/assistant"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/runtime"
	"github.com/tendrilai/tendril/internal/testenv"
)

// tcpProxy forwards TCP connections to target until Close, which also
// cuts every connection it carries: to its clients the server is gone.
type tcpProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	closed bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{l: l, target: target}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.pipe(c) }()
		}
	}()
	t.Cleanup(p.Close)
	return p
}

// track records c to be cut by Close, or closes it when Close has run.
func (p *tcpProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *tcpProxy) pipe(c net.Conn) {
	if !p.track(c) {
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(up) {
		c.Close()
		return
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
}

// Close stops accepting and cuts every connection.
func (p *tcpProxy) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.l.Close()
		for _, c := range p.conns {
			c.Close()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestDatabaseOutage: with PostgreSQL gone under a running instance,
// GET /readyz says so (503) while /ping keeps AgentCore's contract, and
// management requests and turns answer 503 NOT_READY (they were 500
// INTERNAL_ERROR, and /readyz was a 404) with messages that name no user,
// database, host or port (they quoted pgconn's "failed to connect to
// `user=… database=…`: 127.0.0.1:PORT …"). A bad request is still a 400,
// and the management socket still sees the whole error.
func TestDatabaseOutage(t *testing.T) {
	pgURL := testenv.PostgresSchema(t)
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, u.Host)
	u.Host = proxy.l.Addr().String()
	_, port, _ := net.SplitHostPort(u.Host)

	t.Setenv("TENDRIL_DATABASE_URL", u.String())
	srv := outageServer(t)
	remote := httptest.NewServer(srv.Handler())
	defer remote.Close()
	local := httptest.NewServer(srv.LocalHandler())
	defer local.Close()

	leak := func(msg string) string {
		for _, s := range []string{"user=", "database=", "127.0.0.1", ":" + port, "failed to connect to `"} {
			if strings.Contains(msg, s) {
				return s
			}
		}
		return ""
	}
	if st, out := get(t, remote.URL, "/approvals"); st != http.StatusOK {
		t.Fatalf("GET /approvals with the database up: %d %v", st, out)
	}

	proxy.Close()

	st, out := waitNotReady(t, remote.URL)
	reason, _ := out["reason"].(string)
	if st != http.StatusServiceUnavailable || out["status"] != "not_ready" || !strings.HasPrefix(reason, "database: ") {
		t.Fatalf("GET /readyz with the database gone: %d %v, want 503 not_ready naming the database", st, out)
	}
	if l := leak(reason); l != "" {
		t.Errorf("/readyz reason %q gives away %q", reason, l)
	}
	if st, out := getURL(t, remote.URL+"/ping"); st != http.StatusOK || out["status"] != runtime.StatusHealthy {
		t.Errorf("GET /ping: %d %v, want AgentCore's 200 Healthy", st, out)
	}

	for _, path := range []string{"/approvals", "/memory/search?actor=api:me&q=basil"} {
		st, out := get(t, remote.URL, path)
		msg, _ := out["message"].(string)
		if st != http.StatusServiceUnavailable || out["error"] != "NOT_READY" {
			t.Errorf("GET %s with the database gone: %d %v, want 503 NOT_READY", path, st, out)
		}
		if l := leak(msg); l != "" {
			t.Errorf("GET %s: message %q gives away %q", path, msg, l)
		}
	}
	if st, out := get(t, remote.URL, "/memory/search?actor=api:me&q="); st != http.StatusBadRequest {
		t.Errorf("a bad request with the database gone: %d %v, want 400", st, out)
	}
	resp, inv := postInvocation(t, remote.URL, `{"message":"hi","actor_id":"api:me"}`)
	msg, _ := inv["message"].(string)
	if resp != http.StatusServiceUnavailable || inv["error"] != "NOT_READY" {
		t.Errorf("POST /invocations with the database gone: %d %v, want 503 NOT_READY", resp, inv)
	}
	if l := leak(msg); l != "" {
		t.Errorf("POST /invocations: message %q gives away %q", msg, l)
	}

	// The management socket's caller owns the home: it gets the details.
	st, out = get(t, local.URL, "/approvals")
	if msg, _ := out["message"].(string); st != http.StatusServiceUnavailable || !strings.Contains(msg, "failed to connect") {
		t.Errorf("GET /approvals on the socket: %d %v, want 503 with the whole error", st, out)
	}
}

// outageServer opens an assistant on a fresh home and the configuration
// in the environment (the test sets the database and Redis URLs, through
// its proxies) and returns its server with the management API mounted.
func outageServer(t *testing.T) *runtime.Server {
	t.Helper()
	a := openAssistant(t)
	srv, err := runtime.New(runtime.Options{Invoker: a, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv.Mount(Prefix+"/", Handler(a), true)
	return srv
}

// waitNotReady polls GET /readyz until it is not 200 (it may answer from
// its cache for up to a second after a dependency went), for at most 30 s
// (a hang guard), and returns the last answer.
func waitNotReady(t *testing.T, base string) (int, map[string]any) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st, out := getURL(t, base+"/readyz")
		if st != http.StatusOK || time.Now().After(deadline) {
			return st, out
		}
	}
}

func getURL(t *testing.T, u string) (int, map[string]any) {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("GET %s: %d %q is not JSON", u, res.StatusCode, b)
	}
	return res.StatusCode, out
}

func postInvocation(t *testing.T, base, body string) (int, map[string]any) {
	t.Helper()
	res, err := http.Post(base+"/invocations", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("POST /invocations: %d %q is not JSON", res.StatusCode, b)
	}
	return res.StatusCode, out
}

// TestStatusMapping: a dependency that cannot be reached is 503
// NOT_READY; a bad request, a missing thing or a conflict keeps its own
// status even when a connection error rides along.
func TestStatusMapping(t *testing.T) {
	connErr := &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	cases := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"not ready", fmt.Errorf("%w: database: down", agent.ErrNotReady), 503, "NOT_READY"},
		{"server shutting down", fmt.Errorf("list approvals: %w", connErr), 503, "NOT_READY"},
		{"dial", fmt.Errorf("search: %w", dial), 503, "NOT_READY"},
		{"pool acquire deadline", fmt.Errorf("list records: %w", context.DeadlineExceeded), 503, "NOT_READY"},
		{"invalid", fmt.Errorf("%w: k: too big", assistant.ErrInvalid), 400, "INVALID_REQUEST"},
		{"not found", fmt.Errorf("record r1: %w", memory.ErrNotFound), 404, "NOT_FOUND"},
		{"not found and a dial error", errors.Join(memory.ErrNotFound, dial), 404, "NOT_FOUND"},
		{"unique violation", fmt.Errorf("add job: %w", &pgconn.PgError{Code: "23505"}), 500, "INTERNAL_ERROR"},
		{"plain", errors.New("boom"), 500, "INTERNAL_ERROR"},
	}
	for _, c := range cases {
		if st, code := status(c.err); st != c.status || code != c.code {
			t.Errorf("%s: status(%v) = %d %s, want %d %s", c.name, c.err, st, code, c.status, c.code)
		}
	}
}

// TestRedisOutageWithDatabase: sessions on Redis beside a database (the
// session store is then wrapped for the turn locks) — with Redis gone,
// GET /readyz says so and a turn is 503 NOT_READY. The wrapper hid the
// store's Ping, so /readyz said ready while every turn failed.
func TestRedisOutageWithDatabase(t *testing.T) {
	pgURL := testenv.PostgresSchema(t)
	proxy := startProxy(t, testenv.Redis(t))

	t.Setenv("TENDRIL_DATABASE_URL", pgURL)
	t.Setenv("TENDRIL_REDIS_URL", "redis://"+proxy.l.Addr().String()+"/11")
	remote := httptest.NewServer(outageServer(t).Handler())
	defer remote.Close()
	if st, out := getURL(t, remote.URL+"/readyz"); st != http.StatusOK {
		t.Fatalf("GET /readyz with Redis up: %d %v", st, out)
	}

	proxy.Close()

	st, out := waitNotReady(t, remote.URL)
	if reason, _ := out["reason"].(string); st != http.StatusServiceUnavailable || !strings.HasPrefix(reason, "redis: ") {
		t.Fatalf("GET /readyz with Redis gone: %d %v, want 503 naming redis", st, out)
	}
	if resp, inv := postInvocation(t, remote.URL, `{"message":"hi","actor_id":"api:me"}`); resp != http.StatusServiceUnavailable || inv["error"] != "NOT_READY" {
		t.Errorf("POST /invocations with Redis gone: %d %v, want 503 NOT_READY", resp, inv)
	}
}
