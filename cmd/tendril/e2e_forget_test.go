package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// `tendril memory forget` run beside a live server takes effect on the very
// next turn: nothing of the actor reaches the model again.
func TestE2EForgetTakesEffectOnRunningServer(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	p := startServe(t, testHome(t), openAIEnv(fake)...)
	for _, m := range []string{"I only use organic fertiliser.", "I live in Busan and grow figs.", "my cat is named Zebulon"} {
		if st, out := invoke(t, p.URL, map[string]any{"message": m, "actor_id": "api:fo", "session_id": "a"}); st != 200 {
			t.Fatalf("%d %v", st, out)
		}
	}
	// Wait for extraction (every 2 turns) to store the preference.
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _, _ := runCLI(t, p.Home, nil, "memory", "list", "--actor", "api:fo", "--json")
		if strings.Contains(strings.ToLower(out), "organic") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("preference never extracted:\n%s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	before := len(fake.Requests())
	invoke(t, p.URL, map[string]any{"message": "what fertiliser should I buy?", "actor_id": "api:fo", "session_id": "b"})
	if !strings.Contains(strings.ToLower(memoryBlock(fake.Requests()[before].System)), "organic") {
		t.Fatalf("memory not used before forgetting:\n%s", fake.Requests()[before].System)
	}
	before = len(fake.Requests())
	invoke(t, p.URL, map[string]any{"message": "what is my cat's name?", "actor_id": "api:fo", "session_id": "b2"})
	if !strings.Contains(strings.ToLower(memoryBlock(fake.Requests()[before].System)), "zebulon") {
		t.Fatalf("the past exchange is not recalled before forgetting:\n%s", fake.Requests()[before].System)
	}
	// A paused turn of the actor: forgetting denies it and drops its saved
	// conversation.
	fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "notes", Args: `{"action":"add","text":"Zebulon sleeps in the greenhouse"}`}}})
	_, out := invoke(t, p.URL, map[string]any{"message": "note where Zebulon sleeps", "actor_id": "api:fo", "session_id": "d"})
	reqID, _ := out["approval"].(map[string]any)["request_id"].(string)
	if reqID == "" {
		t.Fatalf("no pending approval: %v", out)
	}
	// A scheduled job of the actor, and one of someone else.
	for _, a := range []string{"api:fo", "api:other"} {
		if _, e, code := runCLI(t, p.Home, nil, "cron", "add", "--name", "water", "--every", "24h", "--task", "water the figs", "--actor", a); code != 0 {
			t.Fatalf("cron add: exit %d %s", code, e)
		}
	}
	out2, e, code := runCLI(t, p.Home, nil, "memory", "forget", "--actor", "api:fo", "--sessions", "--json")
	if code != 0 {
		t.Fatalf("forget: exit %d %s", code, e)
	}
	var rep struct {
		Remaining       int      `json:"remaining"`
		JobsRemoved     int      `json:"jobs_removed"`
		ApprovalsDenied int      `json:"approvals_denied"`
		Sessions        []string `json:"sessions_removed"`
	}
	if err := json.Unmarshal([]byte(out2), &rep); err != nil || rep.Remaining != 0 || rep.JobsRemoved != 1 || rep.ApprovalsDenied != 1 || len(rep.Sessions) != 4 {
		t.Fatalf("forget report: %v %s", err, out2)
	}
	if jobs, _, _ := runCLI(t, p.Home, nil, "cron", "list", "--json"); strings.Contains(jobs, `"api:fo"`) || !strings.Contains(jobs, `"api:other"`) {
		t.Fatalf("cron list after forget:\n%s", jobs)
	}
	if pending, _, _ := runCLI(t, p.Home, nil, "approvals", "list", "--json"); strings.Contains(pending, reqID) {
		t.Fatalf("the forgotten actor's request is still open:\n%s", pending)
	}
	if files, _ := filepath.Glob(filepath.Join(p.Home, "approvals", "resume", "*.json")); len(files) != 0 {
		t.Fatalf("saved paused turns survive forget: %v", files)
	}
	// The very next turn sees none of it, and 10 s later (extraction and
	// index refreshes have had their chance to bring something back) still
	// none.
	for i, q := range []string{"what fertiliser should I buy?", "where do I live and do I use organic fertiliser?", "what is my cat's name?"} {
		before = len(fake.Requests())
		invoke(t, p.URL, map[string]any{"message": q, "actor_id": "api:fo", "session_id": "c"})
		sys := strings.ToLower(fake.Requests()[before].System)
		if block := memoryBlock(sys); strings.Contains(block, "organic") || strings.Contains(block, "busan") || strings.Contains(block, "zebulon") {
			t.Fatalf("forgotten memory reached the model:\n%s", block)
		}
		if i == 0 {
			time.Sleep(10 * time.Second)
		}
	}
}
