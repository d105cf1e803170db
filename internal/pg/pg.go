// Package pg is Tendril's PostgreSQL foundation for scale-out (SPEC §9):
// one connection pool per process, shared by every store, and one
// migration runner for the whole binary.
//
// Each store package embeds its own SQL files and passes them to Migrate
// (or to Open); every applied script is recorded by name in the table
// tendril_migrations, so instances starting together apply each script
// exactly once (the run holds a transaction-scoped advisory lock) and
// `tendril doctor` can list what is applied and what is pending.
package pg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Migration is one named SQL script. Name is "<component>/<file>", for
// example "memory/001_init.sql"; scripts of one component run in name
// order and a name, once recorded, is never run again.
type Migration struct {
	Name string
	SQL  string
}

// FromFS reads every *.sql file directly under dir in fsys (typically an
// embed.FS), sorted by file name, and names each "<component>/<file>".
// It panics on a read error: the files are compiled into the binary, so
// a failure is a programming error caught by any test that opens the store.
func FromFS(component string, fsys fs.FS, dir string) []Migration {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		panic(fmt.Sprintf("pg: migrations of %s: %v", component, err))
	}
	var out []Migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			panic(fmt.Sprintf("pg: migration %s/%s: %v", component, e.Name(), err))
		}
		out = append(out, Migration{Name: component + "/" + e.Name(), SQL: string(b)})
	}
	slices.SortFunc(out, func(a, b Migration) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// migrationLock is the advisory lock key held while migrating ("tendrilm").
const migrationLock int64 = 0x74656e6472696c6d

const createTable = `CREATE TABLE IF NOT EXISTS tendril_migrations (
	name       TEXT PRIMARY KEY,
	applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)`

// Migrate applies, in one transaction under an advisory lock, every
// migration in ms whose name is not yet recorded in tendril_migrations,
// and returns the names it applied. A failing script rolls the whole run
// back and the error names it.
func Migrate(ctx context.Context, db *pgxpool.Pool, ms []Migration) (applied []string, err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
		return nil, fmt.Errorf("migrate: lock: %w", err)
	}
	if _, err := tx.Exec(ctx, createTable); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	done, err := recorded(ctx, tx)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if done[m.Name] {
			continue
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return nil, fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO tendril_migrations (name) VALUES ($1)`, m.Name); err != nil {
			return nil, fmt.Errorf("migration %s: record: %w", m.Name, err)
		}
		done[m.Name] = true
		applied = append(applied, m.Name)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("migrate: commit: %w", err)
	}
	return applied, nil
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func recorded(ctx context.Context, q querier) (map[string]bool, error) {
	rows, err := q.Query(ctx, `SELECT name FROM tendril_migrations`)
	if err != nil {
		return nil, fmt.Errorf("migrate: read applied: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("migrate: read applied: %w", err)
	}
	done := make(map[string]bool, len(names))
	for _, n := range names {
		done[n] = true
	}
	return done, nil
}

// Status reports which of ms are recorded as applied and which are
// pending, without changing anything (for `tendril doctor`).
func Status(ctx context.Context, db *pgxpool.Pool, ms []Migration) (applied, pending []string, err error) {
	var exists bool
	if err := db.QueryRow(ctx, `SELECT to_regclass('tendril_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, nil, fmt.Errorf("migration status: %w", err)
	}
	done := map[string]bool{}
	if exists {
		if done, err = recorded(ctx, db); err != nil {
			return nil, nil, err
		}
	}
	for _, m := range ms {
		if done[m.Name] {
			applied = append(applied, m.Name)
		} else {
			pending = append(pending, m.Name)
		}
	}
	return applied, pending, nil
}

// Options tune Open. The zero value is usable.
type Options struct {
	// MaxConns caps the pool (default: pgxpool's, max(4, GOMAXPROCS)). A
	// pool_max_conns parameter in the URL wins over it.
	MaxConns int32
	// ConnectTimeout bounds the first ping (default 10 s).
	ConnectTimeout time.Duration
}

// Open parses url (a postgres:// URL or libpq key/value string; libpq
// parameters such as search_path become run-time parameters), creates a
// pool and pings the server. Connections idle for 5 minutes are closed and
// a connection idle for a second or more is pinged before reuse, so a pool
// that sat through a freeze (the server dropped its connections meanwhile)
// redials instead of failing the next query.
func Open(ctx context.Context, url string, opts Options) (*pgxpool.Pool, error) {
	if scheme, _, ok := strings.Cut(url, "://"); ok && scheme != "postgres" && scheme != "postgresql" {
		return nil, fmt.Errorf("database url: scheme %q: want postgres:// or postgresql:// (or libpq key=value pairs)", scheme)
	}
	cfg, err := poolConfig(url, opts)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	t := opts.ConnectTimeout
	if t <= 0 {
		t = 10 * time.Second
	}
	pctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database unreachable: %w", err)
	}
	return pool, nil
}

// DefaultConnectTimeout bounds each new connection's dial and startup
// when the URL sets no connect_timeout: a server that accepts the TCP
// connection and then never answers (a hung host, a black-holed proxy)
// fails a request within it, as NOT_READY, instead of holding it until
// the kernel gives up minutes later.
const DefaultConnectTimeout = 5 * time.Second

// poolConfig parses url into the pool's configuration with Tendril's
// defaults (MaxConns unless pool_max_conns is given, idle and health
// periods, DefaultConnectTimeout unless connect_timeout is given).
func poolConfig(url string, opts Options) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	if !strings.Contains(url, "connect_timeout") {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.MaxConns > 0 && !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = opts.MaxConns
	}
	cfg.MaxConnIdleTime = 5 * time.Minute
	cfg.HealthCheckPeriod = 30 * time.Second
	// pgxpool pings a connection idle for a second or more before handing
	// it out; bound that ping so a dead one is replaced, not waited on.
	cfg.PingTimeout = 5 * time.Second
	return cfg, nil
}

// IsUnique reports whether err is a unique-violation (SQLSTATE 23505).
func IsUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}
