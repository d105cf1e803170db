package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/extract"
	"github.com/tendrilai/tendril/internal/memory/gate"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	t     *testing.T
	store memory.Store
	clk   *clock
	path  string
	pool  *pgxpool.Pool // jobs on PostgreSQL ("…@pg" kinds)
	p     *Pipeline
}

// storeKinds are the stores every store-backed test runs against: the
// in-memory fake and the real embedded store.
// "mem@pg" is the in-memory store with the jobs on PostgreSQL.
var storeKinds = []string{"mem", "sqlite", "mem@pg"}

func newClock() *clock { return &clock{t: time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)} }

func openStore(t *testing.T, kind string, clk *clock) memory.Store {
	t.Helper()
	switch strings.TrimSuffix(kind, "@pg") {
	case "mem":
		return newMemStore()
	case "mem+rejections":
		return &rejectingStore{memStore: newMemStore(), rej: map[string]bool{}}
	case "sqlite":
		st, err := sqlitestore.Open(t.TempDir(), sqlitestore.Options{NoFsync: true, EventExpiryDays: -1, Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	t.Fatalf("unknown store %q", kind)
	return nil
}

func newFixture(t *testing.T, kind string) *fixture {
	t.Helper()
	clk := newClock()
	f := &fixture{t: t, store: openStore(t, kind, clk), clk: clk, path: filepath.Join(t.TempDir(), "index", "jobs.db")}
	if onPG(kind) {
		f.pool = pgPool(t)
	}
	f.open()
	t.Cleanup(func() { f.p.Close() })
	return f
}

// forStores runs fn once per store kind as a subtest.
func forStores(t *testing.T, fn func(t *testing.T, f *fixture)) {
	for _, k := range storeKinds {
		t.Run(k, func(t *testing.T) { fn(t, newFixture(t, k)) })
	}
}

// allOf lists every record (any status, events excluded) of an actor of
// agent "main", ordered by ID.
func allOf(t *testing.T, st memory.Store, actor string) []memory.Record {
	t.Helper()
	hits, err := st.Search(ctx, memory.Query{NamespacePath: "/main/" + memory.EscapeSegment(actor) + "/",
		Statuses: []memory.Status{memory.StatusActive, memory.StatusStaged, memory.StatusSuperseded, memory.StatusRejected}})
	if err != nil {
		t.Fatal(err)
	}
	var out []memory.Record
	for _, h := range hits {
		if !isEvent(h.Record) {
			out = append(out, h.Record)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (f *fixture) all(actor string) []memory.Record { return allOf(f.t, f.store, actor) }

func (f *fixture) open() {
	f.t.Helper()
	p, err := New(f.store, f.options())
	if err != nil {
		f.t.Fatal(err)
	}
	f.p = p
}

var ctx = context.Background()

// turn records one user/assistant exchange, one second after the last.
func (f *fixture) turn(actor, session, user string) {
	f.t.Helper()
	f.clk.Add(time.Second)
	err := f.p.RecordTurn(ctx, "main", actor, session, []memory.Event{
		{Role: "user", Text: user},
		{Role: "assistant", Text: "Got it."},
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// drain runs the workers until no extraction job is left and returns how
// many jobs ran.
func (f *fixture) drain() int {
	f.t.Helper()
	return drainP(f.t, f.p)
}

func (f *fixture) active(actor string, s ...memory.Strategy) []memory.Record {
	var out []memory.Record
	for _, r := range f.all(actor) {
		if r.Status == memory.StatusActive && (len(s) == 0 || hasStrategy(s, r.Strategy)) {
			out = append(out, r)
		}
	}
	return out
}

func contents(rs []memory.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Content)
	}
	return out
}

func TestRecordTurnQueuesEveryTwoTurns(t *testing.T) {
	forStores(t, func(t *testing.T, f *fixture) {
		f.turn("u1", "s1", "I only use organic fertiliser")
		if n, _ := f.p.Lag(); n != 0 {
			t.Fatalf("after 1 turn: %d jobs, want 0", n)
		}
		f.turn("u1", "s1", "hello")
		if n, _ := f.p.Lag(); n != 1 {
			t.Fatalf("after 2 turns: %d jobs, want 1", n)
		}
		f.turn("u1", "s1", "call me Jin")
		f.turn("u1", "s1", "thanks!")
		if n, _ := f.p.Lag(); n != 1 {
			t.Fatalf("after 4 turns: %d jobs, want 1 (the waiting job covers the new events)", n)
		}
		if ran := f.drain(); ran != 1 {
			t.Fatalf("ran %d jobs", ran)
		}
		got := contents(f.active("u1"))
		if len(got) != 2 || !strings.Contains(strings.Join(got, "|"), "I only use organic fertiliser") || !strings.Contains(strings.Join(got, "|"), "Call me Jin") {
			t.Fatalf("records %q", got)
		}
		for _, r := range f.active("u1") {
			if r.Namespace != "/main/u1/long_term/" || len(r.Sources) != 1 || r.Importance < 0.7 {
				t.Errorf("record %+v", r)
			}
		}
		// Events reached the store with IDs, actor, session and time.
		evs, _ := f.store.Events(ctx, "u1", "s1")
		if len(evs) != 8 || evs[0].ID == "" || evs[0].ActorID != "u1" || evs[0].SessionID != "s1" || evs[0].Timestamp.IsZero() {
			t.Fatalf("events %+v", evs)
		}
		// Nothing is extracted twice: a second job over the same session is a no-op.
		f.turn("u1", "s1", "ok")
		f.turn("u1", "s1", "ㅋㅋ")
		f.drain()
		if got := f.active("u1"); len(got) != 2 {
			t.Fatalf("after noise: %q", contents(got))
		}
	})
}

func TestExtractionTablesThroughPipeline(t *testing.T) {
	tests := []struct {
		name  string
		turns []string
		want  map[memory.Strategy][]string // active contents by strategy
	}{
		{"en preference+fact+instruction", []string{"I only use organic fertiliser", "I live in Busan", "I have a fig tree", "always answer in Korean"},
			map[memory.Strategy][]string{
				memory.StrategyUserPreference: {"I only use organic fertiliser"},
				memory.StrategySemantic:       {"I live in Busan", "I have a fig tree"},
				memory.StrategyProcedural:     {"Always answer in Korean"},
			}},
		{"ko preference+fact+instruction", []string{"저는 유기농 비료만 써요", "진이라고 불러줘", "부산에 살아요", "무화과나무가 있어요", "항상 한국어로 답해줘"},
			map[memory.Strategy][]string{
				memory.StrategyUserPreference: {"저는 유기농 비료만 써요", "진이라고 불러줘"},
				memory.StrategySemantic:       {"부산에 살아요", "무화과나무가 있어요"},
				memory.StrategyProcedural:     {"항상 한국어로 답해줘"},
			}},
		{"en contradiction supersedes", []string{"I only use organic fertiliser", "I only use chemical fertiliser now", "call me Jin", "Call me Jinny"},
			map[memory.Strategy][]string{memory.StrategyUserPreference: {"I only use chemical fertiliser now", "Call me Jinny"}}},
		{"ko contradiction supersedes", []string{"저는 유기농 비료만 써요", "이제 화학 비료만 써요", "항상 한국어로 답해줘", "always answer in English"},
			map[memory.Strategy][]string{
				memory.StrategyUserPreference: {"이제 화학 비료만 써요"},
				memory.StrategyProcedural:     {"Always answer in English"},
			}},
		{"noise only", []string{"ok", "haha", "thanks!", "ㅋㅋ", "네"}, map[memory.Strategy][]string{}},
	}
	for _, tt := range tests {
		for _, kind := range storeKinds {
			t.Run(kind+"/"+tt.name, func(t *testing.T) {
				f := newFixture(t, kind)
				for _, s := range tt.turns {
					f.turn("u1", "s1", s)
				}
				if err := f.p.Flush(ctx, "main", "u1", "s1"); err != nil {
					t.Fatal(err)
				}
				for _, s := range []memory.Strategy{memory.StrategyUserPreference, memory.StrategySemantic, memory.StrategyProcedural} {
					got := contents(f.active("u1", s))
					if strings.Join(sorted(got), "|") != strings.Join(sorted(tt.want[s]), "|") {
						t.Errorf("%s: got %q, want %q", s, got, tt.want[s])
					}
				}
				// Nothing from noise reaches staging either.
				if st, _ := f.p.Staged(ctx, "u1"); tt.name == "noise only" && len(st) != 0 {
					t.Errorf("noise staged: %q", contents(st))
				}
			})
		}
	}
}

func sorted(ss []string) []string {
	c := append([]string(nil), ss...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c
}

func TestSupersedeKeepsHistory(t *testing.T) {
	forStores(t, func(t *testing.T, f *fixture) {
		f.turn("u1", "s1", "I only use organic fertiliser")
		f.turn("u1", "s1", "ok")
		f.drain()
		f.clk.Add(72 * time.Hour)
		f.turn("u1", "s2", "I only use chemical fertiliser now")
		f.turn("u1", "s2", "thanks")
		f.drain()
		var old, cur memory.Record
		for _, r := range f.all("u1") {
			switch r.Content {
			case "I only use organic fertiliser":
				old = r
			case "I only use chemical fertiliser now":
				cur = r
			}
		}
		if old.Status != memory.StatusSuperseded || cur.Status != memory.StatusActive {
			t.Fatalf("statuses old=%s new=%s", old.Status, cur.Status)
		}
		if old.Metadata[keySupersededBy] != cur.ID {
			t.Errorf("old supersededBy = %v, want %s", old.Metadata[keySupersededBy], cur.ID)
		}
		if ids, _ := cur.Metadata[keySupersedes].([]string); len(ids) != 1 || ids[0] != old.ID {
			t.Errorf("new supersedes = %v, want [%s]", cur.Metadata[keySupersedes], old.ID)
		}
		if at, ok := timeMeta(old.Metadata[keySupersededAt]); !ok || !at.After(old.CreatedAt) {
			t.Errorf("supersededAt %v", old.Metadata[keySupersededAt])
		}
		// Saying the old thing again later re-asserts it: a new active record
		// supersedes the chemical one.
		f.clk.Add(24 * time.Hour)
		f.turn("u1", "s3", "I only use organic fertiliser")
		f.turn("u1", "s3", "ok")
		f.drain()
		act := contents(f.active("u1", memory.StrategyUserPreference))
		if len(act) != 1 || act[0] != "I only use organic fertiliser" {
			t.Fatalf("after re-assertion: %q", act)
		}
		// Re-running extraction over old events (a rerun or a harvest) does not
		// flip the state back: the stale statement merges into history.
		if _, err := f.p.Harvest(ctx, "main", "u1"); err != nil {
			t.Fatal(err)
		}
		act = contents(f.active("u1", memory.StrategyUserPreference))
		if len(act) != 1 || act[0] != "I only use organic fertiliser" {
			t.Fatalf("after harvest: %q", act)
		}
	})
}

// TestQuestionsDoNotSupersede: a user asking about themselves ("Do I live
// in Portland?") states nothing; before, the rules read the question as a
// fact, which then superseded the true one and reached the prompt as
// "[Inferred] Do I live in Portland".
func TestQuestionsDoNotSupersede(t *testing.T) {
	forStores(t, func(t *testing.T, f *fixture) {
		f.turn("u1", "s1", "I live in Seattle")
		f.turn("u1", "s1", "ok thanks")
		f.drain()
		f.clk.Add(time.Hour)
		for _, q := range []string{"Do I live in Portland?", "Do I have a dog", "Is my sister named Alice", "What is my dog called", "제 강아지 이름이 뭐였나요"} {
			f.turn("u1", "s1", q)
		}
		f.turn("u1", "s1", "thanks")
		f.drain()
		var got []string
		for _, r := range f.all("u1") {
			if r.Strategy == memory.StrategyEpisodic {
				continue
			}
			got = append(got, r.Content+" ("+string(r.Status)+")")
		}
		if len(got) != 1 || got[0] != "I live in Seattle (active)" {
			t.Fatalf("records %q, want only the active Seattle fact", got)
		}
	})
}

func TestDuplicatesMerge(t *testing.T) {
	forStores(t, func(t *testing.T, f *fixture) {
		f.turn("u1", "s1", "I have a fig tree")
		f.turn("u1", "s1", "ok")
		f.drain()
		first := f.active("u1")
		if len(first) != 1 {
			t.Fatalf("records %q", contents(first))
		}
		f.clk.Add(time.Hour)
		f.turn("u1", "s2", "i have a FIG tree!!") // same normalised hash
		f.turn("u1", "s2", "I have a fig tree.")  // same again
		f.drain()
		got := f.active("u1")
		if len(got) != 1 {
			t.Fatalf("duplicates not merged: %q", contents(got))
		}
		r := got[0]
		if r.ID != first[0].ID || len(r.Sources) != 3 || !r.UpdatedAt.After(first[0].UpdatedAt) {
			t.Fatalf("merged record %+v", r)
		}
		// High token overlap in the same namespace merges too.
		f.turn("u1", "s3", "I have raised beds with very fast drainage")
		f.turn("u1", "s3", "I have raised beds with fast drainage")
		f.drain()
		if n := len(f.active("u1", memory.StrategySemantic)); n != 2 {
			t.Fatalf("overlap not merged: %q", contents(f.active("u1")))
		}
	})
}

func TestDurableQueueSurvivesCrash(t *testing.T) {
	forStores(t, func(t *testing.T, f *fixture) {
		f.turn("u1", "s1", "I only use organic fertiliser")
		f.turn("u1", "s1", "call me Jin")
		// The process stops before the job ran: the job survives the restart.
		if err := f.p.Close(); err != nil {
			t.Fatal(err)
		}
		f.open()
		if n, _ := f.p.Lag(); n != 1 {
			t.Fatalf("job lost across a restart: lag %d", n)
		}
		// The first run "crashes" after the records were written but before
		// the job completed: River retries it, and the rerun must not
		// duplicate them. (A worker process killed mid-job is rescued by
		// River; jobstest covers that.)
		crashes := 0
		var atCrash []string
		f.p.beforeComplete = func() error {
			if crashes > 0 {
				return nil
			}
			crashes++
			atCrash = contents(f.active("u1"))
			return errors.New("crash before commit")
		}
		if ran := f.drain(); ran != 1 {
			t.Fatalf("ran %d jobs to completion, want 1", ran)
		}
		if crashes != 1 || len(atCrash) != 2 {
			t.Fatalf("crashes %d, records at the crash %q; want one crash after both records were written", crashes, atCrash)
		}
		got := f.active("u1")
		if len(got) != 2 {
			t.Fatalf("after rerun: %q", contents(got))
		}
		for _, r := range got {
			if len(r.Sources) != 1 {
				t.Errorf("%q has sources %v", r.Content, r.Sources)
			}
		}
		if n, _ := f.p.Lag(); n != 0 {
			t.Fatalf("lag %d after completion", n)
		}
		rows, err := f.p.q.jobs.List(ctx, river.NewJobListParams().Kinds(KindExtract).States(rivertype.JobStateCompleted))
		if err != nil || len(rows) != 1 || rows[0].Attempt != 2 || len(rows[0].Errors) != 1 || !strings.Contains(rows[0].Errors[0].Error, "crash before commit") {
			t.Fatalf("completed jobs %+v (err %v); want one, completed on attempt 2 after the crash", rows, err)
		}
	})
}

// failingExtractor fails a set number of times, then delegates to Rules.
type failingExtractor struct {
	mu    sync.Mutex
	fails int
}

func (e *failingExtractor) Extract(ctx context.Context, evs []memory.Event) ([]extract.Candidate, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fails > 0 {
		e.fails--
		return nil, errors.New("extractor down")
	}
	return extract.Rules{}.Extract(ctx, evs)
}

func TestFailedJobRetriesWithBackoffThenDies(t *testing.T) {
	m := newMemStore()
	clk := &clock{t: time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)}
	ex := &failingExtractor{fails: 1}
	p, err := New(m, Options{JobsPath: filepath.Join(t.TempDir(), "jobs.db"), Now: clk.Now, Extractor: ex, MaxAttempts: 2, JobsOptions: fastJobs})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, s := range []string{"I live in Busan", "ok"} {
		if err := p.RecordTurn(ctx, "main", "u1", "s1", []memory.Event{{Role: "user", Text: s}}); err != nil {
			t.Fatal(err)
		}
	}
	if ran := drainP(t, p); ran != 1 {
		t.Fatalf("ran %d", ran)
	}
	if len(m.all("u1")) != 1 {
		t.Fatalf("records %q", contents(m.all("u1")))
	}
	rows, err := p.q.jobs.List(ctx, river.NewJobListParams().Kinds(KindExtract).States(rivertype.JobStateCompleted))
	if err != nil || len(rows) != 1 {
		t.Fatalf("completed %v %v", rows, err)
	}
	done := rows[0]
	if done.Attempt != 2 || len(done.Errors) != 1 || !strings.Contains(done.Errors[0].Error, "extractor down") {
		t.Fatalf("job %+v; want completed on attempt 2 after the extractor's error", done)
	}
	// The retry waited for its backoff (1² s after the first attempt).
	if done.AttemptedAt.Sub(done.Errors[0].At) < time.Second-50*time.Millisecond {
		t.Fatalf("retried at %v, %v after the failure: no backoff", done.AttemptedAt, done.AttemptedAt.Sub(done.Errors[0].At))
	}
	// A job that keeps failing is discarded after MaxAttempts and kept
	// with its errors.
	ex.mu.Lock()
	ex.fails = 10
	ex.mu.Unlock()
	for _, s := range []string{"I have a fig tree", "ok"} {
		p.RecordTurn(ctx, "main", "u1", "s1", []memory.Event{{Role: "user", Text: s}})
	}
	startJobs(t, p)
	waitDepth(t, p, 0)
	stopJobs(t, p)
	if n, _ := p.Lag(); n != 0 {
		t.Fatalf("lag %d, want the discarded job excluded", n)
	}
	dead, err := p.q.jobs.List(ctx, river.NewJobListParams().Kinds(KindExtract).States(rivertype.JobStateDiscarded))
	if err != nil || len(dead) != 1 || len(dead[0].Errors) != 2 || !strings.Contains(dead[0].Errors[1].Error, "extractor down") {
		t.Fatalf("discarded jobs %+v, err %v", dead, err)
	}
}

func TestIdleQueuesSummary(t *testing.T) {
	forStores(t, func(t *testing.T, f *fixture) {
		f.turn("u1", "s1", "My tomatoes have yellow leaves")
		f.turn("u1", "s1", "I only use organic fertiliser")
		f.turn("u1", "s1", "what should I do?")
		f.drain()
		if n, _ := f.p.SweepIdle(ctx); n != 0 {
			t.Fatalf("idle before IdleAfter: %d", n)
		}
		f.clk.Add(11 * time.Minute)
		if n, _ := f.p.SweepIdle(ctx); n != 1 {
			t.Fatalf("idle sweep enqueued %d", n)
		}
		if n, _ := f.p.SweepIdle(ctx); n != 0 {
			t.Fatalf("second sweep enqueued %d", n)
		}
		f.drain()
		sums := f.active("u1", memory.StrategySummary)
		if len(sums) != 1 {
			t.Fatalf("summaries: %q (all: %q)", contents(sums), contents(f.all("u1")))
		}
		s := sums[0]
		if s.ID != SummaryID("main", "u1", "s1") || SummaryID("main", "u1", "s2") == s.ID || SummaryID("main", "u2", "s1") == s.ID {
			t.Fatalf("summary ID %s", s.ID)
		}
		if s.Namespace != "/main/u1/episodic/s1/" || !strings.Contains(s.Content, "yellow leaves") || s.Metadata["type"] != "summary" {
			t.Fatalf("summary %+v", s)
		}
		// A later turn and idle period update the same summary record.
		f.turn("u1", "s1", "I have a fig tree too")
		f.clk.Add(11 * time.Minute)
		f.p.SweepIdle(ctx)
		f.drain()
		sums = f.active("u1", memory.StrategySummary)
		if len(sums) != 1 || sums[0].ID != s.ID || !strings.Contains(sums[0].Content, "fig") {
			t.Fatalf("summary not updated in place: %q", contents(sums))
		}
		if len(f.active("u1", memory.StrategySemantic)) != 2 { // tomatoes' leaves, fig tree
			t.Fatalf("idle job did not extract the pending turn: %q", contents(f.all("u1")))
		}
	})
}

func TestWorkersRunInBackground(t *testing.T) {
	m := newMemStore()
	p, err := New(m, Options{Home: t.TempDir(), JobsOptions: fastJobs})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Start(ctx)
	p.Start(ctx) // no-op
	for i := 0; i < 10; i++ {
		p.RecordTurn(ctx, "main", "u1", fmt.Sprint("s", i%3), []memory.Event{{Role: "user", Text: fmt.Sprintf("I have %d fig trees", i+1)}})
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, _ := p.Lag()
		if n == 0 && len(m.all("u1")) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workers did not drain the queue: lag %d", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.Stop()
	p.Stop()
}

func TestRecordTurnRejectsBadInput(t *testing.T) {
	forStores(t, func(t *testing.T, f *fixture) {
		for _, c := range [][3]string{{"", "u", "s"}, {"main", "", "s"}, {"main", "u", ""}, {"main", "u\n1", "s"}, {"main", strings.Repeat("x", 300), "s"}} {
			if err := f.p.RecordTurn(ctx, c[0], c[1], c[2], []memory.Event{{Role: "user", Text: "hi"}}); !errors.Is(err, ErrInvalid) {
				t.Errorf("%q: err %v, want ErrInvalid", c, err)
			}
		}
		if err := f.p.RecordTurn(ctx, "main", "u1", "s1", []memory.Event{{ActorID: "u2", Role: "user", Text: "hi"}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("foreign actor: %v", err)
		}
		if _, err := New(nil, Options{}); err == nil {
			t.Error("New(nil) succeeded")
		}
		if _, err := New(newMemStore(), Options{}); err == nil {
			t.Error("New without a jobs path succeeded")
		}
		if _, err := New(newMemStore(), Options{Home: t.TempDir(), Thresholds: gate.Thresholds{Stage: 0.9, Store: 0.5}}); err == nil {
			t.Error("New with inverted thresholds succeeded")
		}
	})
}

func TestActorsAreIsolated(t *testing.T) {
	forStores(t, func(t *testing.T, f *fixture) {
		f.turn("12", "s1", "I only use organic fertiliser")
		f.turn("12", "s1", "ok")
		f.turn("123", "s1", "I only use chemical fertiliser")
		f.turn("123", "s1", "ok")
		f.drain()
		a, b := f.active("12"), f.active("123")
		if len(a) != 1 || len(b) != 1 || a[0].Status != memory.StatusActive || b[0].Status != memory.StatusActive {
			t.Fatalf("actor 12: %q, actor 123: %q — one must not supersede the other", contents(a), contents(b))
		}
	})
}

func TestListerAndBatchFastPaths(t *testing.T) {
	ls := &listingStore{memStore: newMemStore()}
	clk := newClock()
	p, err := New(ls, Options{JobsPath: filepath.Join(t.TempDir(), "jobs.db"), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, s := range []string{"I live in Busan", "I have a fig tree"} {
		if err := p.RecordTurn(ctx, "main", "u1", "s1", []memory.Event{{Role: "user", Text: s}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx, "main", "u1", "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Staged(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if ls.lists == 0 || ls.searches != 0 {
		t.Fatalf("lists %d, searches %d: listing must go through Lister", ls.lists, ls.searches)
	}
	if ls.batches != 1 {
		t.Fatalf("%d batches, want the extraction's writes in one PutBatch", ls.batches)
	}
	if got := len(ls.all("u1")); got != 3 { // two facts and the summary
		t.Fatalf("records %q", contents(ls.all("u1")))
	}
}

func TestInMemoryJobDatabase(t *testing.T) {
	p, err := New(newMemStore(), Options{JobsPath: ":memory:", JobsOptions: fastJobs})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := 0; i < 2; i++ {
		if err := p.RecordTurn(ctx, "main", "u1", "s1", []memory.Event{{Role: "user", Text: "I live in Busan"}}); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := p.Lag(); n != 1 {
		t.Fatalf("lag %d", n)
	}
	if ran := drainP(t, p); ran != 1 {
		t.Fatalf("ran %d", ran)
	}
}
