// Package jobs is Tendril's one job queue for background work (SPEC §9):
// memory extraction, scheduled runs and, later, Telegram update processing
// and approval resumes are all River jobs (github.com/riverqueue/river).
//
// Two backends, one API:
//
//   - PostgreSQL (scale-out): River's riverpgxv5 driver over the process's
//     shared *pgxpool.Pool (OpenPostgres). River's own tables (river_job,
//     river_leader, river_queue, river_client, river_migration) live in the
//     pool's search_path and are created by River's migrator (rivermigrate,
//     one transaction per version) under a session advisory lock, so
//     instances starting together migrate once. New jobs are announced with LISTEN/NOTIFY.
//   - SQLite (the embedded default): River's riversqlite driver over a
//     database file of its own, conventionally <home>/index/jobs.db
//     (OpenSQLite). River's notifications go through its river_notification
//     outbox table, read by River's listener.
//
// A Queue also exposes its database (DB or Pool) so that a component can keep
// its own state tables beside the jobs and enqueue in the same transaction
// (InsertTx) or complete a job in the same transaction as its writes
// (CompleteTx).
//
// Adding a kind of job takes three steps (see Example):
//
//  1. an args type with `json` tags and a Kind method returning a stable,
//     dotted name ("telegram.update");
//  2. a worker — any river.Worker[T], or a function with RegisterFunc —
//     registered with Register before the Queue's first Insert or Start;
//  3. Insert (or InsertTx, inside the caller's transaction) with
//     river.InsertOpts for the queue, the scheduled time, uniqueness and
//     attempts.
//
// A worker's error makes River retry the job with backoff (the worker's
// NextRetry, else Options.RetryPolicy, else River's attempt⁴ seconds)
// until MaxAttempts, then the job is discarded. river.JobSnooze(d) asks for
// the job to run again after d without counting an attempt. A job whose
// process died while running it is rescued after RescueStuckJobsAfter and
// run again: work must be idempotent (at-least-once).
package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	_ "modernc.org/sqlite" // pure-Go SQLite driver, "sqlite"

	"github.com/tendrilai/tendril/internal/sqlitewal"
)

// Backend names, as reported by Queue.Backend.
const (
	BackendSQLite   = "sqlite"
	BackendPostgres = "postgres"
)

// DefaultQueue is the queue of jobs inserted without InsertOpts.Queue.
const DefaultQueue = river.QueueDefault

// Errors.
var (
	// ErrBuilt is returned by Register and AddQueue once the Queue has been
	// used (Insert, InsertTx, Start): River fixes its workers then.
	ErrBuilt = errors.New("jobs: register workers and queues before the first Insert or Start")
	// ErrTx is returned by InsertTx and CompleteTx for a transaction of the
	// other backend (the SQLite backend takes *sql.Tx, PostgreSQL pgx.Tx).
	ErrTx = errors.New("jobs: transaction does not belong to this backend")
	// ErrInvalid marks bad arguments.
	ErrInvalid = errors.New("jobs: invalid argument")
)

// Options tune a Queue. Zero values take the defaults in brackets.
type Options struct {
	// ID names this client among the clients sharing the database; it must
	// be unique per process [River's random ID].
	ID string
	// Workers is the number of jobs of DefaultQueue run at once [4]. Other
	// queues are added with AddQueue.
	Workers int
	// JobTimeout cancels a job's context after this long; -1 never [10m].
	JobTimeout time.Duration
	// RescueStuckJobsAfter is how long a job may be running before River
	// takes it for stuck (its process died) and runs it again; it must
	// exceed JobTimeout [JobTimeout + 5m].
	RescueStuckJobsAfter time.Duration
	// MaxAttempts is a job's attempts before it is discarded, unless its
	// InsertOpts say otherwise [8].
	MaxAttempts int
	// RetryPolicy decides when a failed job runs again [River's
	// DefaultClientRetryPolicy: attempt⁴ seconds plus jitter].
	RetryPolicy river.ClientRetryPolicy
	// FetchPollInterval is River's fallback poll for new jobs when no
	// notification arrives; notifications (LISTEN/NOTIFY on PostgreSQL,
	// River's outbox on SQLite) normally wake the fetcher at once [10s].
	FetchPollInterval time.Duration
	// FetchCooldown is the minimum time between two fetches of one queue;
	// it bounds throughput [River's 100ms].
	FetchCooldown time.Duration
	// CompletedJobRetention is how long completed jobs stay in the table
	// [River's 24h].
	CompletedJobRetention time.Duration
	// StopTimeout bounds Close's wait for running jobs before their
	// contexts are cancelled [30s].
	StopTimeout time.Duration
	// Logger receives River's logs [discard].
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.JobTimeout == 0 {
		o.JobTimeout = 10 * time.Minute
	}
	if o.RescueStuckJobsAfter <= 0 {
		base := o.JobTimeout
		if base < 0 {
			base = time.Hour
		}
		o.RescueStuckJobsAfter = base + 5*time.Minute
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 8
	}
	if o.FetchPollInterval <= 0 {
		o.FetchPollInterval = 10 * time.Second
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Queue is one River client on one database. Its methods are safe for
// concurrent use, except that Register and AddQueue must happen before
// the first Insert, InsertTx or Start.
type Queue struct {
	backend string
	db      *sql.DB       // SQLite: owned by the Queue
	pool    *pgxpool.Pool // PostgreSQL: shared, never closed here
	opts    Options

	mu       sync.Mutex
	workers  *river.Workers
	kinds    map[string]bool
	queues   map[string]int
	periodic []*river.PeriodicJob
	built    bool
	lite     *river.Client[*sql.Tx]
	pgc      *river.Client[pgx.Tx]
	started  bool
	closed   bool
	// ckpt checkpoints a SQLite job database's log off the writers' path
	// (nil on PostgreSQL).
	ckpt *sqlitewal.Checkpointer
}

// OpenSQLite opens (creating when needed) the SQLite job database at path,
// with WAL, a 10 s busy timeout and immediate write transactions, on one
// connection (River's advice for SQLite: its background services then never
// meet SQLITE_BUSY inside the process; other processes wait on the busy
// timeout), and applies River's migrations. Close closes the database.
//
// synchronous=NORMAL: a commit is not fsynced (WAL checkpoints are), so a
// power loss — not a process crash — may undo the last transactions. That
// is acceptable for what lives here: a lost job or turn count only delays
// work whose inputs are stored elsewhere (the memory pipeline's next job
// for the session reads its events from the extraction cursor, so the next
// turn of the session catches up), and a lost cursor advance makes a job
// run again, which consolidation makes idempotent.
//
// Components that share the file keep their tables beside River's and
// must never use DB() while they hold a transaction: the pool has one
// connection.
func OpenSQLite(ctx context.Context, path string, opts Options) (*Queue, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: empty SQLite path", ErrInvalid)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open jobs %s: %w", path, err)
	}
	if err := createSQLiteFile(path); err != nil {
		return nil, fmt.Errorf("open jobs %s: %w", path, err)
	}
	dsn := sqlitewal.FileURI(path) + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate" +
		sqlitewal.WriterPragmas(walCheckpointBytes, SQLitePageSize)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open jobs %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if err := migrateSQLite(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open jobs %s: %w", path, err)
	}
	q := newQueue(BackendSQLite, db, nil, opts)
	if q.ckpt, err = sqlitewal.Start(path, walCheckpointBytes, opts.Logger); err != nil {
		db.Close()
		return nil, fmt.Errorf("open jobs %s: %w", path, err)
	}
	return q, nil
}

// walCheckpointBytes is the SQLite job database's write-ahead log size at
// which it is checkpointed, in the background (sqlitewal.Checkpointer), so
// that the group commit of turn counts never pays for the copy and its
// fsyncs: SQLite's default of 1,000 pages.
var walCheckpointBytes = sqlitewal.Pages(1000, SQLitePageSize)

// SQLitePageSize is the page size of a new SQLite job database (bytes).
// Each commit appends every page it changed to the write-ahead log, and a
// job's life (insert, fetch, completion, deletion by River's cleaner)
// changes a few pages of river_job and each of its four indexes per step,
// so the log's bytes per job scale with the page size: 1 KiB instead of
// SQLite's default 4 KiB cut what a turn writes (docs/bench/soak.md, stop
// 16). An existing file keeps the page size it was created with.
const SQLitePageSize = 1024

// createSQLiteFile creates an empty job database at path with
// SQLitePageSize pages and WAL journaling; an existing file is left alone.
// The page size must be set before the first page is written, and the
// driver applies a DSN's _pragma values in lexical order (journal_mode
// before page_size), so this runs on a connection of its own.
func createSQLiteFile(path string) error {
	if _, err := os.Stat(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	db, err := sql.Open("sqlite", sqlitewal.FileURI(path))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(fmt.Sprintf(`PRAGMA page_size=%d`, SQLitePageSize)); err != nil {
		return err
	}
	_, err = db.Exec(`PRAGMA journal_mode=WAL`)
	return err
}

// OpenPostgres returns a Queue on the shared pool and applies River's
// migrations (rivermigrate, main line, one transaction per version) under
// a session-level advisory lock. Close does not close the pool.
func OpenPostgres(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Queue, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ErrInvalid)
	}
	if err := migratePostgres(ctx, pool); err != nil {
		return nil, fmt.Errorf("open jobs: %w", err)
	}
	return newQueue(BackendPostgres, nil, pool, opts), nil
}

func newQueue(backend string, db *sql.DB, pool *pgxpool.Pool, opts Options) *Queue {
	return &Queue{
		backend: backend, db: db, pool: pool, opts: opts.withDefaults(),
		workers: river.NewWorkers(), kinds: map[string]bool{}, queues: map[string]int{},
	}
}

// migrationLock is the advisory lock key held while River's tables are
// migrated on PostgreSQL ("rivermig").
const migrationLock int64 = 0x7269766572_6d6967

func migratePostgres(ctx context.Context, pool *pgxpool.Pool) error {
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	// River's scripts cannot share one transaction (006 adds an enum value
	// and then uses it), so Migrate runs each version in its own; a
	// session-level advisory lock held on a connection of its own makes
	// instances starting together take turns, and the later ones find
	// nothing left to apply.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLock); err != nil {
		return fmt.Errorf("river migrations: lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLock)
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	return nil
}

func migrateSQLite(ctx context.Context, db *sql.DB) error {
	m, err := rivermigrate.New(riversqlite.New(db), nil)
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	// BEGIN IMMEDIATE (the DSN's _txlock): a second process migrating at the
	// same time waits for this one and then finds nothing to do.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	defer tx.Rollback()
	if _, err := m.MigrateTx(ctx, tx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	return nil
}

// Backend is BackendSQLite or BackendPostgres.
func (q *Queue) Backend() string { return q.backend }

// DB is the SQLite database (nil on PostgreSQL). Transactions begun on it
// are *sql.Tx values that InsertTx and CompleteTx accept.
func (q *Queue) DB() *sql.DB { return q.db }

// Pool is the PostgreSQL pool (nil on SQLite). Transactions begun on it are
// pgx.Tx values that InsertTx and CompleteTx accept.
func (q *Queue) Pool() *pgxpool.Pool { return q.pool }

// Register adds the worker for jobs of kind T. It fails with ErrBuilt after
// the Queue's first use, and when the kind is already registered.
func Register[T river.JobArgs](q *Queue, w river.Worker[T]) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.built {
		return ErrBuilt
	}
	var zero T
	if err := river.AddWorkerSafely(q.workers, w); err != nil {
		return fmt.Errorf("jobs: register %s: %w", zero.Kind(), err)
	}
	q.kinds[zero.Kind()] = true
	return nil
}

// RegisterFunc registers f as the worker for jobs of kind T.
func RegisterFunc[T river.JobArgs](q *Queue, f func(ctx context.Context, job *river.Job[T]) error) error {
	return Register(q, river.WorkFunc(f))
}

// AddQueue declares a named queue run with up to maxWorkers jobs at once,
// so that one kind of work cannot starve another (jobs choose it with
// InsertOpts.Queue or their args' InsertOpts). Adding an existing queue
// again keeps the larger bound. It fails with ErrBuilt after first use.
func (q *Queue) AddQueue(name string, maxWorkers int) error {
	if name == "" || maxWorkers <= 0 {
		return fmt.Errorf("%w: queue %q with %d workers", ErrInvalid, name, maxWorkers)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.built {
		return ErrBuilt
	}
	if maxWorkers > q.queues[name] {
		q.queues[name] = maxWorkers
	}
	return nil
}

// AddPeriodic makes River insert the job that construct returns every
// interval. Only the elected leader among the clients sharing the
// database inserts periodic jobs, so the job is inserted once per interval
// across instances (give it uniqueness if a late leader change must not
// double it). id names the periodic job. It fails with ErrBuilt after
// first use.
func (q *Queue) AddPeriodic(id string, interval time.Duration, construct func() (river.JobArgs, *river.InsertOpts)) error {
	if id == "" || interval <= 0 || construct == nil {
		return fmt.Errorf("%w: periodic job %q every %v", ErrInvalid, id, interval)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.built {
		return ErrBuilt
	}
	q.periodic = append(q.periodic, river.NewPeriodicJob(river.PeriodicInterval(interval), construct, &river.PeriodicJobOpts{ID: id}))
	return nil
}

func (q *Queue) build() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return errors.New("jobs: queue closed")
	}
	if q.built {
		return nil
	}
	o := q.opts
	cfg := &river.Config{
		ID:                          o.ID,
		Workers:                     q.workers,
		JobTimeout:                  o.JobTimeout,
		RescueStuckJobsAfter:        o.RescueStuckJobsAfter,
		MaxAttempts:                 o.MaxAttempts,
		RetryPolicy:                 o.RetryPolicy,
		FetchPollInterval:           o.FetchPollInterval,
		FetchCooldown:               o.FetchCooldown,
		CompletedJobRetentionPeriod: o.CompletedJobRetention,
		Logger:                      o.Logger,
		PeriodicJobs:                q.periodic,
	}
	// Without workers the client only inserts (a CLI command), possibly
	// kinds another process works.
	cfg.SkipUnknownJobCheck = len(q.kinds) == 0
	if len(q.kinds) > 0 {
		cfg.Queues = map[string]river.QueueConfig{DefaultQueue: {MaxWorkers: o.Workers}}
		for name, n := range q.queues {
			cfg.Queues[name] = river.QueueConfig{MaxWorkers: n}
		}
	}
	var err error
	switch q.backend {
	case BackendSQLite:
		q.lite, err = river.NewClient(riversqlite.New(q.db), cfg)
	default:
		q.pgc, err = river.NewClient(riverpgxv5.New(q.pool), cfg)
	}
	if err != nil {
		return fmt.Errorf("jobs: river client: %w", err)
	}
	q.built = true
	return nil
}

// Start runs the registered workers until Stop or Close (or ctx ends).
// Without any registered worker the Queue only inserts and Start is a
// no-op. Calling Start twice is a no-op.
func (q *Queue) Start(ctx context.Context) error {
	if err := q.build(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.started || len(q.kinds) == 0 {
		return nil
	}
	var err error
	if q.lite != nil {
		err = q.lite.Start(ctx)
	} else {
		err = q.pgc.Start(ctx)
	}
	if err != nil {
		return fmt.Errorf("jobs: start: %w", err)
	}
	q.started = true
	return nil
}

// Stop stops fetching jobs and waits for running jobs to finish until ctx
// ends; then their contexts are cancelled and Stop waits for them to
// return (a job cancelled this way is retried later). It returns nil once
// the client has stopped; a no-op if not started.
func (q *Queue) Stop(ctx context.Context) error {
	q.mu.Lock()
	started := q.started
	q.started = false
	q.mu.Unlock()
	if !started {
		return nil
	}
	var soft, hard func(context.Context) error
	if q.lite != nil {
		soft, hard = q.lite.Stop, q.lite.StopAndCancel
	} else {
		soft, hard = q.pgc.Stop, q.pgc.StopAndCancel
	}
	err := soft(ctx)
	if err == nil {
		return nil
	}
	if ctx.Err() == nil {
		return fmt.Errorf("jobs: stop: %w", err)
	}
	hctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hard(hctx); err != nil {
		return fmt.Errorf("jobs: stop: cancelling running jobs: %w", err)
	}
	return nil
}

// Close stops the client (waiting up to Options.StopTimeout for running
// jobs) and closes the SQLite database; the PostgreSQL pool stays open.
func (q *Queue) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), q.opts.StopTimeout)
	defer cancel()
	err := q.Stop(ctx)
	q.mu.Lock()
	closed := q.closed
	q.closed = true
	q.mu.Unlock()
	if !closed && q.db != nil {
		err = errors.Join(err, q.ckpt.Close(), q.db.Close())
	}
	return err
}

// Insert enqueues a job. res.UniqueSkippedAsDuplicate reports that a
// unique job (opts.UniqueOpts) was already there and nothing was inserted.
func (q *Queue) Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	if err := q.build(); err != nil {
		return nil, err
	}
	var res *rivertype.JobInsertResult
	var err error
	if q.lite != nil {
		res, err = q.lite.Insert(ctx, args, opts)
	} else {
		res, err = q.pgc.Insert(ctx, args, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("jobs: insert %s: %w", args.Kind(), err)
	}
	return res, nil
}

// InsertTx enqueues a job in the caller's transaction: a *sql.Tx from DB()
// on SQLite, a pgx.Tx from Pool() on PostgreSQL (else ErrTx). The job
// exists, and runs, only if the transaction commits.
func (q *Queue) InsertTx(ctx context.Context, tx any, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	if err := q.build(); err != nil {
		return nil, err
	}
	var res *rivertype.JobInsertResult
	var err error
	switch t := tx.(type) {
	case *sql.Tx:
		if q.lite == nil {
			return nil, ErrTx
		}
		res, err = q.lite.InsertTx(ctx, t, args, opts)
	case pgx.Tx:
		if q.pgc == nil {
			return nil, ErrTx
		}
		res, err = q.pgc.InsertTx(ctx, t, args, opts)
	default:
		return nil, fmt.Errorf("%w: %T", ErrTx, tx)
	}
	if err != nil {
		return nil, fmt.Errorf("jobs: insert %s: %w", args.Kind(), err)
	}
	return res, nil
}

// CompleteTx marks the running job completed inside the caller's
// transaction (the worker's writes and the completion commit together);
// it must be called from the job's Work. tx is a *sql.Tx on SQLite or a
// pgx.Tx on PostgreSQL.
func CompleteTx[T river.JobArgs](ctx context.Context, tx any, job *river.Job[T]) error {
	var err error
	switch t := tx.(type) {
	case *sql.Tx:
		_, err = river.JobCompleteTx[*riversqlite.Driver](ctx, t, job)
	case pgx.Tx:
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, t, job)
	default:
		return fmt.Errorf("%w: %T", ErrTx, tx)
	}
	if err != nil {
		return fmt.Errorf("jobs: complete %s %d: %w", job.Kind, job.ID, err)
	}
	return nil
}

// LiveStates are the states of a job not yet finished: waiting (available,
// scheduled, pending), running, or waiting for a retry (retryable).
var LiveStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
	rivertype.JobStateRetryable, rivertype.JobStateScheduled,
}

// Stats counts the live jobs of kind (LiveStates) and reports when the
// oldest of them was created (zero when there are none), for the queue
// depth and lag metrics.
func (q *Queue) Stats(ctx context.Context, kind string) (live int, oldest time.Time, err error) {
	if err := q.build(); err != nil {
		return 0, time.Time{}, err
	}
	const count = `SELECT count(*) FROM river_job WHERE kind = %s AND state IN ('available','pending','running','retryable','scheduled')`
	if q.db != nil {
		err = q.db.QueryRowContext(ctx, fmt.Sprintf(count, "?"), kind).Scan(&live)
	} else {
		err = q.pool.QueryRow(ctx, fmt.Sprintf(count, "$1"), kind).Scan(&live)
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("jobs: stats %s: %w", kind, err)
	}
	if live == 0 {
		return 0, time.Time{}, nil
	}
	rows, err := q.List(ctx, river.NewJobListParams().Kinds(kind).States(LiveStates...).OrderBy(river.JobListOrderByID, river.SortOrderAsc).First(1))
	if err != nil {
		return 0, time.Time{}, err
	}
	if len(rows) > 0 {
		oldest = rows[0].CreatedAt
	}
	return live, oldest, nil
}

// List returns the jobs matching params (River's JobListParams).
func (q *Queue) List(ctx context.Context, params *river.JobListParams) ([]*rivertype.JobRow, error) {
	if err := q.build(); err != nil {
		return nil, err
	}
	var res *river.JobListResult
	var err error
	if q.lite != nil {
		res, err = q.lite.JobList(ctx, params)
	} else {
		res, err = q.pgc.JobList(ctx, params)
	}
	if err != nil {
		return nil, fmt.Errorf("jobs: list: %w", err)
	}
	return res.Jobs, nil
}

// Delete deletes the job with id unless it is running (River refuses
// that: the error then says so).
func (q *Queue) Delete(ctx context.Context, id int64) error {
	if err := q.build(); err != nil {
		return err
	}
	var err error
	if q.lite != nil {
		_, err = q.lite.JobDelete(ctx, id)
	} else {
		_, err = q.pgc.JobDelete(ctx, id)
	}
	if err != nil {
		return fmt.Errorf("jobs: delete job %d: %w", id, err)
	}
	return nil
}

// DeleteJobTx deletes the job with id in the caller's transaction. A
// worker may delete its own job after CompleteTx in the same transaction
// (a job whose work turned out to be void, e.g. its subject was forgotten).
// Deleting a running job of another transaction fails.
func (q *Queue) DeleteJobTx(ctx context.Context, tx any, id int64) error {
	if err := q.build(); err != nil {
		return err
	}
	var err error
	switch t := tx.(type) {
	case *sql.Tx:
		if q.lite == nil {
			return ErrTx
		}
		_, err = q.lite.JobDeleteTx(ctx, t, id)
	case pgx.Tx:
		if q.pgc == nil {
			return ErrTx
		}
		_, err = q.pgc.JobDeleteTx(ctx, t, id)
	default:
		return fmt.Errorf("%w: %T", ErrTx, tx)
	}
	if err != nil {
		return fmt.Errorf("jobs: delete job %d: %w", id, err)
	}
	return nil
}

// DeleteWhere is DeleteTx in a transaction of its own: it deletes every
// job of kind that is not running and whose encoded args hold value under
// the top-level key, and returns how many (none when it fails).
func (q *Queue) DeleteWhere(ctx context.Context, kind, key, value string) (int, error) {
	if q.db != nil {
		tx, err := q.db.BeginTx(ctx, nil)
		if err != nil {
			return 0, fmt.Errorf("jobs: delete %s: %w", kind, err)
		}
		defer tx.Rollback()
		n, err := q.DeleteTx(ctx, tx, kind, key, value)
		if err != nil {
			return 0, err
		}
		if err := tx.Commit(); err != nil {
			return 0, fmt.Errorf("jobs: delete %s: %w", kind, err)
		}
		return n, nil
	}
	tx, err := q.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("jobs: delete %s: %w", kind, err)
	}
	defer tx.Rollback(ctx)
	n, err := q.DeleteTx(ctx, tx, kind, key, value)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("jobs: delete %s: %w", kind, err)
	}
	return n, nil
}

// DeleteTx deletes, in the caller's transaction, every job of kind that
// is not running and whose encoded args hold value under the top-level key
// (e.g. "actor_id"); it returns how many. Running jobs are left to finish
// (River never deletes them); their workers must check that their work
// still stands.
func (q *Queue) DeleteTx(ctx context.Context, tx any, kind, key, value string) (int, error) {
	if err := q.build(); err != nil {
		return 0, err
	}
	if key == "" {
		return 0, fmt.Errorf("%w: empty args key", ErrInvalid)
	}
	total := 0
	for {
		p := river.NewJobDeleteManyParams().Kinds(kind).First(1000).
			Where("args ->> @key = @value", river.NamedArgs{"key": key, "value": value})
		var res *river.JobDeleteManyResult
		var err error
		switch t := tx.(type) {
		case *sql.Tx:
			if q.lite == nil {
				return total, ErrTx
			}
			p = river.NewJobDeleteManyParams().Kinds(kind).First(1000).
				Where("args ->> ('$.' || @key) = @value", river.NamedArgs{"key": key, "value": value})
			res, err = q.lite.JobDeleteManyTx(ctx, t, p)
		case pgx.Tx:
			if q.pgc == nil {
				return total, ErrTx
			}
			res, err = q.pgc.JobDeleteManyTx(ctx, t, p)
		default:
			return total, fmt.Errorf("%w: %T", ErrTx, tx)
		}
		if err != nil {
			return total, fmt.Errorf("jobs: delete %s where %s = %q: %w", kind, key, value, err)
		}
		total += len(res.Jobs)
		if len(res.Jobs) < 1000 {
			return total, nil
		}
	}
}
