package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/tool"
	"github.com/tendrilai/tendril/internal/tool/mcp"
	"github.com/tendrilai/tendril/internal/tool/mcp/mcptest"
)

// TestMain lets the test binary double as a stdio MCP server: the manager
// starts os.Args[0] with TENDRIL_MCPTEST_STDIO=1.
func TestMain(m *testing.M) {
	mcptest.RunIfStdioChild()
	os.Exit(m.Run())
}

func stdioConfig() mcp.ServerConfig {
	return mcp.ServerConfig{Command: os.Args[0], Env: map[string]string{mcptest.EnvStdio: "1"}}
}

func byName(t *testing.T, tools []tool.Tool) map[string]tool.Tool {
	t.Helper()
	m := map[string]tool.Tool{}
	for _, tl := range tools {
		m[tl.Name()] = tl
	}
	return m
}

func run(t *testing.T, tl tool.Tool, args string) string {
	t.Helper()
	out, err := tl.Run(context.Background(), tool.Call{AgentID: "main", ActorID: "a", Args: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("%s(%s): %v", tl.Name(), args, err)
	}
	return out
}

func newManager(t *testing.T, servers map[string]mcp.ServerConfig) *mcp.Manager {
	t.Helper()
	m := mcp.NewManager(servers, nil)
	t.Cleanup(func() { m.Close() })
	return m
}

func TestStdio(t *testing.T) {
	m := newManager(t, map[string]mcp.ServerConfig{"garden db": stdioConfig()})
	ctx := context.Background()
	tools, err := m.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name())
		if !tool.ValidName(tl.Name()) || tl.Class() != tool.ClassWrite {
			t.Errorf("%s: invalid name or class %s", tl.Name(), tl.Class())
		}
		var schema map[string]any
		if err := json.Unmarshal(tl.Schema(), &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s schema %s", tl.Name(), tl.Schema())
		}
	}
	want := "garden_db__add,garden_db__count,garden_db__echo,garden_db__fail,garden_db__get_file_v2,garden_db__pid,garden_db__sleep"
	if got := strings.Join(names, ","); got != want {
		t.Fatalf("tools = %s\nwant    %s", got, want)
	}
	ts := byName(t, tools)
	if d := ts["garden_db__echo"].Description(); d != "[MCP server garden db, tool echo] Echo the text back." {
		t.Fatalf("description = %q", d)
	}
	// They register alongside built-ins.
	reg := tool.NewRegistry()
	for _, tl := range tools {
		if err := reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		tool, args, want, wantErr string
	}{
		{tool: "garden_db__echo", args: `{"text":"hello 🌱"}`, want: "hello 🌱"},
		{tool: "garden_db__add", args: `{"a":2,"b":3.5}`, want: `{"sum":5.5}`},
		{tool: "garden_db__get_file_v2", args: `{"path":"beds.txt"}`, want: "file:beds.txt"},
		{tool: "garden_db__fail", args: `{"message":"the greenhouse is locked"}`, wantErr: "the greenhouse is locked"},
		{tool: "garden_db__add", args: `{"a":"two"}`, wantErr: "a"},
		{tool: "garden_db__echo", args: `{not json`, wantErr: "not valid JSON"},
	}
	for _, tc := range tests {
		out, err := ts[tc.tool].Run(ctx, tool.Call{Args: json.RawMessage(tc.args)})
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s(%s): err = %v, want %q", tc.tool, tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || out != tc.want {
			t.Errorf("%s(%s) = %q, %v; want %q", tc.tool, tc.args, out, err, tc.want)
		}
	}
	// Errors of the tool did not restart the server: the count continues.
	if a, b := run(t, ts["garden_db__count"], `{}`), run(t, ts["garden_db__count"], `{}`); a != "1" || b != "2" {
		t.Fatalf("count = %s, %s", a, b)
	}
}

// A server that dies is restarted lazily, on the next call or Tools, and
// the call that finds it dead still succeeds, exactly once.
func TestStdioKillAndLazyRestart(t *testing.T) {
	m := newManager(t, map[string]mcp.ServerConfig{"s": stdioConfig()})
	ctx := context.Background()
	tools, err := m.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ts := byName(t, tools)
	for round := 0; round < 3; round++ {
		pid, err := strconv.Atoi(run(t, ts["s__pid"], `{}`))
		if err != nil || pid == os.Getpid() {
			t.Fatalf("pid %d, %v", pid, err)
		}
		if got := run(t, ts["s__count"], `{}`); got != "1" {
			t.Fatalf("round %d: count before kill = %s, want 1 (fresh process)", round, got)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if round == 1 {
			// Let the manager notice the death first: the next use reconnects.
			waitGone(t, pid)
		}
		if round == 2 {
			// Pre-turn path: Tools restarts the server.
			waitGone(t, pid)
			again, err := m.Tools(ctx)
			if err != nil || len(again) != len(tools) {
				t.Fatalf("Tools after kill: %d tools, %v", len(again), err)
			}
		}
		// The old tool values keep working: they go through the manager.
		pid2, err := strconv.Atoi(run(t, ts["s__pid"], `{}`))
		if err != nil || pid2 == pid {
			t.Fatalf("round %d: pid after kill = %d (was %d), %v", round, pid2, pid, err)
		}
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if f := strings.Fields(string(data)); len(f) > 2 && f[2] == "Z" {
			time.Sleep(50 * time.Millisecond) // reaped soon by the transport
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d still alive", pid)
}

// swappable lets a test replace the HTTP MCP server behind one URL, which
// looks to the client like a server restart that lost every session.
type swappable struct {
	mu      sync.Mutex
	h       http.Handler
	headers []string
}

func (s *swappable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.h
	s.headers = append(s.headers, r.Header.Get("Authorization"))
	s.mu.Unlock()
	h.ServeHTTP(w, r)
}

func (s *swappable) swap(h http.Handler) {
	s.mu.Lock()
	s.h = h
	s.mu.Unlock()
}

func TestStreamableHTTP(t *testing.T) {
	sw := &swappable{h: mcptest.NewHTTPHandler()}
	srv := httptest.NewServer(sw)
	defer srv.Close()
	m := newManager(t, map[string]mcp.ServerConfig{
		"web": {URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer t0k"}, Class: tool.ClassRead},
	})
	tools, err := m.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ts := byName(t, tools)
	if len(ts) != 7 || ts["web__echo"].Class() != tool.ClassRead {
		t.Fatalf("tools = %v", ts)
	}
	if got := run(t, ts["web__echo"], `{"text":"over http"}`); got != "over http" {
		t.Fatalf("echo = %q", got)
	}
	if got := run(t, ts["web__count"], `{}`); got != "1" {
		t.Fatalf("count = %q", got)
	}
	// The server restarts and forgets the session: the next call reconnects.
	sw.swap(mcptest.NewHTTPHandler())
	if got := run(t, ts["web__count"], `{}`); got != "1" {
		t.Fatalf("count after server restart = %q, want 1 (new server, called once)", got)
	}
	if got := run(t, ts["web__echo"], `{"text":"still here"}`); got != "still here" {
		t.Fatalf("echo after restart = %q", got)
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for _, h := range sw.headers {
		if h != "Bearer t0k" {
			t.Fatalf("request without the configured header: %q", h)
		}
	}
}

// One broken server never hides the others' tools.
func TestBrokenServers(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	m := newManager(t, map[string]mcp.ServerConfig{
		"ok":      stdioConfig(),
		"down":    {URL: deadURL},
		"missing": {Command: "/nonexistent/tendril-mcp-server"},
		"both":    {Command: "x", URL: "http://127.0.0.1:1"},
		"neither": {},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tools, err := m.Tools(ctx)
	if len(tools) != 7 || !strings.HasPrefix(tools[0].Name(), "ok__") {
		t.Fatalf("tools = %d", len(tools))
	}
	for _, want := range []string{"mcp server down:", "mcp server missing:", "mcp server both: set either command or url", "mcp server neither: set command"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to mention %q", err, want)
		}
	}
	check := m.Check(ctx)
	if check["ok"] != nil || check["down"] == nil || len(check) != 5 {
		t.Fatalf("Check = %v", check)
	}
}

func TestCallCancelled(t *testing.T) {
	m := newManager(t, map[string]mcp.ServerConfig{"s": stdioConfig()})
	tools, err := m.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ts := byName(t, tools)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = ts["s__sleep"].Run(ctx, tool.Call{Args: json.RawMessage(`{"ms":60000}`)})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	// The server survived the cancelled call and is not restarted.
	if got := run(t, ts["s__count"], `{}`); got != "1" {
		t.Fatalf("count = %s", got)
	}
}

// Concurrent calls across a server crash all complete, and the manager
// starts exactly one replacement process.
func TestConcurrentCallsAcrossCrash(t *testing.T) {
	m := newManager(t, map[string]mcp.ServerConfig{"s": stdioConfig()})
	tools, err := m.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ts := byName(t, tools)
	pid, _ := strconv.Atoi(run(t, ts["s__pid"], `{}`))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	pids := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pids[i], errs[i] = ts["s__pid"].Run(context.Background(), tool.Call{Args: json.RawMessage(`{}`)})
		}()
	}
	wg.Wait()
	distinct := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		distinct[pids[i]] = true
	}
	if len(distinct) != 1 || distinct[strconv.Itoa(pid)] {
		t.Fatalf("pids after crash = %v (old %d): want exactly one new process", distinct, pid)
	}
}
