package jobs_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tendrilai/tendril/internal/jobs"
	"github.com/tendrilai/tendril/internal/jobs/jobstest"
	"github.com/tendrilai/tendril/internal/pg"
	"github.com/tendrilai/tendril/internal/testenv"
)

var sqliteBackend = jobstest.Backend{
	Name:        "sqlite",
	NewDatabase: func(t testing.TB) string { return filepath.Join(t.TempDir(), "index", "jobs.db") },
	Open: func(ctx context.Context, dsn string, opts jobs.Options) (*jobs.Queue, func(), error) {
		q, err := jobs.OpenSQLite(ctx, dsn, opts)
		return q, nil, err
	},
}

var postgresBackend = jobstest.Backend{
	Name:        "postgres",
	NewDatabase: func(t testing.TB) string { return testenv.PostgresSchema(t) },
	Open: func(ctx context.Context, dsn string, opts jobs.Options) (*jobs.Queue, func(), error) {
		pool, err := pg.Open(ctx, dsn, pg.Options{})
		if err != nil {
			return nil, nil, err
		}
		q, err := jobs.OpenPostgres(ctx, pool, opts)
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		return q, pool.Close, nil
	},
}

func TestMain(m *testing.M) {
	jobstest.Child(sqliteBackend, postgresBackend)
	os.Exit(m.Run())
}

func TestSQLite(t *testing.T) { jobstest.Exercise(t, sqliteBackend) }

func TestPostgres(t *testing.T) { jobstest.Exercise(t, postgresBackend) }
