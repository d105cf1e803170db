package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// testHome returns a fresh home whose tendril.json turns LLM extraction
// off, so the fake model sees only turn requests and scripted replies are
// never consumed by a background extraction call.
func testHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	cfg := `{
  // e2e: rule-based extraction only
  "memory": {"llmExtraction": false}
}`
	if err := os.WriteFile(filepath.Join(home, "tendril.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

// openAIEnv points the binary at an OpenAI-compatible fake.
func openAIEnv(fake *modeltest.Server) []string {
	return []string{"MODEL_ID=openai/gpt-test", "OPENAI_BASE_URL=" + fake.BaseURL(), "OPENAI_API_KEY=test-key"}
}

func TestE2EServeAgainstOpenAIFake(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	p := startServe(t, testHome(t), openAIEnv(fake)...)

	resp, err := http.Get(p.URL + "/ping")
	if err != nil {
		t.Fatal(err)
	}
	var ping map[string]any
	json.NewDecoder(resp.Body).Decode(&ping)
	resp.Body.Close()
	if ping["status"] != "Healthy" || ping["time_of_last_update"] == nil {
		t.Fatalf("ping %v", ping)
	}

	fake.Push(modeltest.Reply{Text: "Water your fig deeply once a week."})
	status, out := invoke(t, p.URL, map[string]any{"message": "How often should I water my fig?", "user_id": "api:dana"})
	if status != 200 || out["ok"] != true || out["text"] != "Water your fig deeply once a week." {
		t.Fatalf("%d %v", status, out)
	}
	seen := fake.Requests()
	if len(seen) != 1 || seen[0].Model != "gpt-test" || !strings.Contains(seen[0].System, "Sprout") ||
		seen[0].LastUserText() != "How often should I water my fig?" {
		t.Fatalf("model saw %+v", seen)
	}

	// SSE framing.
	fake.Push(modeltest.Reply{Text: strings.Repeat("stream me ", 60)})
	req, _ := http.NewRequest("POST", p.URL+"/invocations", strings.NewReader(`{"message":"hi","actor_id":"api:dana"}`))
	req.Header.Set("Accept", "text/event-stream")
	sresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var frames []map[string]any
	sc := bufio.NewScanner(sresp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "data: ") {
			var f map[string]any
			if err := json.Unmarshal([]byte(l[6:]), &f); err != nil {
				t.Fatalf("bad frame %q", l)
			}
			frames = append(frames, f)
		} else if l != "" {
			t.Fatalf("non-SSE line %q", l)
		}
	}
	sresp.Body.Close()
	if len(frames) < 4 || frames[len(frames)-1]["type"] != "final" || frames[len(frames)-1]["ok"] != true {
		t.Fatalf("want start, several streamed deltas and final; got %v", frames)
	}
	var streamed string
	for _, f := range frames[1 : len(frames)-1] {
		streamed += f["text"].(string)
	}
	if strings.TrimSpace(streamed) != frames[len(frames)-1]["text"] { // the stored reply is trimmed
		t.Fatalf("deltas %q do not add up to the final text %q", streamed, frames[len(frames)-1]["text"])
	}

	// 400 and 413.
	for _, tc := range []struct {
		body   string
		status int
	}{
		{`{"message": "unterminated`, 400},
		{`{"actor_id":"api:x"}`, 400},
		{`{"message":"` + strings.Repeat("a", 9<<20) + `","actor_id":"api:x"}`, 413},
	} {
		r, err := http.Post(p.URL+"/invocations", "application/json", bytes.NewReader([]byte(tc.body)))
		if err != nil {
			t.Fatal(err)
		}
		var e map[string]any
		json.NewDecoder(r.Body).Decode(&e)
		r.Body.Close()
		if r.StatusCode != tc.status || e["ok"] != false || e["error"] != "INVALID_REQUEST" {
			t.Fatalf("body %.40q: %d %v", tc.body, r.StatusCode, e)
		}
	}

	// Malformed provider JSON is a clear MODEL_ERROR, not a crash.
	fake.Push(modeltest.Reply{Body: `{"choices": [`})
	status, out = invoke(t, p.URL, map[string]any{"message": "again", "actor_id": "api:dana"})
	if status != 502 || out["error"] != "MODEL_ERROR" {
		t.Fatalf("malformed provider reply: %d %v", status, out)
	}
}

func TestE2ESIGTERMLetsTheSlowTurnFinish(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	p := startServe(t, testHome(t), openAIEnv(fake)...)
	fake.Push(modeltest.Reply{Text: "finished despite shutdown", Delay: 1500 * time.Millisecond})
	type result struct {
		status int
		out    map[string]any
	}
	done := make(chan result, 1)
	go func() {
		s, o := invoke(t, p.URL, map[string]any{"message": "slow one", "actor_id": "api:u"})
		done <- result{s, o}
	}()
	// Wait until the turn is in flight.
	for {
		resp, err := http.Get(p.URL + "/ping")
		if err != nil {
			t.Fatal(err)
		}
		var ping map[string]any
		json.NewDecoder(resp.Body).Decode(&ping)
		resp.Body.Close()
		if ping["status"] == "HealthyBusy" {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit status after SIGTERM: %v\n%s", err, p.logs.String())
	}
	r := <-done
	if r.status != 200 || r.out["text"] != "finished despite shutdown" {
		t.Fatalf("in-flight turn: %d %v", r.status, r.out)
	}
	// The process is gone: no new work is accepted.
	if _, err := http.Get(p.URL + "/ping"); err == nil {
		t.Fatal("server still answering after shutdown")
	}
}

// The process survives being stopped and continued (a frozen container
// that thaws) and then answers normally; /metrics counts the turns.
func TestE2ESIGSTOPSIGCONTAndMetrics(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	p := startServe(t, testHome(t), openAIEnv(fake)...)
	if status, out := invoke(t, p.URL, map[string]any{"message": "before", "actor_id": "api:z"}); status != 200 {
		t.Fatalf("%d %v", status, out)
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if status, out := invoke(t, p.URL, map[string]any{"message": "after the thaw", "actor_id": "api:z"}); status != 200 || out["text"] != "echo: after the thaw" {
		t.Fatalf("after SIGCONT: %d %v", status, out)
	}
	resp, err := http.Get(p.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The live gauges: nothing in flight now, the queues sampled at scrape
	// time, and the one actor counted at its breaker level.
	for _, want := range []string{`tendril_turn_duration_seconds_count{channel="api",outcome="ok"} 2`, "tendril_model_duration_seconds_bucket",
		"tendril_memory_retrieval_duration_seconds", "tendril_turns_in_flight 0", `tendril_queue_depth{queue="extraction"}`,
		`tendril_queue_depth{queue="schedule"} 0`, `tendril_queue_depth{queue="resume"} 0`, "tendril_memory_extraction_lag_seconds",
		`tendril_breaker_actors{level="NORMAL"} 1`, `tendril_breaker_actors{level="CRITICAL"} 0`,
		// One actor read into the memory cache once, and the default 32 MiB budget.
		"tendril_memory_cache_actors 1", "tendril_memory_cache_loads_total 1", "tendril_memory_cache_budget_bytes 3.3554432e+07"} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("/metrics lacks %q", want)
		}
	}
}

// An embedder that fails is visible in /metrics: the failed passes are
// counted and the actor waits for a retry (before, only log lines showed
// that hybrid search had fallen back to BM25F). The fake OpenAI server
// answers no embeddings.
func TestE2EEmbedFailuresInMetrics(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	p := startServe(t, testHome(t), append(openAIEnv(fake), "EMBEDDING_MODEL_ID=openai/text-embedding-3-small")...)
	if status, out := invoke(t, p.URL, map[string]any{"message": "my lemon tree drops its flowers", "actor_id": "api:e"}); status != 200 {
		t.Fatalf("turn with a failing embedder: %d %v", status, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "tendril_memory_embed_retrying_actors 1") && !strings.Contains(string(body), "tendril_memory_embed_failures_total 0") &&
			strings.Contains(string(body), "tendril_memory_embed_failures_total") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics shows no embedding failure:\n%s", grepLines(string(body), "tendril_memory_embed"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
