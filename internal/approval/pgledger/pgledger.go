// Package pgledger keeps the approval gate's ledger and paused turns in
// PostgreSQL (SPEC §6.3, §9), so several `tendril serve` instances and the
// CLI share one hash-chained ledger.
//
// Tables (migrations/001_init.sql): approval_ledger (seq, type,
// request_id, hash, line, created_at), one row per entry, line being the
// entry's RFC 8785 canonical JSON exactly as hashed; approval_ledger_archive,
// where an operator reset moves a broken ledger; approval_resume (ref,
// payload BYTEA, created_at), the content-addressed paused turns.
//
// Every writing operation of the gate is one transaction that first takes
// pg_advisory_xact_lock on a key derived from approval_ledger's OID (so
// one key per schema), then reads the rows other instances appended,
// verifies them, and appends its own: the chain stays linear across
// instances and an approved request is executed once however many
// instances see its decision (partial unique indexes on request_id back
// that up). Each append also sends NOTIFY approval_ledger, '<seq>' (and a
// reset 'reset'), delivered at commit; Gate.Watch listens on a dedicated
// connection so another instance's decision reaches OnDecision at once.
//
// Reads (Get, List, Pending, Refresh) take no lock: a statement sees a
// committed prefix of the chain, because appends commit in seq order
// under the lock.
package pgledger

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/pg"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the ledger's schema scripts ("approval/001_init.sql",
// …) for pg.Migrate and `tendril doctor`.
func Migrations() []pg.Migration { return pg.FromFS("approval", migrations, "migrations") }

// Channel is the LISTEN/NOTIFY channel of appends; the payload is the
// appended seq in decimal, or "reset".
const Channel = "approval_ledger"

// lockTag is the high half of the advisory lock key ("appr"); the low
// half is approval_ledger's OID, so each schema has its own lock.
const lockTag int64 = 0x61707072

// commitTimeout bounds COMMIT and ROLLBACK, which run even when the
// operation's context was cancelled after its writes.
const commitTimeout = 30 * time.Second

// Log is the PostgreSQL approval.Log. A Gate uses it from one goroutine
// at a time (under its mutex), except LoadResume, which uses the pool.
type Log struct {
	pool *pgxpool.Pool
	name string
	key  int64

	conn     *pgxpool.Conn // the current writing unit's connection, in a transaction
	first    []byte        // the lowest row's line of the ledger last loaded: its identity
	firstSeq int64
}

var _ approval.Log = (*Log)(nil)
var _ approval.Notifier = (*Log)(nil)

// Open applies Migrations to pool's database (in the schema of its
// search_path) and returns the Log. The pool is shared: Close leaves it
// open. Errors: a failed migration or query.
func Open(ctx context.Context, pool *pgxpool.Pool) (*Log, error) {
	if pool == nil {
		return nil, errors.New("pgledger: nil pool")
	}
	if _, err := pg.Migrate(ctx, pool, Migrations()); err != nil {
		return nil, fmt.Errorf("pgledger: %w", err)
	}
	var schema string
	var oid int64
	err := pool.QueryRow(ctx, `SELECT current_schema(), 'approval_ledger'::regclass::oid::bigint`).Scan(&schema, &oid)
	if err != nil {
		return nil, fmt.Errorf("pgledger: %w", err)
	}
	return &Log{pool: pool, name: "postgres:" + schema + ".approval_ledger", key: lockTag<<32 | oid}, nil
}

// OpenGate opens the approval gate over the PostgreSQL ledger in pool:
// Open, then approval.OpenLog with opts (verifying the whole ledger).
func OpenGate(ctx context.Context, pool *pgxpool.Pool, opts approval.Options) (*approval.Gate, error) {
	l, err := Open(ctx, pool)
	if err != nil {
		return nil, err
	}
	return approval.OpenLog(ctx, l, opts)
}

// Name is "postgres:<schema>.approval_ledger".
func (l *Log) Name() string { return l.name }

type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// q is the unit's connection inside a writing unit, else the pool.
func (l *Log) q() querier {
	if l.conn != nil {
		return l.conn
	}
	return l.pool
}

// Lock with write begins a transaction holding the ledger's advisory lock
// (one round trip: both statements go in one simple-protocol message).
// Reading units use the pool directly.
func (l *Log) Lock(ctx context.Context, write bool) error {
	if !write {
		return nil
	}
	if l.conn != nil {
		return errors.New("pgledger: unit already open")
	}
	c, err := l.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pgledger: lock ledger: %w", err)
	}
	if _, err := c.Exec(ctx, "BEGIN; SELECT pg_advisory_xact_lock("+strconv.FormatInt(l.key, 10)+")"); err != nil {
		// The connection's state is unknown: drop it rather than reuse it.
		c.Conn().Close(context.Background())
		c.Release()
		return fmt.Errorf("pgledger: lock ledger: %w", err)
	}
	l.conn = c
	return nil
}

// Unlock commits (or rolls back) the unit's transaction, releasing the
// advisory lock. A transaction a failed statement aborted is reported as
// an error even on commit.
func (l *Log) Unlock(ctx context.Context, commit bool) error {
	c := l.conn
	if c == nil {
		return nil
	}
	l.conn = nil
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	stmt := "ROLLBACK"
	if commit {
		stmt = "COMMIT"
	}
	tag, err := c.Exec(ctx, stmt)
	if err != nil {
		c.Conn().Close(context.Background())
		c.Release()
		return fmt.Errorf("pgledger: %s: %w", stmt, err)
	}
	c.Release()
	if commit && tag.String() != "COMMIT" {
		return fmt.Errorf("pgledger: the transaction was rolled back (%s)", tag.String())
	}
	return nil
}

type row struct {
	seq  int64
	line string
}

func (l *Log) rows(ctx context.Context, sql string, args ...any) ([]row, error) {
	rs, err := l.q().Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("pgledger: read ledger: %w", err)
	}
	out, err := pgx.CollectRows(rs, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.seq, &x.line)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgledger: read ledger: %w", err)
	}
	return out, nil
}

func join(rows []row) []byte {
	n := 0
	for _, r := range rows {
		n += len(r.line) + 1
	}
	b := make([]byte, 0, n)
	for _, r := range rows {
		b = append(b, r.line...)
		b = append(b, '\n')
	}
	return b
}

func (l *Log) Load(ctx context.Context) ([]byte, error) {
	rows, err := l.rows(ctx, `SELECT seq, line FROM approval_ledger ORDER BY seq`)
	if err != nil {
		return nil, err
	}
	l.first, l.firstSeq = nil, 0
	if len(rows) > 0 {
		l.first, l.firstSeq = []byte(rows[0].line), rows[0].seq
	}
	return join(rows), nil
}

func (l *Log) Snapshot(ctx context.Context) ([]byte, bool, error) {
	rows, err := l.rows(ctx, `SELECT seq, line FROM approval_ledger ORDER BY seq`)
	if err != nil {
		return nil, false, err
	}
	return join(rows), len(rows) > 0, nil
}

// Tail reads, in one statement, the lowest row (the ledger's identity),
// the last accepted row (which must be unchanged) and every row after it.
// It always checks the last accepted row: the extra row costs nothing.
func (l *Log) Tail(ctx context.Context, at approval.Pos, deep bool) (approval.Tail, error) {
	from := max(at.Seq, 1)
	rows, err := l.rows(ctx, `SELECT seq, line FROM approval_ledger
		WHERE seq >= $1 OR seq = (SELECT min(seq) FROM approval_ledger) ORDER BY seq`, from)
	if err != nil {
		return approval.Tail{}, err
	}
	if len(rows) == 0 {
		if at.Seq > 0 || l.first != nil {
			return approval.Tail{Change: approval.TailRemoved, Reason: "every row of approval_ledger was deleted"}, nil
		}
		return approval.Tail{}, nil
	}
	low := rows[0]
	if l.first == nil {
		if at.Seq > 0 {
			return approval.Tail{Change: approval.TailReplaced}, nil
		}
		l.first, l.firstSeq = []byte(low.line), low.seq // the first rows are being appended now
	} else if low.seq != l.firstSeq || low.line != string(l.first) {
		return approval.Tail{Change: approval.TailReplaced}, nil
	}
	i := 0
	if at.Seq > 0 {
		for i < len(rows) && rows[i].seq < at.Seq {
			i++
		}
		if i == len(rows) || rows[i].seq != at.Seq {
			return approval.Tail{Change: approval.TailAltered, Reason: fmt.Sprintf("row seq %d was deleted after it was written", at.Seq)}, nil
		}
		if want := bytes.TrimSuffix(at.Last, []byte{'\n'}); rows[i].line != string(want) {
			return approval.Tail{Change: approval.TailAltered, Reason: fmt.Sprintf("line %d (seq %d) changed after it was written", at.Entries, at.Seq)}, nil
		}
		i++
	}
	if i == len(rows) {
		return approval.Tail{}, nil
	}
	return approval.Tail{Change: approval.TailAppended, Data: join(rows[i:])}, nil
}

// Append inserts the row and queues the notification in one statement.
// A second decision or execution of one request violates a unique index:
// the error says so.
func (l *Log) Append(ctx context.Context, r approval.Record) error {
	if l.conn == nil {
		return errors.New("pgledger: append outside a writing unit")
	}
	line := bytes.TrimSuffix(r.Line, []byte{'\n'})
	var reqID *string
	if r.RequestID != "" {
		reqID = &r.RequestID
	}
	_, err := l.conn.Exec(ctx, `WITH ins AS (
		INSERT INTO approval_ledger (seq, type, request_id, hash, line) VALUES ($1, $2, $3, $4, $5) RETURNING seq
	) SELECT pg_notify('`+Channel+`', seq::text) FROM ins`, r.Seq, r.Type, reqID, r.Hash, string(line))
	if pg.IsUnique(err) {
		return fmt.Errorf("pgledger: seq %d: the ledger already holds this %s of request %q (another instance wrote it): %w", r.Seq, r.Type, r.RequestID, err)
	}
	if err != nil {
		return fmt.Errorf("pgledger: append seq %d: %w", r.Seq, err)
	}
	if l.first == nil {
		l.first, l.firstSeq = append([]byte(nil), line...), r.Seq
	}
	return nil
}

// ArchiveName is "approval_ledger_archive/<UTC time>", the value of the
// archive column the old rows get.
func (l *Log) ArchiveName(now time.Time) string {
	return "approval_ledger_archive/" + now.UTC().Format("20060102T150405.000000000Z")
}

// Replace moves every row to approval_ledger_archive under archive and
// inserts first, in the unit's transaction, and notifies "reset".
func (l *Log) Replace(ctx context.Context, archive string, exists bool, first approval.Record) error {
	if l.conn == nil {
		return errors.New("pgledger: reset outside a writing unit")
	}
	if _, err := l.conn.Exec(ctx, `INSERT INTO approval_ledger_archive (archive, seq, type, request_id, hash, line, created_at)
		SELECT $1, seq, type, request_id, hash, line, created_at FROM approval_ledger`, archive); err != nil {
		return fmt.Errorf("pgledger: reset: archive: %w", err)
	}
	if _, err := l.conn.Exec(ctx, `DELETE FROM approval_ledger`); err != nil {
		return fmt.Errorf("pgledger: reset: %w", err)
	}
	line := bytes.TrimSuffix(first.Line, []byte{'\n'})
	if _, err := l.conn.Exec(ctx, `INSERT INTO approval_ledger (seq, type, request_id, hash, line) VALUES ($1, $2, NULL, $3, $4)`,
		first.Seq, first.Type, first.Hash, string(line)); err != nil {
		return fmt.Errorf("pgledger: reset: %w", err)
	}
	if _, err := l.conn.Exec(ctx, `SELECT pg_notify('`+Channel+`', 'reset')`); err != nil {
		return fmt.Errorf("pgledger: reset: %w", err)
	}
	return nil
}

func (l *Log) StoreResume(ctx context.Context, ref string, payload []byte) error {
	_, err := l.q().Exec(ctx, `INSERT INTO approval_resume (ref, payload) VALUES ($1, $2) ON CONFLICT (ref) DO NOTHING`, ref, payload)
	if err != nil {
		return fmt.Errorf("pgledger: store paused turn %s: %w", ref, err)
	}
	return nil
}

// LoadResume reads from the pool (it may run during another unit); a
// payload over limit is not transferred.
func (l *Log) LoadResume(ctx context.Context, ref string, limit int) ([]byte, error) {
	var size int64
	var b []byte
	err := l.pool.QueryRow(ctx, `SELECT octet_length(payload), CASE WHEN octet_length(payload) <= $2 THEN payload END
		FROM approval_resume WHERE ref = $1`, ref, int64(limit)).Scan(&size, &b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%s is not in approval_resume: %w", ref, fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("pgledger: load paused turn %s: %w", ref, err)
	}
	if size > int64(limit) {
		return nil, fmt.Errorf("%w: %s is over %d bytes", approval.ErrResumeCorrupt, ref, limit)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

func (l *Log) DeleteResume(ctx context.Context, ref string) error {
	if _, err := l.q().Exec(ctx, `DELETE FROM approval_resume WHERE ref = $1`, ref); err != nil {
		return fmt.Errorf("pgledger: delete paused turn %s: %w", ref, err)
	}
	return nil
}

// Listen takes a connection out of the pool for itself, LISTENs on
// Channel and calls fn for each notification until ctx ends or the
// connection fails; the connection is closed then, never returned to the
// pool.
func (l *Log) Listen(ctx context.Context, ready func(), fn func(payload string)) error {
	c, err := l.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pgledger: listen: %w", err)
	}
	conn := c.Hijack()
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return fmt.Errorf("pgledger: listen: %w", err)
	}
	if ready != nil {
		ready()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("pgledger: listen: %w", err)
		}
		fn(n.Payload)
	}
}

// Close releases nothing but an open unit's connection: the pool is the
// caller's.
func (l *Log) Close() error {
	if l.conn != nil {
		c := l.conn
		l.conn = nil
		c.Conn().Close(context.Background())
		c.Release()
	}
	return nil
}
