package pipeline

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/gate"
)

// Back-to-back turns while an extraction job waits insert no River job:
// the session holds one waiting memory.extract job and one memory.idle job,
// and the waiting job covers every turn recorded before it runs.
func TestWaitingJobCoalescesTurns(t *testing.T) {
	forStores(t, func(t *testing.T, f *fixture) {
		facts := []string{"I only use organic fertiliser", "call me Jin", "I live in Busan", "my sister is called Mina"}
		for i := 0; i < 20; i++ {
			f.turn("u1", "s1", facts[i%len(facts)])
			if i >= 1 {
				if n := riverJobsOf(t, f.p, "u1"); n != 2 {
					t.Fatalf("after %d turns: %d River jobs of the actor, want 2 (one extraction, one idle timer)", i+1, n)
				}
			}
		}
		if ran := f.drain(); ran != 1 {
			t.Fatalf("ran %d jobs, want 1", ran)
		}
		got := strings.Join(contents(f.active("u1")), "|")
		for _, want := range []string{"organic fertiliser", "Call me Jin", "Busan", "Mina"} {
			if !strings.Contains(got, want) {
				t.Errorf("records %q lack %q", got, want)
			}
		}
	})
}

// Turns recorded while the session's extraction job runs (after it read
// its events) make another job run, which extracts them.
func TestTurnDuringRunningJobQueuesAnother(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind)
			ex := newBlocking(false)
			p := f.openWith(t, ex, gate.Thresholds{})
			rec := func(text string) {
				t.Helper()
				f.clk.Add(time.Second)
				if err := p.RecordTurn(ctx, "main", "u1", "s1", []memory.Event{{Role: "user", Text: text}, {Role: "assistant", Text: "Got it."}}); err != nil {
					t.Fatal(err)
				}
			}
			rec("I only use organic fertiliser")
			rec("hello")
			startJobs(t, p)
			defer stopJobs(t, p)
			ex.wait(t) // the first job has begun and read the first two turns
			rec("call me Jin")
			rec("I live in Busan")
			ex.release <- struct{}{} // first job finishes
			ex.wait(t)               // a second job starts, for the turns above
			close(ex.release)
			waitDepth(t, p, 0)
			got := strings.Join(contents(activeOf(t, f.store, "u1")), "|")
			for _, want := range []string{"organic fertiliser", "Call me Jin", "Busan"} {
				if !strings.Contains(got, want) {
					t.Errorf("records %q lack %q", got, want)
				}
			}
			// The extraction cursor reached the last event: nothing is left.
			evs, err := f.store.Events(ctx, "u1", "s1")
			if err != nil {
				t.Fatal(err)
			}
			cur, err := p.q.cursor(ctx, "main", "u1", "s1")
			if err != nil {
				t.Fatal(err)
			}
			if last := evs[len(evs)-1]; cur.CursorID != last.ID {
				t.Errorf("cursor %q, want the last event %q", cur.CursorID, last.ID)
			}
		})
	}
}

// An idle job lost (here: deleted from River's table) is inserted again
// when the pipeline starts, for every session still waiting for its idle
// extraction.
func TestLostIdleJobRecoveredAtStart(t *testing.T) {
	f := newFixture(t, "sqlite")
	f.turn("u1", "s1", "I only use organic fertiliser")
	if _, err := f.p.q.jobs.DB().Exec(`DELETE FROM river_job WHERE kind = ?`, KindIdle); err != nil {
		t.Fatal(err)
	}
	f.turn("u1", "s1", "hello") // the session row says the idle job was queued: no insert
	if n := countKind(t, f.p, KindIdle); n != 0 {
		t.Fatalf("%d idle jobs before Start, want 0", n)
	}
	f.p.Start(context.Background())
	f.p.Stop()
	if n := countKind(t, f.p, KindIdle); n != 1 {
		t.Fatalf("%d idle jobs after Start, want 1", n)
	}
}

func countKind(t *testing.T, p *Pipeline, kind string) int {
	t.Helper()
	rows, err := p.q.jobs.List(ctx, river.NewJobListParams().Kinds(kind).First(1000))
	if err != nil {
		t.Fatal(err)
	}
	return len(rows)
}

func activeOf(t *testing.T, st memory.Store, actor string) []memory.Record {
	var out []memory.Record
	for _, r := range allOf(t, st, actor) {
		if r.Status == memory.StatusActive {
			out = append(out, r)
		}
	}
	return out
}

// A job database from before queued_gen and idle_queued_gen gets the
// columns when it is opened, and its sessions queue their jobs again.
func TestOldJobDatabaseGetsQueuedGen(t *testing.T) {
	f := newFixture(t, "sqlite")
	f.turn("u1", "s1", "I only use organic fertiliser")
	f.p.Close()
	db, err := sql.Open("sqlite", "file:"+f.path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`ALTER TABLE memory_pipeline_sessions DROP COLUMN queued_gen`, `ALTER TABLE memory_pipeline_sessions DROP COLUMN idle_queued_gen`, `DELETE FROM river_job`} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	f.open()
	f.turn("u1", "s1", "call me Jin")
	if n := countKind(t, f.p, KindExtract); n != 1 {
		t.Fatalf("%d extraction jobs, want 1", n)
	}
	if n := countKind(t, f.p, KindIdle); n != 1 {
		t.Fatalf("%d idle jobs, want 1", n)
	}
	if ran := f.drain(); ran != 1 {
		t.Fatalf("ran %d jobs", ran)
	}
	if got := strings.Join(contents(f.active("u1")), "|"); !strings.Contains(got, "Call me Jin") || !strings.Contains(got, "organic fertiliser") {
		t.Fatalf("records %q", got)
	}
}

// A session's turn-count jobs are spaced by ExtractMinInterval: the first
// runs at once, one queued sooner after it waits for the interval to end,
// one queued later runs at once again; sessions are spaced apart.
func TestExtractMinIntervalSpacesJobs(t *testing.T) {
	q := &queue{minGap: 2 * time.Second}
	k, other := sessionKey{"main", "u1", "s1"}, sessionKey{"main", "u1", "s2"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if at := q.extractAt(k, t0); !at.IsZero() {
		t.Fatalf("first job at %v, want at once", at)
	}
	q.scheduled(k, time.Time{}, t0)
	if at := q.extractAt(k, t0.Add(500*time.Millisecond)); !at.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("job 0.5 s later at %v, want %v", at, t0.Add(2*time.Second))
	}
	q.scheduled(k, t0.Add(2*time.Second), t0.Add(500*time.Millisecond))
	if at := q.extractAt(k, t0.Add(3*time.Second)); !at.Equal(t0.Add(4 * time.Second)) {
		t.Errorf("job after a spaced one at %v, want %v", at, t0.Add(4*time.Second))
	}
	if at := q.extractAt(k, t0.Add(5*time.Second)); !at.IsZero() {
		t.Errorf("job after the interval at %v, want at once", at)
	}
	if at := q.extractAt(other, t0.Add(time.Second)); !at.IsZero() {
		t.Errorf("another session's job at %v, want at once", at)
	}
	if at := (&queue{minGap: -1}).extractAt(k, t0); !at.IsZero() {
		t.Errorf("disabled: job at %v, want at once", at)
	}
}

// With back-to-back turns the second turn-count job of a session is
// inserted scheduled in the future (it coalesces the turns that arrive
// while it waits).
func TestSpacedJobIsScheduled(t *testing.T) {
	f := newFixture(t, "sqlite")
	p := f.p
	rec := func(text string) {
		t.Helper()
		if err := p.RecordTurn(ctx, "main", "u1", "s1", []memory.Event{{Role: "user", Text: text}, {Role: "assistant", Text: "Got it."}}); err != nil {
			t.Fatal(err)
		}
	}
	rec("I only use organic fertiliser")
	rec("hello")
	// The first job begins (advancing the generation) without running.
	var first ExtractArgs
	var raw string
	if err := p.q.jobs.DB().QueryRowContext(ctx, `SELECT json(args) FROM river_job WHERE kind = ? ORDER BY id LIMIT 1`, KindExtract).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(raw), &first); err != nil {
		t.Fatal(err)
	}
	if _, err := p.q.begin(ctx, first); err != nil {
		t.Fatal(err)
	}
	rec("call me Jin")
	rec("I live in Busan")
	var n int
	if err := p.q.jobs.DB().QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE kind = ? AND state = 'scheduled'`, KindExtract).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d scheduled extraction jobs, want 1 (the second, spaced from the first)", n)
	}
}

// The SQLite transactions' queries are prepared once and reused: after a
// few turns the cache holds the turn-counting statements, and the counts
// they keep are right.
func TestStatementsPreparedOnce(t *testing.T) {
	f := newFixture(t, "sqlite")
	for i := 0; i < 5; i++ {
		f.turn("u1", "s1", "I live in Busan")
	}
	f.p.q.stmts.mu.Lock()
	n := len(f.p.q.stmts.stmts)
	f.p.q.stmts.mu.Unlock()
	if n == 0 {
		t.Fatal("no statement prepared after 5 turns")
	}
	var pending int
	if err := f.p.q.jobs.DB().QueryRowContext(ctx, `SELECT pending_turns FROM memory_pipeline_sessions WHERE actor_id = 'u1'`).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	// Turn 2 queued the extraction (pending reset to 0); turns 3–5 count
	// while it waits.
	if pending != 3 {
		t.Errorf("pending_turns %d, want 3", pending)
	}
}
