package main

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readyz fetches GET /readyz: its status and reason ("" when ready or
// when the request failed: ok false).
func readyz(url string) (status int, reason string, ok bool) {
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		return 0, "", false
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	r, _ := out["reason"].(string)
	return resp.StatusCode, r, true
}

// With shutdownDelay, SIGTERM first takes the instance out of rotation
// (/readyz 503) while it still answers requests, then it stops as usual.
// A load balancer therefore sees "not ready" before it sees a refused
// connection.
func TestE2EShutdownDelayDrainsBeforeClosing(t *testing.T) {
	p := startServe(t, t.TempDir(), "TENDRIL_SHUTDOWN_DELAY=30s")
	if st, _, ok := readyz(p.URL); !ok || st != http.StatusOK {
		t.Fatalf("before SIGTERM: /readyz %d (reachable %v), want 200", st, ok)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, reason, ok := readyz(p.URL)
		if !ok {
			t.Fatalf("listener closed during the drain delay\n%s", p.logs.String())
		}
		if st == http.StatusServiceUnavailable {
			if reason != "shutting down" {
				t.Fatalf("draining: reason %q, want shutting down", reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d after SIGTERM\n%s", st, p.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// still serving: a turn is answered (this server has no model)
	if status, out := invoke(t, p.URL, map[string]any{"message": "hello", "actor_id": "api:u"}); status != http.StatusServiceUnavailable || out["error"] != "MODEL_NOT_CONFIGURED" {
		t.Fatalf("turn during the drain: %d %v", status, out)
	}
	if !strings.Contains(p.logs.String(), "draining") {
		t.Fatalf("no drain logged:\n%s", p.logs.String())
	}
	select {
	case err := <-p.done:
		t.Fatalf("exited before the delay (30s) or a second signal: %v", err)
	default:
	}
	// a second signal skips the rest of the delay
	if err := p.stop(t); err != nil {
		t.Fatalf("exit after the second signal: %v\n%s", err, p.logs.String())
	}
	if !strings.Contains(p.logs.String(), "second signal") {
		t.Fatalf("second signal not logged:\n%s", p.logs.String())
	}
}

func TestShutdownDelayConfig(t *testing.T) {
	home := t.TempDir()
	for _, v := range []string{"soon", "-5s"} {
		_, stderr, code := runCLI(t, home, []string{"TENDRIL_SHUTDOWN_DELAY=" + v}, "serve", "--addr", freeAddr(t))
		if code == 0 || !strings.Contains(stderr, "TENDRIL_SHUTDOWN_DELAY") {
			t.Fatalf("TENDRIL_SHUTDOWN_DELAY=%s: exit %d stderr %q", v, code, stderr)
		}
	}
}

// The unauthenticated /readyz says what is missing but not where: a
// removed home is "home: stat: no such file or directory", without its
// path, which only the server's log carries.
func TestE2EReadyzHidesHomePath(t *testing.T) {
	home := filepath.Join(t.TempDir(), "private-home-dir")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, home)
	if err := os.RemoveAll(home); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, reason, ok := readyz(p.URL)
		if !ok {
			t.Fatal("/readyz unreachable")
		}
		if st == http.StatusServiceUnavailable {
			if strings.Contains(reason, "private-home-dir") || !strings.Contains(reason, "home") {
				t.Fatalf("reason %q: want the home named as a dependency, not its path", reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d with the home removed", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(p.logs.String(), "private-home-dir") {
		t.Errorf("the log should name the missing home for the operator:\n%s", p.logs.String())
	}
}

// A --json command prints an envelope on stdout even when it could not
// run: the stores would not open (no server, database refused), or its
// arguments were wrong.
func TestInvokeJSONWhenTheDatabaseIsDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	for _, args := range [][]string{
		{"invoke", "--json", "hi"},
		{"memory", "search", "--json", "--actor", "api:x", "fig"},
		{"approvals", "list", "--json"},
		{"cron", "list", "--json"},
	} {
		stdout, stderr, code := runCLI(t, t.TempDir(), []string{"TENDRIL_DATABASE_URL=postgres://tendril@" + addr + "/x"}, args...)
		var out map[string]any
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatalf("%v: stdout is not JSON: %q (stderr %q)", args, stdout, stderr)
		}
		if code != 1 || out["ok"] != false || out["error"] != "NOT_READY" || !strings.Contains(out["message"].(string), "refused") {
			t.Fatalf("%v: exit %d, %v", args, code, out)
		}
		if !strings.Contains(stderr, "refused") {
			t.Fatalf("%v: stderr %q should say why too", args, stderr)
		}
	}
	// bad usage is INVALID_REQUEST, exit 2
	stdout, _, code := runCLI(t, t.TempDir(), nil, "invoke", "--json")
	if !strings.Contains(stdout, `"INVALID_REQUEST"`) || code != 2 {
		t.Fatalf("invoke --json without a message: %d %q", code, stdout)
	}
}
