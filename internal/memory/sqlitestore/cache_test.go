package sqlitestore

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// appendTurns appends n turns (a user and an assistant event) of one
// actor, one session, starting at t0.
func appendTurns(tb testing.TB, s *Store, actor string, t0 time.Time, n int) {
	tb.Helper()
	ctx := context.Background()
	for i := 0; i < n; i += 50 {
		var evs []memory.Event
		for j := i; j < min(i+50, n); j++ {
			ts := t0.Add(time.Duration(j) * time.Millisecond)
			evs = append(evs,
				memory.Event{ActorID: actor, SessionID: "s" + strconv.Itoa(j/100), Role: "user", Text: soakTexts[j%len(soakTexts)] + " " + strconv.Itoa(j), Timestamp: ts},
				memory.Event{ActorID: actor, SessionID: "s" + strconv.Itoa(j/100), Role: "assistant", Text: "echo: " + soakTexts[(j+1)%len(soakTexts)], Timestamp: ts.Add(time.Microsecond)})
		}
		if err := s.AppendEvents(ctx, evs); err != nil {
			tb.Fatal(err)
		}
	}
}

func (s *Store) cached(actor string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.actors[actor]
	return ok
}

// TestCacheBytesEvicts: past Options.CacheBytes the least recently used
// actor is dropped (the one in use stays), and an evicted actor's search,
// after its rebuild from the index, returns the same hits as before.
func TestCacheBytesEvicts(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoFsync: true, SyncInterval: -1, CacheBytes: 1 << 20, IndexedKeys: []memory.IndexedKey{{Name: "role", Type: memory.KeyString}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	queries := []memory.Query{
		{Text: "painting by the lake", NamespacePath: "/main/a/", TopK: 10},
		{Text: "charity race Busan", Namespace: "/main/a/episodic/s3/", TopK: 5},
		{Text: "support group", NamespacePath: "/main/a/", TopK: 10, Filters: []memory.Filter{{Key: "role", Op: memory.OpEquals, Value: "user"}}},
	}
	search := func() [][]memory.Hit {
		var out [][]memory.Hit
		for _, q := range queries {
			h, err := s.Search(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(h) == 0 {
				t.Fatalf("%q: no hits", q.Text)
			}
			out = append(out, h)
		}
		return out
	}
	appendTurns(t, s, "a", t0, 600)
	before := search()
	if !s.cached("a") {
		t.Fatal("a not cached right after its search")
	}
	if est := s.cachedBytes(); est < 1<<19 {
		t.Fatalf("a is estimated at %d bytes; the test needs it near the 1 MiB budget", est)
	}
	appendTurns(t, s, "b", t0, 600)
	if _, err := s.Search(ctx, memory.Query{Text: "lake", NamespacePath: "/main/b/"}); err != nil {
		t.Fatal(err)
	}
	if s.cached("a") || !s.cached("b") {
		t.Fatalf("cached a %v b %v; want a evicted, b kept", s.cached("a"), s.cached("b"))
	}
	if s.evictions == 0 {
		t.Fatal("no eviction counted")
	}
	if est := s.cachedBytes(); est > 1<<20 && len(s.actors) > 1 {
		t.Fatalf("%d bytes cached over a 1 MiB budget with %d actors", est, len(s.actors))
	}
	after := search()
	if !reflect.DeepEqual(before, after) {
		for i := range before {
			if !reflect.DeepEqual(before[i], after[i]) {
				t.Errorf("query %q after the rebuild:\n got %+v\nwant %+v", queries[i].Text, after[i], before[i])
			}
		}
	}
	if !s.cached("a") {
		t.Fatal("a not cached again after its search")
	}
}

// TestCacheBytesUnbounded: a negative CacheBytes keeps every actor.
func TestCacheBytesUnbounded(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoFsync: true, SyncInterval: -1, CacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Now().Add(-time.Hour)
	for _, a := range []string{"a", "b", "c"} {
		appendTurns(t, s, a, t0, 300)
		if _, err := s.Search(context.Background(), memory.Query{Text: "lake", NamespacePath: "/main/" + a + "/"}); err != nil {
			t.Fatal(err)
		}
	}
	if !s.cached("a") || !s.cached("b") || !s.cached("c") || s.evictions != 0 {
		t.Fatalf("evicted without a byte budget: %d evictions", s.evictions)
	}
}

// BenchmarkActorRebuild is what the next turn of an evicted actor pays:
// each iteration drops the actor from the cache, then searches it (load
// from the index, build of the ranking index, search). Compare with
// BenchmarkWarmSearch.
func BenchmarkActorRebuild(b *testing.B) {
	for _, turns := range []int{1000, 10000} {
		b.Run("events="+strconv.Itoa(2*turns), func(b *testing.B) {
			s := rebuildStore(b, turns)
			defer s.Close()
			q := memory.Query{Text: "painting by the lake", NamespacePath: "/main/a/", TopK: 10}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.mu.Lock()
				delete(s.actors, "a")
				s.mu.Unlock()
				if _, err := s.Search(context.Background(), q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWarmSearch is one search of a cached actor, for comparison with
// BenchmarkActorRebuild.
func BenchmarkWarmSearch(b *testing.B) {
	for _, turns := range []int{1000, 10000} {
		b.Run("events="+strconv.Itoa(2*turns), func(b *testing.B) {
			s := rebuildStore(b, turns)
			defer s.Close()
			q := memory.Query{Text: "painting by the lake", NamespacePath: "/main/a/", TopK: 10}
			if _, err := s.Search(context.Background(), q); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Search(context.Background(), q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func rebuildStore(b *testing.B, turns int) *Store {
	s, err := Open(b.TempDir(), Options{NoFsync: true, SyncInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	appendTurns(b, s, "a", time.Now().Add(-time.Hour), turns)
	return s
}
