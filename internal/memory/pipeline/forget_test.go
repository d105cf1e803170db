package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/extract"
	"github.com/tendrilai/tendril/internal/memory/gate"
)

// blockingExtractor is extract.Rules that first announces the call on
// started and then waits for release. With honourCtx it gives up when its
// context ends (as an LLM call does); without, it ignores cancellation, so
// only the forget epoch can keep its result out of the store.
type blockingExtractor struct {
	started   chan struct{}
	release   chan struct{}
	honourCtx bool
}

func newBlocking(honourCtx bool) *blockingExtractor {
	return &blockingExtractor{started: make(chan struct{}, 10), release: make(chan struct{}), honourCtx: honourCtx}
}

func (e *blockingExtractor) Extract(ctx context.Context, evs []memory.Event) ([]extract.Candidate, error) {
	e.started <- struct{}{}
	if e.honourCtx {
		select {
		case <-e.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else {
		<-e.release
	}
	return extract.Rules{}.Extract(context.WithoutCancel(ctx), evs)
}

func (e *blockingExtractor) wait(t *testing.T) {
	t.Helper()
	select {
	case <-e.started:
	case <-time.After(10 * time.Second):
		t.Fatal("extraction did not start")
	}
}

// openWith opens another Pipeline on f's job database and store (as a
// second process would) with extractor ex.
func (f *fixture) openWith(t *testing.T, ex extract.Extractor, th gate.Thresholds) *Pipeline {
	t.Helper()
	o := f.options()
	o.Extractor, o.HarvestExtractor, o.Thresholds = ex, ex, th
	p, err := New(f.store, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// nothingOf fails unless the store and the job database hold nothing of
// actor: no record of any status, no event, no job, no rejection.
func (f *fixture) nothingOf(t *testing.T, p *Pipeline, actor string) {
	t.Helper()
	if recs := f.all(actor); len(recs) != 0 {
		t.Errorf("%s has %d records after forget: %q", actor, len(recs), contents(recs))
	}
	if evs, err := f.store.Events(ctx, actor, ""); err != nil || len(evs) != 0 {
		t.Errorf("%s has %d events after forget (err %v)", actor, len(evs), err)
	}
	for _, table := range []string{"sessions", "harvest", "rejections"} {
		var n int
		if err := p.q.db().queryRow(ctx, `SELECT COUNT(*) FROM memory_pipeline_`+table+` WHERE actor_id = ?`, actor).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d rows of %s after forget (err %v)", table, n, actor, err)
		}
	}
	if n := riverJobsOf(t, p, actor); n != 0 {
		t.Errorf("%d River jobs of %s after forget", n, actor)
	}
}

// A job queued before Forget never runs for the forgotten actor; the other
// actor's job runs. Forget also removes staged records and rejection
// hashes, wherever they are kept.
func TestForgetQueuedJobAndStaging(t *testing.T) {
	for _, kind := range []string{"mem", "mem+rejections", "sqlite", "mem@pg"} {
		t.Run(kind, func(t *testing.T) {
			f := stagingFixture(t, kind) // everything extracted is staged
			for _, u := range []string{"u1", "u2"} {
				f.turn(u, "s1", "I like rock music")
				f.turn(u, "s1", "I like jazz")
				f.drain()
				st, err := f.p.Staged(ctx, u)
				if err != nil || len(st) != 2 {
					t.Fatalf("%s staged %q, %v", u, contents(st), err)
				}
				if err := f.p.Reject(ctx, st[1].ID); err != nil {
					t.Fatal(err)
				}
			}
			// Another exchange each queues a job that is still waiting at Forget.
			for _, u := range []string{"u1", "u2"} {
				f.turn(u, "s2", "call me Jin")
				f.turn(u, "s2", "I only use organic fertiliser")
			}
			rejected := ""
			for _, r := range f.all("u1") {
				if r.Status == memory.StatusRejected {
					rejected = r.Content
				}
			}
			if rej, err := f.p.rejected(ctx, "u1", rejected); err != nil || !rej {
				t.Fatalf("u1's rejection of %q not recorded (err %v)", rejected, err)
			}
			if n, _, err := f.p.Depth(ctx); err != nil || n != 2 {
				t.Fatalf("Depth = %d, %v; want a queued job per actor", n, err)
			}
			if err := f.p.Forget(ctx, "u1"); err != nil {
				t.Fatal(err)
			}
			if n, _, _ := f.p.Depth(ctx); n != 1 {
				t.Fatalf("Depth after forget = %d, want u2's job only", n)
			}
			if ran := f.drain(); ran != 1 {
				t.Fatalf("ran %d jobs after forget, want 1 (u2's)", ran)
			}
			f.nothingOf(t, f.p, "u1")
			if rej, err := f.p.rejected(ctx, "u1", rejected); err != nil || rej {
				t.Errorf("u1's rejection of %q survived forget (err %v)", rejected, err)
			}
			if rej, err := f.p.rejected(ctx, "u2", rejected); err != nil || !rej {
				t.Errorf("u2's rejection of %q was lost (err %v)", rejected, err)
			}
			if st, _ := f.p.Staged(ctx, "u2"); len(st) != 3 { // jazz or rock, Jin, fertiliser
				t.Errorf("u2 staged %q after forgetting u1", contents(st))
			}
			// The forgotten actor starts afresh: new turns are learned again.
			f.turn("u1", "s3", "call me Jin")
			f.turn("u1", "s3", "ok")
			f.drain()
			if st, _ := f.p.Staged(ctx, "u1"); len(st) != 1 {
				t.Errorf("after forget, new turns of u1 staged %q", contents(st))
			}
		})
	}
}

// An extraction blocked mid-way when Forget runs — a worker's job, a
// Flush, a Harvest — writes nothing once it continues, whether its
// extractor notices the cancellation or not; Forget does not wait for it.
func TestForgetDuringExtraction(t *testing.T) {
	ops := map[string]func(p *Pipeline) error{
		"job": func(p *Pipeline) error {
			before := p.ran.Load()
			startJobs(t, p)
			defer stopJobs(t, p)
			deadline := time.Now().Add(30 * time.Second)
			for p.ran.Load() == before {
				if time.Now().After(deadline) {
					return errNoJob
				}
				time.Sleep(5 * time.Millisecond)
			}
			return nil
		},
		"flush":   func(p *Pipeline) error { return p.Flush(ctx, "main", "u1", "s1") },
		"harvest": func(p *Pipeline) error { _, err := p.Harvest(ctx, "main", "u1"); return err },
	}
	for _, kind := range storeKinds {
		for name, op := range ops {
			for _, honour := range []bool{false, true} {
				t.Run(kind+"/"+name+"/honourCtx="+map[bool]string{false: "no", true: "yes"}[honour], func(t *testing.T) {
					f := newFixture(t, kind)
					ex := newBlocking(honour)
					p := f.openWith(t, ex, gate.Thresholds{})
					f.turn("u1", "s1", "I only use organic fertiliser")
					f.turn("u1", "s1", "call me Jin")
					done := make(chan error, 1)
					go func() { done <- op(p) }()
					ex.wait(t)

					forgot := make(chan error, 1)
					go func() { forgot <- p.Forget(ctx, "u1") }()
					select {
					case err := <-forgot:
						if err != nil {
							t.Fatal(err)
						}
					case <-time.After(10 * time.Second):
						t.Fatal("Forget waited for the blocked extraction")
					}
					close(ex.release)
					select {
					case err := <-done:
						if err != nil {
							t.Fatalf("%s after forget: %v", name, err)
						}
					case <-time.After(10 * time.Second):
						t.Fatalf("%s did not return", name)
					}
					f.nothingOf(t, p, "u1")
					if n, _, _ := p.Depth(ctx); n != 0 {
						t.Errorf("Depth %d after the dropped job", n)
					}
					// Nothing comes back later either.
					f.clk.Add(time.Hour)
					if _, err := p.SweepIdle(ctx); err != nil {
						t.Fatal(err)
					}
					if ran := drainP(t, p); ran != 0 {
						t.Errorf("%d jobs ran after forget", ran)
					}
					f.nothingOf(t, p, "u1")
				})
			}
		}
	}
}

var errNoJob = errorString("no job was ready")

type errorString string

func (e errorString) Error() string { return string(e) }

// Forget in another process (a second Pipeline on the same job database,
// which cannot cancel this one's extraction) still keeps the blocked
// extraction's result out of the store, and the other actor's extraction,
// blocked beside it, is written as usual.
func TestForgetFromAnotherProcess(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind)
			ex := newBlocking(false)
			o := f.options()
			o.Extractor, o.HarvestExtractor, o.Workers = ex, ex, 2
			server, err := New(f.store, o)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { server.Close() })
			for _, u := range []string{"u1", "u2"} {
				f.turn(u, "s1", "I only use organic fertiliser")
				f.turn(u, "s1", "call me Jin")
			}
			startJobs(t, server)
			ex.wait(t)
			ex.wait(t) // both actors' jobs are mid-extraction
			cli, err := New(f.store, f.options())
			if err != nil {
				t.Fatal(err)
			}
			if err := cli.Forget(ctx, "u1"); err != nil {
				t.Fatal(err)
			}
			cli.Close()
			close(ex.release)
			deadline := time.Now().Add(10 * time.Second)
			for {
				if n, _, err := server.Depth(ctx); err == nil && n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("u2's job did not complete")
				}
				time.Sleep(5 * time.Millisecond)
			}
			stopJobs(t, server)
			f.nothingOf(t, server, "u1")
			if got := f.active("u2"); len(got) != 2 {
				t.Errorf("u2's records %q, want both facts", contents(got))
			}
		})
	}
}

// Depth counts live jobs and the age of the oldest; Lag reports the same.
func TestDepth(t *testing.T) {
	f := newFixture(t, "mem")
	if n, age, err := f.p.Depth(ctx); err != nil || n != 0 || age != 0 {
		t.Fatalf("empty Depth = %d, %v, %v", n, age, err)
	}
	f.turn("u1", "s1", "I live in Busan")
	f.turn("u1", "s1", "ok") // queues a job at the clock's time
	f.clk.Add(90 * time.Second)
	n, age, err := f.p.Depth(ctx)
	if err != nil || n != 1 || age != 90*time.Second {
		t.Fatalf("Depth = %d, %v, %v; want 1, 1m30s", n, age, err)
	}
	if ln, lage := f.p.Lag(); ln != n || lage != age {
		t.Fatalf("Lag = %d, %v; Depth %d, %v", ln, lage, n, age)
	}
	f.drain()
	if n, age, _ := f.p.Depth(ctx); n != 0 || age != 0 {
		t.Fatalf("Depth after drain = %d, %v", n, age)
	}
	f.p.q.close()
	if _, _, err := f.p.Depth(ctx); err == nil {
		t.Fatal("Depth on a closed job database succeeded")
	}
}
