package sqlitestore

import (
	"context"
	"testing"

	"github.com/tendrilai/tendril/internal/memory"
)

// TestIndexSharesRecords: a record's document in the ranking index points
// to the record actorState.records holds (one copy per record, not two),
// built fresh or added by a write, and an update replaces that record
// instead of changing it in place, so a hit returned earlier keeps what it
// said.
func TestIndexSharesRecords(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoFsync: true, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	put := func(r memory.Record) memory.Record {
		t.Helper()
		out, err := s.Put(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := put(memory.Record{Namespace: "/main/a/facts/", Strategy: memory.StrategySemantic, Status: memory.StatusActive, Content: "the user grows basil on the balcony"})
	search := func(text string) []memory.Hit {
		t.Helper()
		hits, err := s.Search(ctx, memory.Query{Text: text, NamespacePath: "/main/a/", TopK: 5})
		if err != nil {
			t.Fatal(err)
		}
		return hits
	}
	before := search("basil balcony") // builds the index
	if len(before) != 1 || before[0].Record.Content != first.Content {
		t.Fatalf("hits = %+v", before)
	}
	second := put(memory.Record{Namespace: "/main/a/facts/", Strategy: memory.StrategySemantic, Status: memory.StatusActive, Content: "the user waters the tomatoes at dawn"})
	first.Content = "the user grows basil and mint on the balcony"
	put(first) // an update: replaced in the map and in the index

	a, done, err := s.acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	check := func(when string) {
		t.Helper()
		x, release := s.readIndex(ctx, a)
		defer release()
		a.mu.RLock()
		defer a.mu.RUnlock()
		for _, id := range []string{first.ID, second.ID} {
			doc, ok := x.docOf[id]
			if !ok {
				t.Fatalf("%s: record %s not indexed", when, id)
			}
			if got, want := x.docs[doc].rec, a.records[id]; got == nil || got != want {
				t.Fatalf("%s: the index holds its own copy of record %s (%p, map %p)", when, id, got, want)
			}
		}
		if got := a.records[first.ID].Content; got != first.Content {
			t.Fatalf("%s: stored content %q, want the update", when, got)
		}
	}
	check("after writes")
	if before[0].Record.Content != "the user grows basil on the balcony" {
		t.Fatalf("an earlier hit changed with the update: %q", before[0].Record.Content)
	}
	s.changeIndex(a, func(*actorIndex) *actorIndex { return nil }) // dropped: the next search rebuilds
	if hits := search("mint"); len(hits) != 1 || hits[0].Record.ID != first.ID {
		t.Fatalf("after rebuild: hits = %+v", hits)
	}
	check("after a rebuild")
}
