package mgmt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/assistant"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool"
)

func openAssistant(t *testing.T) *assistant.Assistant {
	t.Helper()
	t.Setenv("TENDRIL_HOME", t.TempDir())
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Memory.LLMExtraction = false
	a, err := assistant.Open(context.Background(), cfg, assistant.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Owner: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// TestMemorySearchK: k outside 1–MaxSearchK (or not a number) is a 400
// naming k, not a search that reserves k hits (k=1e9 once took the
// server down with an out-of-memory fatal error); 0 and no k mean 10.
func TestMemorySearchK(t *testing.T) {
	a := openAssistant(t)
	ctx := context.Background()
	var evs []memory.Event
	for i := range 12 {
		evs = append(evs, memory.Event{ActorID: "api:k", SessionID: "s", Role: "user", Text: "basil on the windowsill " + strings.Repeat("x", i)})
	}
	if err := a.Memory().AppendEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(a))
	defer srv.Close()
	get := func(k string) (int, string) {
		t.Helper()
		u := srv.URL + Prefix + "/memory/search?actor=api:k&q=basil"
		if k != "none" {
			u += "&k=" + k
		}
		res, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, k := range []string{"1000000000", "1001", "-5", "abc", "1e3"} {
		if st, body := get(k); st != http.StatusBadRequest || !strings.Contains(body, "INVALID_REQUEST") || !strings.Contains(body, "k ") {
			t.Errorf("k=%s: %d %s, want 400 INVALID_REQUEST naming k", k, st, body)
		}
	}
	for _, q := range []string{"", "%20%20", "!!!", "%E2%80%8B", "%3F%3F%20-"} { // blank, punctuation, a zero-width space
		res, err := http.Get(srv.URL + Prefix + "/memory/search?actor=api:k&q=" + q)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "/memory/records") {
			t.Errorf("q=%q: %d %s, want 400 pointing at /memory/records", q, res.StatusCode, b)
		}
	}
	for k, want := range map[string]int{"none": 10, "0": 10, "3": 3, "1000": 12} {
		st, body := get(k)
		var hits []memory.Hit
		if st != http.StatusOK || json.Unmarshal([]byte(body), &hits) != nil || len(hits) != want {
			t.Errorf("k=%s: %d, %d hits (%.200s), want 200 and %d", k, st, len(hits), body, want)
		}
	}
}

// TestYoloSeconds: a window beyond approval.MaxYolo is a 400, not a
// Duration overflow that answers "open" and closes the window.
func TestYoloSeconds(t *testing.T) {
	srv := httptest.NewServer(Handler(openAssistant(t)))
	defer srv.Close()
	post := func(body string) (int, map[string]any) {
		t.Helper()
		res, err := http.Post(srv.URL+Prefix+"/approvals/yolo", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out
	}
	for _, b := range []string{`{"seconds":1e18,"by":"x"}`, `{"seconds":1801,"by":"x"}`, `{"seconds":-1,"by":"x"}`, `{"seconds":60}`} {
		if st, out := post(b); st != http.StatusBadRequest {
			t.Errorf("%s: %d %v, want 400", b, st, out)
		}
	}
	st, out := post(`{"seconds":1800,"by":"x"}`)
	if st != http.StatusOK || out["open"] != true {
		t.Fatalf("1800 s: %d %v", st, out)
	}
	until, err := time.Parse(time.RFC3339Nano, out["until"].(string))
	if err != nil || time.Until(until) < 29*time.Minute {
		t.Fatalf("1800 s: until %v (%v)", out["until"], err)
	}
	if st, out := post(`{"seconds":0,"by":"x"}`); st != http.StatusOK || out["open"] != false {
		t.Fatalf("close: %d %v", st, out)
	}
}

// TestApprovalsByIsValidated: the approve, deny and yolo routes check "by"
// with approval.ValidateBy, the check the ledger's writers use: a value
// of 900 KB, with control characters or blank is a 400 INVALID_REQUEST
// naming by, and the ledger is left as it was.
func TestApprovalsByIsValidated(t *testing.T) {
	a := openAssistant(t)
	ctx := context.Background()
	g := a.Gate()
	d, err := g.Check(ctx, approval.Call{AgentID: "main", ActorID: "api:me", SessionID: "s1", Channel: "api", Tool: "notes",
		Class: tool.ClassWrite, Args: json.RawMessage(`{"text":"x"}`)}, state.Normal)
	if err != nil || d.Request == nil {
		t.Fatalf("check: %v %+v", err, d)
	}
	before, err := os.ReadFile(g.Path())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(a))
	defer srv.Close()
	post := func(path string, body any) (int, map[string]any) {
		t.Helper()
		b, _ := json.Marshal(body)
		res, err := http.Post(srv.URL+Prefix+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out
	}
	for _, by := range []string{strings.Repeat("a", 900<<10), "\u001b[2J\u0000", "evil\n\u001b[31mRED\u0000", "", "   "} {
		label := fmt.Sprintf("%.30q", by)
		for _, path := range []string{"/approvals/" + d.Request.ID + "/approve", "/approvals/" + d.Request.ID + "/deny"} {
			st, out := post(path, Decision{By: by})
			if msg, _ := out["message"].(string); st != http.StatusBadRequest || out["error"] != "INVALID_REQUEST" || !strings.Contains(msg, "'by'") {
				t.Errorf("%s by %s: %d %v, want 400 INVALID_REQUEST naming by", path, label, st, out)
			}
		}
		st, out := post("/approvals/yolo", YoloRequest{Seconds: 60, By: by})
		if msg, _ := out["message"].(string); st != http.StatusBadRequest || out["error"] != "INVALID_REQUEST" || !strings.Contains(msg, "'by'") {
			t.Errorf("yolo by %s: %d %v, want 400 INVALID_REQUEST naming by", label, st, out)
		}
	}
	if after, _ := os.ReadFile(g.Path()); !bytes.Equal(before, after) {
		t.Fatalf("the ledger changed:\n%.2000s", after[len(before):])
	}
	if _, open := g.YoloUntil(); open {
		t.Fatal("a YOLO window opened")
	}
	if r, _ := g.Get(ctx, d.Request.ID); r.Status != approval.StatusPending {
		t.Fatalf("request is %s, want pending", r.Status)
	}
	if st, out := post("/approvals/"+d.Request.ID+"/approve", Decision{By: "cli:ana"}); st != http.StatusOK || out["decided_by"] != "cli:ana" {
		t.Fatalf("approve by cli:ana: %d %v", st, out)
	}
}

// TestErrorMessagesBoundedAndEscaped: an error never echoes a hostile
// path segment whole (a 100 KB ID gave a 100 KB answer on three routes)
// nor a bidirectional control as such.
func TestErrorMessagesBoundedAndEscaped(t *testing.T) {
	a := openAssistant(t)
	srv := httptest.NewServer(Handler(a))
	defer srv.Close()
	long := strings.Repeat("q", 100000)
	for _, c := range []struct{ method, path string }{
		{"GET", "/memory/records/" + long},
		{"POST", "/memory/staging/" + long + "/approve"},
		{"POST", "/pairing/" + long + "/approve"},
		{"GET", "/sessions/api:" + long},
	} {
		res, out := do(t, srv.URL, c.method, c.path, nil)
		msg, _ := out["message"].(string)
		if res.StatusCode < 400 || len(msg) > 1200 {
			t.Errorf("%s %s…: %d, message of %d bytes %.80q…, want an error cut short", c.method, c.path[:20], res.StatusCode, len(msg), msg)
		}
	}
	res, out := do(t, srv.URL, "GET", "/sessions/api:%E2%80%AEx", nil)
	msg, _ := out["message"].(string)
	if res.StatusCode != http.StatusNotFound || strings.ContainsRune(msg, '\u202e') || !strings.Contains(msg, `\u202e`) {
		t.Errorf("GET /sessions/api:<RLO>x: %d %q, want the override escaped", res.StatusCode, msg)
	}
}
