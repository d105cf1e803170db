package sqlitestore

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// TestEventMetadataInterned: events with equal small metadata share one
// map in the actor's state (before and after a reload), events with other
// metadata keep theirs, and what a listing returns is each event's own
// metadata, unchanged by a caller that edits a returned record.
func TestEventMetadataInterned(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{NoFsync: true, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	var evs []memory.Event
	for i := 0; i < 20; i++ {
		md := map[string]any{"agentId": "main"}
		if i%5 == 4 {
			md = map[string]any{"agentId": "main", "turn": float64(i)}
		}
		evs = append(evs, memory.Event{ID: "e" + string(rune('a'+i)), ActorID: "a", SessionID: "s", Role: "user",
			Text: "watering the fig tree", Timestamp: t0.Add(time.Duration(i) * time.Second), Metadata: md})
	}
	if err := s.AppendEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		a, done, err := s.acquire(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		defer done()
		a.mu.RLock()
		defer a.mu.RUnlock()
		ptrs := map[string]bool{}
		for _, e := range evs {
			got := a.events[e.ID]
			if !reflect.DeepEqual(got.Metadata, e.Metadata) {
				t.Fatalf("%s: metadata %v, want %v", e.ID, got.Metadata, e.Metadata)
			}
			if len(got.Metadata) == 1 {
				ptrs[fmt.Sprintf("%p", got.Metadata)] = true
			}
		}
		if len(ptrs) != 1 {
			t.Fatalf("equal metadata held in %d maps, want 1", len(ptrs))
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{NoFsync: true, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s)
	hits, err := s.Search(ctx, memory.Query{Text: "fig tree", NamespacePath: "/main/a/", TopK: 20})
	if err != nil || len(hits) == 0 {
		t.Fatalf("search: %v, %d hits", err, len(hits))
	}
	for _, h := range hits {
		h.Record.Metadata["agentId"] = "changed"
	}
	check(s)
}
