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
