package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/schedule/pgstore"
	"github.com/tendrilai/tendril/internal/schedule/scheduletest"
)

// baseURL is the test database: TENDRIL_TEST_DATABASE_URL or the local
// trust-auth server.
func baseURL() string {
	if u := os.Getenv("TENDRIL_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// freshSchema creates an empty schema and returns a URL whose connections
// use it; it is dropped when the test ends. The test is skipped when
// Postgres is unreachable.
func freshSchema(t *testing.T) string { return freshSchemaTB(t) }

func freshSchemaTB(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, baseURL())
	if err != nil {
		t.Skipf("postgres unreachable at %s, skipping: %v", baseURL(), err)
	}
	defer conn.Close(ctx)
	schema := fmt.Sprintf("sched_test_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, baseURL()); err == nil {
			c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			c.Close(ctx)
		}
	})
	sep := "?"
	if strings.Contains(baseURL(), "?") {
		sep = "&"
	}
	return baseURL() + sep + "search_path=" + schema
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
