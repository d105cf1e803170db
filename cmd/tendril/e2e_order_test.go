package main

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// Fifty concurrent messages to one session are all stored, each user node
// directly followed by its own reply (never interleaved), in the order the
// server accepted them; fifty sessions in parallel run concurrently.
func TestE2EOrderingAndParallelSessions(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	p := startServe(t, testHome(t), openAIEnv(fake)...)

	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			st, out := invoke(t, p.URL, map[string]any{"message": fmt.Sprintf("msg %02d", i), "actor_id": "api:ord", "session_id": "one"})
			if st != 200 {
				t.Errorf("msg %d: %d %v", i, st, out)
			}
		}(i)
	}
	wg.Wait()
	nodes := getJSON(t, p.URL+"/api/v1/sessions/api:ord~one")["nodes"].([]any)
	if len(nodes) != 100 {
		t.Fatalf("%d nodes stored, want 100", len(nodes))
	}
	seen := map[string]bool{}
	var prev string
	for i := 0; i < 100; i += 2 {
		u, r := nodes[i].(map[string]any), nodes[i+1].(map[string]any)
		if u["role"] != "user" || r["role"] != "assistant" || r["content"] != "echo: "+u["content"].(string) || r["parentId"] != u["id"] {
			t.Fatalf("interleaved at %d: %v / %v", i, u, r)
		}
		if prev != "" && u["parentId"] != prev {
			t.Fatalf("turn %d does not follow the previous reply", i/2)
		}
		prev = r["id"].(string)
		seen[u["content"].(string)] = true
	}
	if len(seen) != 50 {
		t.Fatalf("%d distinct messages stored, want 50", len(seen))
	}
	// The order the model was called in is the order the session stored.
	var modelOrder []string
	for _, s := range fake.Requests() {
		modelOrder = append(modelOrder, s.LastUserText())
	}
	for i := 0; i < 50; i++ {
		if modelOrder[i] != nodes[2*i].(map[string]any)["content"] {
			t.Fatalf("model call %d was %q but the session stored %q", i, modelOrder[i], nodes[2*i].(map[string]any)["content"])
		}
	}

	// Fifty sessions, each model call taking 300 ms: run in parallel they
	// finish in a small multiple of one call, not 50 × 300 ms = 15 s.
	for i := 0; i < 50; i++ {
		fake.Push(modeltest.Reply{Text: "slow", Delay: 300 * time.Millisecond})
	}
	start := time.Now()
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if st, out := invoke(t, p.URL, map[string]any{"message": "hi", "actor_id": fmt.Sprintf("api:p%d", i)}); st != 200 {
				t.Errorf("session %d: %d %v", i, st, out)
			}
		}(i)
	}
	wg.Wait()
	t.Logf("50 parallel sessions with a 300 ms model took %v (serial would be 15 s)", time.Since(start))
}
