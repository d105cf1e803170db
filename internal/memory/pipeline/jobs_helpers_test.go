package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tendrilai/tendril/internal/jobs"
	"github.com/tendrilai/tendril/internal/pg"
	"github.com/tendrilai/tendril/internal/testenv"
)

// fastJobs make River fetch promptly in tests.
var fastJobs = jobs.Options{FetchPollInterval: 50 * time.Millisecond, FetchCooldown: 5 * time.Millisecond}

// onPG reports whether a fixture kind puts the jobs on PostgreSQL
// ("mem@pg": the in-memory store, River and the pipeline's tables in a
// fresh schema).
func onPG(kind string) bool { return strings.HasSuffix(kind, "@pg") }

// pgPool opens a pool on a fresh schema for the test.
func pgPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	url := testenv.PostgresSchema(t)
	pool, err := pg.Open(context.Background(), url, pg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// options are the base Options of a pipeline on f's job database: the
// SQLite file, or a new Queue (another instance) on f's pool.
func (f *fixture) options() Options {
	f.t.Helper()
	o := Options{Now: f.clk.Now, JobsOptions: fastJobs}
	if f.pool == nil {
		o.JobsPath = f.path
		return o
	}
	q, err := jobs.OpenPostgres(context.Background(), f.pool, fastJobs)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { q.Close() })
	o.Jobs = q
	return o
}

// startJobs runs p's workers (its Queue, whoever owns it).
func startJobs(t *testing.T, p *Pipeline) {
	t.Helper()
	p.Start(context.Background())
	if !p.q.owned {
		if err := p.q.jobs.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// stopJobs stops p's workers, waiting for the jobs running.
func stopJobs(t *testing.T, p *Pipeline) {
	t.Helper()
	p.Stop()
	if !p.q.owned {
		if err := p.q.jobs.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// drainP runs p's workers until no extraction job is live, stops them and
// returns how many jobs they finished.
func drainP(t *testing.T, p *Pipeline) int {
	t.Helper()
	before := p.ran.Load()
	startJobs(t, p)
	waitDepth(t, p, 0)
	stopJobs(t, p)
	return int(p.ran.Load() - before)
}

// waitDepth waits (up to a minute) until p's Depth is n.
func waitDepth(t *testing.T, p *Pipeline, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got, _, err := p.Depth(context.Background())
		if err == nil && got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Depth %d (err %v) after a minute, want %d", got, err, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// riverJobsOf counts River's rows (any kind, any state) whose args name
// the actor.
func riverJobsOf(t *testing.T, p *Pipeline, actor string) int {
	t.Helper()
	var n int
	var err error
	if db := p.q.jobs.DB(); db != nil {
		err = db.QueryRow(`SELECT COUNT(*) FROM river_job WHERE json_extract(args, '$.actor_id') = ?`, actor).Scan(&n)
	} else {
		err = p.q.jobs.Pool().QueryRow(context.Background(), `SELECT COUNT(*) FROM river_job WHERE args->>'actor_id' = $1`, actor).Scan(&n)
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}
