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
