package mgmt

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/assistant"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/runtime"
)

// get sends GET path (under Prefix, query included) and decodes the JSON
// reply, which may be an object or an array.
func get(t *testing.T, base, path string) (int, map[string]any) {
	t.Helper()
	res, err := http.Get(base + Prefix + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var out map[string]any
	if json.Unmarshal(b, &out) != nil {
		out = map[string]any{"body": string(b)}
	}
	return res.StatusCode, out
}

// TestBoolParamsRefuseOtherValues: explain, events and all accept what
// strconv.ParseBool accepts (and empty or absent, which is false); any
// other value is a 400 INVALID_REQUEST naming the parameter and the
// accepted values. Before, "maybe" was read as false and answered 200.
func TestBoolParamsRefuseOtherValues(t *testing.T) {
	a := openAssistant(t)
	if err := a.Memory().AppendEvents(context.Background(), []memory.Event{{ActorID: "api:b", SessionID: "s", Role: "user", Text: "basil on the windowsill"}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(a))
	defer srv.Close()
	routes := map[string]string{
		"explain": "/memory/search?actor=api:b&q=basil&explain=",
		"events":  "/memory/records?actor=api:b&events=",
		"all":     "/approvals?all=",
	}
	for name, path := range routes {
		for _, v := range []string{"maybe", "yes", "on", "2", "truee", "%20true"} {
			st, out := get(t, srv.URL, path+v)
			msg, _ := out["message"].(string)
			if st != http.StatusBadRequest || out["error"] != "INVALID_REQUEST" || !strings.Contains(msg, name+" ") || !strings.Contains(msg, "true or false") {
				t.Errorf("%s=%s: %d %v, want 400 INVALID_REQUEST naming %s and the accepted values", name, v, st, out, name)
			}
		}
		for _, v := range []string{"true", "1", "t", "T", "TRUE", "True", "false", "0", "f", "F", "FALSE", "False", "", "true&" + name + "=false"} {
			if st, out := get(t, srv.URL, path+v); st != http.StatusOK {
				t.Errorf("%s=%s: %d %v, want 200", name, v, st, out)
			}
		}
		// A second, unacceptable value is refused too.
		if st, _ := get(t, srv.URL, path+"true&"+name+"=maybe"); st != http.StatusBadRequest {
			t.Errorf("%s=true&%s=maybe: %d, want 400", name, name, st)
		}
	}
	// The value is read, not only checked: events=1 lists the event.
	st, out := get(t, srv.URL, "/memory/records?actor=api:b&events=1")
	if b, _ := json.Marshal(out); st != http.StatusOK || !strings.Contains(string(b), "windowsill") {
		t.Errorf("events=1: %d %s, want the event", st, b)
	}
}

// TestStateShowRefusesInvalidActor: GET /state/{actor} refuses an actor
// ID that no turn can have with the 400 INVALID_REQUEST and the message
// GET /memory/records gives for it (agent.ValidateStoredID), where it
// answered a default state before; an ID stored before invisible
// characters were refused stays readable.
func TestStateShowRefusesInvalidActor(t *testing.T) {
	srv := httptest.NewServer(Handler(openAssistant(t)))
	defer srv.Close()
	for _, actor := range []string{"   ", "\u200b", "\ufffd", "api:\ufffd", "\u200b\u200b ", strings.Repeat("a", 257)} {
		st, out := get(t, srv.URL, "/state/"+url.PathEscape(actor))
		_, want := get(t, srv.URL, "/memory/records?actor="+url.QueryEscape(actor))
		if st != http.StatusBadRequest || out["error"] != "INVALID_REQUEST" || out["message"] != want["message"] {
			t.Errorf("actor %.20q: %d %v, want 400 INVALID_REQUEST %q", actor, st, out, want["message"])
		}
	}
	for _, actor := range []string{"api:ana", "api:a\u200bb", "telegram:42"} {
		if st, out := get(t, srv.URL, "/state/"+url.PathEscape(actor)); st != http.StatusOK || out["actor_id"] != actor {
			t.Errorf("actor %q: %d %v, want 200 with its state", actor, st, out)
		}
	}
}

// TestMemoryExportPaths: a directory the caller got wrong is a 400
// naming it, before anything is written (it was a 500 from the middle of
// the export); the live memory directory and the home are refused, also
// through a symbolic link; a path with ".." is cleaned and created; a
// server fault is never a 400.
func TestMemoryExportPaths(t *testing.T) {
	a := openAssistant(t)
	if err := a.Memory().AppendEvents(context.Background(), []memory.Event{{ActorID: "api:x", SessionID: "s", Role: "user", Text: "figs by the door"}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(a))
	defer srv.Close()
	home := a.Config().Home
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(home, "memory")); err != nil || !fi.IsDir() {
		t.Fatalf("no live memory directory: %v", err)
	}
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(filepath.Join(home, "memory"), link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{
		{filepath.Join(file, "sub"), "cannot create it"},
		{file, "cannot create it"},
		{"", "dir is required"},
		{"relative/dir", "must be absolute"},
		{tmp + "/a\x00b", "NUL"},
		{home, "Tendril home"},
		{home + "/", "Tendril home"},
		{filepath.Join(home, "memory"), "live memory directory"},
		{filepath.Join(home, "memory", "x"), "live memory directory"},
		{home + "/agents/../memory/y", "live memory directory"},
		{filepath.Join(link, "sub"), "live memory directory"},
	} {
		res, out := do(t, srv.URL, "POST", "/memory/export", map[string]string{"dir": tc.dir})
		msg, _ := out["message"].(string)
		if res.StatusCode != http.StatusBadRequest || out["error"] != "INVALID_REQUEST" || !strings.Contains(msg, tc.want) {
			t.Errorf("dir %q: %d %v, want 400 INVALID_REQUEST saying %q", tc.dir, res.StatusCode, out, tc.want)
		}
		if tc.dir != "" && !strings.Contains(msg, "export directory") && !strings.Contains(msg, "dir is required") {
			t.Errorf("dir %q: message %q does not name the directory", tc.dir, msg)
		}
	}
	for _, p := range []string{filepath.Join(home, "memory", "x"), filepath.Join(home, "memory", "sub"), filepath.Join(home, "memory", "y")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("a refused export created %s", p)
		}
	}

	dir := filepath.Join(tmp, "new", "..", "out", "nested")
	res, out := do(t, srv.URL, "POST", "/memory/export", map[string]string{"dir": dir})
	if files, _ := out["files"].(float64); res.StatusCode != http.StatusOK || files < 1 || out["dir"] != filepath.Join(tmp, "out", "nested") {
		t.Fatalf("export to %s: %d %v, want 200, files and the cleaned dir", dir, res.StatusCode, out)
	}
	if _, err := os.Stat(filepath.Join(tmp, "new")); err == nil {
		t.Errorf("%s/new was created: the path was not cleaned", tmp)
	}

	// The memory store is closed: a server fault, not the caller's, and
	// as the assistant is shut down, 503 NOT_READY.
	a.Close()
	res, out = do(t, srv.URL, "POST", "/memory/export", map[string]string{"dir": filepath.Join(tmp, "after")})
	if msg, _ := out["message"].(string); res.StatusCode != http.StatusServiceUnavailable || out["error"] != "NOT_READY" || !strings.Contains(msg, "shutting down") {
		t.Fatalf("export with the store closed: %d %v, want 503 NOT_READY (shutting down)", res.StatusCode, out)
	}
}

// TestPausedTurnArgsAreCanonical: the 202 of a paused turn carries the
// request's canonical args (RFC 8785, what args_hash is the SHA-256 of),
// byte for byte what the approval_wait frame of a turn queued behind it
// carries; it carried the model's raw bytes before.
func TestPausedTurnArgsAreCanonical(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	t.Setenv("TENDRIL_HOME", t.TempDir())
	t.Setenv("MODEL_ID", "openai/gpt-test")
	t.Setenv("OPENAI_BASE_URL", fake.BaseURL())
	t.Setenv("OPENAI_API_KEY", "k")
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Memory.LLMExtraction = false
	ctx := context.Background()
	a, err := assistant.Open(ctx, cfg, assistant.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Owner: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if err := a.Start(ctx, assistant.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Options{Invoker: a})
	if err != nil {
		t.Fatal(err)
	}
	rt.Mount(Prefix+"/", Handler(a), true)
	srv := httptest.NewServer(rt.Handler())
	defer srv.Close()

	const raw = `{ "text" : "fig pruned",  "action":"add" }`
	const canon = `{"action":"add","text":"fig pruned"}`
	fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "notes", Args: raw}}})
	fake.Otherwise(func(modeltest.Seen) modeltest.Reply { return modeltest.Reply{Text: "ok"} })
	res, err := http.Post(srv.URL+"/invocations", "application/json", strings.NewReader(`{"message":"note: fig pruned","actor_id":"api:me"}`))
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Error    string                `json:"error"`
		Approval agent.PendingApproval `json:"approval"`
	}
	err = json.NewDecoder(res.Body).Decode(&body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusAccepted || body.Error != "APPROVAL_PENDING" {
		t.Fatalf("paused turn: %d %+v %v", res.StatusCode, body, err)
	}
	req, err := a.Gate().Get(ctx, body.Approval.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(body.Approval.Args))
	if body.Approval.Args != canon || body.Approval.Args != string(req.Args) || hex.EncodeToString(sum[:]) != req.ArgsHash {
		t.Fatalf("202 approval.args %q, want the canonical %q (request args %s, args_hash %s)", body.Approval.Args, canon, req.Args, req.ArgsHash)
	}

	// A turn of the same session waits behind it and streams approval_wait.
	sctx, cancel := context.WithTimeout(ctx, time.Minute) // a hang guard, not a timing assertion
	defer cancel()
	sreq, _ := http.NewRequestWithContext(sctx, "POST", srv.URL+"/invocations", strings.NewReader(`{"message":"hi","actor_id":"api:me"}`))
	sreq.Header.Set("Accept", "text/event-stream")
	sres, err := http.DefaultClient.Do(sreq)
	if err != nil {
		t.Fatal(err)
	}
	defer sres.Body.Close()
	sc := bufio.NewScanner(sres.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var wait *agent.PendingApproval
	for wait == nil && sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var f struct {
			Type     string                `json:"type"`
			Approval agent.PendingApproval `json:"approval"`
		}
		if err := json.Unmarshal([]byte(data), &f); err != nil {
			t.Fatal(err)
		}
		switch f.Type {
		case "approval_wait":
			wait = &f.Approval
		case "final":
			t.Fatalf("the second turn ended without an approval_wait frame: %s", data)
		}
	}
	if wait == nil {
		t.Fatalf("no approval_wait frame: %v", sc.Err())
	}
	if wait.RequestID != body.Approval.RequestID || wait.Args != body.Approval.Args {
		t.Fatalf("approval_wait %+v, 202 %+v: the args differ", *wait, body.Approval)
	}
	if r, out := do(t, srv.URL, "POST", "/approvals/"+wait.RequestID+"/deny", Decision{By: "cli:test"}); r.StatusCode != http.StatusOK {
		t.Fatalf("deny: %d %v", r.StatusCode, out)
	}
	io.Copy(io.Discard, sres.Body) // let the second turn finish
}

// A hostile-size approval ID in the path is echoed short in the 400, not
// whole: before, 5,000 bytes of it came back in the message.
func TestDecideEchoesLongIDShort(t *testing.T) {
	srv := httptest.NewServer(Handler(openAssistant(t)))
	defer srv.Close()
	res, err := http.Post(srv.URL+Prefix+"/approvals/"+strings.Repeat("A", 5000)+"/approve", "application/json", strings.NewReader(`{"by":"cli:ana"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusBadRequest || len(b) > 400 || !strings.Contains(string(b), "(5000 bytes)") {
		t.Fatalf("%d, %d bytes: %.300s", res.StatusCode, len(b), b)
	}
}

// GET /deliveries refuses the actor IDs the other read routes refuse
// (before, any non-empty value subscribed).
func TestDeliveriesRefuseBadActor(t *testing.T) {
	srv := httptest.NewServer(Handler(openAssistant(t)))
	defer srv.Close()
	for _, actor := range []string{"", "%20", "api:%00", "%FF%FE", strings.Repeat("a", 300)} {
		res, err := http.Get(srv.URL + Prefix + "/deliveries?actor=" + actor)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "INVALID_REQUEST") {
			t.Errorf("actor %.40q: %d %.200s, want 400 INVALID_REQUEST", actor, res.StatusCode, b)
		}
	}
}
