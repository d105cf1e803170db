// Package pgstore is the scale-out schedule.Store on PostgreSQL (pgx/v5),
// used when TENDRIL_DATABASE_URL is set. Several `tendril serve` instances
// share the table schedule_jobs; a claim is one conditional UPDATE, so
// Postgres row locking lets exactly one instance win each run.
package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tendrilai/tendril/internal/jobs"
	"github.com/tendrilai/tendril/internal/pg"
	"github.com/tendrilai/tendril/internal/schedule"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is a schedule.Store on Postgres.
type Store struct {
	pool    *pgxpool.Pool
	ownPool bool
}

var _ schedule.Store = (*Store)(nil)

// Migrations are the store's scripts (tables schedule_jobs, schedule_runs), for pg.Migrate
// and `tendril doctor`.
func Migrations() []pg.Migration { return pg.FromFS("schedule", migrations, "migrations") }

// New returns a Store on the process's shared pool and applies pending
// migrations (pg.Migrate). Close does not close the pool.
func New(ctx context.Context, pool *pgxpool.Pool) (*Store, error) {
	if _, err := pg.Migrate(ctx, pool, Migrations()); err != nil {
		return nil, fmt.Errorf("open schedule store: %w", err)
	}
	return &Store{pool: pool}, nil
}

// Open connects to url ("postgres://...", libpq parameters such as
// search_path allowed) with a pool of its own (pg.Open), which Close
// closes, and applies pending migrations. Prefer New with the shared pool.
func Open(ctx context.Context, url string) (*Store, error) {
	pool, err := pg.Open(ctx, url, pg.Options{})
	if err != nil {
		return nil, fmt.Errorf("open schedule store: %w", err)
	}
	s, err := New(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownPool = true
	return s, nil
}

// OpenJobs implements schedule.JobsOpener: a River queue on the store's
// pool, for a Scheduler given no shared queue.
func (s *Store) OpenJobs(ctx context.Context, opts jobs.Options) (*jobs.Queue, error) {
	return jobs.OpenPostgres(ctx, s.pool, opts)
}

// Close closes the pool when Open opened it.
func (s *Store) Close() error {
	if s.ownPool {
		s.pool.Close()
	}
	return nil
}

const cols = `id, name, kind, spec, tz, task, actor_id, channel, chat_id, session_id,
	created_at, next_run, last_run, attempts, status, source, last_error`

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func scanJob(r pgx.Row) (schedule.Job, error) {
	var j schedule.Job
	var last *time.Time
	err := r.Scan(&j.ID, &j.Name, &j.Kind, &j.Spec, &j.TZ, &j.Task, &j.ActorID, &j.Channel, &j.ChatID, &j.SessionID,
		&j.CreatedAt, &j.NextRun, &last, &j.Attempts, &j.Status, &j.Source, &j.LastError)
	j.CreatedAt, j.NextRun = j.CreatedAt.UTC(), j.NextRun.UTC()
	if last != nil {
		j.LastRun = last.UTC()
	}
	return j, err
}

func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// Create implements schedule.Store.
func (s *Store) Create(ctx context.Context, j schedule.Job) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO schedule_jobs (`+cols+`)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17)`,
		j.ID, j.Name, j.Kind, j.Spec, j.TZ, j.Task, j.ActorID, j.Channel, j.ChatID, j.SessionID,
		j.CreatedAt, j.NextRun, nullTime(j.LastRun), j.Attempts, j.Status, j.Source, j.LastError)
	if isUnique(err) {
		return fmt.Errorf("create job %s: %w", j.ID, schedule.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("create job %s: %w", j.ID, err)
	}
	return nil
}

// Get implements schedule.Store.
func (s *Store) Get(ctx context.Context, id string) (schedule.Job, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+cols+` FROM schedule_jobs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return schedule.Job{}, fmt.Errorf("job %q: %w", id, schedule.ErrNotFound)
	}
	if err != nil {
		return schedule.Job{}, fmt.Errorf("get job %q: %w", id, err)
	}
	return j, nil
}

func (s *Store) query(ctx context.Context, q string, args ...any) ([]schedule.Job, error) {
	rows, err := s.pool.Query(ctx, q, args...)
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
	jobs, err := s.query(ctx, `SELECT `+cols+` FROM schedule_jobs
		WHERE ($1 = '' OR actor_id = $1) AND ($2 = '' OR source = $2) AND ($3 = '' OR name = $3)
		ORDER BY status = 'done', next_run, id`, f.ActorID, string(f.Source), f.Name)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

func affected(tag pgconn.CommandTag, err error, what string, none error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", what, none)
	}
	return nil
}

// Update implements schedule.Store.
func (s *Store) Update(ctx context.Context, j schedule.Job) error {
	tag, err := s.pool.Exec(ctx, `UPDATE schedule_jobs SET name=$1, kind=$2, spec=$3, tz=$4, task=$5, actor_id=$6,
		channel=$7, chat_id=$8, session_id=$9, created_at=$10, next_run=$11, last_run=$12, attempts=$13, status=$14,
		source=$15, last_error=$16 WHERE id=$17`,
		j.Name, j.Kind, j.Spec, j.TZ, j.Task, j.ActorID, j.Channel, j.ChatID, j.SessionID,
		j.CreatedAt, j.NextRun, nullTime(j.LastRun), j.Attempts, j.Status, j.Source, j.LastError, j.ID)
	if isUnique(err) {
		return fmt.Errorf("update job %s: %w", j.ID, schedule.ErrExists)
	}
	return affected(tag, err, "update job "+j.ID, schedule.ErrNotFound)
}

// Delete implements schedule.Store.
func (s *Store) Delete(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM schedule_jobs WHERE id = $1`, id)
	return affected(tag, err, "delete job "+id, schedule.ErrNotFound)
}

// DeleteActor implements schedule.Store: one DELETE … RETURNING, so the
// jobs read are exactly the jobs removed.
func (s *Store) DeleteActor(ctx context.Context, actorID string) ([]schedule.Job, error) {
	jobs, err := s.query(ctx, `DELETE FROM schedule_jobs WHERE actor_id = $1 RETURNING `+cols, actorID)
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
	var c int
	if err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM schedule_jobs
		WHERE status = 'active' AND next_run <= $1 AND (lease_until IS NULL OR lease_until <= $1)`, now).Scan(&c); err != nil {
		return 0, fmt.Errorf("count due jobs: %w", err)
	}
	return c, nil
}

// Due implements schedule.Store.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]schedule.Job, error) {
	jobs, err := s.query(ctx, `SELECT `+cols+` FROM schedule_jobs
		WHERE status = 'active' AND next_run <= $1 AND (lease_until IS NULL OR lease_until <= $1)
		ORDER BY next_run, id LIMIT $2`, now, limit)
	if err != nil {
		return nil, fmt.Errorf("due jobs: %w", err)
	}
	return jobs, nil
}

// NextWake implements schedule.Store.
func (s *Store) NextWake(ctx context.Context) (time.Time, bool, error) {
	var t *time.Time
	err := s.pool.QueryRow(ctx, `SELECT MIN(GREATEST(next_run, lease_until)) FROM schedule_jobs WHERE status = 'active'`).Scan(&t)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next wake: %w", err)
	}
	if t == nil {
		return time.Time{}, false, nil
	}
	return t.UTC(), true, nil
}

// Claim implements schedule.Store.
func (s *Store) Claim(ctx context.Context, c schedule.Claim) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE schedule_jobs SET lease_owner = $1, lease_until = $2
		WHERE id = $3 AND next_run = $4 AND status = 'active' AND (lease_until IS NULL OR lease_until <= $5)`,
		c.Owner, c.Until, c.ID, c.NextRun, c.Now)
	if err != nil {
		return false, fmt.Errorf("claim job %s: %w", c.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Finish implements schedule.Store.
func (s *Store) Finish(ctx context.Context, id, owner string, o schedule.Outcome) error {
	if owner == "" {
		return fmt.Errorf("finish job %s: %w", id, schedule.ErrLeaseLost)
	}
	if o.Delete {
		tag, err := s.pool.Exec(ctx, `DELETE FROM schedule_jobs WHERE id = $1 AND lease_owner = $2`, id, owner)
		return affected(tag, err, "finish job "+id, schedule.ErrLeaseLost)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("finish job %s: %w", id, err)
	}
	defer tx.Rollback(ctx)
	tag, err := tx.Exec(ctx, `UPDATE schedule_jobs SET next_run = $1, last_run = $2, attempts = $3,
		status = CASE WHEN status = 'paused' AND $4::text <> 'done' THEN status ELSE $4::text END,
		last_error = $5, lease_owner = '', lease_until = NULL WHERE id = $6 AND lease_owner = $7`,
		o.NextRun, nullTime(o.LastRun), o.Attempts, string(o.Status), o.LastError, id, owner)
	if err := affected(tag, err, "finish job "+id, schedule.ErrLeaseLost); err != nil {
		return err
	}
	if r := o.Run; r != nil {
		if _, err := tx.Exec(ctx, `INSERT INTO schedule_runs (job_id, started, finished, outcome, detail) VALUES ($1,$2,$3,$4,$5)`,
			id, r.Started, r.Finished, string(r.Result), r.Detail); err != nil {
			return fmt.Errorf("finish job %s: record run: %w", id, err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM schedule_runs WHERE job_id = $1 AND seq NOT IN
			(SELECT seq FROM schedule_runs WHERE job_id = $1 ORDER BY finished DESC, seq DESC LIMIT $2)`,
			id, schedule.MaxRuns); err != nil {
			return fmt.Errorf("finish job %s: trim runs: %w", id, err)
		}
	}
	if o.Status == schedule.StatusDone {
		// Keep the actor's newest MaxDone done jobs; older ones go with
		// their runs (ON DELETE CASCADE).
		if _, err := tx.Exec(ctx, `DELETE FROM schedule_jobs WHERE status = 'done'
			AND actor_id = (SELECT actor_id FROM schedule_jobs WHERE id = $1)
			AND id NOT IN (SELECT id FROM schedule_jobs WHERE status = 'done' AND actor_id = (SELECT actor_id FROM schedule_jobs WHERE id = $1)
				ORDER BY last_run DESC NULLS LAST, id DESC LIMIT $2)`, id, schedule.MaxDone); err != nil {
			return fmt.Errorf("finish job %s: trim done jobs: %w", id, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("finish job %s: %w", id, err)
	}
	return nil
}

// Runs implements schedule.Store.
func (s *Store) Runs(ctx context.Context, id string) ([]schedule.Run, error) {
	rows, err := s.pool.Query(ctx, `SELECT started, finished, outcome, detail FROM schedule_runs
		WHERE job_id = $1 ORDER BY finished DESC, seq DESC LIMIT $2`, id, schedule.MaxRuns)
	if err != nil {
		return nil, fmt.Errorf("runs of job %s: %w", id, err)
	}
	defer rows.Close()
	out := []schedule.Run{}
	for rows.Next() {
		r := schedule.Run{JobID: id}
		if err := rows.Scan(&r.Started, &r.Finished, &r.Result, &r.Detail); err != nil {
			return nil, fmt.Errorf("runs of job %s: %w", id, err)
		}
		r.Started, r.Finished = r.Started.UTC(), r.Finished.UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("runs of job %s: %w", id, err)
	}
	return out, nil
}
