package sqlitestore

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// A hand edit of a daily log that a turn appends to before the next sync
// check is still picked up by that check: the append must not record the
// edited file's size and time as its own (oweFiles), which hid the edit
// until a restart or a rebuild.
func TestHandEditBeforeAppendToSameFile(t *testing.T) {
	for _, withRecord := range []bool{false, true} {
		t.Run(map[bool]string{false: "append", true: "append then record"}[withRecord], func(t *testing.T) { handEditBeforeAppend(t, withRecord) })
	}
}

func handEditBeforeAppend(t *testing.T, withRecord bool) {
	var mu sync.Mutex
	now := tierT0.Add(time.Hour)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s, err := Open(t.TempDir(), Options{SyncInterval: time.Minute, EventExpiryDays: -1, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ev := func(id, text string) memory.Event {
		return memory.Event{ID: id, ActorID: "u", SessionID: "s", Role: "user", Text: text, Timestamp: tierT0}
	}
	if err := s.AppendEvents(bg, []memory.Event{ev("e1", "I grow apples"), ev("e2", "turn two")}); err != nil {
		t.Fatal(err)
	}
	s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "apples", TopK: 1}) // the sync check, now done
	brkEditFile(t, s, ev("e1", ""), func(c string) string { return strings.Replace(c, "apples", "pomegranates", 1) })
	if err := s.AppendEvents(bg, []memory.Event{ev("e3", "turn three")}); err != nil {
		t.Fatal(err)
	}
	if withRecord {
		// A record write pays the owed files rows: with the stat they
		// were owed with, not a re-stat that takes the edit for ours.
		if _, err := s.Put(bg, memory.Record{Namespace: "/main/u/long_term/", Strategy: memory.StrategySemantic, Content: "has a fig tree"}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	now = now.Add(2 * time.Minute) // the next sync check is due
	mu.Unlock()
	hits, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "pomegranates", TopK: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) == 0 || hits[0].Record.ID != "e1" {
		t.Fatalf("the hand edit was not picked up: %v", hitIDs(hits))
	}
	evs, _ := s.Events(bg, "u", "")
	if len(evs) != 3 {
		t.Fatalf("%d events after the reload, want 3", len(evs))
	}
	if recs, _ := s.Search(bg, memory.Query{NamespacePath: "/main/u/long_term/", Text: "fig", TopK: 1}); withRecord && len(recs) != 1 {
		t.Fatalf("the record after the reload: %v", hitIDs(recs))
	}
}
