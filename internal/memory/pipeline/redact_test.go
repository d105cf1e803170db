package pipeline

import (
	"context"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
)

func TestSecretsNeverBecomeMemory(t *testing.T) {
	home := t.TempDir()
	st, err := sqlitestore.Open(home, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := New(st, Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	secret := "my openai key is sk-proj-abcdefghijklmnopqrstuvwx and my password is hunter2"
	if err := p.RecordTurn(ctx, "main", "api:s", "s1", []memory.Event{{Role: "user", Text: secret}, {Role: "assistant", Text: "ok"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WriteEpisodic(ctx, "main", "api:s", "s1", "card 4111 1111 1111 1111 for the seeds"); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx, "main", "api:s", "s1"); err != nil {
		t.Fatal(err)
	}
	evs, _ := st.Events(ctx, "api:s", "")
	hits, _ := st.Search(ctx, memory.Query{NamespacePath: "/main/api:s/", Statuses: []memory.Status{memory.StatusActive, memory.StatusStaged}})
	var all strings.Builder
	for _, e := range evs {
		all.WriteString(e.Text + "\n")
	}
	for _, h := range hits {
		all.WriteString(h.Record.Content + "\n")
	}
	for _, leak := range []string{"sk-proj-abcdefghij", "hunter2", "4111 1111 1111 1111"} {
		if strings.Contains(all.String(), leak) {
			t.Fatalf("%q stored in memory:\n%s", leak, all.String())
		}
	}
	if !strings.Contains(all.String(), memory.Redacted) {
		t.Fatalf("nothing was stored at all:\n%s", all.String())
	}
}

func TestContradictionStaysWithinAStrategy(t *testing.T) {
	pref := memory.Record{ID: "p", Strategy: memory.StrategyUserPreference, Status: memory.StatusActive, Content: "I only use organic fertiliser", Metadata: map[string]any{"topic": "garden"}}
	fact := memory.Record{ID: "f", Strategy: memory.StrategySemantic, Status: memory.StatusActive, Content: "lives in Busan", Metadata: map[string]any{"topic": "garden"}}
	newPref := memory.Record{ID: "n", Strategy: memory.StrategyUserPreference, Status: memory.StatusActive, Content: "I now use chemical fertiliser", Metadata: map[string]any{"topic": "garden"}}
	if got := contradicted(fact, []memory.Record{pref}); len(got) != 0 {
		t.Fatalf("a fact superseded a preference: %v", got)
	}
	if got := contradicted(newPref, []memory.Record{pref, fact}); len(got) != 1 || got[0].ID != "p" {
		t.Fatalf("a newer preference must supersede the old one only: %v", got)
	}
}
