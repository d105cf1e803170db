package pgstore_test

import (
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/pgstore"
	"github.com/tendrilai/tendril/internal/testenv"
)

// TestVersionCatchUp: instance A keeps u1's index cached; B's writes move
// u1's version and A catches up from the rows stamped since (no reload);
// a deletion on B (expiry) makes A reload.
func TestVersionCatchUp(t *testing.T) {
	url := testenv.PostgresSchema(t)
	now := time.Now().UTC()
	clock := func() time.Time { return now }
	a := newStore(t, openPool(t, url), pgstore.Options{Now: func() time.Time { return clock() }})
	b := newStore(t, openPool(t, url), pgstore.Options{Now: func() time.Time { return clock() }})
	ns := "/main/u1/long_term/"
	if _, err := b.Put(ctx, memory.Record{ID: "r1", Namespace: ns, Content: "has a fig tree"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Prepare(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if a.Loads() != 1 {
		t.Fatalf("loads after Prepare = %d, want 1", a.Loads())
	}
	q := memory.Query{NamespacePath: "/main/u1/", Text: "fig"}
	for i := 2; i <= 5; i++ {
		if _, err := b.Put(ctx, memory.Record{ID: fmt.Sprintf("r%d", i), Namespace: ns, Content: fmt.Sprintf("fig note %d", i)}); err != nil {
			t.Fatal(err)
		}
		if err := b.AppendEvents(ctx, []memory.Event{{ID: fmt.Sprintf("e%d", i), ActorID: "u1", Text: "fig turn", Timestamp: now.Add(-time.Duration(40-i) * 24 * time.Hour)}}); err != nil {
			t.Fatal(err)
		}
		hits, err := a.Search(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != i { // the events are older than 30 days: hidden
			t.Fatalf("after write %d, a finds %d hits: %v", i, len(hits), hitIDs(hits))
		}
	}
	if a.Loads() != 1 {
		t.Fatalf("a reloaded u1 %d times; catch-up should have sufficed", a.Loads()-1)
	}
	// Expiry off on a second clock: the events become visible to a store
	// with no expiry, and b's ExpireEvents deletes them for good.
	keep := newStore(t, openPool(t, url), pgstore.Options{EventExpiryDays: -1})
	if got, _ := keep.Search(ctx, q); len(got) != 9 {
		t.Fatalf("store without expiry finds %d, want 9 (5 records, 4 events)", len(got))
	}
	n, err := b.ExpireEvents(ctx)
	if err != nil || n != 4 {
		t.Fatalf("ExpireEvents = %d, %v; want 4", n, err)
	}
	if got, _ := keep.Search(ctx, q); len(got) != 5 {
		t.Fatalf("after expiry the store without expiry finds %d, want 5", len(got))
	}
	if _, err := a.Search(ctx, q); err != nil {
		t.Fatal(err)
	}
	if a.Loads() != 2 {
		t.Fatalf("a's loads after a deletion = %d, want 2 (a reload)", a.Loads())
	}
}

// TestCacheBounded: at most MaxCachedActors actors stay cached, and an
// evicted actor is reloaded with the same results.
func TestCacheBounded(t *testing.T) {
	s := newStore(t, openPool(t, testenv.PostgresSchema(t)), pgstore.Options{MaxCachedActors: 3})
	want := map[string][]string{}
	for i := 0; i < 10; i++ {
		actor := fmt.Sprintf("actor%d", i)
		r, err := s.Put(ctx, memory.Record{Namespace: "/main/" + actor + "/long_term/", Content: "basil and mint"})
		if err != nil {
			t.Fatal(err)
		}
		want[actor] = []string{r.ID}
	}
	for round := 0; round < 2; round++ {
		for actor, ids := range want {
			hits, err := s.Search(ctx, memory.Query{NamespacePath: "/main/" + actor + "/", Text: "basil"})
			if err != nil {
				t.Fatal(err)
			}
			if got := hitIDs(hits); !reflect.DeepEqual(got, ids) {
				t.Fatalf("%s: %v, want %v", actor, got, ids)
			}
			if n := s.CachedActors(); n > 3 {
				t.Fatalf("%d actors cached, cap 3", n)
			}
		}
	}
	if s.Loads() < 10 {
		t.Fatalf("loads %d: evicted actors were not reloaded", s.Loads())
	}
}

// TestCacheBytesBounded: past Options.CacheBytes the least recently used
// actors are dropped (each here is estimated at about 15 KB: 10 records
// and their documents), and an evicted actor is reloaded with the same
// results.
func TestCacheBytesBounded(t *testing.T) {
	s := newStore(t, openPool(t, testenv.PostgresSchema(t)), pgstore.Options{CacheBytes: 40_000, HotFor: -1})
	want := map[string][]string{}
	for i := 0; i < 5; i++ {
		actor := fmt.Sprintf("actor%d", i)
		for j := 0; j < 10; j++ {
			r, err := s.Put(ctx, memory.Record{Namespace: "/main/" + actor + "/long_term/", Content: fmt.Sprintf("basil and mint %d", j)})
			if err != nil {
				t.Fatal(err)
			}
			want[actor] = append(want[actor], r.ID)
		}
	}
	for round := 0; round < 2; round++ {
		for i := 0; i < 5; i++ {
			actor := fmt.Sprintf("actor%d", i)
			hits, err := s.Search(ctx, memory.Query{NamespacePath: "/main/" + actor + "/", Text: "basil"})
			if err != nil {
				t.Fatal(err)
			}
			got := hitIDs(hits)
			sort.Strings(got)
			if w := append([]string(nil), want[actor]...); !reflect.DeepEqual(got, sortedCopy(w)) {
				t.Fatalf("%s: %v, want %v", actor, got, w)
			}
			if n := s.CachedActors(); n > 2 {
				t.Fatalf("%d actors cached, the budget holds 2", n)
			}
		}
	}
	if s.Loads() < 10 {
		t.Fatalf("loads %d: evicted actors were not reloaded", s.Loads())
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// TestForgetRemovesEveryRow: after Forget no table holds a row of the
// actor, and a failed write leaves the version untouched.
func TestForgetRemovesEveryRow(t *testing.T) {
	pool := openPool(t, testenv.PostgresSchema(t))
	s := newStore(t, pool, pgstore.Options{Embedder: hashEmbedder{}})
	ns := "/main/u1/long_term/"
	for _, r := range []memory.Record{{Namespace: ns, Content: "fig"}, {Namespace: ns, Content: "maybe orchids", Status: memory.StatusStaged},
		{Namespace: "/main/u2/long_term/", Content: "u2 fig"}} {
		if _, err := s.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendEvents(ctx, []memory.Event{{ActorID: "u1", Text: "fig turn"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkRejected(ctx, "u1", "plastic flowers"); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitEmbedded(ctx); err != nil { // vectors are stored in the background
		t.Fatal(err)
	}
	count := func(actor string) map[string]int {
		out := map[string]int{}
		for _, tb := range []string{"memory_records", "memory_events", "memory_rejections", "memory_vectors", "memory_actors"} {
			var n int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+tb+` WHERE actor = $1`, actor).Scan(&n); err != nil {
				t.Fatal(err)
			}
			out[tb] = n
		}
		return out
	}
	before := count("u1")
	for tb, n := range before {
		if n == 0 {
			t.Fatalf("setup wrote no %s row for u1: %v", tb, before)
		}
	}
	var v0, v1 int64
	pool.QueryRow(ctx, `SELECT version FROM memory_actors WHERE actor = 'u2'`).Scan(&v0)
	if _, err := s.PutBatch(ctx, []memory.Record{{Namespace: "/main/u2/long_term/", Content: "ok"}, {ID: "bad", Namespace: "/main/u2/long_term/", Content: "x\x00"}}); err == nil {
		t.Fatal("PutBatch with a NUL record succeeded")
	}
	pool.QueryRow(ctx, `SELECT version FROM memory_actors WHERE actor = 'u2'`).Scan(&v1)
	if v0 == 0 || v1 != v0 {
		t.Fatalf("u2 version %d → %d after a failed batch", v0, v1)
	}
	if err := s.Forget(ctx, "main", "u1"); err != nil {
		t.Fatal(err)
	}
	for tb, n := range count("u1") {
		if n != 0 {
			t.Errorf("after Forget, %s holds %d rows of u1", tb, n)
		}
	}
	if c := count("u2"); c["memory_records"] != 1 || c["memory_actors"] != 1 {
		t.Fatalf("u2 rows after forgetting u1: %v", c)
	}
}

// TestConcurrentInstances: writers and searchers on two instances at
// once; afterwards both instances hold every write and agree on every hit.
func TestConcurrentInstances(t *testing.T) {
	url := testenv.PostgresSchema(t)
	a := newStore(t, openPool(t, url), pgstore.Options{})
	b := newStore(t, openPool(t, url), pgstore.Options{})
	stores := []*pgstore.Store{a, b}
	const writers, turns = 4, 15
	errs := make(chan error, 2*writers)
	for w := 0; w < writers; w++ {
		go func(w int) {
			s := stores[w%2]
			for i := 0; i < turns; i++ {
				if err := s.AppendEvents(ctx, []memory.Event{{ID: fmt.Sprintf("c-%d-%d", w, i), ActorID: "u1", SessionID: fmt.Sprintf("s%d", w), Text: fmt.Sprintf("fig turn %d of writer %d", i, w)}}); err != nil {
					errs <- err
					return
				}
				if _, err := s.Put(ctx, memory.Record{ID: fmt.Sprintf("cr-%d-%d", w, i), Namespace: "/main/u1/long_term/", Content: fmt.Sprintf("fig fact %d %d", w, i)}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(w)
		go func(w int) {
			s := stores[(w+1)%2]
			for i := 0; i < turns; i++ {
				if _, err := s.Search(ctx, memory.Query{NamespacePath: "/main/u1/", Text: "fig turn"}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(w)
	}
	for i := 0; i < 2*writers; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	q := memory.Query{NamespacePath: "/main/u1/", Text: "fig turn writer", TopK: 500}
	ha, err := a.Search(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := b.Search(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(ha) != 2*writers*turns {
		t.Fatalf("a finds %d documents, want %d", len(ha), 2*writers*turns)
	}
	for i := range ha {
		if ha[i].Record.ID != hb[i].Record.ID || ha[i].Score != hb[i].Score {
			t.Fatalf("hit %d differs: a %s %v, b %s %v", i, ha[i].Record.ID, ha[i].Score, hb[i].Record.ID, hb[i].Score)
		}
	}
	fresh := newStore(t, openPool(t, url), pgstore.Options{})
	hf, err := fresh.Search(ctx, q)
	if err != nil || len(hf) != len(ha) {
		t.Fatalf("fresh instance: %d, %v", len(hf), err)
	}
	for i := range ha {
		if ha[i].Record.ID != hf[i].Record.ID || ha[i].Score != hf[i].Score {
			t.Fatalf("hit %d: caught-up %s %v, fresh %s %v", i, ha[i].Record.ID, ha[i].Score, hf[i].Record.ID, hf[i].Score)
		}
	}
}

// TestCacheHotFor: with Options.HotFor, actors used within it stay past
// the byte budget (no reload on every turn when more are active than
// fit), up to 2 × the budget.
func TestCacheHotFor(t *testing.T) {
	s := newStore(t, openPool(t, testenv.PostgresSchema(t)), pgstore.Options{CacheBytes: 40_000, HotFor: time.Hour})
	for i := 0; i < 12; i++ {
		actor := fmt.Sprintf("actor%d", i)
		for j := 0; j < 10; j++ {
			if _, err := s.Put(ctx, memory.Record{Namespace: "/main/" + actor + "/long_term/", Content: fmt.Sprintf("basil and mint %d", j)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Search(ctx, memory.Query{NamespacePath: "/main/" + actor + "/", Text: "basil"}); err != nil {
			t.Fatal(err)
		}
		// about 15 KB each: 2 fit the budget, 5 its 2 × bound
		if n := s.CachedActors(); i < 4 && n != i+1 {
			t.Fatalf("after %d hot actors, %d cached", i+1, n)
		}
	}
	if n := s.CachedActors(); n < 3 || n > 7 {
		t.Fatalf("%d hot actors cached past 2 × the budget", n)
	}
}
