package schedule

import (
	"context"
	"time"
)

// Store persists jobs and arbitrates runs. Implementations: sqlitestore
// (embedded default) and pgstore (scale-out); both pass
// scheduletest.Exercise. All times are UTC at millisecond precision (see
// normTime); implementations must round-trip them exactly because Claim
// compares next_run for equality.
type Store interface {
	// Create inserts j. It fails with ErrExists if j.ID is taken, or if
	// j.Source is SourceConfig and another config job has j.Name.
	Create(ctx context.Context, j Job) error
	// Get returns the job with id, or ErrNotFound.
	Get(ctx context.Context, id string) (Job, error)
	// List returns the jobs matching f: jobs that are not StatusDone first,
	// ordered by NextRun then ID, then the done jobs in the same order.
	List(ctx context.Context, f Filter) ([]Job, error)
	// Update replaces every field of the stored job j.ID except the lease,
	// or fails with ErrNotFound (ErrExists if it would duplicate a config
	// job's name).
	Update(ctx context.Context, j Job) error
	// Delete removes the job, or fails with ErrNotFound.
	Delete(ctx context.Context, id string) error
	// DeleteActor removes every job whose ActorID is actorID, whatever its
	// Source, status or lease, atomically (one statement), and returns the
	// removed jobs ordered by NextRun then ID (empty, not an error, when
	// there were none). Jobs of other actors are untouched. A removed job
	// that is leased by a run in flight is gone all the same; that run's
	// Finish then fails with ErrLeaseLost.
	DeleteActor(ctx context.Context, actorID string) ([]Job, error)

	// Due returns up to limit active jobs with NextRun <= now whose lease is
	// free (never taken, or expired at or before now), earliest first.
	Due(ctx context.Context, now time.Time, limit int) ([]Job, error)
	// CountDue returns how many jobs Due(ctx, now, ∞) would return: active,
	// NextRun <= now, lease free at now (so runs in flight are not counted).
	CountDue(ctx context.Context, now time.Time) (int, error)
	// NextWake returns the earliest instant at which some active job may
	// become due: max(NextRun, lease expiry) minimised over active jobs.
	// ok is false when there are no active jobs.
	NextWake(ctx context.Context) (t time.Time, ok bool, err error)
	// Claim atomically takes the run of c.ID scheduled at c.NextRun for
	// c.Owner until c.Until. It reports true only if the job is active,
	// still scheduled at exactly c.NextRun, and its lease is free at c.Now;
	// of several concurrent claims of one run at most one wins.
	Claim(ctx context.Context, c Claim) (bool, error)
	// Finish records the outcome of a claimed run and frees the lease. It
	// fails with ErrLeaseLost unless c.Owner still holds the lease. A job
	// paused while its run was in flight stays StatusPaused (the outcome's
	// Status is not applied), except for an outcome of StatusDone: that
	// run did fire, so the job is done. When o.Run is set it is added to
	// the job's run history in the same transaction, keeping the newest
	// MaxRuns. When o.Status is StatusDone the same transaction removes,
	// with their runs, the done jobs of the job's actor beyond the newest
	// MaxDone (by LastRun, then ID), so that history stays bounded.
	Finish(ctx context.Context, id, owner string, o Outcome) error
	// Runs returns the run history of job id (table schedule_runs), newest
	// first (by Finished, then insertion), at most MaxRuns; empty, not an
	// error, for an unknown job. Only JobID of the job's fields is set.
	// The runs stay while the job does (a done job included); Delete,
	// DeleteActor, a deleting Finish and the MaxDone trim remove them with
	// the job.
	Runs(ctx context.Context, id string) ([]Run, error)

	// Close releases the store's resources.
	Close() error
}

// Filter selects jobs in Store.List. Zero fields match everything.
type Filter struct {
	ActorID string
	Source  Source
	Name    string
}

// Claim is one attempt to take a run (Store.Claim).
type Claim struct {
	ID      string
	NextRun time.Time // the slot being claimed, as read from Due
	Owner   string    // the claiming scheduler's InstanceID
	Now     time.Time
	Until   time.Time // lease expiry
}

// Outcome is what Store.Finish writes after a run.
type Outcome struct {
	// Delete removes the job, with its runs, instead of updating it. The
	// Scheduler does not use it: a one-shot success is Status StatusDone,
	// which keeps the job and its history.
	Delete    bool
	NextRun   time.Time
	LastRun   time.Time
	Attempts  int
	Status    Status
	LastError string
	// Run, when set, is appended to the job's history (nil for a run cut
	// short by shutdown, which records nothing).
	Run *Run
}

// MaxRuns is how many runs of each job the history keeps.
const MaxRuns = 20

// MaxDone is how many done one-shot jobs (StatusDone), each with its run
// history, every actor keeps: the same bound on a one-shot's history as
// MaxRuns puts on a recurring job's. Store.Finish removes the oldest.
const MaxDone = MaxRuns

// MaxRunDetail bounds Run.Detail of a successful run (the delivered
// text), in characters (runes); an error's text keeps up to 1000.
const MaxRunDetail = 200

// RunResult is how a run ended.
type RunResult string

const (
	RunOK    RunResult = "ok"    // ran, and delivered its reply (or had nothing due)
	RunError RunResult = "error" // the runner or the delivery failed
)

// Run is one finished run of a job. Times are UTC, millisecond precision.
type Run struct {
	JobID    string    `json:"job_id"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Result   RunResult `json:"outcome"`
	// Detail is the error text for RunError; for RunOK the first
	// MaxRunDetail characters of what was delivered, or NothingDue when
	// nothing was sent.
	Detail string `json:"detail,omitempty"`
	// Name and ActorID are the job's (Scheduler.History sets them; a
	// Store leaves them empty).
	Name    string `json:"name,omitempty"`
	ActorID string `json:"actor_id,omitempty"`
}

// truncRunes cuts s to at most max runes.
func truncRunes(s string, max int) string {
	n := 0
	for i := range s {
		if n == max {
			return s[:i]
		}
		n++
	}
	return s
}
