package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
)

// readyInvoker is an Invoker with a readiness check whose answer the test
// sets.
type readyInvoker struct {
	recInvoker
	mu     sync.Mutex
	err    error
	checks int
}

func (r *readyInvoker) CheckReady(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks++
	return r.err
}

func (r *readyInvoker) set(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

func getJSON(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, out
}

// TestReadyz: GET /readyz answers 200 while a turn could run and 503 with
// a short reason, naming no user, database, host or port, when a
// dependency is down or the server is shutting down — without a token, in
// both modes — while /ping stays AgentCore's liveness answer.
func TestReadyz(t *testing.T) {
	connErr, addr := refusedConnect(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, mode := range []struct {
		name string
		opt  Options
	}{
		{"self-hosted with token", Options{AuthToken: "0123456789abcdef0123", Addr: "0.0.0.0:8080"}},
		{"agentcore", Options{AgentCore: true, Addr: "0.0.0.0:8080"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			inv := &readyInvoker{}
			opt := mode.opt
			opt.Invoker, opt.Logger = inv, quiet
			s, err := New(opt)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Unix(1_700_000_000, 0)
			s.ready.now = func() time.Time { return now }
			url := httptestServer(t, s.Handler())

			if st, out := getJSON(t, url+"/readyz"); st != http.StatusOK || out["status"] != "ready" {
				t.Fatalf("ready: %d %v, want 200 ready", st, out)
			}
			inv.set(fmt.Errorf("%w: database: %w", agent.ErrNotReady, connErr))
			now = now.Add(readyTTL)
			st, out := getJSON(t, url+"/readyz")
			reason, _ := out["reason"].(string)
			if st != http.StatusServiceUnavailable || out["status"] != "not_ready" || reason != "database: cannot connect to the database (connection refused)" {
				t.Fatalf("database down: %d %v, want 503 not_ready naming the database", st, out)
			}
			if l := leaks(reason, addr); l != "" {
				t.Errorf("reason %q gives away %q", reason, l)
			}
			if st, out := getJSON(t, url+"/ping"); st != http.StatusOK || out["status"] != StatusHealthy {
				t.Errorf("/ping while not ready: %d %v, want the AgentCore contract's 200 Healthy", st, out)
			}

			inv.set(nil)
			now = now.Add(readyTTL)
			if st, _ := getJSON(t, url+"/readyz"); st != http.StatusOK {
				t.Fatalf("database back: %d, want 200", st)
			}
			if err := s.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if st, out := getJSON(t, url+"/readyz"); st != http.StatusServiceUnavailable || out["reason"] != "shutting down" {
				t.Fatalf("shutting down: %d %v, want 503 shutting down", st, out)
			}
		})
	}
}

// TestReadyzWithoutChecker: an Invoker with no readiness check is ready.
func TestReadyzWithoutChecker(t *testing.T) {
	url := newTestServer(t, &recInvoker{}, Options{}).URL
	if st, out := getJSON(t, url+"/readyz"); st != http.StatusOK || out["status"] != "ready" {
		t.Fatalf("%d %v, want 200 ready", st, out)
	}
}

// TestReadinessCachesAndSharesChecks: within readyTTL of an answer no new
// check runs, and callers that arrive while a check runs wait for its
// answer instead of starting their own, so probes cannot hammer the
// database.
func TestReadinessCachesAndSharesChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var checks atomic.Int32
		release := make(chan struct{})
		down := errors.New("not ready: database: down")
		r := newReadiness(func(ctx context.Context) error {
			checks.Add(1)
			<-release
			return down
		}, slog.New(slog.NewTextHandler(io.Discard, nil)))

		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() { errs[i] = r.get(context.Background()) })
		}
		synctest.Wait() // every caller is blocked: one in the check, the rest waiting for it
		if n := checks.Load(); n != 1 {
			t.Errorf("%d checks in flight, want 1", n)
		}
		close(release)
		wg.Wait()
		for i, err := range errs {
			if err != down {
				t.Errorf("caller %d: %v, want the shared answer", i, err)
			}
		}

		if err := r.get(context.Background()); err != down || checks.Load() != 1 {
			t.Fatalf("within the TTL: %v after %d checks, want the cached answer", err, checks.Load())
		}
		time.Sleep(readyTTL)
		r.get(context.Background())
		if n := checks.Load(); n != 2 {
			t.Fatalf("after the TTL: %d checks, want 2", n)
		}
	})
}

// TestReadinessWaiterMayLeave: a caller waiting for another's check
// returns when its own context ends.
func TestReadinessWaiterMayLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		r := newReadiness(func(ctx context.Context) error { <-release; return nil }, slog.New(slog.NewTextHandler(io.Discard, nil)))
		done := make(chan error, 1)
		go func() { done <- r.get(context.Background()) }()
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := r.get(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("waiter with a cancelled context: %v", err)
		}
		close(release)
		if err := <-done; err != nil {
			t.Errorf("checker: %v", err)
		}
	})
}

// TestInternalErrorWhileNotReady: a turn that fails with an error naming
// no dependency (a database connection cut mid-query reads as a bare
// "unexpected EOF") while the readiness check says a dependency is down
// is 503 NOT_READY, and says why; while ready it stays 500.
func TestInternalErrorWhileNotReady(t *testing.T) {
	connErr, addr := refusedConnect(t)
	inv := &readyInvoker{}
	inv.recInvoker.err = fmt.Errorf("load session api:me: %w", io.ErrUnexpectedEOF)
	s, err := New(Options{Invoker: inv, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	s.ready.now = func() time.Time { return now }
	url := httptestServer(t, s.Handler())
	if resp, out := post(t, url, `{"message":"hi","actor_id":"api:me"}`, nil); resp.StatusCode != http.StatusInternalServerError || out["error"] != "INTERNAL_ERROR" {
		t.Fatalf("ready: %d %v, want 500 INTERNAL_ERROR", resp.StatusCode, out)
	}
	inv.set(fmt.Errorf("%w: database: %w", agent.ErrNotReady, connErr))
	now = now.Add(readyTTL)
	resp, out := post(t, url, `{"message":"hi","actor_id":"api:me"}`, nil)
	msg, _ := out["message"].(string)
	want := "load session api:me: unexpected EOF; not ready: database: cannot connect to the database (connection refused)"
	if resp.StatusCode != http.StatusServiceUnavailable || out["error"] != "NOT_READY" || msg != want {
		t.Fatalf("not ready: %d %v, want 503 NOT_READY %q", resp.StatusCode, out, want)
	}
	if l := leaks(msg, addr); l != "" {
		t.Errorf("message %q gives away %q", msg, l)
	}
}
