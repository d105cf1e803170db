package pipeline

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite driver, "sqlite"
)

// queue is the durable extraction job table. A job is claimed by setting a
// lease (visibility timeout) in one UPDATE … RETURNING statement; it is
// deleted only when it completes. A worker that crashes leaves the lease to
// expire, and the job runs again: extraction is at-least-once and
// consolidation makes a rerun idempotent.
type queue struct {
	db *sql.DB
}

// job reasons
const (
	reasonTurns = "turns" // every ExtractEveryTurns turns
	reasonIdle  = "idle"  // session idle: extraction plus the session summary
)

type job struct {
	ID        int64
	AgentID   string
	ActorID   string
	SessionID string
	Reason    string
	Attempts  int
	CreatedAt time.Time
	// Epoch is the actor's forget epoch when the job was claimed (read in
	// the claiming transaction); a forget since then makes its writes
	// no-ops (queue.guard).
	Epoch int64
}

// errForgotten reports that the actor was forgotten after the work began:
// its writes were not made.
var errForgotten = errors.New("memory pipeline: actor forgotten meanwhile")

// session bookkeeping: the extraction cursor and the turn counter.
type sessionState struct {
	CursorID string
	CursorTS time.Time
}

const schema = `
CREATE TABLE IF NOT EXISTS jobs (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	agent_id     TEXT NOT NULL,
	actor_id     TEXT NOT NULL,
	session_id   TEXT NOT NULL,
	reason       TEXT NOT NULL,
	created_at   INTEGER NOT NULL,
	run_after    INTEGER NOT NULL,
	leased_until INTEGER NOT NULL DEFAULT 0,
	attempts     INTEGER NOT NULL DEFAULT 0,
	last_error   TEXT NOT NULL DEFAULT '',
	dead         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs(dead, run_after, leased_until);
CREATE TABLE IF NOT EXISTS sessions (
	agent_id      TEXT NOT NULL,
	actor_id      TEXT NOT NULL,
	session_id    TEXT NOT NULL,
	pending_turns INTEGER NOT NULL DEFAULT 0,
	last_turn_at  INTEGER NOT NULL DEFAULT 0,
	idle_done     INTEGER NOT NULL DEFAULT 0,
	cursor_id     TEXT NOT NULL DEFAULT '',
	cursor_ts     INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (agent_id, actor_id, session_id)
);
CREATE TABLE IF NOT EXISTS harvest (
	agent_id  TEXT NOT NULL,
	actor_id  TEXT NOT NULL,
	cursor_ts INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (agent_id, actor_id)
);
-- One row per actor ever forgotten: Forget increments epoch in the same
-- transaction that deletes the actor's jobs, and every write of extraction
-- runs in a transaction that first checks the epoch it started with.
CREATE TABLE IF NOT EXISTS forgotten (
	actor_id TEXT PRIMARY KEY,
	epoch    INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS rejections (
	actor_id   TEXT NOT NULL,
	hash       TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (actor_id, hash)
);
`

func openQueue(path string) (*queue, error) {
	if path != ":memory:" {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("extraction jobs: %w", err)
		}
	}
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open extraction jobs %s: %w", path, err)
	}
	// One connection: transactions are short, and it keeps ":memory:" one
	// database and in-process writers from meeting SQLITE_BUSY; other
	// processes (the CLI beside a server) wait on busy_timeout.
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("extraction jobs schema %s: %w", path, err)
	}
	return &queue{db: db}, nil
}

func (q *queue) close() error { return q.db.Close() }

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// noteTurn counts one turn of a session and, every `every` turns, enqueues
// a job unless one is already waiting. It reports whether it enqueued.
func (q *queue) noteTurn(ctx context.Context, agentID, actorID, sessionID string, every int, now time.Time) (bool, error) {
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var pending int
	err = tx.QueryRowContext(ctx, `INSERT INTO sessions(agent_id, actor_id, session_id, pending_turns, last_turn_at, idle_done)
		VALUES(?,?,?,1,?,0)
		ON CONFLICT(agent_id, actor_id, session_id) DO UPDATE SET pending_turns = pending_turns + 1, last_turn_at = excluded.last_turn_at, idle_done = 0
		RETURNING pending_turns`, agentID, actorID, sessionID, ms(now)).Scan(&pending)
	if err != nil {
		return false, err
	}
	enq := false
	if pending >= every {
		if enq, err = q.enqueueTx(ctx, tx, agentID, actorID, sessionID, reasonTurns, now); err != nil {
			return false, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET pending_turns = 0 WHERE agent_id=? AND actor_id=? AND session_id=?`, agentID, actorID, sessionID); err != nil {
			return false, err
		}
	}
	return enq, tx.Commit()
}

// enqueueTx adds a job unless an unclaimed, live job of the same reason is
// already waiting for the session (it will read the same new events).
func (q *queue) enqueueTx(ctx context.Context, tx *sql.Tx, agentID, actorID, sessionID, reason string, now time.Time) (bool, error) {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM jobs WHERE agent_id=? AND actor_id=? AND session_id=? AND reason=? AND dead=0 AND leased_until <= ?`,
		agentID, actorID, sessionID, reason, ms(now)).Scan(&n); err != nil {
		return false, err
	}
	if n > 0 {
		return false, nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO jobs(agent_id, actor_id, session_id, reason, created_at, run_after) VALUES(?,?,?,?,?,?)`,
		agentID, actorID, sessionID, reason, ms(now), ms(now))
	return err == nil, err
}

// enqueueIdle enqueues an idle job for every session whose last turn is at
// least idleAfter old and that has not had one since; it returns how many.
func (q *queue) enqueueIdle(ctx context.Context, idleAfter time.Duration, now time.Time) (int, error) {
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT agent_id, actor_id, session_id FROM sessions WHERE idle_done = 0 AND last_turn_at <= ?`, ms(now.Add(-idleAfter)))
	if err != nil {
		return 0, err
	}
	type key struct{ ag, ac, se string }
	var ks []key
	for rows.Next() {
		var k key
		if err := rows.Scan(&k.ag, &k.ac, &k.se); err != nil {
			rows.Close()
			return 0, err
		}
		ks = append(ks, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	n := 0
	for _, k := range ks {
		ok, err := q.enqueueTx(ctx, tx, k.ag, k.ac, k.se, reasonIdle, now)
		if err != nil {
			return 0, err
		}
		if ok {
			n++
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET idle_done = 1, pending_turns = 0 WHERE agent_id=? AND actor_id=? AND session_id=?`, k.ag, k.ac, k.se); err != nil {
			return 0, err
		}
	}
	return n, tx.Commit()
}

// claim leases the oldest ready job for lease; ok is false when none is.
// The actor's forget epoch is read in the same transaction, so a job
// claimed before a forget always carries the epoch that forget replaces.
func (q *queue) claim(ctx context.Context, lease time.Duration, now time.Time) (job, bool, error) {
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return job{}, false, fmt.Errorf("claim extraction job: %w", err)
	}
	defer tx.Rollback()
	var j job
	var created int64
	err = tx.QueryRowContext(ctx, `UPDATE jobs SET leased_until = ?, attempts = attempts + 1
		WHERE id = (SELECT id FROM jobs WHERE dead = 0 AND run_after <= ? AND leased_until <= ? ORDER BY id LIMIT 1)
		RETURNING id, agent_id, actor_id, session_id, reason, attempts, created_at`,
		ms(now.Add(lease)), ms(now), ms(now)).Scan(&j.ID, &j.AgentID, &j.ActorID, &j.SessionID, &j.Reason, &j.Attempts, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return job{}, false, nil
	}
	if err != nil {
		return job{}, false, fmt.Errorf("claim extraction job: %w", err)
	}
	if j.Epoch, err = epochTx(ctx, tx, j.ActorID); err != nil {
		return job{}, false, fmt.Errorf("claim extraction job: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return job{}, false, fmt.Errorf("claim extraction job: %w", err)
	}
	j.CreatedAt = fromMS(created)
	return j, true, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// epochTx is the actor's forget epoch: 0 until the first forget.
func epochTx(ctx context.Context, q querier, actorID string) (int64, error) {
	var e int64
	err := q.QueryRowContext(ctx, `SELECT epoch FROM forgotten WHERE actor_id = ?`, actorID).Scan(&e)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return e, err
}

// epoch reads the actor's forget epoch outside a transaction. Read it
// before reading the events the work is based on.
func (q *queue) epoch(ctx context.Context, actorID string) (int64, error) {
	e, err := epochTx(ctx, q.db, actorID)
	if err != nil {
		return 0, fmt.Errorf("forget epoch of %s: %w", actorID, err)
	}
	return e, nil
}

// guard runs fn — the writes of work on actorID that began at epoch —
// inside a write transaction of the job database that first checks the
// actor's epoch; fn's queue changes go through tx and commit with it. When
// the actor was forgotten since, fn does not run and guard returns
// errForgotten. Forget takes the same write lock (SQLite's, so across
// processes too), so a write either completes before a forget starts, and
// the forget removes it, or sees the new epoch and is not made.
//
// fn must not use q.db: the pool has one connection, held by tx.
func (q *queue) guard(ctx context.Context, actorID string, epoch int64, fn func(tx *sql.Tx) error) error {
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	cur, err := epochTx(ctx, tx, actorID)
	if err != nil {
		return fmt.Errorf("forget epoch of %s: %w", actorID, err)
	}
	if cur != epoch {
		return errForgotten
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// completeTx deletes the job and moves the session's cursor.
func completeTx(ctx context.Context, tx *sql.Tx, j job, cur sessionState, moved bool) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM jobs WHERE id = ?`, j.ID); err != nil {
		return err
	}
	if moved {
		return setCursorTx(ctx, tx, j.AgentID, j.ActorID, j.SessionID, cur)
	}
	return nil
}

func setCursorTx(ctx context.Context, tx *sql.Tx, agentID, actorID, sessionID string, cur sessionState) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO sessions(agent_id, actor_id, session_id, cursor_id, cursor_ts) VALUES(?,?,?,?,?)
		ON CONFLICT(agent_id, actor_id, session_id) DO UPDATE SET cursor_id = excluded.cursor_id, cursor_ts = excluded.cursor_ts`,
		agentID, actorID, sessionID, cur.CursorID, cur.CursorTS.UnixNano())
	return err
}

// fail releases the job for a retry after a backoff of attempts² seconds
// (capped at 10 minutes), or marks it dead after maxAttempts; a dead job
// stays in the table with its last error for inspection.
func (q *queue) fail(ctx context.Context, j job, cause error, maxAttempts int, now time.Time) error {
	backoff := time.Duration(j.Attempts*j.Attempts) * time.Second
	if backoff > 10*time.Minute {
		backoff = 10 * time.Minute
	}
	dead := 0
	if j.Attempts >= maxAttempts {
		dead = 1
	}
	msg := cause.Error()
	if len(msg) > 2000 {
		msg = msg[:2000]
	}
	_, err := q.db.ExecContext(ctx, `UPDATE jobs SET leased_until = 0, run_after = ?, last_error = ?, dead = ? WHERE id = ?`,
		ms(now.Add(backoff)), msg, dead, j.ID)
	return err
}

func (q *queue) cursor(ctx context.Context, agentID, actorID, sessionID string) (sessionState, error) {
	var id string
	var ts int64
	err := q.db.QueryRowContext(ctx, `SELECT cursor_id, cursor_ts FROM sessions WHERE agent_id=? AND actor_id=? AND session_id=?`,
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

// lag is the number of live jobs and the age of the oldest.
func (q *queue) lag(ctx context.Context, now time.Time) (int, time.Duration, error) {
	var n int
	var oldest sql.NullInt64
	if err := q.db.QueryRowContext(ctx, `SELECT COUNT(*), MIN(created_at) FROM jobs WHERE dead = 0`).Scan(&n, &oldest); err != nil {
		return 0, 0, err
	}
	var age time.Duration
	if oldest.Valid {
		age = now.Sub(fromMS(oldest.Int64))
		if age < 0 {
			age = 0
		}
	}
	return n, age, nil
}

func (q *queue) agentsOf(ctx context.Context, actorID string) ([]string, error) {
	rows, err := q.db.QueryContext(ctx, `SELECT DISTINCT agent_id FROM sessions WHERE actor_id = ? OR ? = '' ORDER BY agent_id`, actorID, actorID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func (q *queue) actorsOf(ctx context.Context, agentID string) ([]string, error) {
	rows, err := q.db.QueryContext(ctx, `SELECT DISTINCT actor_id FROM sessions WHERE agent_id = ? ORDER BY actor_id`, agentID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func (q *queue) harvestCursor(ctx context.Context, agentID, actorID string) (time.Time, error) {
	var ts int64
	err := q.db.QueryRowContext(ctx, `SELECT cursor_ts FROM harvest WHERE agent_id=? AND actor_id=?`, agentID, actorID).Scan(&ts)
	if errors.Is(err, sql.ErrNoRows) || ts == 0 {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, ts).UTC(), nil
}

func setHarvestCursorTx(ctx context.Context, tx *sql.Tx, agentID, actorID string, t time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO harvest(agent_id, actor_id, cursor_ts) VALUES(?,?,?)
		ON CONFLICT(agent_id, actor_id) DO UPDATE SET cursor_ts = excluded.cursor_ts`, agentID, actorID, t.UnixNano())
	return err
}

func (q *queue) isRejected(ctx context.Context, actorID, hash string) (bool, error) {
	var n int
	err := q.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM rejections WHERE actor_id=? AND hash=?`, actorID, hash).Scan(&n)
	return n > 0, err
}

func (q *queue) markRejected(ctx context.Context, actorID, hash string, now time.Time) error {
	_, err := q.db.ExecContext(ctx, `INSERT OR IGNORE INTO rejections(actor_id, hash, created_at) VALUES(?,?,?)`, actorID, hash, ms(now))
	return err
}

// forget makes the actor forgotten in one transaction: it increments the
// actor's forget epoch, so that work begun before can no longer write
// (guard), deletes every row of the actor — jobs (queued, running or dead),
// session cursors and turn counters, harvest cursors, rejection hashes —
// and, before committing, calls also(agents), where agents are the agents
// the actor has rows with. also must not use q.db. An error from also
// rolls everything back.
func (q *queue) forget(ctx context.Context, actorID string, also func(agents []string) error) error {
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO forgotten(actor_id, epoch) VALUES(?, 1)
		ON CONFLICT(actor_id) DO UPDATE SET epoch = epoch + 1`, actorID); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `SELECT agent_id FROM sessions WHERE actor_id = ?1 UNION SELECT agent_id FROM harvest WHERE actor_id = ?1
		UNION SELECT agent_id FROM jobs WHERE actor_id = ?1 ORDER BY 1`, actorID)
	if err != nil {
		return err
	}
	var agents []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			rows.Close()
			return err
		}
		agents = append(agents, a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, s := range []string{
		`DELETE FROM jobs WHERE actor_id = ?`, `DELETE FROM sessions WHERE actor_id = ?`,
		`DELETE FROM harvest WHERE actor_id = ?`, `DELETE FROM rejections WHERE actor_id = ?`,
	} {
		if _, err := tx.ExecContext(ctx, s, actorID); err != nil {
			return err
		}
	}
	if also != nil {
		if err := also(agents); err != nil {
			return err
		}
	}
	return tx.Commit()
}
