package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// The model calls a write tool; the turn pauses with APPROVAL_PENDING; the
// process restarts; the approval arrives through the CLI; the tool runs
// exactly once, the turn completes and its reply is stored in the session.
func TestE2EApprovalSurvivesRestart(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	home := testHome(t)
	p := startServe(t, home, openAIEnv(fake)...)

	fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{ID: "call_1", Name: "notes",
		Args: `{"action":"add","text":"Pruned the fig on the south wall","plants":["fig"],"section":"pruning"}`}}})
	status, out := invoke(t, p.URL, map[string]any{"message": "note that I pruned the fig", "actor_id": "api:noa", "session_id": "s1"})
	if status == 200 || out["error"] != "APPROVAL_PENDING" {
		t.Fatalf("want APPROVAL_PENDING, got %d %v", status, out)
	}
	approvalInfo, _ := out["approval"].(map[string]any)
	id, _ := approvalInfo["request_id"].(string)
	if id == "" {
		t.Fatalf("no request id in %v", out)
	}

	// The append-only ledger never holds the conversation or the prompt
	// (memory must stay forgettable); only the tool call and its hash.
	ledger, err := os.ReadFile(filepath.Join(home, "approvals", "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(ledger), "note that I pruned the fig") || strings.Contains(string(ledger), "Sprout") {
		t.Fatalf("ledger holds the paused conversation:\n%s", ledger)
	}

	// Restart.
	if err := p.stop(t); err != nil {
		t.Fatal(err)
	}
	p = startServe(t, home, openAIEnv(fake)...)

	list, _, code := runCLI(t, home, nil, "approvals", "list", "--json")
	if code != 0 || !strings.Contains(list, id) || !strings.Contains(list, "notes") {
		t.Fatalf("approvals list after restart: exit %d\n%s", code, list)
	}
	fake.Push(modeltest.Reply{Text: "Noted: you pruned the fig."})
	if o, e, code := runCLI(t, home, nil, "approvals", "approve", id); code != 0 {
		t.Fatalf("approve: exit %d %s %s", code, o, e)
	}

	// The server sees the decision, runs the tool once and finishes the turn.
	deadline := time.Now().Add(30 * time.Second)
	var nodes []any
	for time.Now().Before(deadline) {
		sess := getJSON(t, p.URL+"/api/v1/sessions/api:noa~s1")
		nodes, _ = sess["nodes"].([]any)
		if len(nodes) >= 4 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(nodes) != 4 {
		t.Fatalf("session holds %d nodes, want user, tool call, tool result, reply\n%s", len(nodes), p.logs.String())
	}
	last := nodes[3].(map[string]any)
	if last["role"] != "assistant" || last["content"] != "Noted: you pruned the fig." {
		t.Fatalf("final node %v", last)
	}
	// The tool result went back to the model.
	seen := fake.Requests()
	if got := seen[len(seen)-1].LastUserText(); !strings.Contains(strings.ToLower(got), "note") {
		t.Fatalf("tool result the model saw: %q", got)
	}
	// Exactly one note exists.
	mem, _, code := runCLI(t, home, nil, "memory", "list", "--actor", "api:noa", "--json")
	if code != 0 {
		t.Fatalf("memory list exit %d", code)
	}
	if n := strings.Count(mem, "Pruned the fig on the south wall"); n != 1 {
		t.Fatalf("note stored %d times:\n%s", n, mem)
	}
	// Approving again is refused and runs nothing.
	if _, _, code := runCLI(t, home, nil, "approvals", "approve", id); code == 0 {
		t.Fatal("second approval accepted")
	}
	var v any
	if out, _, code := runCLI(t, home, nil, "audit", "verify", "--json"); code != 0 || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("audit verify: exit %d %s", code, out)
	}
}

// An approval given while no server runs resumes its turn at the next
// start.
func TestE2EApprovalWhileStoppedResumesOnStart(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	home := testHome(t)
	p := startServe(t, home, openAIEnv(fake)...)
	fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{ID: "call_9", Name: "notes", Args: `{"action":"add","text":"Sowed carrots in bed 3"}`}}})
	_, out := invoke(t, p.URL, map[string]any{"message": "note: sowed carrots", "actor_id": "api:ola", "session_id": "s2"})
	id, _ := out["approval"].(map[string]any)["request_id"].(string)
	if id == "" {
		t.Fatalf("no pending approval: %v", out)
	}
	if err := p.stop(t); err != nil {
		t.Fatal(err)
	}
	if _, e, code := runCLI(t, home, nil, "approvals", "approve", id); code != 0 {
		t.Fatalf("approve while stopped: exit %d %s", code, e)
	}
	fake.Push(modeltest.Reply{Text: "Carrots noted."})
	p = startServe(t, home, openAIEnv(fake)...)
	deadline := time.Now().Add(30 * time.Second)
	for {
		nodes, _ := getJSON(t, p.URL+"/api/v1/sessions/api:ola~s2")["nodes"].([]any)
		if len(nodes) == 4 && nodes[3].(map[string]any)["content"] == "Carrots noted." {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("turn not resumed after restart; nodes %v\n%s", nodes, p.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
