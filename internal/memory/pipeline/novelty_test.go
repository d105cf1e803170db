package pipeline

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/extract"
	"github.com/tendrilai/tendril/internal/memory/gate"
)

// consolidateIx gives the gate only the record most similar to the
// candidate; the score must be the one the gate gives with every active
// record on another topic that shares a token.
func TestNoveltyFromBestRecordOnly(t *testing.T) {
	f := newFixture(t, "mem")
	words := strings.Fields("I my we fig tree basil tomato garden shed pond water every morning evening grow plant likes hates Busan Seoul sister Mina Jin organic fertiliser")
	rng := rand.New(rand.NewSource(7))
	sentence := func() string {
		n := 3 + rng.Intn(8)
		ws := make([]string, n)
		for i := range ws {
			ws[i] = words[rng.Intn(len(words))]
		}
		return strings.Join(ws, " ")
	}
	topics := []string{"", "home", "garden", "family"}
	var existing []memory.Record
	for i := 0; i < 300; i++ {
		st := memory.StatusActive
		if i%5 == 0 {
			st = memory.StatusSuperseded
		}
		existing = append(existing, memory.Record{ID: fmt.Sprintf("r%d", i), Namespace: "/main/u1/long_term/", Strategy: memory.StrategySemantic,
			Content: sentence(), Status: st, Metadata: map[string]any{extract.KeyTopic: topics[i%len(topics)]}})
	}
	scored := 0
	for k := 0; k < 200; k++ {
		c := extract.Candidate{Content: sentence(), Strategy: memory.StrategySemantic, Topic: topics[k%len(topics)], Time: f.clk.Now()}
		gin := c.GateInput(nil)
		var all []string
		for _, r := range existing {
			if r.Status == memory.StatusActive && (c.Topic == "" || topicOf(r) != c.Topic) {
				all = append(all, r.Content)
			}
		}
		gin.Existing = all
		_, want, _ := gate.Thresholds{}.Evaluate(gin)
		res, err := f.p.consolidateIx(ctx, "u1", "/main/u1/long_term/", c, newCandIndex(existing), newBatch())
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome == OutcomeMerged || res.Outcome == OutcomeRejected {
			continue
		}
		scored++
		if res.Score != want {
			t.Fatalf("candidate %q: score %v, want %v (all records given)", c.Content, res.Score, want)
		}
	}
	if scored < 100 {
		t.Fatalf("only %d candidates were scored", scored)
	}
}
