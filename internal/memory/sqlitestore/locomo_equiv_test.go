package sqlitestore_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/eval/locomo"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
)

// TestLoCoMoIncrementalMatchesFresh ingests LoCoMo conversations one turn
// per AppendEvents into a store whose ranking index is live (a search
// after every session), then checks that every question's top 50 — IDs,
// scores and explanations — equals that of a store building its index from
// scratch over the same files. Set LOCOMO_DATA to the LoCoMo JSON file
// (LOCOMO_CONVS limits the conversations, default 2).
func TestLoCoMoIncrementalMatchesFresh(t *testing.T) {
	path := os.Getenv("LOCOMO_DATA")
	if path == "" {
		t.Skip("set LOCOMO_DATA to the LoCoMo JSON file to compare incremental and fresh indexes on it")
	}
	convs, err := locomo.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 2
	if v := os.Getenv("LOCOMO_CONVS"); v != "" {
		fmt.Sscan(v, &n)
	}
	if len(convs) > n {
		convs = convs[:n]
	}
	ctx := context.Background()
	dir := t.TempDir()
	opts := sqlitestore.Options{AgentID: "main", EventExpiryDays: -1, SyncInterval: -1, NoFsync: true}
	inc, err := sqlitestore.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer inc.Close()
	for _, c := range convs {
		scope := memory.MustNamespace(memory.EpisodicRootTemplate, memory.NamespaceVars{AgentID: "main", ActorID: c.SampleID})
		for _, s := range c.Sessions {
			for i, tn := range s.Turns {
				md := map[string]any{"speaker": tn.Speaker, "diaId": tn.DiaID}
				if tn.BlipCaption != "" {
					md["caption"] = tn.BlipCaption
				}
				if err := inc.AppendEvents(ctx, []memory.Event{{ID: c.SampleID + ":" + tn.DiaID, ActorID: c.SampleID, SessionID: s.Key, Role: "user",
					Text: tn.Text, Timestamp: s.Date.Add(time.Duration(i) * time.Second), Metadata: md}}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := inc.Search(ctx, memory.Query{NamespacePath: scope, Text: "what did they talk about", TopK: 5}); err != nil {
				t.Fatal(err)
			}
		}
	}
	fresh, err := sqlitestore.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	compared := 0
	for _, c := range convs {
		scope := memory.MustNamespace(memory.EpisodicRootTemplate, memory.NamespaceVars{AgentID: "main", ActorID: c.SampleID})
		for _, q := range c.QA {
			mq := memory.Query{NamespacePath: scope, Text: q.Question, TopK: 50}
			a, err := inc.Search(ctx, mq)
			if err != nil {
				t.Fatal(err)
			}
			b, err := fresh.Search(ctx, mq)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(summary(a), summary(b)) {
				t.Fatalf("%s %q: incremental and fresh rankings differ\n%v\n%v", c.SampleID, q.Question, summary(a), summary(b))
			}
			compared++
		}
	}
	t.Logf("%d questions over %d conversations: identical rankings", compared, len(convs))
}

func summary(hits []memory.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = fmt.Sprintf("%s %.12f %s", h.Record.ID, h.Score, h.Explain)
	}
	return out
}
