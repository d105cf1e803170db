package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tendrilai/tendril/internal/pg"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/pgstore"
	"github.com/tendrilai/tendril/internal/session/sessiontest"
	"github.com/tendrilai/tendril/internal/testenv"
)

var ctx = context.Background()

// openPool opens a pool on url, closed when t ends.
func openPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pg.Open(ctx, url, pg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestConformance(t *testing.T) {
	var mu sync.Mutex
	urls := map[*testing.T]string{}
	sessiontest.Exercise(t, func(t *testing.T) session.Store {
		mu.Lock()
		u, ok := urls[t]
		if !ok {
			u = testenv.PostgresSchema(t)
			urls[t] = u
		}
		mu.Unlock()
		// A new pool each time: a reopened store shares nothing in memory.
		st, err := pgstore.New(ctx, openPool(t, u))
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

// TestCompareAndSetAcrossPools: writers with a pool each (as separate
// instances would have) race to append turns to one session, each turn at
// the leaf it last read. Every Append either wins or returns ErrLeafMoved
// and writes nothing, so the session stays one unbroken chain holding
// every winning turn.
func TestCompareAndSetAcrossPools(t *testing.T) {
	url := testenv.PostgresSchema(t)
	k := session.Key{AgentID: "main", Channel: "telegram", ID: "race"}
	const writers, turns = 6, 15
	stores := make([]*pgstore.Store, writers)
	for i := range stores {
		st, err := pgstore.New(ctx, openPool(t, url))
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = st
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, lost := map[string]bool{}, 0
	errs := make(chan error, writers)
	for w, st := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < turns; {
				leaf, err := st.Leaf(ctx, k)
				if err != nil {
					errs <- err
					return
				}
				u, a := fmt.Sprintf("u-%d-%d", w, i), fmt.Sprintf("a-%d-%d", w, i)
				err = st.Append(ctx, k,
					session.Node{ID: u, ParentID: leaf, Role: session.RoleUser, Text: u},
					session.Node{ID: a, ParentID: u, Role: session.RoleAssistant, Text: a})
				var lm *session.LeafMovedError
				switch {
				case err == nil:
					mu.Lock()
					won[u] = true
					mu.Unlock()
					i++
				case errors.As(err, &lm) && errors.Is(err, session.ErrLeafMoved):
					if lm.Expected != leaf || lm.Actual == leaf {
						errs <- fmt.Errorf("leaf moved error %+v after reading %q", lm, leaf)
						return
					}
					mu.Lock()
					lost++
					mu.Unlock()
				default:
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := stores[0]
	all, err := st.Nodes(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2*writers*turns || len(won) != writers*turns {
		t.Fatalf("%d nodes, %d won turns; want %d and %d", len(all), len(won), 2*writers*turns, writers*turns)
	}
	leaf, _ := st.Leaf(ctx, k)
	path, err := st.Path(ctx, k, leaf, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(path) != len(all) {
		t.Fatalf("path from the leaf has %d of %d nodes: the session forked", len(path), len(all))
	}
	for i, n := range all {
		if n.ID != path[i].ID {
			t.Fatalf("append order and path differ at %d: %s vs %s", i, n.ID, path[i].ID)
		}
	}
	t.Logf("%d turns won, %d compare-and-set losses", len(won), lost)
}

// TestMigrationsOnce: a second New on the same database applies nothing
// and the scripts are recorded under the session component.
func TestMigrationsOnce(t *testing.T) {
	pool := openPool(t, testenv.PostgresSchema(t))
	if _, err := pgstore.New(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.New(ctx, pool); err != nil {
		t.Fatal(err)
	}
	applied, pending, err := pg.Status(ctx, pool, pgstore.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 0 || len(applied) != 1 || applied[0] != "session/001_init.sql" {
		t.Fatalf("applied %v, pending %v", applied, pending)
	}
}

// TestClosed: the store refuses work after Close and leaves the pool open.
func TestClosed(t *testing.T) {
	pool := openPool(t, testenv.PostgresSchema(t))
	st, err := pgstore.New(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	k := session.Key{AgentID: "main", Channel: "telegram", ID: "1"}
	if _, err := st.Leaf(ctx, k); !errors.Is(err, pgstore.ErrClosed) {
		t.Fatalf("leaf after close: %v", err)
	}
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("pool closed by the store: %v", err)
	}
}

// TestPathPlan: Path's walk probes the (session_key, node_id) index once
// per node. Without the LATERAL step the planner hash-joins the whole
// session at every step on small sessions, which stays correct but costs
// O(session) per node.
func TestPathPlan(t *testing.T) {
	pool := openPool(t, testenv.PostgresSchema(t))
	st, err := pgstore.New(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	k := session.Key{AgentID: "main", Channel: "telegram", ID: "plan"}
	leaf := build(t, st, k, 1000)
	rows, err := pool.Query(ctx, "EXPLAIN "+pgstore.SQLPath, pgstore.KeyDigest(k), []byte(leaf), int64(50))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if strings.Contains(plan, "Seq Scan on session_nodes") || strings.Contains(plan, "Hash Join") ||
		!strings.Contains(plan, "Index Scan using session_nodes_session_key_node_id_key") {
		t.Fatalf("Path does not walk the index:\n%s", plan)
	}
}
