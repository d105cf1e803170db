package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/model/modeltest"
)

func getJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func postJSON(t *testing.T, url string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// allText flattens everything the model saw (system excluded).
func allText(s modeltest.Seen) string {
	var b strings.Builder
	for _, m := range s.Messages {
		for _, c := range m.Content {
			b.WriteString(c.Text + "\n")
		}
	}
	return b.String()
}

// Two branches from the same node give the model two different histories,
// and neither contains the other's messages (checked on the request bodies
// the fake model received).
func TestE2EBranchesIsolateHistories(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	p := startServe(t, testHome(t), openAIEnv(fake)...)
	say := func(msg string) {
		status, out := invoke(t, p.URL, map[string]any{"message": msg, "actor_id": "api:bea", "session_id": "garden"})
		if status != 200 {
			t.Fatalf("%s: %d %v", msg, status, out)
		}
	}
	say("root: I grow tomatoes")
	say("trunk: they have blight")
	sess := getJSON(t, p.URL+"/api/v1/sessions/api:bea~garden")
	nodes := sess["nodes"].([]any)
	if len(nodes) != 4 {
		t.Fatalf("%d nodes", len(nodes))
	}
	forkAt := nodes[1].(map[string]any)["id"].(string) // assistant reply to the root message
	trunkLeaf := sess["leaf"].(string)

	if st, out := postJSON(t, p.URL+"/api/v1/sessions/api:bea~garden/branch", map[string]string{"from": forkAt}); st != 200 {
		t.Fatalf("branch: %d %v", st, out)
	}
	say("branch B: what about peppers?")
	seenB := allText(fake.Requests()[2])
	if !strings.Contains(seenB, "root: I grow tomatoes") || strings.Contains(seenB, "trunk: they have blight") {
		t.Fatalf("branch B history leaks the trunk or lost the root:\n%s", seenB)
	}

	if st, out := postJSON(t, p.URL+"/api/v1/sessions/api:bea~garden/branch", map[string]string{"from": trunkLeaf}); st != 200 {
		t.Fatalf("switch leaf: %d %v", st, out)
	}
	say("branch A: and copper spray?")
	seenA := allText(fake.Requests()[3])
	if !strings.Contains(seenA, "trunk: they have blight") || strings.Contains(seenA, "peppers") {
		t.Fatalf("branch A history wrong:\n%s", seenA)
	}

	// The session survives a restart with both branches and the active leaf.
	if err := p.stop(t); err != nil {
		t.Fatal(err)
	}
	p2 := startServe(t, p.Home, openAIEnv(fake)...)
	sess = getJSON(t, p2.URL+"/api/v1/sessions/api:bea~garden")
	if n := len(sess["nodes"].([]any)); n != 8 {
		t.Fatalf("after restart %d nodes, want 8", n)
	}
	if br := sess["branches"].([]any); len(br) != 2 {
		t.Fatalf("branches after restart: %v", br)
	}
	out, _, code := runCLI(t, p.Home, nil, "session", "show", "api:bea~garden", "--tree")
	if code != 0 || !strings.Contains(out, "peppers") || !strings.Contains(out, "copper") {
		t.Fatalf("session show --tree: exit %d\n%s", code, out)
	}
}
