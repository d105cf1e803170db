package pipeline

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"github.com/tendrilai/tendril/internal/jobs"
	"github.com/tendrilai/tendril/internal/pg"
)

// The extraction queue is River (internal/jobs). The pipeline's own tables
// beside River's hold state, not a queue: per-session turn counters,
// extraction cursors and job generations, harvest cursors, forget epochs and
// rejection hashes. On SQLite they live in the job database file itself, on
// PostgreSQL in the shared pool (memory_pipeline_*, applied by pg.Migrate);
// either way a job is enqueued in the same transaction that counts the turn
// and completed in the same transaction that moves the cursor.

// Job kinds.
const (
	// KindExtract extracts a session's new events (and, for reason "idle",
	// refreshes its summary).
	KindExtract = "memory.extract"
	// KindIdle fires IdleAfter after a session's last turn and queues its
	// idle extraction; a turn meanwhile makes it wait again (snooze).
	KindIdle = "memory.idle"
	// Queue is the River queue the pipeline's jobs run in (Options.Workers
	// at a time).
	Queue = "memory"
)

// job reasons
const (
	reasonTurns = "turns" // every ExtractEveryTurns turns
	reasonIdle  = "idle"  // session idle: extraction plus the session summary
)

// ExtractArgs are a memory.extract job's args. The unique fields make at
// most one job per (agent, actor, session, reason) wait at a time; Gen is
// the session's job generation, advanced when a job starts, so a turn
// that arrives while a job runs queues a new one.
type ExtractArgs struct {
	AgentID   string `json:"agent_id" river:"unique"`
	ActorID   string `json:"actor_id" river:"unique"`
	SessionID string `json:"session_id" river:"unique"`
	Reason    string `json:"reason" river:"unique"`
	Gen       int64  `json:"gen" river:"unique"`
	// QueuedAt is when the job was queued by the pipeline's clock, in Unix
	// milliseconds (Depth's age).
	QueuedAt int64 `json:"queued_at"`
}

func (ExtractArgs) Kind() string { return KindExtract }

// IdleArgs are a memory.idle job's args; IdleGen advances when the job
// queues the idle extraction, so the next quiet period gets its own job.
type IdleArgs struct {
	AgentID   string `json:"agent_id" river:"unique"`
	ActorID   string `json:"actor_id" river:"unique"`
	SessionID string `json:"session_id" river:"unique"`
	IdleGen   int64  `json:"idle_gen" river:"unique"`
}

func (IdleArgs) Kind() string { return KindIdle }

// uniqueWhileLive de-duplicates a job while one with the same unique args
// waits, runs or waits for a retry (River requires running among them;
// the generations let a new job in while one runs).
var uniqueWhileLive = river.UniqueOpts{ByArgs: true, ByState: jobs.LiveStates}

// errForgotten reports that the actor was forgotten after the work began:
// its writes were not made.
var errForgotten = errors.New("memory pipeline: actor forgotten meanwhile")

// session bookkeeping: the extraction cursor.
type sessionState struct {
	CursorID string
	CursorTS time.Time
}

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrations are the pipeline's PostgreSQL tables (memory_pipeline_*),
// applied by New through pg.Migrate on the jobs Queue's pool.
func Migrations() []pg.Migration { return pg.FromFS("memory_pipeline", migrationFS, "migrations") }

// sqliteSchema is the same tables in the SQLite job database.
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS memory_pipeline_sessions (
	agent_id      TEXT NOT NULL,
	actor_id      TEXT NOT NULL,
	session_id    TEXT NOT NULL,
	pending_turns INTEGER NOT NULL DEFAULT 0,
	last_turn_at  INTEGER NOT NULL DEFAULT 0,
	idle_done     INTEGER NOT NULL DEFAULT 0,
	cursor_id     TEXT NOT NULL DEFAULT '',
	cursor_ts     INTEGER NOT NULL DEFAULT 0,
	gen           INTEGER NOT NULL DEFAULT 0,
	idle_gen      INTEGER NOT NULL DEFAULT 0,
	queued_gen      INTEGER NOT NULL DEFAULT -1,
	idle_queued_gen INTEGER NOT NULL DEFAULT -1,
	PRIMARY KEY (agent_id, actor_id, session_id)
);
CREATE TABLE IF NOT EXISTS memory_pipeline_harvest (
	agent_id  TEXT NOT NULL,
	actor_id  TEXT NOT NULL,
	cursor_ts INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (agent_id, actor_id)
);
CREATE TABLE IF NOT EXISTS memory_pipeline_consolidations (
	actor_id TEXT PRIMARY KEY,
	gen      INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS memory_pipeline_forgotten (
	actor_id TEXT PRIMARY KEY,
	epoch    INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS memory_pipeline_rejections (
	actor_id   TEXT NOT NULL,
	hash       TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (actor_id, hash)
);
`

// txn is a transaction of the job database: SQL through one interface for
// both backends, and the raw *sql.Tx or pgx.Tx for River (InsertTx,
// CompleteTx, DeleteTx).
type txn interface {
	conn
	raw() any
}

// conn runs SQL written with ? placeholders (rebound to $n on
// PostgreSQL). A missing row is sql.ErrNoRows on both backends.
type conn interface {
	exec(ctx context.Context, q string, args ...any) error
	queryRow(ctx context.Context, q string, args ...any) row
	// each calls fn for every row of the query.
	each(ctx context.Context, q string, args []any, fn func(r row) error) error
}

// queryStrings is the first column of every row of the query.
func queryStrings(ctx context.Context, c conn, q string, args ...any) ([]string, error) {
	var out []string
	err := c.each(ctx, q, args, func(r row) error {
		var s string
		err := r.Scan(&s)
		out = append(out, s)
		return err
	})
	return out, err
}

type row interface{ Scan(dest ...any) error }

// sqlConn is a *sql.DB or *sql.Tx; with stmts set, the transaction's
// queries use statements prepared once (SQLite re-parsing them was a few
// per cent of a turn's CPU).
type sqlConn struct {
	c interface {
		ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
		QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
		QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	}
	tx    *sql.Tx
	stmts *stmtCache
}

// stmt is the transaction's handle on q's prepared statement, or nil.
func (c sqlConn) stmt(ctx context.Context, q string) *sql.Stmt {
	if c.tx == nil || c.stmts == nil {
		return nil
	}
	if st := c.stmts.lookup(q); st != nil {
		return c.tx.StmtContext(ctx, st)
	}
	return nil
}

func (c sqlConn) raw() any { return c.tx }
func (c sqlConn) exec(ctx context.Context, q string, args ...any) error {
	if st := c.stmt(ctx, q); st != nil {
		_, err := st.ExecContext(ctx, args...)
		return err
	}
	_, err := c.c.ExecContext(ctx, q, args...)
	return err
}
func (c sqlConn) queryRow(ctx context.Context, q string, args ...any) row {
	if st := c.stmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return c.c.QueryRowContext(ctx, q, args...)
}
func (c sqlConn) each(ctx context.Context, q string, args []any, fn func(r row) error) error {
	var rows *sql.Rows
	var err error
	if st := c.stmt(ctx, q); st != nil {
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = c.c.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// stmtCache holds the SQLite statements of the pipeline's transactions,
// prepared on the job database. A query first seen inside a transaction
// runs unprepared and is prepared before the next transaction begins
// (preparing on the DB inside one would wait for the pool's only
// connection, which the transaction holds). The queries are the
// package's own, so the cache stays small; it stops growing at
// maxStmts.
type stmtCache struct {
	db    *sql.DB
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
	want  []string
	bad   map[string]bool // failed to prepare: not retried
}

const maxStmts = 64

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, stmts: map[string]*sql.Stmt{}, bad: map[string]bool{}}
}

// lookup is q's prepared statement, or nil (q is then prepared later).
func (c *stmtCache) lookup(q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.stmts[q]; st != nil {
		return st
	}
	if !c.bad[q] && len(c.stmts)+len(c.want) < maxStmts && !slices.Contains(c.want, q) {
		c.want = append(c.want, q)
	}
	return nil
}

// prepareWanted prepares the queries lookup missed. The caller must not
// hold a transaction or connection of c.db.
func (c *stmtCache) prepareWanted(ctx context.Context) {
	c.mu.Lock()
	want := c.want
	c.want = nil
	c.mu.Unlock()
	for _, q := range want {
		st, err := c.db.PrepareContext(ctx, q)
		c.mu.Lock()
		if err != nil {
			c.bad[q] = true
		} else if c.stmts[q] == nil {
			c.stmts[q] = st
			st = nil
		}
		c.mu.Unlock()
		if st != nil {
			st.Close()
		}
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.stmts {
		st.Close()
		delete(c.stmts, q)
	}
}

// pgConn is a *pgxpool.Pool or pgx.Tx.
type pgConn struct {
	c interface {
		Exec(ctx context.Context, q string, args ...any) (pgconn.CommandTag, error)
		QueryRow(ctx context.Context, q string, args ...any) pgx.Row
		Query(ctx context.Context, q string, args ...any) (pgx.Rows, error)
	}
	tx pgx.Tx
}

func (c pgConn) raw() any { return c.tx }
func (c pgConn) exec(ctx context.Context, q string, args ...any) error {
	_, err := c.c.Exec(ctx, rebind(q), args...)
	return err
}
func (c pgConn) queryRow(ctx context.Context, q string, args ...any) row {
	return pgRow{c.c.QueryRow(ctx, rebind(q), args...)}
}
func (c pgConn) each(ctx context.Context, q string, args []any, fn func(r row) error) error {
	rows, err := c.c.Query(ctx, rebind(q), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

type pgRow struct{ r pgx.Row }

func (r pgRow) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return sql.ErrNoRows
	}
	return err
}

// rebind turns ? placeholders into $1, $2, … (the SQL here has no ? in
// literals).
func rebind(q string) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// queue is the pipeline's view of the job database: its state tables and
// River.
type queue struct {
	jobs  *jobs.Queue
	owned bool // opened by New: Close closes it

	// minGap is Options.ExtractMinInterval; lastExtract holds, per
	// session, the wall time its last turn-count job was scheduled for
	// (entries older than minGap are pruned as the map grows).
	minGap      time.Duration
	mu          sync.Mutex
	lastExtract map[sessionKey]time.Time

	stmts *stmtCache // SQLite job database only

	// Group commit of noted turns (SQLite; see noteGrouped): notePending
	// waits for the holder of noteSlot, a one-place semaphore.
	noteMu      sync.Mutex
	notePending []*note
	noteSlot    chan struct{}
}

// extractAt is when a turn-count job of session k queued now should run:
// zero (at once) unless the session's previous one was scheduled less
// than minGap before now.
func (q *queue) extractAt(k sessionKey, now time.Time) time.Time {
	if q.minGap <= 0 {
		return time.Time{}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if next := q.lastExtract[k].Add(q.minGap); next.After(now) {
		return next
	}
	return time.Time{}
}

// scheduled records that a turn-count job of session k was queued for at
// (zero: now).
func (q *queue) scheduled(k sessionKey, at, now time.Time) {
	if q.minGap <= 0 {
		return
	}
	if at.IsZero() {
		at = now
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lastExtract == nil {
		q.lastExtract = map[sessionKey]time.Time{}
	}
	if len(q.lastExtract) >= 1024 && len(q.lastExtract)%1024 == 0 {
		for key, t := range q.lastExtract {
			if now.Sub(t) >= q.minGap {
				delete(q.lastExtract, key)
			}
		}
	}
	q.lastExtract[k] = at
}

// sqliteAdded are the columns added to memory_pipeline_sessions after its
// first release (migrations/002_queued_gen.sql on PostgreSQL).
var sqliteAdded = []struct{ name, def string }{
	{"queued_gen", "INTEGER NOT NULL DEFAULT -1"},
	{"idle_queued_gen", "INTEGER NOT NULL DEFAULT -1"},
}

func openState(ctx context.Context, q *jobs.Queue) error {
	if db := q.DB(); db != nil {
		if _, err := db.ExecContext(ctx, sqliteSchema); err != nil {
			return fmt.Errorf("memory pipeline schema: %w", err)
		}
		cols, err := queryStrings(ctx, sqlConn{c: db}, `SELECT name FROM pragma_table_info('memory_pipeline_sessions')`)
		if err != nil {
			return fmt.Errorf("memory pipeline schema: %w", err)
		}
		for _, c := range sqliteAdded {
			if slices.Contains(cols, c.name) {
				continue
			}
			if _, err := db.ExecContext(ctx, `ALTER TABLE memory_pipeline_sessions ADD COLUMN `+c.name+` `+c.def); err != nil {
				return fmt.Errorf("memory pipeline schema: add %s: %w", c.name, err)
			}
		}
		return nil
	}
	if _, err := pg.Migrate(ctx, q.Pool(), Migrations()); err != nil {
		return fmt.Errorf("memory pipeline schema: %w", err)
	}
	return nil
}

func (q *queue) db() conn {
	if db := q.jobs.DB(); db != nil {
		return sqlConn{c: db}
	}
	return pgConn{c: q.jobs.Pool()}
}

// tx runs fn in a write transaction of the job database (BEGIN IMMEDIATE
// on SQLite). On PostgreSQL, when actorID is set, the transaction first
// takes the actor's advisory lock, which serialises guard and forget per
// actor as SQLite's write lock does. fn must not use q.db(): on SQLite the
// pool has one connection, held by the transaction.
func (q *queue) tx(ctx context.Context, actorID string, fn func(tx txn) error) error {
	if db := q.jobs.DB(); db != nil {
		if q.stmts != nil {
			q.stmts.prepareWanted(ctx)
		}
		region := trace.StartRegion(ctx, "wait: jobs db")
		tx, err := db.BeginTx(ctx, nil)
		region.End()
		if err != nil {
			return err
		}
		defer tx.Rollback()
		defer trace.StartRegion(ctx, "hold: jobs db").End()
		if err := fn(sqlConn{c: tx, tx: tx, stmts: q.stmts}); err != nil {
			return err
		}
		return tx.Commit()
	}
	tx, err := q.jobs.Pool().Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if actorID != "" {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('memory_pipeline:' || $1, 0))`, actorID); err != nil {
			return fmt.Errorf("actor lock: %w", err)
		}
	}
	if err := fn(pgConn{c: tx, tx: tx}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (q *queue) close() error {
	if q.stmts != nil {
		q.stmts.close()
	}
	if q.owned {
		return q.jobs.Close()
	}
	return nil
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

func (q *queue) extractOpts(maxAttempts int) *river.InsertOpts {
	return &river.InsertOpts{Queue: Queue, MaxAttempts: maxAttempts, UniqueOpts: uniqueWhileLive}
}

// noteTurn counts one turn of a session, makes sure an idle job waits for
// the session, and every `every` turns enqueues an extraction job unless
// one is already waiting — all in one transaction. It reports whether it
// enqueued an extraction.
//
// Back-to-back turns are coalesced without touching River: the session row
// remembers the generations it last queued jobs for (queued_gen,
// idle_queued_gen). While the extraction job of the current gen waits (it
// has not begun: begin advances gen), a turn inserts nothing and leaves
// pending_turns counting, so the first turn noted after that job begins
// queues the next one; that job reads from the cursor and covers every turn
// since. The idle job of the current idle_gen is inserted once (it snoozes
// until the session is quiet); sweeping it advances idle_gen.
//
// Under back-to-back turns the job is spaced from the session's previous
// one by minGap (see extractAt), so it waits and coalesces more turns.
func (q *queue) noteTurn(ctx context.Context, agentID, actorID, sessionID string, every, maxAttempts int, idleAfter time.Duration, now time.Time) (bool, error) {
	n := &note{k: sessionKey{agentID, actorID, sessionID}, every: every, maxAttempts: maxAttempts, idleAfter: idleAfter, now: now}
	if q.jobs.DB() == nil {
		// PostgreSQL: a pool of connections, one transaction per turn.
		err := q.tx(ctx, "", func(tx txn) error { return q.noteOne(ctx, tx, n) })
		if err == nil && n.enq {
			q.scheduled(n.k, n.at, time.Now())
		}
		return n.enq, err
	}
	return q.noteGrouped(ctx, n)
}

// note is one turn counted by noteTurn: its arguments, and its outcome once
// the transaction holding it has committed (done).
type note struct {
	k                  sessionKey
	every, maxAttempts int
	idleAfter          time.Duration
	now                time.Time

	enq  bool      // an extraction job was inserted
	at   time.Time // when that job is scheduled (zero: at once)
	err  error
	done bool
}

// testNoteFault, set by tests only, fails noteOne for the sessions it
// returns an error for.
var testNoteFault func(sessionKey) error

// noteBatchTimeout bounds one group commit of noted turns. The batch does
// not run under any one caller's context (a caller that gives up must not
// fail the others' turns), so this is its deadline.
const noteBatchTimeout = 30 * time.Second

// noteGrouped counts n on SQLite with group commit: the job database has
// one connection, and with many turns in flight one transaction per turn
// queued them all behind each other (and behind whichever goroutine held
// the connection while descheduled). Every noted turn joins a pending list;
// whoever takes the commit slot commits the whole list in one transaction,
// each turn in its own savepoint so one turn's failure fails only that turn.
// A turn whose caller waited for the slot finds itself already committed by
// the slot's previous holder or commits itself with those that joined
// meanwhile, so a turn waits for at most one other commit before its own.
// Durability is unchanged: noteTurn returns after the commit holding the
// turn. A caller whose ctx ends while it waits returns ctx's error; its turn
// may still be counted by a later commit (one extra count, harmless: the
// job reads from the cursor).
func (q *queue) noteGrouped(ctx context.Context, n *note) (bool, error) {
	q.noteMu.Lock()
	slot := q.slot()
	q.notePending = append(q.notePending, n)
	q.noteMu.Unlock()

	region := trace.StartRegion(ctx, "wait: commit slot")
	select {
	case slot <- struct{}{}:
	case <-ctx.Done():
		region.End()
		return false, ctx.Err()
	}
	region.End()
	defer func() { <-slot }()
	if n.done { // committed by the slot's previous holder
		return n.enq, n.err
	}
	q.noteMu.Lock()
	batch := q.notePending
	q.notePending = nil
	q.noteMu.Unlock()

	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), noteBatchTimeout)
	defer cancel()
	err := q.tx(bctx, "", func(tx txn) error {
		if len(batch) == 1 {
			return q.noteOne(bctx, tx, batch[0])
		}
		for _, b := range batch {
			if err := tx.exec(bctx, `SAVEPOINT note`); err != nil {
				return err
			}
			if b.err = q.noteOne(bctx, tx, b); b.err != nil {
				if err := tx.exec(bctx, `ROLLBACK TO note`); err != nil {
					return err
				}
				b.enq = false
			}
			if err := tx.exec(bctx, `RELEASE note`); err != nil {
				return err
			}
		}
		return nil
	})
	now := time.Now()
	for _, b := range batch {
		if err != nil {
			b.err, b.enq = err, false
		} else if b.enq {
			q.scheduled(b.k, b.at, now)
		}
		b.done = true
	}
	return n.enq, n.err
}

// slot returns the group commit's one-place semaphore; q.noteMu is held.
func (q *queue) slot() chan struct{} {
	if q.noteSlot == nil {
		q.noteSlot = make(chan struct{}, 1)
	}
	return q.noteSlot
}

// noteOne is noteTurn's work for one turn inside tx; it sets n.enq and n.at.
func (q *queue) noteOne(ctx context.Context, tx txn, n *note) error {
	n.enq, n.at = false, time.Time{}
	if testNoteFault != nil {
		if err := testNoteFault(n.k); err != nil {
			return err
		}
	}
	agentID, actorID, sessionID := n.k.ag, n.k.ac, n.k.se
	var pending int
	var gen, idleGen, queuedGen, idleQueuedGen int64
	err := tx.queryRow(ctx, `INSERT INTO memory_pipeline_sessions AS s (agent_id, actor_id, session_id, pending_turns, last_turn_at, idle_done)
		VALUES(?,?,?,1,?,0)
		ON CONFLICT(agent_id, actor_id, session_id) DO UPDATE SET pending_turns = s.pending_turns + 1, last_turn_at = excluded.last_turn_at, idle_done = 0
		RETURNING pending_turns, gen, idle_gen, queued_gen, idle_queued_gen`, agentID, actorID, sessionID, ms(n.now)).Scan(&pending, &gen, &idleGen, &queuedGen, &idleQueuedGen)
	if err != nil {
		return err
	}
	if idleQueuedGen != idleGen {
		// River schedules by the wall clock; the worker judges idleness
		// by the pipeline's clock and snoozes when the session is not
		// idle yet.
		if _, err := q.jobs.InsertTx(ctx, tx.raw(), IdleArgs{AgentID: agentID, ActorID: actorID, SessionID: sessionID, IdleGen: idleGen},
			&river.InsertOpts{Queue: Queue, ScheduledAt: time.Now().Add(n.idleAfter), UniqueOpts: uniqueWhileLive}); err != nil {
			return err
		}
	}
	extract := pending >= n.every && queuedGen != gen
	if extract {
		opts := q.extractOpts(n.maxAttempts)
		at := q.extractAt(n.k, time.Now())
		opts.ScheduledAt = at
		res, err := q.jobs.InsertTx(ctx, tx.raw(), ExtractArgs{AgentID: agentID, ActorID: actorID, SessionID: sessionID, Reason: reasonTurns, Gen: gen, QueuedAt: ms(n.now)}, opts)
		if err != nil {
			return err
		}
		n.enq, n.at = !res.UniqueSkippedAsDuplicate, at
	}
	if !extract && idleQueuedGen == idleGen {
		return nil
	}
	set := `idle_queued_gen = ?`
	args := []any{idleGen}
	if extract {
		set += `, pending_turns = 0, queued_gen = ?`
		args = append(args, gen)
	}
	return tx.exec(ctx, `UPDATE memory_pipeline_sessions SET `+set+` WHERE agent_id=? AND actor_id=? AND session_id=?`, append(args, agentID, actorID, sessionID)...)
}

type sessionKey struct{ ag, ac, se string }

// enqueueIdle enqueues an idle extraction for every session whose last
// turn is at least idleAfter old (by now) and that has not had one since;
// it returns how many it enqueued. With only set, it looks at that one
// session.
func (q *queue) enqueueIdle(ctx context.Context, idleAfter time.Duration, now time.Time, maxAttempts int, only *sessionKey) (int, error) {
	n := 0
	err := q.tx(ctx, "", func(tx txn) error {
		n = 0
		sel := `SELECT agent_id, actor_id, session_id FROM memory_pipeline_sessions WHERE idle_done = 0 AND last_turn_at <= ?`
		args := []any{ms(now.Add(-idleAfter))}
		if only != nil {
			sel += ` AND agent_id = ? AND actor_id = ? AND session_id = ?`
			args = append(args, only.ag, only.ac, only.se)
		}
		var keys []sessionKey
		if err := tx.each(ctx, sel, args, func(r row) error {
			var k sessionKey
			err := r.Scan(&k.ag, &k.ac, &k.se)
			keys = append(keys, k)
			return err
		}); err != nil {
			return err
		}
		for _, k := range keys {
			var gen int64
			if err := tx.queryRow(ctx, `UPDATE memory_pipeline_sessions SET idle_done = 1, pending_turns = 0, idle_gen = idle_gen + 1
				WHERE agent_id=? AND actor_id=? AND session_id=? RETURNING gen`, k.ag, k.ac, k.se).Scan(&gen); err != nil {
				return err
			}
			res, err := q.jobs.InsertTx(ctx, tx.raw(), ExtractArgs{AgentID: k.ag, ActorID: k.ac, SessionID: k.se, Reason: reasonIdle, Gen: gen, QueuedAt: ms(now)}, q.extractOpts(maxAttempts))
			if err != nil {
				return err
			}
			if !res.UniqueSkippedAsDuplicate {
				n++
			}
		}
		return nil
	})
	return n, err
}

// idleDue reports, for a session, when it becomes idle by the pipeline's
// clock (zero when it has no pending idle extraction).
func (q *queue) idleDue(ctx context.Context, k sessionKey, idleAfter time.Duration) (time.Time, error) {
	var last int64
	err := q.db().queryRow(ctx, `SELECT last_turn_at FROM memory_pipeline_sessions WHERE agent_id=? AND actor_id=? AND session_id=? AND idle_done = 0`,
		k.ag, k.ac, k.se).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	return fromMS(last).Add(idleAfter), nil
}

// pendingIdle lists the sessions waiting for an idle extraction (for
// Start, which makes sure each has an idle job).
func (q *queue) pendingIdle(ctx context.Context) ([]IdleArgs, error) {
	var out []IdleArgs
	err := q.db().each(ctx, `SELECT agent_id, actor_id, session_id, idle_gen FROM memory_pipeline_sessions WHERE idle_done = 0`, nil, func(r row) error {
		var a IdleArgs
		err := r.Scan(&a.AgentID, &a.ActorID, &a.SessionID, &a.IdleGen)
		out = append(out, a)
		return err
	})
	return out, err
}

// begin is the start of a job's run: it advances the session's job
// generation (when the job is of the current one), so turns from now on
// queue a new job, and reads the actor's forget epoch, so a forget from
// now on makes the job's writes no-ops.
func (q *queue) begin(ctx context.Context, a ExtractArgs) (epoch int64, err error) {
	err = q.tx(ctx, a.ActorID, func(tx txn) error {
		if err := tx.exec(ctx, `UPDATE memory_pipeline_sessions SET gen = gen + 1 WHERE agent_id=? AND actor_id=? AND session_id=? AND gen = ?`,
			a.AgentID, a.ActorID, a.SessionID, a.Gen); err != nil {
			return err
		}
		epoch, err = epochOf(ctx, tx, a.ActorID)
		return err
	})
	return epoch, err
}

// epochOf is the actor's forget epoch: 0 until the first forget.
func epochOf(ctx context.Context, c conn, actorID string) (int64, error) {
	var e int64
	err := c.queryRow(ctx, `SELECT epoch FROM memory_pipeline_forgotten WHERE actor_id = ?`, actorID).Scan(&e)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return e, err
}

// consolidationGenOf is the actor's consolidation generation: how many
// extraction writes have consolidated its long-term records (0 before the
// first). Read it before listing the records a consolidation decides on.
func consolidationGenOf(ctx context.Context, c conn, actorID string) (int64, error) {
	var g int64
	err := c.queryRow(ctx, `SELECT gen FROM memory_pipeline_consolidations WHERE actor_id = ?`, actorID).Scan(&g)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return g, err
}

// advanceConsolidationGen moves the actor's consolidation generation from
// gen to gen+1 in tx, or returns errConsolidationRace when it is no longer
// gen. The row it writes stays locked until tx ends, so a concurrent
// consolidation's check waits and then sees the new generation.
func advanceConsolidationGen(ctx context.Context, tx txn, actorID string, gen int64) error {
	var got int64
	err := tx.queryRow(ctx, `INSERT INTO memory_pipeline_consolidations AS c (actor_id, gen) VALUES(?, 1)
		ON CONFLICT(actor_id) DO UPDATE SET gen = c.gen + 1 WHERE c.gen = ?
		RETURNING gen`, actorID, gen).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) || err == nil && got != gen+1 {
		return errConsolidationRace
	}
	return err
}

// epoch reads the actor's forget epoch outside a transaction. Read it
// before reading the events the work is based on.
func (q *queue) epoch(ctx context.Context, actorID string) (int64, error) {
	e, err := epochOf(ctx, q.db(), actorID)
	if err != nil {
		return 0, fmt.Errorf("forget epoch of %s: %w", actorID, err)
	}
	return e, nil
}

// guard runs fn — the writes of work on actorID that began at epoch —
// inside a write transaction of the job database that first checks the
// actor's epoch; fn's changes to the job database go through tx and commit
// with it. When the actor was forgotten since, fn does not run and guard
// returns errForgotten. Forget takes the same lock (SQLite's write lock,
// across processes too; the actor's advisory lock on PostgreSQL, across
// instances), so a write either completes before a forget starts, and the
// forget removes it, or sees the new epoch and is not made.
func (q *queue) guard(ctx context.Context, actorID string, epoch int64, fn func(tx txn) error) error {
	return q.tx(ctx, actorID, func(tx txn) error {
		cur, err := epochOf(ctx, tx, actorID)
		if err != nil {
			return fmt.Errorf("forget epoch of %s: %w", actorID, err)
		}
		if cur != epoch {
			return errForgotten
		}
		return fn(tx)
	})
}

func setCursorTx(ctx context.Context, tx txn, agentID, actorID, sessionID string, cur sessionState) error {
	return tx.exec(ctx, `INSERT INTO memory_pipeline_sessions(agent_id, actor_id, session_id, cursor_id, cursor_ts) VALUES(?,?,?,?,?)
		ON CONFLICT(agent_id, actor_id, session_id) DO UPDATE SET cursor_id = excluded.cursor_id, cursor_ts = excluded.cursor_ts`,
		agentID, actorID, sessionID, cur.CursorID, cur.CursorTS.UnixNano())
}

func (q *queue) cursor(ctx context.Context, agentID, actorID, sessionID string) (sessionState, error) {
	var id string
	var ts int64
	err := q.db().queryRow(ctx, `SELECT cursor_id, cursor_ts FROM memory_pipeline_sessions WHERE agent_id=? AND actor_id=? AND session_id=?`,
		agentID, actorID, sessionID).Scan(&id, &ts)
	if errors.Is(err, sql.ErrNoRows) {
		return sessionState{}, nil
	}
	if err != nil {
		return sessionState{}, err
	}
	var t time.Time
	if ts != 0 {
		t = time.Unix(0, ts).UTC()
	}
	return sessionState{CursorID: id, CursorTS: t}, nil
}

// lag is the number of live extraction jobs (waiting, running or waiting
// for a retry; discarded ones are not counted) and the age of the oldest
// by the pipeline's clock, read from River's job table.
func (q *queue) lag(ctx context.Context, now time.Time) (int, time.Duration, error) {
	var n int
	var oldest sql.NullInt64
	var err error
	const live = `state IN ('available','pending','running','retryable','scheduled')`
	if db := q.jobs.DB(); db != nil {
		err = db.QueryRowContext(ctx, `SELECT count(*), min(json_extract(args, '$.queued_at')) FROM river_job WHERE kind = ? AND `+live, KindExtract).Scan(&n, &oldest)
	} else {
		err = q.jobs.Pool().QueryRow(ctx, `SELECT count(*), min((args->>'queued_at')::bigint) FROM river_job WHERE kind = $1 AND `+live, KindExtract).Scan(&n, &oldest)
	}
	if err != nil {
		return 0, 0, err
	}
	var age time.Duration
	if oldest.Valid {
		if age = now.Sub(fromMS(oldest.Int64)); age < 0 {
			age = 0
		}
	}
	return n, age, nil
}

func (q *queue) agentsOf(ctx context.Context, actorID string) ([]string, error) {
	return queryStrings(ctx, q.db(), `SELECT DISTINCT agent_id FROM memory_pipeline_sessions WHERE actor_id = ? OR ? = '' ORDER BY agent_id`, actorID, actorID)
}

func (q *queue) actorsOf(ctx context.Context, agentID string) ([]string, error) {
	return queryStrings(ctx, q.db(), `SELECT DISTINCT actor_id FROM memory_pipeline_sessions WHERE agent_id = ? ORDER BY actor_id`, agentID)
}

func (q *queue) harvestCursor(ctx context.Context, agentID, actorID string) (time.Time, error) {
	var ts int64
	err := q.db().queryRow(ctx, `SELECT cursor_ts FROM memory_pipeline_harvest WHERE agent_id=? AND actor_id=?`, agentID, actorID).Scan(&ts)
	if errors.Is(err, sql.ErrNoRows) || ts == 0 {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, ts).UTC(), nil
}

func setHarvestCursorTx(ctx context.Context, tx txn, agentID, actorID string, t time.Time) error {
	return tx.exec(ctx, `INSERT INTO memory_pipeline_harvest(agent_id, actor_id, cursor_ts) VALUES(?,?,?)
		ON CONFLICT(agent_id, actor_id) DO UPDATE SET cursor_ts = excluded.cursor_ts`, agentID, actorID, t.UnixNano())
}

func (q *queue) isRejected(ctx context.Context, actorID, hash string) (bool, error) {
	var n int
	err := q.db().queryRow(ctx, `SELECT COUNT(*) FROM memory_pipeline_rejections WHERE actor_id=? AND hash=?`, actorID, hash).Scan(&n)
	return n > 0, err
}

func (q *queue) markRejected(ctx context.Context, actorID, hash string, now time.Time) error {
	return q.db().exec(ctx, `INSERT INTO memory_pipeline_rejections(actor_id, hash, created_at) VALUES(?,?,?) ON CONFLICT DO NOTHING`, actorID, hash, ms(now))
}

// forget makes the actor forgotten in one transaction: it increments the
// actor's forget epoch, so that work begun before can no longer write
// (guard), deletes every row of the actor — its River jobs that are not
// running (waiting, retrying, finished or discarded), session cursors and
// turn counters, harvest cursors, rejection hashes — and, before
// committing, calls also(agents), where agents are the agents the actor
// has rows with. also must not use the job database. An error from also
// rolls everything back. A job running meanwhile is dropped by its worker
// (its epoch is stale), which deletes its own row.
func (q *queue) forget(ctx context.Context, actorID string, also func(agents []string) error) error {
	return q.tx(ctx, actorID, func(tx txn) error {
		if err := tx.exec(ctx, `INSERT INTO memory_pipeline_forgotten AS f (actor_id, epoch) VALUES(?, 1)
			ON CONFLICT(actor_id) DO UPDATE SET epoch = f.epoch + 1`, actorID); err != nil {
			return err
		}
		agents, err := queryStrings(ctx, tx, `SELECT agent_id FROM memory_pipeline_sessions WHERE actor_id = ? UNION SELECT agent_id FROM memory_pipeline_harvest WHERE actor_id = ? ORDER BY 1`, actorID, actorID)
		if err != nil {
			return err
		}
		for _, kind := range []string{KindExtract, KindIdle} {
			if _, err := q.jobs.DeleteTx(ctx, tx.raw(), kind, "actor_id", actorID); err != nil {
				return err
			}
		}
		for _, s := range []string{
			`DELETE FROM memory_pipeline_sessions WHERE actor_id = ?`, `DELETE FROM memory_pipeline_harvest WHERE actor_id = ?`,
			`DELETE FROM memory_pipeline_rejections WHERE actor_id = ?`,
		} {
			if err := tx.exec(ctx, s, actorID); err != nil {
				return err
			}
		}
		if also != nil {
			return also(agents)
		}
		return nil
	})
}

// retryAfter is the backoff before attempt+1 of a failed job: attempt²
// seconds, capped at 10 minutes.
func retryAfter(attempt int) time.Duration {
	d := time.Duration(attempt*attempt) * time.Second
	if d > 10*time.Minute || d < 0 {
		d = 10 * time.Minute
	}
	return d
}

// ForgetEpoch returns how many times actorID has been forgotten (0 before
// the first Forget), read from the job database that every instance
// shares: a turn that reads it before it waits behind another and again
// before it runs can tell that the actor was forgotten meanwhile.
func (p *Pipeline) ForgetEpoch(ctx context.Context, actorID string) (int64, error) {
	e, err := epochOf(ctx, p.q.db(), actorID)
	if err != nil {
		return 0, fmt.Errorf("memory pipeline: forget epoch: %w", err)
	}
	return e, nil
}
