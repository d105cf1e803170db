package pgstate_test

import (
	"context"
	"sync"
	"testing"

	"github.com/tendrilai/tendril/internal/pg"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/state/pgstate"
	"github.com/tendrilai/tendril/internal/state/statetest"
	"github.com/tendrilai/tendril/internal/testenv"
)

// harness opens each store on a fresh schema; Reopen opens a second pool
// on the same schema, as a second `tendril serve` instance would.
func harness(opts pgstate.Options) statetest.Harness {
	var mu sync.Mutex
	urls := map[state.Backend]string{}
	open := func(t *testing.T, url string) state.Backend {
		ctx := context.Background()
		pool, err := pg.Open(ctx, url, pg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		s, err := pgstate.New(ctx, pool, opts)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		urls[s] = url
		mu.Unlock()
		return s
	}
	return statetest.Harness{
		Open: func(t *testing.T) state.Backend { return open(t, testenv.PostgresSchema(t)) },
		Reopen: func(t *testing.T, b state.Backend) state.Backend {
			mu.Lock()
			url := urls[b]
			mu.Unlock()
			return open(t, url)
		},
		Shared: true,
	}
}

func TestConformance(t *testing.T) {
	statetest.Exercise(t, harness(pgstate.Options{}))
}

func TestConformanceAsyncCommit(t *testing.T) {
	statetest.Exercise(t, harness(pgstate.Options{AsyncCommit: true}))
}

// TestRows checks the tables themselves: old changes are deleted in the
// update that pushes them out, version counts updates, level follows the
// stored level, and Forget removes the changes with the row.
func TestRows(t *testing.T) {
	ctx := context.Background()
	pool, err := pg.Open(ctx, testenv.PostgresSchema(t), pg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st, err := pgstate.New(ctx, pool, pgstate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A second New on the same database applies nothing again.
	if _, err := pgstate.New(ctx, pool, pgstate.Options{}); err != nil {
		t.Fatal(err)
	}
	c := statetest.NewClock()
	e, err := state.New(st, state.Options{Now: c.Now, HistoryLimit: 5})
	if err != nil {
		t.Fatal(err)
	}
	var ev state.Event
	for range 30 {
		if ev, err = e.Apply(ctx, "a", 0, state.Stimulus{Category: state.Threat, Intensity: 1}); err != nil {
			t.Fatal(err)
		}
	}
	var changes, minSeq, maxSeq, lastSeq, version int64
	var level string
	if err := pool.QueryRow(ctx, `SELECT count(*), min(seq), max(seq) FROM state_changes WHERE actor = 'a'`).Scan(&changes, &minSeq, &maxSeq); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT version, level, last_seq FROM state_actors WHERE actor = 'a'`).Scan(&version, &level, &lastSeq); err != nil {
		t.Fatal(err)
	}
	if changes != 5 || maxSeq != lastSeq || minSeq != lastSeq-4 || version != 30 || level != ev.Level.String() {
		t.Fatalf("rows: %d changes seq %d..%d, last_seq %d, version %d, level %s (want 5, last 5, 30, %s)",
			changes, minSeq, maxSeq, lastSeq, version, level, ev.Level)
	}
	if lastSeq < 30 {
		t.Fatalf("last_seq %d < 30 updates: changes were not all numbered", lastSeq)
	}
	if err := e.Forget(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM state_changes`).Scan(&changes); err != nil || changes != 0 {
		t.Fatalf("after Forget: %d changes, %v", changes, err)
	}
	var applied []string
	if applied, _, err = pg.Status(ctx, pool, pgstate.Migrations()); err != nil || len(applied) != len(pgstate.Migrations()) {
		t.Fatalf("migrations applied %q, %v", applied, err)
	}
}
