package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// sessionNodes reads a session's nodes through the management API.
func sessionNodes(t *testing.T, url, key string) []map[string]any {
	t.Helper()
	raw, _ := getJSON(t, url+"/api/v1/sessions/"+key)["nodes"].([]any)
	var out []map[string]any
	for _, n := range raw {
		out = append(out, n.(map[string]any))
	}
	return out
}

// wellFormed checks the tree's active path: parents chain, no two user
// messages in a row, every tool_use answered by a tool_result.
func wellFormed(t *testing.T, nodes []map[string]any) {
	t.Helper()
	byID := map[string]map[string]any{}
	for _, n := range nodes {
		byID[n["id"].(string)] = n
	}
	for _, n := range nodes {
		if p, ok := n["parentId"].(string); ok && p != "" {
			if byID[p] == nil {
				t.Fatalf("node %v has a missing parent", n["id"])
			}
			if n["role"] == "user" && byID[p]["role"] == "user" {
				t.Fatalf("two user messages in a row: %q after %q", n["content"], byID[p]["content"])
			}
		}
	}
	b, _ := json.Marshal(nodes)
	if uses, results := strings.Count(string(b), `"type":"tool_use"`), strings.Count(string(b), `"type":"tool_result"`); uses != results {
		t.Fatalf("%d tool_use blocks but %d tool_result blocks:\n%s", uses, results, b)
	}
}

// A message sent while a turn waits for approval waits behind it: it is not
// merged into the paused message, it opens no second approval, the
// approved call runs once, and both turns are stored in order.
func TestE2EMessageWhilePausedWaitsBehindIt(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	p := startServe(t, testHome(t), openAIEnv(fake)...)
	fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "notes", Args: `{"action":"add","text":"Sowed basil"}`}}})
	_, out := invoke(t, p.URL, map[string]any{"message": "please save a note: sowed basil", "actor_id": "api:pia", "session_id": "s"})
	id, _ := out["approval"].(map[string]any)["request_id"].(string)
	if id == "" {
		t.Fatalf("no pending approval: %v", out)
	}
	fake.Push(modeltest.Reply{Text: "Saved: sowed basil."}, modeltest.Reply{Text: "Hello again!"})
	var wg sync.WaitGroup
	var second map[string]any
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, second = invoke(t, p.URL, map[string]any{"message": "hello again", "actor_id": "api:pia", "session_id": "s"})
	}()
	time.Sleep(500 * time.Millisecond) // let the second message arrive and wait
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("the waiting message reached the model before the approval: %d requests", n)
	}
	if _, e, code := runCLI(t, p.Home, nil, "approvals", "approve", id); code != 0 {
		t.Fatalf("approve: exit %d %s", code, e)
	}
	wg.Wait()
	if second["text"] != "Hello again!" {
		t.Fatalf("second turn: %v", second)
	}
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3 (pause, resume, second turn)", len(reqs))
	}
	if last := reqs[2].LastUserText(); last != "hello again" {
		t.Fatalf("second turn's user text %q: merged with the paused message?", last)
	}
	list, _, _ := runCLI(t, p.Home, nil, "approvals", "list", "--all", "--json")
	if n := strings.Count(list, `"tool_name": "notes"`); n != 1 {
		t.Fatalf("%d approval requests for the call, want 1:\n%s", n, list)
	}
	notes, _, _ := runCLI(t, p.Home, nil, "memory", "list", "--actor", "api:pia", "--json")
	if n := strings.Count(notes, "Sowed basil"); n != 1 {
		t.Fatalf("the note was saved %d times:\n%s", n, notes)
	}
	nodes := sessionNodes(t, p.URL, "api:pia~s")
	wellFormed(t, nodes)
	var order []string
	for _, n := range nodes {
		if c, _ := n["content"].(string); c != "" {
			order = append(order, c)
		}
	}
	if got := strings.Join(order, " | "); got != "please save a note: sowed basil | Saved: sowed basil. | hello again | Hello again!" {
		t.Fatalf("session order: %s", got)
	}
}

// An approval that expires closes its turn with a stored "expired" tool
// result: the next message is its own turn and the model is not asked for
// the expired action again.
func TestE2EExpiredApprovalClosesItsTurn(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	home := testHome(t)
	cfg := `{"memory": {"llmExtraction": false}, "approval": {"expiry": "2s"}}`
	if err := os.WriteFile(filepath.Join(home, "tendril.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, home, openAIEnv(fake)...)
	fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "notes", Args: `{"action":"add","text":"Sowed leeks"}`}}},
		modeltest.Reply{Text: "The approval expired, so I did not save it."}, modeltest.Reply{Text: "Hi!"})
	_, out := invoke(t, p.URL, map[string]any{"message": "note: sowed leeks", "actor_id": "api:exa", "session_id": "s"})
	if out["error"] != "APPROVAL_PENDING" {
		t.Fatalf("want APPROVAL_PENDING: %v", out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(fake.Requests()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the expired turn was never closed\n%s", p.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(allText(fake.Requests()[1]), "expired") {
		t.Fatalf("the closing request carries no expired result:\n%s", allText(fake.Requests()[1]))
	}
	_, out = invoke(t, p.URL, map[string]any{"message": "hi", "actor_id": "api:exa", "session_id": "s"})
	if out["text"] != "Hi!" {
		t.Fatalf("next turn: %v", out)
	}
	if last := fake.Requests()[2].LastUserText(); last != "hi" {
		t.Fatalf("next turn's user text %q, want only \"hi\"", last)
	}
	wellFormed(t, sessionNodes(t, p.URL, "api:exa~s"))
}

// A denied approval closes its turn with a stored "not approved" result;
// the request cannot be approved afterwards, so the call never runs.
func TestE2EDeniedApprovalClosesItsTurn(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	p := startServe(t, testHome(t), openAIEnv(fake)...)
	fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "notes", Args: `{"action":"add","text":"Sowed kale"}`}}},
		modeltest.Reply{Text: "Understood, I did not save it."}, modeltest.Reply{Text: "Sure."})
	_, out := invoke(t, p.URL, map[string]any{"message": "note: sowed kale", "actor_id": "api:den", "session_id": "s"})
	id, _ := out["approval"].(map[string]any)["request_id"].(string)
	if id == "" {
		t.Fatalf("no pending approval: %v", out)
	}
	if _, e, code := runCLI(t, p.Home, nil, "approvals", "deny", id); code != 0 {
		t.Fatalf("deny: exit %d %s", code, e)
	}
	if _, _, code := runCLI(t, p.Home, nil, "approvals", "approve", id); code != 1 {
		t.Fatalf("approving a denied request: exit %d, want 1", code)
	}
	_, out = invoke(t, p.URL, map[string]any{"message": "ok, thanks", "actor_id": "api:den", "session_id": "s"})
	if out["text"] != "Sure." {
		t.Fatalf("next turn: %v", out)
	}
	reqs := fake.Requests()
	if len(reqs) != 3 || !strings.Contains(allText(reqs[1]), "not approved") || reqs[2].LastUserText() != "ok, thanks" {
		t.Fatalf("%d requests; closing request:\n%s", len(reqs), allText(reqs[len(reqs)-1]))
	}
	if notes, _, _ := runCLI(t, p.Home, nil, "memory", "list", "--actor", "api:den", "--json"); strings.Contains(notes, "Sowed kale") {
		t.Fatalf("a denied call ran:\n%s", notes)
	}
	wellFormed(t, sessionNodes(t, p.URL, "api:den~s"))
}
