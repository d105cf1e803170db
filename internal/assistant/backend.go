package assistant

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tendrilai/tendril/internal/approval/pgledger"
	"github.com/tendrilai/tendril/internal/channel/telegram"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/jobs"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/embed"
	memorypg "github.com/tendrilai/tendril/internal/memory/pgstore"
	"github.com/tendrilai/tendril/internal/memory/pipeline"
	"github.com/tendrilai/tendril/internal/memory/search"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
	"github.com/tendrilai/tendril/internal/pg"
	"github.com/tendrilai/tendril/internal/schedule"
	schedpg "github.com/tendrilai/tendril/internal/schedule/pgstore"
	schedsqlite "github.com/tendrilai/tendril/internal/schedule/sqlitestore"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/jsonl"
	sessionpg "github.com/tendrilai/tendril/internal/session/pgstore"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/state/pgstate"
)

// With TENDRIL_DATABASE_URL set (SPEC §9) every store opens on one shared
// pool and nothing of the user's data is written to $TENDRIL_HOME; without
// it, the embedded files and SQLite databases in the home are used.

// openDatabase opens the shared pool, and a second one for the turn
// locks (each in-flight turn holds one connection of it, so locks never
// starve the stores), when a database is configured. The store pool
// holds at most 12 connections and the lock pool 24, so an instance runs
// up to 24 turns at once (the 25th waits for a lock connection) and opens
// at most 36 connections; pool_max_conns in the URL sets both pools.
func (a *Assistant) openDatabase(ctx context.Context) error {
	if a.cfg.DatabaseURL == "" {
		return nil
	}
	if err := CheckPoolMaxConns(a.cfg.DatabaseURL); err != nil {
		return err
	}
	db, err := pg.Open(ctx, a.cfg.DatabaseURL, pg.Options{MaxConns: 12})
	if err != nil {
		return err
	}
	// Closers run last-first: the pool closes after every store on it.
	a.closers = append(a.closers, func() error { db.Close(); return nil })
	a.db = db
	locks, err := pg.Open(ctx, a.cfg.DatabaseURL, pg.Options{MaxConns: 24})
	if err != nil {
		return err
	}
	a.closers = append(a.closers, func() error { locks.Close(); return nil })
	a.locks = pgLocks{pool: locks}
	return nil
}

// MinPoolConns is the least pool_max_conns the stores can start with:
// River's migrations hold one connection (its advisory lock) while they
// query on another, so with 1 the start waits forever.
const MinPoolConns = 2

// CheckPoolMaxConns reports a pool_max_conns in the database URL below
// MinPoolConns. A URL that does not parse is left to pg.Open.
func CheckPoolMaxConns(url string) error {
	if !strings.Contains(url, "pool_max_conns") {
		return nil
	}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil
	}
	if pc.MaxConns < MinPoolConns {
		return fmt.Errorf("TENDRIL_DATABASE_URL (databaseUrl): pool_max_conns=%d is below the minimum of %d (River's migrations hold one connection while they use another); raise it or remove it (default 12 for the stores, 24 for turn locks)", pc.MaxConns, MinPoolConns)
	}
	return nil
}

// openState opens the internal-state engine: a per-actor append-only log
// in the home, or rows in PostgreSQL.
func (a *Assistant) openState(ctx context.Context) error {
	sopts, err := StateOptions(a.cfg)
	if err != nil {
		return err
	}
	// State is derived, not user data: file appends are not fsynced and
	// PostgreSQL commits asynchronously, so a turn does not wait on the
	// disk; a crash can lose the last change, never corrupt one. 32
	// recent causes are plenty for `state show`.
	sopts.NoSync, sopts.HistoryLimit = true, 32
	if a.db == nil {
		if a.state, err = state.Open(StateDir(a.cfg), sopts); err != nil {
			return fmt.Errorf("open state: %w", err)
		}
		return nil
	}
	b, err := pgstate.New(ctx, a.db, pgstate.Options{AsyncCommit: true})
	if err != nil {
		return fmt.Errorf("open state: %w", err)
	}
	if a.state, err = state.New(b, sopts); err != nil {
		return fmt.Errorf("open state: %w", err)
	}
	return nil
}

// openSessions opens the session store: Redis when TENDRIL_REDIS_URL is
// set (it wins: SPEC §9 "Redis can back sessions"), else PostgreSQL with
// a database, else JSONL files in the home.
func (a *Assistant) openSessions(ctx context.Context) (session.Store, error) {
	var st session.Store
	var err error
	if a.db != nil && a.cfg.RedisURL == "" {
		st, err = sessionpg.New(ctx, a.db)
	} else {
		st, err = OpenSessionStore(a.cfg, jsonl.Options{Logger: a.log})
	}
	if err != nil {
		return nil, fmt.Errorf("open sessions: %w", err)
	}
	if a.db != nil {
		// Turns hold cross-instance locks: a turn that lost its lock
		// (frozen past a failover) must not write.
		st = lockedSessions{st}
	}
	return st, nil
}

// newEmbedder builds memory.embedder's embedder (nil when unset) with the
// providers' endpoints and keys; serve and doctor both call it, so doctor
// fails the references serve would refuse.
func newEmbedder(ctx context.Context, cfg *config.Config) (search.Embedder, error) {
	p := cfg.Providers
	return embed.New(ctx, cfg.Memory.Embedder, embed.Options{OpenAIBaseURL: p.OpenAIBaseURL, OpenAIAPIKey: p.OpenAIAPIKey,
		OllamaBaseURL: p.OllamaBaseURL, AWSRegion: p.AWSRegion, BedrockEndpoint: p.BedrockEndpoint})
}

// openMemoryStore opens the memory store: Markdown files plus a SQLite
// index in the home, or rows in PostgreSQL, ranked the same way.
func (a *Assistant) openMemoryStore(ctx context.Context) (memory.Admin, error) {
	mo := MemoryStoreOptions(a.cfg)
	mo.Logger = a.log
	// memory.embedder (EMBEDDING_MODEL_ID) turns on hybrid search; unset,
	// nothing changes.
	emb, err := newEmbedder(ctx, a.cfg)
	if err != nil {
		return nil, fmt.Errorf("memory.embedder: %w", err)
	}
	if emb != nil {
		mo.Embedder = emb
	}
	if a.db == nil {
		st, err := sqlitestore.Open(a.cfg.Home, mo)
		if err != nil {
			return nil, fmt.Errorf("open memory: %w", err)
		}
		return st, nil
	}
	st, err := memorypg.New(ctx, a.db, memorypg.Options{
		AgentID: mo.AgentID, IndexedKeys: mo.IndexedKeys, EventExpiryDays: mo.EventExpiryDays,
		Ranking: mo.Ranking, Embedder: mo.Embedder, Logger: a.log, CacheBytes: mo.CacheBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("open memory: %w", err)
	}
	return st, nil
}

// openJobs opens the one job queue of the process (River): on the
// database, or on <home>/index/jobs.db. Extraction and scheduled runs go
// through it; Start starts it after every kind of job is registered.
func (a *Assistant) openJobs(ctx context.Context) error {
	opts := jobs.Options{Logger: a.log, CompletedJobRetention: time.Hour}
	var q *jobs.Queue
	var err error
	if a.db != nil {
		q, err = jobs.OpenPostgres(ctx, a.db, opts)
	} else {
		q, err = jobs.OpenSQLite(ctx, filepath.Join(a.cfg.Home, "index", "jobs.db"), opts)
	}
	if err != nil {
		return fmt.Errorf("open job queue: %w", err)
	}
	a.jobs = q
	a.closers = append(a.closers, q.Close)
	return nil
}

// openScheduleStore opens the schedule's job definitions: PostgreSQL
// (table schedule_jobs) on the database, else SQLite in the home.
func (a *Assistant) openScheduleStore(ctx context.Context) (schedule.Store, error) {
	if a.db != nil {
		return schedpg.New(ctx, a.db)
	}
	return schedsqlite.Open(ctx, schedsqlite.DefaultPath(a.cfg.Home))
}

// Migrations lists every PostgreSQL migration of the binary's stores, in
// the order they are applied (for `tendril doctor`).
func Migrations() []pg.Migration {
	var ms []pg.Migration
	ms = append(ms, sessionpg.Migrations()...)
	ms = append(ms, memorypg.Migrations()...)
	ms = append(ms, pgstate.Migrations()...)
	ms = append(ms, telegram.Migrations()...)
	ms = append(ms, pgledger.Migrations()...)
	ms = append(ms, pipeline.Migrations()...)
	ms = append(ms, schedpg.Migrations()...)
	return ms
}
