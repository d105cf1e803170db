package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/testenv"
)

// agentCoreSession is a runtime session id as the relay derives one
// (AgentCore wants at least 33 characters).
const agentCoreSession = "tendril-telegram-chat-0000000000004242"

func TestE2EAgentCoreRefusesWithoutDatabase(t *testing.T) {
	_, stderr, code := runCLI(t, t.TempDir(), []string{"TENDRIL_RUNTIME=agentcore", "TENDRIL_ADDR=" + freeAddr(t)}, "serve")
	if code != 1 || !strings.Contains(stderr, "TENDRIL_DATABASE_URL") || !strings.Contains(stderr, "TENDRIL_EPHEMERAL=1") || !strings.Contains(stderr, "microVM") {
		t.Fatalf("agentcore without a database: exit %d, stderr %q", code, stderr)
	}
	_, stderr, code = runCLI(t, t.TempDir(), []string{"TENDRIL_RUNTIME=lambda"}, "serve")
	if code != 1 || !strings.Contains(stderr, `runtime (from TENDRIL_RUNTIME) "lambda" is unknown`) {
		t.Fatalf("unknown runtime: exit %d, stderr %q", code, stderr)
	}
}

// TestE2EAgentCoreEphemeral checks the contract's routes without a token
// and that nothing else is mounted, on a non-loopback-safe configuration
// (TENDRIL_AUTH_TOKEN unset) that a self-hosted server would refuse.
func TestE2EAgentCoreEphemeral(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	fake.Otherwise(func(s modeltest.Seen) modeltest.Reply { return modeltest.Reply{Text: "echo: " + s.LastUserText()} })
	p := startServe(t, testHome(t), append(openAIEnv(fake), "TENDRIL_RUNTIME=agentcore", "TENDRIL_EPHEMERAL=1")...)
	checkAgentCoreContract(t, p)
}

// checkAgentCoreContract: /ping, /invocations (JSON with the prompt alias
// and the session header, and SSE) and /ws answer without a token; the
// dashboard, the management API and /metrics are not there.
func checkAgentCoreContract(t *testing.T, p *proc) {
	t.Helper()
	resp, err := http.Get(p.URL + "/ping")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/ping: %v %v", resp, err)
	}
	resp.Body.Close()

	body := `{"prompt":"hello from agentcore","actor_id":"telegram:4242"}`
	req, _ := http.NewRequest("POST", p.URL+"/invocations", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Amzn-Bedrock-AgentCore-Runtime-Session-Id", agentCoreSession)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.StatusCode != 200 || out["ok"] != true || out["text"] != "echo: hello from agentcore" {
		t.Fatalf("/invocations: %d %v", resp.StatusCode, out)
	}
	if meta, _ := out["metadata"].(map[string]any); meta == nil || !strings.Contains(fmt.Sprint(meta["session_id"]), agentCoreSession) {
		t.Fatalf("session header not used: %v", out["metadata"])
	}

	req, _ = http.NewRequest("POST", p.URL+"/invocations", strings.NewReader(`{"input":"stream please"}`))
	req.Header.Set("Accept", "text/event-stream")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var last map[string]any
	frames := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "data: ") {
			frames++
			last = nil
			json.Unmarshal([]byte(l[6:]), &last)
		}
	}
	resp.Body.Close()
	if frames < 3 || last["type"] != "final" || last["ok"] != true || last["text"] != "echo: stream please" {
		t.Fatalf("SSE: %d frames, last %v", frames, last)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(p.URL, "http")+"/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"X-Amzn-Bedrock-AgentCore-Runtime-Session-Id": {agentCoreSession}}})
	if err != nil {
		t.Fatalf("/ws: %v", err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"prompt":"over the socket","actor_id":"telegram:4242"}`)); err != nil {
		t.Fatal(err)
	}
	for {
		typ, b, err := c.Read(ctx)
		if err != nil || typ != websocket.MessageText {
			t.Fatalf("/ws read: %v %v", typ, err)
		}
		var f map[string]any
		json.Unmarshal(b, &f)
		if f["type"] == "final" {
			if f["ok"] != true || f["text"] != "echo: over the socket" {
				t.Fatalf("/ws final %v", f)
			}
			break
		}
	}
	c.Close(websocket.StatusNormalClosure, "")

	for _, path := range []string{"/", "/sessions", "/api/v1/approvals", "/api/v1/sessions", "/metrics"} {
		resp, err := http.Get(p.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s without TENDRIL_AUTH_TOKEN in agentcore mode: %d, want 404", path, resp.StatusCode)
		}
	}
}

// agentCoreDB returns the test database URL with an application_name of
// its own, so the test can find (and terminate) exactly this process's
// connections on a shared server.
func agentCoreDB(t *testing.T) (db, app string) {
	t.Helper()
	app = fmt.Sprintf("tendril-e2e-agentcore-%d", time.Now().UnixNano())
	u, _ := url.Parse(testenv.PostgresSchema(t))
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String(), app
}

func echoModel(t *testing.T) *modeltest.Server {
	fake := modeltest.NewOpenAI(t)
	fake.Otherwise(func(s modeltest.Seen) modeltest.Reply { return modeltest.Reply{Text: "echo: " + s.LastUserText()} })
	return fake
}

// TestE2EAgentCorePostgres runs AgentCore mode on the test database: the
// contract, and memory that survives a restart on a fresh home (a new
// microVM, the same database).
func TestE2EAgentCorePostgres(t *testing.T) {
	db, _ := agentCoreDB(t)
	fake := echoModel(t)
	env := append(openAIEnv(fake), "TENDRIL_RUNTIME=agentcore", "TENDRIL_DATABASE_URL="+db)
	p := startServe(t, testHome(t), env...)
	checkAgentCoreContract(t, p)

	actor := "telegram:777"
	for _, m := range []string{"I only use organic fertiliser on my roses.", "My garden has raised beds with fast drainage."} {
		if st, out := invoke(t, p.URL, map[string]any{"prompt": m, "actor_id": actor}); st != 200 || out["ok"] != true {
			t.Fatalf("memory turn: %d %v", st, out)
		}
	}
	// Extraction finishes before the microVM goes away.
	waitRecall(t, p, fake, actor, "organic fertiliser")
	if err := p.stop(t); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.logs.String())
	}
	p = startServe(t, testHome(t), env...)
	waitRecall(t, p, fake, actor, "organic fertiliser")
}

// TestE2EAgentCoreFreezeThaw: SIGSTOP, every database connection of the
// process terminated by PostgreSQL meanwhile, SIGCONT, and the next turn
// answers (SPEC §1 readiness).
func TestE2EAgentCoreFreezeThaw(t *testing.T) {
	db, app := agentCoreDB(t)
	fake := echoModel(t)
	p := startServe(t, testHome(t), append(openAIEnv(fake), "TENDRIL_RUNTIME=agentcore", "TENDRIL_DATABASE_URL="+db)...)
	actor := "telegram:778"
	if st, out := invoke(t, p.URL, map[string]any{"prompt": "before the freeze", "actor_id": actor}); st != 200 || out["ok"] != true {
		t.Fatalf("turn before freeze: %d %v", st, out)
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thawed := false
	defer func() {
		if !thawed {
			p.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	n := terminateBackends(t, testenv.Postgres(t), app)
	if n == 0 {
		t.Fatalf("the frozen process held no database connection named %s", app)
	}
	// Frozen past pgxpool's idle-ping threshold (1 s), so the thaw is a
	// real one: every pooled connection is dead and stale.
	time.Sleep(3 * time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	thawed = true
	for i, m := range []string{"after the thaw", "and again"} {
		st, out := invoke(t, p.URL, map[string]any{"prompt": m, "actor_id": actor})
		if st != 200 || out["ok"] != true || out["text"] != "echo: "+m {
			t.Fatalf("turn %d after thaw (%d connections had been terminated): %d %v\n%s", i+1, n, st, out, p.logs.String())
		}
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("stop after thaw: %v\n%s", err, p.logs.String())
	}
}

// waitRecall asks until the model's system prompt for actor carries want
// (extraction runs in the background).
func waitRecall(t *testing.T, p *proc, fake *modeltest.Server, actor, want string) {
	t.Helper()
	for i := 0; i < 100; i++ {
		before := len(fake.Requests())
		q := fmt.Sprintf("Which fertiliser do I use? (%d)", i)
		st, out := invoke(t, p.URL, map[string]any{"prompt": q, "actor_id": actor, "session_id": fmt.Sprint("recall-", i)})
		if st != 200 {
			t.Fatalf("recall turn: %d %v", st, out)
		}
		for _, s := range fake.Requests()[before:] {
			if s.LastUserText() == q && strings.Contains(s.System, want) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%q never reached the prompt of %s\n%s", want, actor, p.logs.String())
}

// terminateBackends ends every server connection whose application_name
// is app, as an administrator (or a database failover) would, and returns
// how many it ended.
func terminateBackends(t *testing.T, admin, app string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
