package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tendrilai/tendril/internal/pg"
	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/schedule/pgstore"
	"github.com/tendrilai/tendril/internal/schedule/scheduletest"
	"github.com/tendrilai/tendril/internal/testenv"
)

// freshSchema creates an empty schema in the test database (testenv.Postgres:
// TENDRIL_TEST_DATABASE_URL or the local trust-auth server) and returns a
// URL whose connections use it; it is dropped when the test ends. Without
// a reachable server the test is skipped, or failed under CI=true.
func freshSchema(t *testing.T) string { return freshSchemaTB(t) }

func freshSchemaTB(t testing.TB) string {
	t.Helper()
	base := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to the test database: %v", err)
	}
	defer conn.Close(ctx)
	schema := fmt.Sprintf("sched_test_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, base); err == nil {
			c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			c.Close(ctx)
		}
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + schema
}

func open(t *testing.T, url string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	scheduletest.Exercise(t, func(t *testing.T) schedule.Store { return open(t, freshSchema(t)) })
}

// Two instances share one Postgres table: each run fires exactly once.
func TestTwoInstancesOnPostgres(t *testing.T) {
	url := freshSchema(t)
	a, b := open(t, url), open(t, url)
	defer a.Close()
	defer b.Close()
	scheduletest.ExerciseInstances(t, a, b)
}

// Two started instances, River on one database: each run fires exactly
// once.
func TestStartedInstancesOnPostgres(t *testing.T) {
	url := freshSchema(t)
	a, b := open(t, url), open(t, url)
	defer a.Close()
	defer b.Close()
	scheduletest.ExerciseStartedInstances(t, a, b)
}

// Removing or pausing a job deletes its queued River run (PostgreSQL).
func TestQueuedRunsOnPostgres(t *testing.T) {
	s := open(t, freshSchema(t))
	defer s.Close()
	scheduletest.ExerciseQueuedRuns(t, s)
}

// New on a shared pool does not close it.
func TestNewOnSharedPool(t *testing.T) {
	url := freshSchema(t)
	pool, err := pg.Open(context.Background(), url, pg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := pgstore.New(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatalf("the shared pool was closed: %v", err)
	}
}
