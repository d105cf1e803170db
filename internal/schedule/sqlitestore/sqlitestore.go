// Package sqlitestore is the embedded schedule.Store: one SQLite file
// (modernc.org/sqlite, WAL, busy timeout), by default
// $TENDRIL_HOME/schedule/jobs.db. Several processes may share the file;
// claims are single UPDATE statements, so SQLite's write lock makes them
// atomic.
package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	_ "modernc.org/sqlite" // driver "sqlite"

	"github.com/tendrilai/tendril/internal/jobs"
	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/sqlitewal"
)

//go:embed migrations/*.up.sql
var migrations embed.FS

// DefaultPath is the jobs database under a Tendril home directory.
func DefaultPath(home string) string { return filepath.Join(home, "schedule", "jobs.db") }

// Store is a schedule.Store on SQLite.
type Store struct {
	db   *sql.DB
	path string
}

var _ schedule.Store = (*Store)(nil)

// RunsPath is the River job database OpenJobs opens beside the store's
// file at path: <dir>/runs.db.
func RunsPath(path string) string { return filepath.Join(filepath.Dir(path), "runs.db") }

// OpenJobs implements schedule.JobsOpener: a River queue in RunsPath of
// the store's file, for a Scheduler given no shared queue.
func (s *Store) OpenJobs(ctx context.Context, opts jobs.Options) (*jobs.Queue, error) {
	return jobs.OpenSQLite(ctx, RunsPath(s.path), opts)
}

// Open opens (creating if needed, with its directory at mode 0700) the
// database at path and applies pending migrations.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#\x00") {
		return nil, fmt.Errorf("open schedule db: bad path %q", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open schedule db: %w", err)
	}
	dsn := sqlitewal.FileURI(path) + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open schedule db %s: %w", path, err)
	}
	s := &Store{db: db, path: path}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open schedule db %s: %w", path, err)
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	names, err := fsGlob()
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return err
	}
	for i, name := range names {
		if i+1 <= version {
			continue
		}
		b, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, string(b)); err != nil {
			return fmt.Errorf("migration %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", i+1)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func fsGlob() ([]string, error) {
	entries, err := migrations.ReadDir("migrations")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		out = append(out, "migrations/"+e.Name())
	}
	sort.Strings(out)
	return out, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

const cols = `id, name, kind, spec, tz, task, actor_id, channel, chat_id, session_id,
	created_at, next_run, last_run, attempts, status, source, last_error`

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

type scanner interface{ Scan(...any) error }

func scanJob(r scanner) (schedule.Job, error) {
	var j schedule.Job
	var created, next, last int64
	err := r.Scan(&j.ID, &j.Name, &j.Kind, &j.Spec, &j.TZ, &j.Task, &j.ActorID, &j.Channel, &j.ChatID, &j.SessionID,
		&created, &next, &last, &j.Attempts, &j.Status, &j.Source, &j.LastError)
	j.CreatedAt, j.NextRun, j.LastRun = fromMS(created), fromMS(next), fromMS(last)
	return j, err
}

func isConstraint(err error) bool {
	var ce interface{ Code() int }
	return errors.As(err, &ce) && ce.Code()&0xff == 19 // SQLITE_CONSTRAINT
}

// Create implements schedule.Store.
func (s *Store) Create(ctx context.Context, j schedule.Job) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO jobs (`+cols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		j.ID, j.Name, j.Kind, j.Spec, j.TZ, j.Task, j.ActorID, j.Channel, j.ChatID, j.SessionID,
		ms(j.CreatedAt), ms(j.NextRun), ms(j.LastRun), j.Attempts, j.Status, j.Source, j.LastError)
	if isConstraint(err) {
		return fmt.Errorf("create job %s: %w", j.ID, schedule.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("create job %s: %w", j.ID, err)
	}
	return nil
}

// Get implements schedule.Store.
func (s *Store) Get(ctx context.Context, id string) (schedule.Job, error) {
	j, err := scanJob(s.db.QueryRowContext(ctx, `SELECT `+cols+` FROM jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return schedule.Job{}, fmt.Errorf("job %q: %w", id, schedule.ErrNotFound)
	}
	if err != nil {
		return schedule.Job{}, fmt.Errorf("get job %q: %w", id, err)
	}
	return j, nil
}

func (s *Store) query(ctx context.Context, q string, args ...any) ([]schedule.Job, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []schedule.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// List implements schedule.Store.
func (s *Store) List(ctx context.Context, f schedule.Filter) ([]schedule.Job, error) {
	q := `SELECT ` + cols + ` FROM jobs WHERE 1=1`
	var args []any
	if f.ActorID != "" {
		q += ` AND actor_id = ?`
		args = append(args, f.ActorID)
	}
	if f.Source != "" {
		q += ` AND source = ?`
		args = append(args, f.Source)
	}
	if f.Name != "" {
		q += ` AND name = ?`
		args = append(args, f.Name)
	}
	jobs, err := s.query(ctx, q+` ORDER BY status = 'done', next_run, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

// Update implements schedule.Store.
func (s *Store) Update(ctx context.Context, j schedule.Job) error {
	res, err := s.db.ExecContext(ctx, `UPDATE jobs SET name=?, kind=?, spec=?, tz=?, task=?, actor_id=?, channel=?,
		chat_id=?, session_id=?, created_at=?, next_run=?, last_run=?, attempts=?, status=?, source=?, last_error=? WHERE id=?`,
		j.Name, j.Kind, j.Spec, j.TZ, j.Task, j.ActorID, j.Channel, j.ChatID, j.SessionID,
		ms(j.CreatedAt), ms(j.NextRun), ms(j.LastRun), j.Attempts, j.Status, j.Source, j.LastError, j.ID)
	if isConstraint(err) {
		return fmt.Errorf("update job %s: %w", j.ID, schedule.ErrExists)
	}
	return affected(res, err, "update job "+j.ID, schedule.ErrNotFound)
}

func affected(res sql.Result, err error, what string, none error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, none)
	}
	return nil
}

// Delete implements schedule.Store.
func (s *Store) Delete(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM jobs WHERE id = ?`, id)
	return affected(res, err, "delete job "+id, schedule.ErrNotFound)
}

// DeleteActor implements schedule.Store: one DELETE … RETURNING, so the
// jobs read are exactly the jobs removed.
func (s *Store) DeleteActor(ctx context.Context, actorID string) ([]schedule.Job, error) {
	jobs, err := s.query(ctx, `DELETE FROM jobs WHERE actor_id = ? RETURNING `+cols, actorID)
	if err != nil {
		return nil, fmt.Errorf("delete jobs of %s: %w", actorID, err)
	}
	sort.Slice(jobs, func(a, b int) bool {
		if !jobs[a].NextRun.Equal(jobs[b].NextRun) {
			return jobs[a].NextRun.Before(jobs[b].NextRun)
		}
		return jobs[a].ID < jobs[b].ID
	})
	return jobs, nil
}

// CountDue implements schedule.Store.
func (s *Store) CountDue(ctx context.Context, now time.Time) (int, error) {
	n := ms(now)
	var c int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM jobs WHERE status = 'active' AND next_run <= ? AND lease_until <= ?`, n, n).Scan(&c); err != nil {
		return 0, fmt.Errorf("count due jobs: %w", err)
	}
	return c, nil
}

// Due implements schedule.Store.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]schedule.Job, error) {
	n := ms(now)
	jobs, err := s.query(ctx, `SELECT `+cols+` FROM jobs WHERE status = 'active' AND next_run <= ? AND lease_until <= ?
		ORDER BY next_run, id LIMIT ?`, n, n, limit)
	if err != nil {
		return nil, fmt.Errorf("due jobs: %w", err)
	}
	return jobs, nil
}

// NextWake implements schedule.Store.
func (s *Store) NextWake(ctx context.Context) (time.Time, bool, error) {
	var v sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT MIN(MAX(next_run, lease_until)) FROM jobs WHERE status = 'active'`).Scan(&v)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next wake: %w", err)
	}
	if !v.Valid {
		return time.Time{}, false, nil
	}
	return fromMS(v.Int64), true, nil
}

// Claim implements schedule.Store.
func (s *Store) Claim(ctx context.Context, c schedule.Claim) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE jobs SET lease_owner = ?, lease_until = ?
		WHERE id = ? AND next_run = ? AND status = 'active' AND lease_until <= ?`,
		c.Owner, ms(c.Until), c.ID, ms(c.NextRun), ms(c.Now))
	if err != nil {
		return false, fmt.Errorf("claim job %s: %w", c.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("claim job %s: %w", c.ID, err)
	}
	return n == 1, nil
}

// Finish implements schedule.Store.
func (s *Store) Finish(ctx context.Context, id, owner string, o schedule.Outcome) error {
	if owner == "" {
		return fmt.Errorf("finish job %s: %w", id, schedule.ErrLeaseLost)
	}
	if o.Delete {
		res, err := s.db.ExecContext(ctx, `DELETE FROM jobs WHERE id = ? AND lease_owner = ?`, id, owner)
		return affected(res, err, "finish job "+id, schedule.ErrLeaseLost)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("finish job %s: %w", id, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE jobs SET next_run = ?, last_run = ?, attempts = ?,
		status = CASE WHEN status = 'paused' AND ? <> 'done' THEN status ELSE ? END,
		last_error = ?, lease_owner = '', lease_until = 0 WHERE id = ? AND lease_owner = ?`,
		ms(o.NextRun), ms(o.LastRun), o.Attempts, o.Status, o.Status, o.LastError, id, owner)
	if err := affected(res, err, "finish job "+id, schedule.ErrLeaseLost); err != nil {
		return err
	}
	if r := o.Run; r != nil {
		if _, err := tx.ExecContext(ctx, `INSERT INTO schedule_runs (job_id, started, finished, outcome, detail) VALUES (?,?,?,?,?)`,
			id, ms(r.Started), ms(r.Finished), r.Result, r.Detail); err != nil {
			return fmt.Errorf("finish job %s: record run: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM schedule_runs WHERE job_id = ? AND seq NOT IN
			(SELECT seq FROM schedule_runs WHERE job_id = ? ORDER BY finished DESC, seq DESC LIMIT ?)`,
			id, id, schedule.MaxRuns); err != nil {
			return fmt.Errorf("finish job %s: trim runs: %w", id, err)
		}
	}
	if o.Status == schedule.StatusDone {
		// Keep the actor's newest MaxDone done jobs; older ones go with
		// their runs (ON DELETE CASCADE).
		if _, err := tx.ExecContext(ctx, `DELETE FROM jobs WHERE status = 'done'
			AND actor_id = (SELECT actor_id FROM jobs WHERE id = ?)
			AND id NOT IN (SELECT id FROM jobs WHERE status = 'done' AND actor_id = (SELECT actor_id FROM jobs WHERE id = ?)
				ORDER BY last_run DESC, id DESC LIMIT ?)`, id, id, schedule.MaxDone); err != nil {
			return fmt.Errorf("finish job %s: trim done jobs: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("finish job %s: %w", id, err)
	}
	return nil
}

// Runs implements schedule.Store.
func (s *Store) Runs(ctx context.Context, id string) ([]schedule.Run, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT started, finished, outcome, detail FROM schedule_runs
		WHERE job_id = ? ORDER BY finished DESC, seq DESC LIMIT ?`, id, schedule.MaxRuns)
	if err != nil {
		return nil, fmt.Errorf("runs of job %s: %w", id, err)
	}
	defer rows.Close()
	out := []schedule.Run{}
	for rows.Next() {
		r := schedule.Run{JobID: id}
		var started, finished int64
		if err := rows.Scan(&started, &finished, &r.Result, &r.Detail); err != nil {
			return nil, fmt.Errorf("runs of job %s: %w", id, err)
		}
		r.Started, r.Finished = fromMS(started), fromMS(finished)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("runs of job %s: %w", id, err)
	}
	return out, nil
}
