package sqlitestore

import (
	"fmt"
	"maps"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// equivQueries covers ranked searches (ties included: several records share
// their text), filters, statuses, strategies, exact namespaces and
// listings, for actor u.
func equivQueries() []memory.Query {
	lt := "/main/u/long_term/"
	return []memory.Query{
		{NamespacePath: "/main/u/", Text: "fig tree water"},
		{NamespacePath: "/main/u/", Text: "When did I water the fig?", TopK: 7},
		{NamespacePath: "/main/u/", Text: "tomato aphids", TopK: 3},
		{NamespacePath: "/main/u/", Text: "same words everywhere", TopK: 4},
		{NamespacePath: "/main/u/episodic/", Text: "fig rust spots"},
		{NamespacePath: "/main/u/", Text: "compost", Statuses: []memory.Status{memory.StatusActive, memory.StatusSuperseded}},
		{Namespace: lt, Text: "organic fertiliser", Strategies: []memory.Strategy{memory.StrategyUserPreference, memory.StrategySemantic}},
		{NamespacePath: "/main/u/", Text: "basil", Filters: []memory.Filter{{Key: "type", Op: memory.OpEquals, Value: "note"}}},
		{NamespacePath: lt, Strategies: []memory.Strategy{memory.StrategyUserPreference, memory.StrategyProcedural}},
		{NamespacePath: "/main/u/"},
		{NamespacePath: "/main/u/", TopK: 5, Statuses: []memory.Status{memory.StatusSuperseded, memory.StatusStaged}},
	}
}

func fullSummary(hits []memory.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = fmt.Sprintf("%s %.12f %s %s %s %v | %s", h.Record.ID, h.Score, h.Record.Content, h.Record.Status, h.Record.Strategy, h.Record.Metadata, h.Explain)
	}
	return out
}

// TestIncrementalIndexMatchesFreshBuild applies writes to a store whose
// ranking index (and cached masks) already exist — new and updated
// records, status and strategy changes, events appended at the end, in the
// middle and at the start of sessions — and after each step compares every
// query, scores and explanations included, with a second store that builds
// its index from scratch over the same files.
func TestIncrementalIndexMatchesFreshBuild(t *testing.T) {
	home := t.TempDir()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	opts := Options{NoFsync: true, SyncInterval: -1, Now: clock}
	s, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lt := "/main/u/long_term/"
	words := strings.Fields("fig tree water tomato aphids compost basil rust spots organic fertiliser mulch prune frost")
	rng := rand.New(rand.NewSource(7))
	text := func(n int) string {
		var w []string
		for i := 0; i < n; i++ {
			w = append(w, words[rng.Intn(len(words))])
		}
		return strings.Join(w, " ")
	}
	t0 := now.Add(-48 * time.Hour)
	var recs []memory.Record
	for i := 0; i < 40; i++ {
		r := memory.Record{ID: fmt.Sprintf("r%02d", i), Namespace: lt, Content: text(6), CreatedAt: t0.Add(time.Duration(i%13) * time.Minute),
			Metadata: map[string]any{"type": []string{"note", "fact"}[i%2]}}
		if i%10 == 0 {
			r.Strategy = memory.StrategyUserPreference
		}
		if i%4 == 0 {
			r.Content = "same words everywhere fig" // ties
		}
		recs = append(recs, r)
	}
	if _, err := s.PutBatch(bg, recs); err != nil {
		t.Fatal(err)
	}
	var evs []memory.Event
	for i := 0; i < 30; i++ {
		evs = append(evs, memory.Event{ID: fmt.Sprintf("e%02d", i), ActorID: "u", SessionID: fmt.Sprintf("s%d", i%3), Role: []string{"user", "assistant"}[i%2],
			Text: text(8), Timestamp: t0.Add(time.Duration(i) * time.Hour / 2)})
	}
	if err := s.AppendEvents(bg, evs); err != nil {
		t.Fatal(err)
	}
	// The other actor's writes must not disturb u's index.
	if _, err := s.Put(bg, memory.Record{Namespace: "/main/v/long_term/", Content: "fig tree water"}); err != nil {
		t.Fatal(err)
	}

	compare := func(step string) {
		t.Helper()
		fresh, err := Open(home, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.Close()
		for _, q := range equivQueries() {
			got, err := s.Search(bg, q)
			if err != nil {
				t.Fatal(err)
			}
			want, err := fresh.Search(bg, q)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := fullSummary(got), fullSummary(want); !reflect.DeepEqual(g, w) {
				t.Fatalf("%s: query %+v\nincremental %d hits:\n  %s\nfresh %d hits:\n  %s", step, q, len(g), strings.Join(g, "\n  "), len(w), strings.Join(w, "\n  "))
			}
		}
		// The fts5 engine: the same home's full-text index, kept in step by
		// every write, ranks as one rebuilt from the Markdown alone.
		rebuilt := openMarkdownCopy(t, home, opts)
		defer rebuilt.Close()
		for _, q := range equivQueries() {
			got, err := s.SearchEngine(bg, q, EngineFTS5)
			if err != nil {
				t.Fatal(err)
			}
			want, err := rebuilt.SearchEngine(bg, q, EngineFTS5)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := fullSummary(got), fullSummary(want); !reflect.DeepEqual(g, w) {
				t.Fatalf("%s: fts5 query %+v\nincremental %d hits:\n  %s\nrebuilt %d hits:\n  %s", step, q, len(g), strings.Join(g, "\n  "), len(w), strings.Join(w, "\n  "))
			}
		}
	}
	compare("initial") // builds the index and caches every mask
	if s.actors["u"].currentIndex() == nil {
		t.Fatal("index not built by the first search")
	}

	steps := []struct {
		name string
		do   func() error
	}{
		{"new records", func() error {
			_, err := s.PutBatch(bg, []memory.Record{
				{ID: "n1", Namespace: lt, Content: "same words everywhere fig", CreatedAt: t0.Add(-time.Hour)}, // sorts first
				{ID: "n2", Namespace: lt, Content: "water the basil daily", Metadata: map[string]any{"type": "note"}},
				{ID: "n3", Namespace: lt, Strategy: memory.StrategyProcedural, Content: "always answer about compost briefly"},
			})
			return err
		}},
		{"content update", func() error {
			r := recs[3]
			r.Content = "tomato aphids on the fig tree"
			_, err := s.Put(bg, r)
			return err
		}},
		{"supersede", func() error {
			r := recs[5]
			r.Status = memory.StatusSuperseded
			_, err := s.Put(bg, r)
			return err
		}},
		{"strategy and metadata change", func() error {
			r := recs[6]
			r.Strategy = memory.StrategyUserPreference
			r.Metadata = map[string]any{"type": "note"}
			_, err := s.Put(bg, r)
			return err
		}},
		{"staged record", func() error {
			_, err := s.Put(bg, memory.Record{ID: "st1", Namespace: lt, Content: "maybe likes compost tea", Status: memory.StatusStaged})
			return err
		}},
		{"events at the end of sessions", func() error {
			return s.AppendEvents(bg, []memory.Event{
				{ID: "x1", ActorID: "u", SessionID: "s0", Role: "user", Text: "how do I water the fig tree?", Timestamp: now.Add(-time.Minute)},
				{ID: "x2", ActorID: "u", SessionID: "s0", Role: "assistant", Text: "water the fig deeply once a week", Timestamp: now},
			})
		}},
		{"events in the middle and at the start", func() error {
			return s.AppendEvents(bg, []memory.Event{
				{ID: "m1", ActorID: "u", SessionID: "s1", Role: "user", Text: "rust spots on fig leaves", Timestamp: t0.Add(3*time.Hour + time.Minute)},
				{ID: "m2", ActorID: "u", SessionID: "s2", Role: "user", Text: "frost killed the basil", Timestamp: t0.Add(-time.Hour)},
				{ID: "m3", ActorID: "u", SessionID: "s9", Role: "user", Text: "a new session about mulch", Timestamp: t0.Add(time.Hour)},
			})
		}},
		{"duplicate event retry", func() error {
			return s.AppendEvents(bg, []memory.Event{{ID: "x1", ActorID: "u", SessionID: "s0", Text: "ignored retry"}})
		}},
		{"many small turns", func() error {
			for i := 0; i < 20; i++ {
				if err := s.AppendEvents(bg, []memory.Event{
					{ActorID: "u", SessionID: fmt.Sprintf("t%d", i%4), Role: "user", Text: text(5), Timestamp: now.Add(time.Duration(i) * time.Second)},
					{ActorID: "u", SessionID: fmt.Sprintf("t%d", i%4), Role: "assistant", Text: text(5), Timestamp: now.Add(time.Duration(i)*time.Second + time.Millisecond)},
				}); err != nil {
					return err
				}
				if _, err := s.Put(bg, memory.Record{Namespace: lt, Content: text(4)}); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		compare(st.name)
	}
	if x := s.actors["u"].currentIndex(); x == nil || x.ix.Dead() == 0 {
		t.Fatal("writes rebuilt the index instead of updating it in place")
	}
}

// TestIndexExpiresEventsInPlace: events that expire while the index is
// live leave the ranking (and their neighbours' context) as in a fresh
// build, without a rebuild.
func TestIndexExpiresEventsInPlace(t *testing.T) {
	home := t.TempDir()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s, err := Open(home, Options{NoFsync: true, SyncInterval: -1, EventExpiryDays: 2, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var evs []memory.Event
	for i := 0; i < 12; i++ {
		evs = append(evs, memory.Event{ID: fmt.Sprintf("e%02d", i), ActorID: "u", SessionID: "s", Role: "user",
			Text: fmt.Sprintf("fig note %d water", i), Timestamp: now.Add(-time.Duration(47-i) * time.Hour)})
	}
	if err := s.AppendEvents(bg, evs); err != nil {
		t.Fatal(err)
	}
	q := memory.Query{NamespacePath: "/main/u/", Text: "fig water note 5 6"}
	if hits, err := s.Search(bg, q); err != nil || len(hits) != 12 {
		t.Fatalf("before expiry: %d hits, %v", len(hits), err)
	}
	mu.Lock()
	now = now.Add(5*time.Hour + 30*time.Minute) // e00…e04 expire
	mu.Unlock()
	got, err := s.Search(bg, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 7 { // the cutoff is now 42.5 h before the first clock
		t.Fatalf("after expiry: %d hits, want 7: %v", len(got), fullSummary(got))
	}
	matchFresh(t, "expired in place", got, home, Options{NoFsync: true, SyncInterval: -1, EventExpiryDays: 2, Now: clock}, q)
}

// matchFresh fails unless got (hits for q, explanations included) equals
// what a store freshly opened on home with opts returns for q.
func matchFresh(t *testing.T, step string, got []memory.Hit, home string, opts Options, q memory.Query) {
	t.Helper()
	fresh, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	want, err := fresh.Search(bg, q)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := fullSummary(got), fullSummary(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n  %s\nfresh:\n  %s", step, strings.Join(g, "\n  "), strings.Join(w, "\n  "))
	}
}

// TestConcurrentTurnsOneActor runs turns (append two events, search,
// list) of many sessions of one actor at once with searches of another
// actor, then checks every event is stored once and searchable, and that
// an ID belonging to another actor still fails its own call.
func TestConcurrentTurnsOneActor(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Put(bg, memory.Record{ID: "owned", Namespace: "/main/other/long_term/", Content: "fig tree of the other actor"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(bg, memory.Record{Namespace: "/main/u/long_term/", Strategy: memory.StrategyUserPreference, Content: "I only use organic fertiliser"}); err != nil {
		t.Fatal(err)
	}
	const sessions, turns = 8, 15
	var wg sync.WaitGroup
	errs := make(chan error, sessions*2+1)
	for c := 0; c < sessions; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < turns; i++ {
				if err := s.AppendEvents(bg, []memory.Event{
					{ActorID: "u", SessionID: fmt.Sprintf("s%d", c), Role: "user", Text: fmt.Sprintf("question c%dt%d about figs", c, i)},
					{ActorID: "u", SessionID: fmt.Sprintf("s%d", c), Role: "assistant", Text: fmt.Sprintf("answer %d-%d about figs", c, i)},
				}); err != nil {
					errs <- err
					return
				}
				hits, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "figs", TopK: 5})
				if err != nil || len(hits) == 0 {
					errs <- fmt.Errorf("search: %d hits, %v", len(hits), err)
					return
				}
				list, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/long_term/", Strategies: []memory.Strategy{memory.StrategyUserPreference}})
				if err != nil || len(list) != 1 {
					errs <- fmt.Errorf("standing list: %d, %v", len(list), err)
					return
				}
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < turns; i++ {
				hits, err := s.Search(bg, memory.Query{NamespacePath: "/main/other/", Text: "fig"})
				if err != nil || len(hits) != 1 {
					errs <- fmt.Errorf("other actor: %d hits, %v", len(hits), err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := s.AppendEvents(bg, []memory.Event{{ID: "owned", ActorID: "u", Text: "stolen id"}})
		if err == nil {
			errs <- fmt.Errorf("an ID of another actor was accepted")
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	evs, err := s.Events(bg, "u", "")
	if err != nil || len(evs) != sessions*turns*2 {
		t.Fatalf("events: %d, %v; want %d", len(evs), err, sessions*turns*2)
	}
	hits, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/episodic/", Text: "question c3t7 figs", TopK: 1})
	if err != nil || len(hits) != 1 || !strings.Contains(hits[0].Record.Content, "question c3t7") {
		t.Fatalf("search after concurrent turns: %+v, %v", hits, err)
	}
	// The files on disk rebuild to the same events.
	if err := s.Rebuild(bg, nil); err != nil {
		t.Fatal(err)
	}
	again, err := s.Events(bg, "u", "")
	if err != nil || len(again) != len(evs) {
		t.Fatalf("after rebuild: %d events, %v", len(again), err)
	}
}

// BenchmarkSearchAfterWrite measures the turn pattern on an actor with
// 10,000 records: append the turn's two events, then time the retrieval
// (ranked search of the long_term path and of the episodic root, top 50,
// and the listing of standing preference/procedural records). mode=legacy
// drops and rebuilds the ranking index after every write and lists through
// it, as before incremental indexing; mode=incremental is the store as
// shipped. Reported: p50/p99 of the three searches together.
func BenchmarkSearchAfterWrite(b *testing.B) {
	for _, mode := range []string{"incremental", "legacy"} {
		b.Run("mode="+mode, func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{SyncInterval: -1, NoFsync: true})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.legacy = mode == "legacy"
			words := strings.Fields("tomato fig basil rose aphid compost mulch prune water frost bed soil seed sun shade leaf root pot balcony orchard")
			lt := "/main/u/long_term/"
			recs := make([]memory.Record, 10000)
			for i := range recs {
				recs[i] = memory.Record{Namespace: lt, Content: fmt.Sprintf("note %d: the %s near the %s needs %s", i, words[i%len(words)], words[(i/7)%len(words)], words[(i/49)%len(words)])}
			}
			if _, err := s.PutBatch(bg, recs); err != nil {
				b.Fatal(err)
			}
			if err := s.Prepare(bg, "u"); err != nil {
				b.Fatal(err)
			}
			var lat []time.Duration
			for i := 0; b.Loop(); i++ {
				if err := s.AppendEvents(bg, []memory.Event{
					{ActorID: "u", SessionID: fmt.Sprintf("s%d", i%8), Role: "user", Text: "how do I water the fig tomato?"},
					{ActorID: "u", SessionID: fmt.Sprintf("s%d", i%8), Role: "assistant", Text: "water the fig at the root"},
				}); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				for _, q := range []memory.Query{
					{NamespacePath: lt, Strategies: []memory.Strategy{memory.StrategyUserPreference, memory.StrategyProcedural}, TopK: 50},
					{NamespacePath: lt, Text: "how do I water the fig tomato?", TopK: 50},
					{NamespacePath: "/main/u/episodic/", Text: "how do I water the fig tomato?", TopK: 50},
				} {
					if _, err := s.Search(bg, q); err != nil {
						b.Fatal(err)
					}
				}
				lat = append(lat, time.Since(start))
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[(len(lat)-1)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// currentIndex returns the active copy of a's ranking index (tests).
// waitCompaction waits for a background compaction of actor's index
// (compactSoon) started by a write that has returned.
func (s *Store) waitCompaction(actor string) {
	s.mu.Lock()
	a := s.actors[actor]
	s.mu.Unlock()
	for a != nil && a.compacting.Load() {
		time.Sleep(time.Millisecond)
	}
}

func (a *actorState) currentIndex() *actorIndex {
	slot := &a.slots[a.active.Load()]
	slot.mu.RLock()
	defer slot.mu.RUnlock()
	return slot.x
}

// BenchmarkConcurrentTurns is the store's share of the full-turn
// benchmark: two actors with 10,000 records each, 1 or 64 concurrent
// sessions, each turn lists the standing records, runs the two ranked searches and
// appends its two events (fsync on). Reported: p50/p99 of the store work
// of one turn. mode=legacy rebuilds the ranking index after every write
// (fewer turns: each costs a rebuild).
func BenchmarkConcurrentTurns(b *testing.B) {
	for _, bc := range []struct {
		mode     string
		sessions int
	}{{"incremental", 1}, {"incremental", 64}, {"legacy", 1}, {"legacy", 64}} {
		mode, sessions := bc.mode, bc.sessions
		b.Run(fmt.Sprintf("mode=%s/sessions=%d", mode, sessions), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.legacy = mode == "legacy"
			words := strings.Fields("tomato fig basil rose aphid compost mulch prune water frost bed soil seed sun shade leaf root pot balcony orchard")
			actors := []string{"b0", "b63"}
			for _, actor := range actors {
				recs := make([]memory.Record, 10000)
				for i := range recs {
					recs[i] = memory.Record{Namespace: "/main/" + actor + "/long_term/", Content: fmt.Sprintf("note %d: the %s near the %s needs %s", i, words[i%len(words)], words[(i/7)%len(words)], words[(i/49)%len(words)])}
				}
				if _, err := s.PutBatch(bg, recs); err != nil {
					b.Fatal(err)
				}
				if err := s.Prepare(bg, actor); err != nil {
					b.Fatal(err)
				}
			}
			n := 640
			if s.legacy {
				n = 128
			}
			for b.Loop() {
				lat := make([]time.Duration, n)
				next := make(chan int)
				var wg sync.WaitGroup
				var failed sync.Once
				for w := 0; w < sessions; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range next {
							actor := actors[i%2]
							start := time.Now()
							err := func() error {
								if _, err := s.Search(bg, memory.Query{NamespacePath: "/main/" + actor + "/long_term/", TopK: 50,
									Strategies: []memory.Strategy{memory.StrategyUserPreference, memory.StrategyProcedural}}); err != nil {
									return err
								}
								for _, p := range []string{"/main/" + actor + "/long_term/", "/main/" + actor + "/episodic/"} {
									if _, err := s.Search(bg, memory.Query{NamespacePath: p, Text: "how do I water the fig tomato?", TopK: 50}); err != nil {
										return err
									}
								}
								return s.AppendEvents(bg, []memory.Event{
									{ActorID: actor, SessionID: fmt.Sprintf("s%d", i%sessions), Role: "user", Text: "how do I water the fig tomato?"},
									{ActorID: actor, SessionID: fmt.Sprintf("s%d", i%sessions), Role: "assistant", Text: "water the fig at the root"},
								})
							}()
							lat[i] = time.Since(start)
							if err != nil {
								failed.Do(func() { b.Error(err) })
							}
						}
					}()
				}
				for i := 0; i < n; i++ {
					next <- i
				}
				close(next)
				wg.Wait()
				sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "turn-p50-ms")
				b.ReportMetric(float64(lat[(len(lat)-1)*99/100].Microseconds())/1000, "turn-p99-ms")
			}
		})
	}
}

// TestCompactionKeepsResults: enough updates of the same records retire
// most documents, the index is rebuilt from scratch (both copies), and
// searches still equal a fresh store's.
func TestCompactionKeepsResults(t *testing.T) {
	home := t.TempDir()
	opts := Options{NoFsync: true, SyncInterval: -1}
	s, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lt := "/main/u/long_term/"
	q := memory.Query{NamespacePath: "/main/u/", Text: "fig water version"}
	for round := 0; round < 12; round++ {
		var recs []memory.Record
		for i := 0; i < 60; i++ {
			recs = append(recs, memory.Record{ID: fmt.Sprintf("r%02d", i), Namespace: lt, Content: fmt.Sprintf("fig water version %d item %d", round, i)})
		}
		if _, err := s.PutBatch(bg, recs); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Search(bg, q); err != nil { // keeps the index live
			t.Fatal(err)
		}
	}
	s.waitCompaction("u")
	// A write that crosses the threshold while a compaction runs does not
	// start another (the next write does): start the last one here, as the
	// next write would, so the test does not depend on that timing.
	s.compactSoon(s.actors["u"])
	s.waitCompaction("u")
	// Where the last compaction landed depends on when the background
	// rebuilds ran (a loaded machine shifts them by a round or two), so
	// check what holds whatever the phase: the index was rebuilt (it holds
	// fewer than the 720 documents written) and owes no rebuild (at most
	// compactable's 256 retired documents).
	x := s.actors["u"].currentIndex()
	if x == nil {
		t.Fatal("no index")
	}
	if x.ix.Len() >= 12*60 || x.ix.Dead() > 256 || x.ix.Len()-x.ix.Dead() != 60 {
		t.Fatalf("index not compacted: %d documents, %d retired", x.ix.Len(), x.ix.Dead())
	}
	fresh, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	got, _ := s.Search(bg, q)
	want, _ := fresh.Search(bg, q)
	if g, w := fullSummary(got), fullSummary(want); !reflect.DeepEqual(g, w) || len(g) != 50 {
		t.Fatalf("after compaction %d hits:\n  %s\nfresh %d:\n  %s", len(g), strings.Join(g, "\n  "), len(w), strings.Join(w, "\n  "))
	}
}

// TestMaintenanceDuringTurns runs turns of two actors while Sync, Rebuild,
// ExpireEvents, ExportMarkdown and Forget of a third actor run: nothing
// fails, deadlocks or races, and no accepted event is lost.
func TestMaintenanceDuringTurns(t *testing.T) {
	s, err := Open(t.TempDir(), Options{SyncInterval: time.Millisecond, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const turns = 25
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for _, actor := range []string{"u1", "u2"} {
		for sess := 0; sess < 3; sess++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < turns; i++ {
					if err := s.AppendEvents(bg, []memory.Event{{ActorID: actor, SessionID: fmt.Sprintf("s%d", sess), Text: fmt.Sprintf("fig turn %d", i)}}); err != nil {
						errs <- err
						return
					}
					if _, err := s.Search(bg, memory.Query{NamespacePath: "/main/" + actor + "/", Text: "fig turn"}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 5; i++ {
			if _, err := s.Put(bg, memory.Record{Namespace: "/main/gone/long_term/", Content: "temporary"}); err != nil {
				errs <- err
				return
			}
			steps := []func() error{
				func() error { return s.Sync(bg) },
				func() error { return s.Rebuild(bg, nil) },
				func() error { _, err := s.ExpireEvents(bg); return err },
				func() error { _, err := s.ExportMarkdown(bg, t.TempDir()); return err },
				func() error { return s.Forget(bg, "main", "gone") },
				func() error { _, err := s.Search(bg, memory.Query{NamespacePath: "/main/", Text: "fig"}); return err },
			}
			for _, f := range steps {
				if err := f(); err != nil {
					errs <- err
					return
				}
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, actor := range []string{"u1", "u2"} {
		evs, err := s.Events(bg, actor, "")
		if err != nil || len(evs) != 3*turns {
			t.Fatalf("%s: %d events, %v; want %d", actor, len(evs), err, 3*turns)
		}
	}
}

// TestAppendOnlyHistoryCompacts: each turn appended in order retires its
// predecessor's document (whose context gains the new turn). Over 1,500
// turns the retired documents stay within compactable's bound (256, or
// a quarter of the live ones) once each background compaction is done,
// instead of growing by one per turn; the index was rebuilt meanwhile,
// and it ranks as a fresh build does.
func TestAppendOnlyHistoryCompacts(t *testing.T) {
	home := t.TempDir()
	opts := Options{NoFsync: true, SyncInterval: -1}
	s, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	words := strings.Fields("fig tree water tomato aphids compost basil rust spots organic fertiliser mulch prune frost")
	rng := rand.New(rand.NewSource(11))
	text := func(n int) string {
		var w []string
		for i := 0; i < n; i++ {
			w = append(w, words[rng.Intn(len(words))])
		}
		return strings.Join(w, " ")
	}
	const turns = 1500
	t0 := time.Now().Add(-turns * time.Minute) // recent: not expired
	q := memory.Query{NamespacePath: "/main/u/", Text: "fig tree water", TopK: 10}
	maxDead, rebuilt := 0, false
	for i := 0; i < turns; i++ {
		ts := t0.Add(time.Duration(i) * time.Minute)
		if err := s.AppendEvents(bg, []memory.Event{
			{ActorID: "u", SessionID: "s", Role: "user", Text: text(6), Timestamp: ts},
			{ActorID: "u", SessionID: "s", Role: "assistant", Text: text(6), Timestamp: ts.Add(time.Second)},
		}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, err := s.Search(bg, q); err != nil { // builds the index
				t.Fatal(err)
			}
		}
		s.waitCompaction("u")
		x := s.actors["u"].currentIndex()
		if x == nil {
			t.Fatalf("turn %d: no index", i)
		}
		d := x.ix.Dead()
		if i > 0 && d < maxDead {
			rebuilt = true
		}
		maxDead = max(maxDead, d)
		if live := x.ix.Len() - d; d > max(256, live/4) {
			t.Fatalf("turn %d: %d retired documents beside %d live", i, d, live)
		}
	}
	if !rebuilt {
		t.Fatalf("the index was never compacted (retired documents reached %d)", maxDead)
	}
	got, err := s.Search(bg, q)
	if err != nil {
		t.Fatal(err)
	}
	matchFresh(t, "after compactions", got, home, opts, q)
}

// TestBackgroundCompactionRaces: searches run beside the writes whose
// compactions rebuild the index in the background, and the store closes
// while one may be running; under -race nothing races, every search
// answers, and the reopened store has every event.
func TestBackgroundCompactionRaces(t *testing.T) {
	home := t.TempDir()
	opts := Options{NoFsync: true, SyncInterval: -1}
	s, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	q := memory.Query{NamespacePath: "/main/u/", Text: "fig water", TopK: 5}
	t0 := time.Now().Add(-time.Hour)
	stop := make(chan struct{})
	searched := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				searched <- n
				return
			default:
			}
			if _, err := s.Search(bg, q); err != nil {
				t.Error(err)
			}
			n++
		}
	}()
	const turns = 700
	for i := 0; i < turns; i++ {
		ts := t0.Add(time.Duration(i) * time.Second)
		if err := s.AppendEvents(bg, []memory.Event{
			{ActorID: "u", SessionID: "s", Role: "user", Text: fmt.Sprintf("fig water %d", i), Timestamp: ts},
			{ActorID: "u", SessionID: "s", Role: "assistant", Text: fmt.Sprintf("water the fig %d", i), Timestamp: ts.Add(time.Millisecond)},
		}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if n := <-searched; n == 0 {
		t.Fatal("no search ran beside the writes")
	}
	if err := s.Close(); err != nil { // a compaction may be running
		t.Fatal(err)
	}
	re, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	evs, err := re.Events(bg, "u", "s")
	if err != nil || len(evs) != 2*turns {
		t.Fatalf("reopened: %d events (%v), want %d", len(evs), err, 2*turns)
	}
}

// TestCompactionCatchesUp: compact builds from a snapshot of the actor's
// maps without the writer lock, so writes and a demotion land between
// the snapshot and the swap; catchUp must bring the build up to date.
// Here the snapshot is taken and built by hand, then records are added
// and updated, events appended at a session's end, in its middle and in
// a new session, and a demotion moves old events out; after catchUp and
// the swap every query (scores and explanations included) equals a
// build from the maps as they are then. Without catchUp the swapped index
// misses the new documents and keeps the demoted ones.
func TestCompactionCatchesUp(t *testing.T) {
	home := t.TempDir()
	opts := Options{NoFsync: true, SyncInterval: -1, EventWindow: 48}
	s, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lt := "/main/u/long_term/"
	t0 := time.Now().Add(-48 * time.Hour).Truncate(time.Second) // within the 30-day event expiry
	var recs []memory.Record
	for i := 0; i < 30; i++ {
		recs = append(recs, memory.Record{ID: fmt.Sprintf("r%02d", i), Namespace: lt, Content: fmt.Sprintf("fig tree water compost note %d", i), Metadata: map[string]any{"type": "note"}})
	}
	if _, err := s.PutBatch(bg, recs); err != nil {
		t.Fatal(err)
	}
	turn := func(sid string, i int, ts time.Time) []memory.Event {
		return []memory.Event{
			{ActorID: "u", SessionID: sid, Role: "user", Text: fmt.Sprintf("did I water the fig %d basil tomato aphids", i), Timestamp: ts},
			{ActorID: "u", SessionID: sid, Role: "assistant", Text: fmt.Sprintf("fig rust spots %d organic fertiliser", i), Timestamp: ts.Add(time.Millisecond)},
		}
	}
	for i := 0; i < 20; i++ {
		for _, sid := range []string{"s1", "s2"} {
			if err := s.AppendEvents(bg, turn(sid, i, t0.Add(time.Duration(i)*time.Minute))); err != nil {
				t.Fatal(err)
			}
		}
	}
	q := equivQueries()[0]
	if _, err := s.Search(bg, q); err != nil { // builds the index
		t.Fatal(err)
	}
	s.waitDemotion("u")
	a := s.actors["u"]
	a.mu.RLock()
	snapRecs, snapEvs := maps.Clone(a.records), maps.Clone(a.events)
	a.mu.RUnlock()
	built := s.buildIndexFrom(bg, a, snapRecs, snapEvs)

	// What lands while the build runs.
	if _, err := s.PutBatch(bg, []memory.Record{
		{ID: "r03", Namespace: lt, Content: "fig tree water version two", Metadata: map[string]any{"type": "note"}},
		{ID: "r99", Namespace: lt, Content: "same words everywhere fig", Strategy: memory.StrategyUserPreference},
	}); err != nil {
		t.Fatal(err)
	}
	for i := 20; i < 40; i++ {
		if err := s.AppendEvents(bg, turn("s1", i, t0.Add(time.Duration(i)*time.Minute))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendEvents(bg, turn("s2", 100, t0.Add(90*time.Second))); err != nil { // in s2's middle
		t.Fatal(err)
	}
	if err := s.AppendEvents(bg, turn("s3", 0, t0.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	s.waitDemotion("u")
	if a.coldN == 0 {
		t.Fatal("no event was demoted: the test does not cover demotion")
	}
	a.wmu.Lock()
	var missing, stale int
	a.mu.RLock()
	for id := range a.events {
		if _, ok := built.docOf[id]; !ok {
			missing++
		}
	}
	for id := range built.docOf {
		if _, ok := a.events[id]; !ok && a.records[id] == nil {
			stale++
		}
	}
	a.mu.RUnlock()
	if missing == 0 || stale == 0 {
		t.Fatalf("the snapshot's build misses %d events and holds %d demoted ones: the test needs both", missing, stale)
	}
	s.catchUp(bg, a, built, snapRecs, snapEvs)
	s.changeIndex(a, func(x *actorIndex) *actorIndex { return built })
	a.wmu.Unlock()
	if a.currentIndex() != built {
		t.Fatal("the caught-up build is not the index searched")
	}
	search := func() [][]string {
		var out [][]string
		for _, q := range equivQueries() {
			hits, err := s.Search(bg, q)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fullSummary(hits))
		}
		return out
	}
	got := search()
	// The reference: an index built from the maps as they are now.
	a.wmu.Lock()
	fresh := s.buildIndex(bg, a)
	s.changeIndex(a, func(x *actorIndex) *actorIndex { return fresh })
	a.wmu.Unlock()
	want := search()
	for i, q := range equivQueries() {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("%+v after catch-up:\n  %s\nbuilt now:\n  %s", q, strings.Join(got[i], "\n  "), strings.Join(want[i], "\n  "))
		}
	}
	if built.ix.Len()-built.ix.Dead() != fresh.ix.Len() {
		t.Fatalf("caught-up index has %d live documents, a build now %d", built.ix.Len()-built.ix.Dead(), fresh.ix.Len())
	}
}

// TestWritesDoNotWaitForBackgroundWork: an actor's writes (a turn's
// events, extracted records) go on while its compaction builds and while
// its demotion writes its rows: each hook below holds the background
// work at that point until the writes have returned. Before, both held
// the actor's writer lock throughout, and the writes here would wait for
// the hook forever (the test fails after 20 s instead).
func TestWritesDoNotWaitForBackgroundWork(t *testing.T) {
	for _, which := range []string{"compaction", "demotion"} {
		t.Run(which, func(t *testing.T) {
			s, err := Open(t.TempDir(), Options{NoFsync: true, SyncInterval: -1, EventWindow: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			paused, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			hook := func() {
				once.Do(func() {
					close(paused)
					<-release
				})
			}
			if which == "compaction" {
				s.testHooks.compactBuilt = hook
			} else {
				s.testHooks.demotionPicked = hook
			}
			t0 := time.Now().Add(-48 * time.Hour).Truncate(time.Second) // within the 30-day event expiry
			i := 0
			write := func() error {
				i++
				ts := t0.Add(time.Duration(i) * time.Second)
				return s.AppendEvents(bg, []memory.Event{
					{ActorID: "u", SessionID: "s", Role: "user", Text: fmt.Sprintf("fig water %d", i), Timestamp: ts},
					{ActorID: "u", SessionID: "s", Role: "assistant", Text: fmt.Sprintf("water the fig %d", i), Timestamp: ts.Add(time.Millisecond)},
				})
			}
			if _, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "fig"}); err != nil {
				t.Fatal(err)
			}
			// Write until the background work reaches its hook, then go on
			// writing while it is held there.
			done := make(chan error, 1)
			go func() {
				for {
					select {
					case <-paused:
					default:
						if err := write(); err != nil {
							done <- err
							return
						}
						if i > 5000 {
							done <- fmt.Errorf("no %s started in %d turns", which, i)
							return
						}
						if i%16 == 0 {
							if _, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "fig"}); err != nil {
								done <- err
								return
							}
						}
						continue
					}
					break
				}
				for range 10 {
					if err := write(); err != nil {
						done <- err
						return
					}
				}
				_, err := s.PutBatch(bg, []memory.Record{{ID: "r1", Namespace: "/main/u/long_term/", Content: "waters the fig on Sundays"}})
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					close(release)
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				close(release)
				<-done
				t.Fatalf("writes waited for the paused %s", which)
			}
			close(release)
			s.waitDemotion("u")
			want := fmt.Sprintf("fig water %d", i)
			hits, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/episodic/", Text: want, TopK: 3})
			if err != nil || len(hits) == 0 || !strings.HasSuffix(hits[0].Record.Content, "user: "+want) {
				t.Fatalf("after the %s, the last turn is not found first: %v, %v", which, hits, err)
			}
		})
	}
}
