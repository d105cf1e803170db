package jobs_test

import (
	"context"
	"database/sql"
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

// TestSQLitePageSize: a new job database gets SQLitePageSize pages in WAL
// mode; an existing one made with SQLite's default 4 KiB pages keeps them
// and still runs its migrations and takes jobs.
func TestSQLitePageSize(t *testing.T) {
	ctx := context.Background()
	pageSize := func(t *testing.T, q *jobs.Queue) (size int, mode string) {
		t.Helper()
		if err := q.DB().QueryRowContext(ctx, `PRAGMA page_size`).Scan(&size); err != nil {
			t.Fatal(err)
		}
		if err := q.DB().QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		return size, mode
	}
	t.Run("new", func(t *testing.T) {
		q, err := jobs.OpenSQLite(ctx, filepath.Join(t.TempDir(), "index", "jobs.db"), jobs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		if size, mode := pageSize(t, q); size != jobs.SQLitePageSize || mode != "wal" {
			t.Fatalf("page_size %d, journal_mode %q; want %d, wal", size, mode, jobs.SQLitePageSize)
		}
	})
	t.Run("existing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "jobs.db")
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`PRAGMA page_size=4096; CREATE TABLE keep(x); INSERT INTO keep VALUES(1)`); err != nil {
			t.Fatal(err)
		}
		db.Close()
		q, err := jobs.OpenSQLite(ctx, path, jobs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		if size, mode := pageSize(t, q); size != 4096 || mode != "wal" {
			t.Fatalf("page_size %d, journal_mode %q; want the file's 4096, wal", size, mode)
		}
		var n int
		if err := q.DB().QueryRowContext(ctx, `SELECT count(*) FROM keep`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("existing table: %d rows, %v", n, err)
		}
	})
}
