package sqlitestore

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/markdown"
	"github.com/tendrilai/tendril/internal/session"
)

// writeBytes is this process's write_bytes of /proc/self/io: bytes it
// caused to reach the storage layer.
func writeBytes(tb testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		tb.Skip("no /proc/self/io")
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "write_bytes: "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	tb.Skip("no write_bytes")
	return 0
}

var soakTexts = []string{
	"I went to the LGBTQ support group yesterday and it was so powerful.",
	"That sounds amazing! What did you learn there about the adoption agencies?",
	"My kids love painting; we did a sunset over the lake last weekend.",
	"I'm thinking of running a charity race for mental health next month in Busan.",
}

// BenchmarkTurnWriteBytes appends one turn (a user and an assistant event)
// per iteration to one actor and reports the bytes that reach storage per
// turn (Markdown log, memory.db and its WAL).
func BenchmarkTurnWriteBytes(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	turn := func(i int) {
		ts := t0.Add(time.Duration(i) * time.Millisecond)
		evs := []memory.Event{
			{ActorID: "a", SessionID: "s", Role: "user", Text: soakTexts[i%len(soakTexts)] + " " + strconv.Itoa(i), Timestamp: ts},
			{ActorID: "a", SessionID: "s", Role: "assistant", Text: "echo: " + soakTexts[i%len(soakTexts)], Timestamp: ts.Add(time.Microsecond)},
		}
		if err := s.AppendEvents(ctx, evs); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 200; i++ {
		turn(i)
	}
	w0 := writeBytes(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		turn(200 + i)
	}
	b.StopTimer()
	b.ReportMetric(float64(writeBytes(b)-w0)/float64(b.N), "B-written/turn")
}

// BenchmarkActorHeap appends b.N turns (a user and an assistant event) to
// one actor, searches it, and reports the live heap after a GC: the
// memory one actor's history holds (events, ranking index).
// Run with -benchtime 10000x.
func BenchmarkActorHeap(b *testing.B) {
	s, err := Open(b.TempDir(), Options{NoFsync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	q := memory.Query{Text: "painting by the lake", NamespacePath: "/main/a/", TopK: 10}
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	live0 := liveHeap()
	t0 := time.Now().Add(-time.Hour)
	for i := 0; i < b.N; i++ {
		ts := t0.Add(time.Duration(i) * time.Millisecond)
		if err := s.AppendEvents(ctx, []memory.Event{
			{ActorID: "a", SessionID: "s", Role: "user", Text: soakTexts[i%len(soakTexts)] + " " + strconv.Itoa(i), Timestamp: ts},
			{ActorID: "a", SessionID: "s", Role: "assistant", Text: "echo: " + soakTexts[i%len(soakTexts)] + " " + strconv.Itoa(i), Timestamp: ts.Add(time.Microsecond)},
		}); err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			if _, err := s.Search(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := s.Search(ctx, q); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	// A compaction or demotion in flight holds a second index or a batch:
	// measure the state it leaves.
	s.waitDemotion("a")
	runtime.GC()
	debug.FreeOSMemory()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(m1.HeapInuse-m0.HeapInuse)/(1<<20), "MiB-heap")
	b.ReportMetric(float64(liveHeap()-live0)/(1<<20), "MiB-live")
	b.ReportMetric(float64(s.cachedBytes())/(1<<20), "MiB-estimated")
	b.ReportMetric(float64(s.retiredDocs("a")), "retired-docs")
	writeHeapProfile(b)
}

// TestEventsSince: the cursor rule (after the cursor event, else after its
// timestamp), sessions kept apart, and Events of one session in order.
func TestEventsSince(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoFsync: true, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	var evs []memory.Event
	for i := 0; i < 6; i++ {
		sess := "s1"
		if i%3 == 2 {
			sess = "s2"
		}
		evs = append(evs, memory.Event{ID: "e" + strconv.Itoa(i), ActorID: "a", SessionID: sess, Role: "user", Text: "turn " + strconv.Itoa(i), Timestamp: t0.Add(time.Duration(i) * time.Second)})
	}
	if err := s.AppendEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	ids := func(evs []memory.Event) string {
		var b strings.Builder
		for _, e := range evs {
			b.WriteString(e.ID + " ")
		}
		return strings.TrimSpace(b.String())
	}
	for _, c := range []struct {
		id   string
		ts   time.Time
		want string
	}{
		{"", time.Time{}, "e0 e1 e3 e4"},
		{"e1", t0.Add(time.Second), "e3 e4"},
		{"gone", t0.Add(time.Second), "e3 e4"},   // cursor event not listed: by timestamp
		{"e2", t0.Add(2 * time.Second), "e3 e4"}, // another session's event: by timestamp
		{"e4", t0.Add(4 * time.Second), ""},
	} {
		got, err := s.EventsSince(ctx, "a", "s1", c.id, c.ts)
		if err != nil || ids(got) != c.want {
			t.Errorf("EventsSince(s1, %q) = %q, %v; want %q", c.id, ids(got), err, c.want)
		}
	}
	all, err := s.Events(ctx, "a", "s2")
	if err != nil || ids(all) != "e2 e5" {
		t.Errorf("Events(s2) = %q, %v", ids(all), err)
	}
	if got, err := s.EventsSince(ctx, "nobody", "s1", "", time.Time{}); err != nil || len(got) != 0 {
		t.Errorf("unknown actor: %v, %v", got, err)
	}
}

// TestWarmRecent: the most recently active actors get their ranking index
// built; an actor beyond n does not.
func TestWarmRecent(t *testing.T) {
	home := t.TempDir()
	opts := Options{NoFsync: true, SyncInterval: -1}
	s, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	for i, actor := range []string{"old", "mid", "new"} {
		if err := s.AppendEvents(ctx, []memory.Event{{ActorID: actor, SessionID: "s", Role: "user", Text: "hello " + actor, Timestamp: t0.Add(time.Duration(i) * time.Minute)}}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s, err = Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WarmRecent(ctx, 2); err != nil {
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
}

// BenchmarkManyActorsHeap spreads b.N turns over 100 actors (round robin),
// searches each actor after each of its turns, as a turn does, and reports
// the live heap after a GC, with the default Options.CacheBytes. Run with
// -benchtime 20000x.
func BenchmarkManyActorsHeap(b *testing.B) { manyActorsHeap(b, Options{NoFsync: true}) }

// BenchmarkManyActorsHeapUnbounded is BenchmarkManyActorsHeap with no byte
// budget (every actor stays cached): the per-event heap alone.
func BenchmarkManyActorsHeapUnbounded(b *testing.B) {
	manyActorsHeap(b, Options{NoFsync: true, CacheBytes: -1})
}

// BenchmarkManyActorsHeapBudget16 is BenchmarkManyActorsHeap with a 16 MiB
// budget, smaller than the 100 actors' state: round robin evicts an actor
// on nearly every turn and each search pays its rebuild (ns/op).
func BenchmarkManyActorsHeapBudget16(b *testing.B) {
	manyActorsHeap(b, Options{NoFsync: true, CacheBytes: 16 << 20})
}

func manyActorsHeap(b *testing.B, opts Options) {
	const actors = 100
	s, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	live0 := liveHeap()
	t0 := time.Now().Add(-time.Hour)
	for i := 0; i < b.N; i++ {
		a := "a" + strconv.Itoa(i%actors)
		ts := t0.Add(time.Duration(i) * time.Millisecond)
		if err := s.AppendEvents(ctx, []memory.Event{
			{ActorID: a, SessionID: "s", Role: "user", Text: soakTexts[i%len(soakTexts)] + " " + strconv.Itoa(i), Timestamp: ts},
			{ActorID: a, SessionID: "s", Role: "assistant", Text: "echo: " + soakTexts[i%len(soakTexts)], Timestamp: ts.Add(time.Microsecond)},
		}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Search(ctx, memory.Query{Text: "painting by the lake", NamespacePath: "/main/" + a + "/", TopK: 50}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	debug.FreeOSMemory()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(m1.HeapInuse-m0.HeapInuse)/(1<<20), "MiB-heap")
	b.ReportMetric(float64(liveHeap()-live0)/(1<<20), "MiB-live")
	b.ReportMetric(float64(s.cachedBytes())/(1<<20), "MiB-estimated")
	b.ReportMetric(float64(s.retiredDocs("a")), "retired-docs")
	s.mu.Lock()
	b.ReportMetric(float64(len(s.actors)), "actors-cached")
	b.ReportMetric(float64(s.evictions), "evictions")
	s.mu.Unlock()
	writeHeapProfile(b)
}

// TestOwedFilesRows: an event append writes no files row (it is owed);
// the per-actor check does not take the append for a hand edit; Close
// writes the row; a store dropped without Close (a crash) still finds
// every event on the next Open.
func TestOwedFilesRows(t *testing.T) {
	home := t.TempDir()
	s, err := Open(home, Options{NoFsync: true, SyncInterval: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rows := func(s *Store) int {
		var n int
		if err := s.db.QueryRow(`SELECT count(*) FROM files`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	ev := func(id string) []memory.Event {
		return []memory.Event{{ID: id, ActorID: "u", SessionID: "s", Role: "user", Text: "fig tree " + id, Timestamp: time.Now().Add(-time.Minute)}}
	}
	if err := s.AppendEvents(ctx, ev("e1")); err != nil {
		t.Fatal(err)
	}
	if n := rows(s); n != 0 {
		t.Fatalf("%d files rows after an event append, want 0 (owed)", n)
	}
	enc, _ := markdown.EncodeActor("u")
	if changed, err := s.actorChanged(ctx, enc); err != nil || changed {
		t.Fatalf("own append taken for a hand edit: %v, %v", changed, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(home, Options{NoFsync: true, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if n := rows(s); n != 1 {
		t.Fatalf("%d files rows after Close, want 1", n)
	}
	if err := s.AppendEvents(ctx, ev("e2")); err != nil {
		t.Fatal(err)
	}
	s.db.Close() // crash: the owed row is never written
	s, err = Open(home, Options{NoFsync: true, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Events(ctx, "u", "s")
	if err != nil || len(got) != 2 {
		t.Fatalf("after a crash: %d events, %v; want 2", len(got), err)
	}
}

// cachedBytes is the estimated heap of the cached actors (what
// Options.CacheBytes bounds).
func (s *Store) cachedBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, a := range s.actors {
		n += a.bytes()
	}
	return n
}

// liveHeap is the heap the last GC found live (runtime/metrics
// /gc/heap/live:bytes): unlike HeapInuse, it does not count the free
// space of partly used spans.
// retiredDocs is the number of retired documents in actor's ranking
// index (0 when not built).
func (s *Store) retiredDocs(actor string) int {
	s.mu.Lock()
	a := s.actors[actor]
	s.mu.Unlock()
	if a == nil {
		return 0
	}
	a.ixw.Lock()
	defer a.ixw.Unlock()
	if x := a.slots[a.active.Load()].x; x != nil {
		return x.ix.Dead()
	}
	return 0
}

func liveHeap() int64 {
	m := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(m)
	return int64(m[0].Value.Uint64())
}

// BenchmarkRecordHeap puts b.N records shaped like the rule extractor's
// (about 70 bytes of content; section, type, date and statedAt metadata;
// one source) into one actor in batches of 8, searches it so the ranking
// index is built, and reports the live heap per record after a GC next to
// the store's estimate (what Options.CacheBytes counts). Run with
// -benchtime 20000x.
func BenchmarkRecordHeap(b *testing.B) {
	s, err := Open(b.TempDir(), Options{NoFsync: true, CacheBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	runtime.GC()
	live0 := liveHeap()
	t0 := time.Now().Add(-time.Hour)
	types := []string{"event", "plan", "fact", "person"}
	var batch []memory.Record
	for i := 0; i < b.N; i++ {
		md := map[string]any{"section": "general", "type": types[i%len(types)], "statedAt": t0.Add(time.Duration(i) * time.Second)}
		if i%3 == 0 {
			md["date"], md["dateWords"] = "2026-11-27", "27 November 2026"
		}
		batch = append(batch, memory.Record{
			Namespace: "/main/a/long_term/", Strategy: memory.StrategySemantic, Status: memory.StatusActive,
			Content:  soakTexts[i%len(soakTexts)] + " " + strconv.Itoa(i),
			Metadata: md, Sources: []string{session.NewNodeID()}, Importance: 0.5,
		})
		if len(batch) == 8 || i == b.N-1 {
			if _, err := s.PutBatch(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if _, err := s.Search(ctx, memory.Query{Text: "painting by the lake", NamespacePath: "/main/a/", TopK: 10}); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	runtime.GC()
	b.ReportMetric(float64(liveHeap()-live0)/float64(b.N), "B-live/record")
	b.ReportMetric(float64(s.cachedBytes())/float64(b.N), "B-estimated/record")
	writeHeapProfile(b)
}

// writeHeapProfile writes a heap profile to $HEAP_PROFILE when it is set.
func writeHeapProfile(b *testing.B) {
	p := os.Getenv("HEAP_PROFILE")
	if p == "" {
		return
	}
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}
