package sqlitestore_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
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

// TestLoCoMoEngines ranks every LoCoMo question of categories 1–4 with both
// engines over one store (events level, as `tendril eval locomo`: one actor
// per conversation, the conversation's episodic root as scope, top 50) and
// logs turn-level recall@10, all@10, recall@50 and the median query time
// of each, measured in the same run. Set LOCOMO_DATA to the LoCoMo JSON
// file; it also checks that fts5 never ranks another conversation's turn.
func TestLoCoMoEngines(t *testing.T) {
	path := os.Getenv("LOCOMO_DATA")
	if path == "" {
		t.Skip("set LOCOMO_DATA to the LoCoMo JSON file to compare the bm25f and fts5 engines on it")
	}
	convs, err := locomo.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := sqlitestore.Open(t.TempDir(), sqlitestore.Options{AgentID: "main", EventExpiryDays: -1, SyncInterval: -1, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, c := range convs {
		for _, s := range c.Sessions {
			evs := make([]memory.Event, 0, len(s.Turns))
			for i, tn := range s.Turns {
				md := map[string]any{"speaker": tn.Speaker, "diaId": tn.DiaID}
				if tn.BlipCaption != "" {
					md["caption"] = tn.BlipCaption
				}
				evs = append(evs, memory.Event{ID: c.SampleID + ":" + tn.DiaID, ActorID: c.SampleID, SessionID: s.Key, Role: "user",
					Text: tn.Text, Timestamp: s.Date.Add(time.Duration(i) * time.Second), Metadata: md})
			}
			if err := st.AppendEvents(ctx, evs); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Prepare(ctx, c.SampleID); err != nil {
			t.Fatal(err)
		}
	}
	type score struct {
		n               int
		r10, all10, r50 float64
		lat             []time.Duration
	}
	res := map[sqlitestore.Engine]*score{sqlitestore.EngineBM25F: {}, sqlitestore.EngineFTS5: {}}
	for _, c := range convs {
		scope := memory.MustNamespace(memory.EpisodicRootTemplate, memory.NamespaceVars{AgentID: "main", ActorID: c.SampleID})
		for _, q := range c.QA {
			if q.Category < 1 || q.Category > 4 || len(q.Evidence) == 0 {
				continue
			}
			for _, eng := range []sqlitestore.Engine{sqlitestore.EngineBM25F, sqlitestore.EngineFTS5} {
				start := time.Now()
				hits, err := st.SearchEngine(ctx, memory.Query{NamespacePath: scope, Text: q.Question, TopK: 50}, eng)
				r := res[eng]
				r.lat = append(r.lat, time.Since(start))
				if err != nil {
					t.Fatalf("%s %q: %v", eng, q.Question, err)
				}
				pos := map[string]int{}
				for i, h := range hits {
					id, ok := strings.CutPrefix(h.Record.ID, c.SampleID+":")
					if !ok {
						t.Fatalf("%s: %s returned %s", eng, c.SampleID, h.Record.ID)
					}
					if _, dup := pos[id]; !dup {
						pos[id] = i
					}
				}
				f10, f50 := 0, 0
				for _, e := range q.Evidence {
					if p, ok := pos[e]; ok {
						if p < 10 {
							f10++
						}
						f50++
					}
				}
				r.n++
				r.r10 += float64(f10) / float64(len(q.Evidence))
				r.r50 += float64(f50) / float64(len(q.Evidence))
				if f10 == len(q.Evidence) {
					r.all10++
				}
			}
		}
	}
	for _, eng := range []sqlitestore.Engine{sqlitestore.EngineBM25F, sqlitestore.EngineFTS5} {
		r := res[eng]
		if r.n == 0 {
			t.Fatal("no questions")
		}
		sort.Slice(r.lat, func(i, j int) bool { return r.lat[i] < r.lat[j] })
		t.Logf("%-5s questions %d  recall@10 %.3f  all@10 %.3f  recall@50 %.3f  query p50 %v p95 %v", eng, r.n,
			r.r10/float64(r.n), r.all10/float64(r.n), r.r50/float64(r.n), r.lat[len(r.lat)/2], r.lat[len(r.lat)*95/100])
	}
}
