package runtime

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/model"
)

// closedAddr returns a loopback host:port that nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// refusedConnect returns the error pgx gives for a database that refuses
// connections, and the address it tried.
func refusedConnect(t *testing.T) (error, string) {
	t.Helper()
	addr := closedAddr(t)
	conn, err := pgconn.Connect(context.Background(), "postgres://tendril:s3cret@"+addr+"/pgpass?sslmode=disable&connect_timeout=5")
	if err == nil {
		conn.Close(context.Background())
		t.Fatalf("connect to %s: no error", addr)
	}
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		t.Fatalf("connect to %s: %T %v, want a *pgconn.ConnectError", addr, err, err)
	}
	return err, addr
}

// leaks reports which connection detail msg gives away.
func leaks(msg, addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	for _, s := range []string{"user=", "database=", "tendril", "pgpass", "s3cret", "127.0.0.1", ":" + port} {
		if strings.Contains(msg, s) {
			return s
		}
	}
	return ""
}

func TestSafeMessage(t *testing.T) {
	connErr, addr := refusedConnect(t)
	_, dialErr := net.Dial("tcp", addr)
	if dialErr == nil {
		t.Fatalf("dial %s: no error", addr)
	}
	_, httpErr := http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader("{}"))
	if httpErr == nil {
		t.Fatalf("post to %s: no error", addr)
	}
	cases := []struct {
		name string
		err  error
		want string // what the message must still say
	}{
		// a model's or embedder's HTTP client names the URL it called
		{"model endpoint", fmt.Errorf("model call failed: %w", httpErr), "model call failed: Post an http endpoint: dial failed (connection refused)"},
		// a provider that kept only the text of its HTTP client's error (the
		// OpenAI provider's "status 0" API error)
		{"model endpoint as text", fmt.Errorf("model call failed: openai/fake: openai: status 0: %v", httpErr), "model call failed: openai/fake: openai: status 0: Post an http endpoint: dial: connect: connection refused"},
		{"connect error", connErr, "cannot connect to the database (connection refused)"},
		{"wrapped", fmt.Errorf("%w: database: %w", agent.ErrNotReady, connErr), "not ready: database: cannot connect to the database (connection refused)"},
		// %v keeps only the text: the patterns catch it
		{"wrapped as text", fmt.Errorf("%w: %v", agent.ErrNotReady, connErr), "not ready: cannot connect to the database (connection refused)"},
		{"list approvals", fmt.Errorf("list approvals: %w", connErr), "list approvals: cannot connect to the database (connection refused)"},
		{"dial error", fmt.Errorf("%w: redis: %w", agent.ErrNotReady, dialErr), "not ready: redis: dial failed (connection refused)"},
		{"dial error as text", errors.New("redis: " + dialErr.Error()), "redis: dial: connect: connection refused"},
		{"dns", &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "db.internal", IsNotFound: true}}, "dial failed (no such host)"},
		{"dns as text", errors.New("lookup db.internal on 127.0.0.53:53: no such host"), "lookup: no such host"},
		{"url in text", errors.New("open postgres://tendril:s3cret@127.0.0.1:5432/pgpass: bad"), "open postgres://… bad"},
		{"other", errors.New("session store: disk full"), "session store: disk full"},
		{"home gone", fmt.Errorf("%w: home: %w", agent.ErrNotReady, &fs.PathError{Op: "stat", Path: "/srv/tendril-home", Err: syscall.ENOENT}), "not ready: home: stat: no such file or directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := SafeMessage(c.err)
			if l := leaks(got, addr); l != "" || (c.name == "url in text" || c.name == "dns as text") && strings.Contains(got, "53") {
				t.Errorf("SafeMessage = %q: gives away %q", got, l)
			}
			if got != c.want {
				t.Errorf("SafeMessage = %q, want %q (from %q)", got, c.want, c.err)
			}
		})
	}
}

func TestUnavailable(t *testing.T) {
	connErr, _ := refusedConnect(t)
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"not ready", fmt.Errorf("%w: shutting down", agent.ErrNotReady), true},
		{"connect error", fmt.Errorf("list approvals: %w", connErr), true},
		{"conn closed", fmt.Errorf("query: %w", pgconn.ErrConnClosed), true},
		{"net error", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"invalid request", fmt.Errorf("%w: message is required", agent.ErrInvalidRequest), false},
		{"plain", errors.New("boom"), false},
		{"nil", nil, false},
	}
	for _, c := range cases {
		if got := Unavailable(c.err); got != c.want {
			t.Errorf("%s: Unavailable(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestInvocationDependencyErrors: a turn that fails on an unreachable
// database answers 503 NOT_READY — even when the failure surfaced as an
// internal error half-way through the turn — with a message that names no
// user, database, host or port; the management socket still sees it
// whole. Errors that are no dependency's keep their status.
func TestInvocationDependencyErrors(t *testing.T) {
	connErr, addr := refusedConnect(t)
	cases := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"readiness", fmt.Errorf("%w: database: %w", agent.ErrNotReady, connErr), 503, "NOT_READY"},
		{"readiness as text", fmt.Errorf("%w: %v", agent.ErrNotReady, connErr), 503, "NOT_READY"},
		{"mid-turn", fmt.Errorf("load session api:me: %w", connErr), 503, "NOT_READY"},
		{"server shut down mid-turn", fmt.Errorf("append node: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}), 503, "NOT_READY"},
		{"model", &model.APIError{Provider: "anthropic", StatusCode: 500, Message: "upstream"}, 502, "MODEL_ERROR"},
		{"internal", errors.New("session tree corrupt"), 500, "INTERNAL_ERROR"},
		{"invalid", fmt.Errorf("%w: too many images", agent.ErrInvalidRequest), 400, "INVALID_REQUEST"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(Options{Invoker: &recInvoker{err: c.err}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptestServer(t, s.Handler())
			resp, out := post(t, srv, `{"message":"hi","actor_id":"api:me"}`, nil)
			if resp.StatusCode != c.status || out["error"] != c.code {
				t.Fatalf("got %d %v, want %d %s", resp.StatusCode, out, c.status, c.code)
			}
			msg, _ := out["message"].(string)
			if l := leaks(msg, addr); l != "" {
				t.Errorf("message %q gives away %q", msg, l)
			}
			// the streamed answer's final frame says the same
			frames := sse(t, srv, `{"message":"hi","actor_id":"api:me"}`)
			final := frames[len(frames)-1]
			if final["error"] != c.code || final["message"] != msg {
				t.Errorf("final frame %v, want %s %q", final, c.code, msg)
			}
			// the management socket (the operator) sees the error whole
			local := httptestServer(t, s.LocalHandler())
			_, lout := post(t, local, `{"message":"hi","actor_id":"api:me"}`, nil)
			if lout["error"] != c.code {
				t.Errorf("local: %v, want %s", lout, c.code)
			}
			if want := strings.TrimPrefix(c.err.Error(), c.code+": "); lout["message"] != want {
				t.Errorf("local message %q, want %q", lout["message"], want)
			}
		})
	}
}

// TestCronTickUnavailable: a cron invocation whose due-job query finds
// the database gone is 503 NOT_READY without connection details.
func TestCronTickUnavailable(t *testing.T) {
	connErr, addr := refusedConnect(t)
	s, err := New(Options{Invoker: &recInvoker{}, AgentCore: true, Addr: "0.0.0.0:8080", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Tick: func(context.Context) (int, error) { return 0, fmt.Errorf("list due jobs: %w", connErr) }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptestServer(t, s.Handler())
	resp, out := post(t, srv, `{"invocation_type":"cron"}`, nil)
	msg, _ := out["message"].(string)
	if resp.StatusCode != http.StatusServiceUnavailable || out["error"] != "NOT_READY" || leaks(msg, addr) != "" {
		t.Fatalf("got %d %v, want 503 NOT_READY without connection details", resp.StatusCode, out)
	}
}

// sse posts body asking for Server-Sent Events and returns the frames.
func sse(t *testing.T, url, body string) []map[string]any {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/invocations", strings.NewReader(body))
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var frames []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var f map[string]any
			if err := json.Unmarshal([]byte(line), &f); err != nil {
				t.Fatal(err)
			}
			frames = append(frames, f)
		}
	}
	if len(frames) == 0 {
		t.Fatal("no SSE frames")
	}
	return frames
}
