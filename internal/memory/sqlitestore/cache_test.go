package sqlitestore

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// cacheStats is how many actors were evicted so far and how many are
// cached now.
func (s *Store) cacheStats() (evictions, cached int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evictions, len(s.actors)
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
	s, err := Open(t.TempDir(), Options{NoFsync: true, SyncInterval: -1, CacheBytes: 1 << 20, HotFor: -1, IndexedKeys: []memory.IndexedKey{{Name: "role", Type: memory.KeyString}}})
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
	if n, _ := s.cacheStats(); n == 0 {
		t.Fatal("no eviction counted")
	}
	if _, cached := s.cacheStats(); s.cachedBytes() > 1<<20 && cached > 1 {
		t.Fatalf("%d bytes cached over a 1 MiB budget with %d actors", s.cachedBytes(), cached)
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
	if n, _ := s.cacheStats(); !s.cached("a") || !s.cached("b") || !s.cached("c") || n != 0 {
		t.Fatalf("evicted without a byte budget: %d evictions", n)
	}
}

// TestWarmRecentBudget: WarmRecent warms the most recent actors only as
// far as their estimated size fits Options.CacheBytes, so that warming
// does not evict the most recent actor it warmed first.
func TestWarmRecentBudget(t *testing.T) {
	home := t.TempDir()
	s, err := Open(home, Options{NoFsync: true, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-time.Hour)
	for i, a := range []string{"old", "mid", "new"} {
		appendTurns(t, s, a, t0.Add(time.Duration(i)*time.Minute), 300)
	}
	s.Close()
	// About 0.56 MB per actor by warmBytes: a 1.5 MiB budget holds two.
	s, err = Open(home, Options{NoFsync: true, SyncInterval: -1, CacheBytes: 3 << 19})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WarmRecent(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	built := func(actor string) bool {
		s.mu.Lock()
		a := s.actors[actor]
		s.mu.Unlock()
		return a != nil && a.slots[a.active.Load()].x != nil
	}
	if !built("new") || !built("mid") || built("old") {
		t.Fatalf("built: new %v mid %v old %v; want true true false", built("new"), built("mid"), built("old"))
	}
	if n, _ := s.cacheStats(); n != 0 {
		t.Fatalf("warming evicted %d actors", n)
	}
}

// TestCacheHotFor: actors used within Options.HotFor are not evicted for
// the byte budget (no evict-and-rebuild on every turn when more actors are
// active than fit), until the estimated heap passes 2 × the budget; with
// HotFor negative the budget is strict.
func TestCacheHotFor(t *testing.T) {
	t0 := time.Now().Add(-time.Hour)
	run := func(hot time.Duration, actors []string) *Store {
		s, err := Open(t.TempDir(), Options{NoFsync: true, SyncInterval: -1, CacheBytes: 1 << 20, HotFor: hot})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		for _, a := range actors {
			appendTurns(t, s, a, t0, 600)
			if _, err := s.Search(context.Background(), memory.Query{Text: "lake", NamespacePath: "/main/" + a + "/"}); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	// Each actor's estimate is well under the 1 MiB budget alone; two are
	// over it together (TestCacheBytesEvicts evicts here with HotFor -1).
	s := run(-1, []string{"a", "b"})
	if s.cached("a") {
		t.Fatalf("strict budget: a still cached beside b (%d bytes)", s.cachedBytes())
	}
	s = run(time.Hour, []string{"a", "b"})
	if !s.cached("a") || !s.cached("b") {
		t.Fatal("hot actor evicted for the byte budget")
	}
	if s.cachedBytes() <= 1<<20 {
		t.Fatalf("test needs the two actors over the budget: %d bytes", s.cachedBytes())
	}
	// Past 2 × the budget even hot actors go, least recently used first.
	var many []string
	for i := 0; i < 12; i++ {
		many = append(many, string(rune('a'+i)))
	}
	s = run(time.Hour, many)
	if s.cached("a") || !s.cached("l") {
		t.Fatal("hot actors kept past 2 × the budget")
	}
	if b := s.cachedBytes(); b > 2<<20+(1<<20) {
		t.Fatalf("cached %d bytes with hot actors, want about 2 × the 1 MiB budget at most", b)
	}
}
