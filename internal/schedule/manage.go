package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Add validates spec (see NewJob), stores the new job and queues its first
// run. It also fails with ErrBadSpec when the name is another job's ID
// (nameIsNoID).
func (s *Scheduler) Add(ctx context.Context, spec JobSpec) (Job, error) {
	j, err := NewJob(spec, s.clock.Now())
	if err != nil {
		return Job{}, err
	}
	if err := s.nameIsNoID(ctx, j); err != nil {
		return Job{}, err
	}
	if err := s.store.Create(ctx, j); err != nil {
		return Job{}, fmt.Errorf("add job: %w", err)
	}
	s.enqueueLogged(ctx, j)
	return j, nil
}

// nameIsNoID fails with ErrBadSpec when j's name is the ID of another job:
// a job is named by ID or name ("tendril cron remove <id|name>"), the ID
// first, so such a name would name the other job.
func (s *Scheduler) nameIsNoID(ctx context.Context, j Job) error {
	if j.Name == "" {
		return nil
	}
	other, err := s.store.Get(ctx, j.Name)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("check job name %q: %w", j.Name, err)
	case other.ID != j.ID:
		return badSpec("name %q is the ID of another job (%q of %s): a job is named by its ID or its name, so pick another name", j.Name, other.Name, other.ActorID)
	}
	return nil
}

// Get returns the job with id, or ErrNotFound.
func (s *Scheduler) Get(ctx context.Context, id string) (Job, error) {
	return s.store.Get(ctx, id)
}

// List returns the jobs matching f, earliest NextRun first; done one-shot
// jobs (StatusDone) come last, so that their history can still be found
// by name.
func (s *Scheduler) List(ctx context.Context, f Filter) ([]Job, error) {
	return s.store.List(ctx, f)
}

// Remove deletes the job with id, or fails with ErrNotFound. Its run in
// flight in this instance is cancelled (its context's cause is
// ErrJobRemoved), so it delivers nothing and records no outcome, as with
// RemoveActor; a run in flight in another instance finishes, but its
// outcome is discarded. Its queued River runs are deleted too
// (dropQueued).
func (s *Scheduler) Remove(ctx context.Context, id string) error {
	if err := s.store.Delete(ctx, id); err != nil {
		return err
	}
	s.runsMu.Lock()
	if cancel := s.runs[id]; cancel != nil {
		cancel(ErrJobRemoved)
	}
	s.runsMu.Unlock()
	s.dropQueued(ctx, id)
	return nil
}

// dropQueued deletes the queued River runs (schedule.run, not running) of
// the jobs with ids, once the store no longer holds them as active: such a
// run would only find its slot void when it came due, but until then it is
// a scheduled row in River's table (a yearly job's for a year), listed by
// River's own tools. A failure is logged and changes nothing else: the run
// stays void when it comes due.
func (s *Scheduler) dropQueued(ctx context.Context, ids ...string) {
	if s.q == nil {
		return
	}
	for _, id := range ids {
		if _, err := s.q.DeleteWhere(ctx, RunArgs{}.Kind(), "job_id", id); err != nil {
			s.log.Warn("schedule: delete queued runs; they are void when due", "job", id, "err", err)
		}
	}
}

// ErrJobRemoved is the cancellation cause of a run in flight whose job was
// removed by Remove or RemoveActor.
var ErrJobRemoved = errors.New("schedule: job removed")

// RemoveActor deletes every job of actorID — from the reminders tool, the
// CLI and the config file alike — in one store operation, and returns the
// removed jobs, earliest NextRun first (empty when the actor had none).
// Jobs of other actors are untouched. Runs of the removed jobs in flight
// in this instance are cancelled (their context's cause is ErrJobRemoved)
// and record no outcome; a run in flight in another instance finishes, but
// its outcome is discarded. A source=config job is defined in tendril.json:
// the next SyncConfigJobs (at start-up) re-creates it unless it is removed
// from the config too. It fails with ErrBadSpec for an empty actorID, or
// with the store's error (nothing is removed then).
func (s *Scheduler) RemoveActor(ctx context.Context, actorID string) ([]Job, error) {
	if actorID == "" {
		return nil, badSpec("remove actor: empty actor id")
	}
	jobs, err := s.store.DeleteActor(ctx, actorID)
	if err != nil {
		return nil, fmt.Errorf("remove jobs of %s: %w", actorID, err)
	}
	if jobs == nil {
		jobs = []Job{}
	}
	s.runsMu.Lock()
	ids := make([]string, 0, len(jobs))
	for _, j := range jobs {
		if cancel := s.runs[j.ID]; cancel != nil {
			cancel(ErrJobRemoved)
		}
		ids = append(ids, j.ID)
	}
	s.runsMu.Unlock()
	s.dropQueued(ctx, ids...)
	return jobs, nil
}

// Due returns how many jobs are due now and not running: active, NextRun
// at or before the scheduler's clock, lease free. It is the schedule queue
// depth for metrics; a count that stays above zero means runs are not
// keeping up (or no instance is running the loop).
func (s *Scheduler) Due(ctx context.Context) (int, error) {
	n, err := s.store.CountDue(ctx, normTime(s.clock.Now()))
	if err != nil {
		return 0, fmt.Errorf("count due jobs: %w", err)
	}
	return n, nil
}

// RunNow makes the job due at once: NextRun = now, Attempts = 0, status
// active, and queues that run; River hands it to a started instance (this
// one or another on the same queue) at once; after that run the job
// continues on its regular schedule (an `at` job is done again on
// success). While a run of the job is in flight, the request is absorbed by
// that run. A paused, failed or done job is made active by it.
func (s *Scheduler) RunNow(ctx context.Context, id string) (Job, error) {
	j, err := s.store.Get(ctx, id)
	if err != nil {
		return Job{}, err
	}
	j.NextRun = normTime(s.clock.Now())
	j.Attempts = 0
	j.Status = StatusActive
	if err := s.store.Update(ctx, j); err != nil {
		return Job{}, fmt.Errorf("run job %s now: %w", id, err)
	}
	s.enqueueLogged(ctx, j)
	return j, nil
}

// SyncConfigJobs makes the source=config jobs match specs (tendril.json
// schedule.jobs), keyed by Name:
//   - a new name is created;
//   - a changed definition (kind, spec, tz, task, actor, channel, chat,
//     session) is replaced and rescheduled from now;
//   - an unchanged one keeps its NextRun, so a run missed while the server
//     was down still runs once;
//   - a config job whose name is gone is deleted;
//   - an `at` job whose time has passed and that is not stored (it was
//     removed, or trimmed as an old done job) is skipped, not re-created;
//     one that ran and is stored as done is unchanged, so it does not run
//     again.
//
// Every spec must have a unique, non-empty Name that is no other job's ID
// (nameIsNoID). Invalid specs are reported
// (joined, each wrapping ErrBadSpec) and skipped; the valid ones are still
// applied. Safe to call from several instances at once.
func (s *Scheduler) SyncConfigJobs(ctx context.Context, specs []JobSpec) error {
	now := normTime(s.clock.Now())
	existing, err := s.store.List(ctx, Filter{Source: SourceConfig})
	if err != nil {
		return fmt.Errorf("sync config jobs: %w", err)
	}
	byName := make(map[string]Job, len(existing))
	for _, j := range existing {
		byName[j.Name] = j
	}
	var errs []error
	seen := map[string]bool{}
	for i, spec := range specs {
		spec.Source = SourceConfig
		j, err := newJob(spec, now, false)
		if err == nil && j.Name == "" {
			err = badSpec("name is empty")
		}
		if err == nil && seen[j.Name] {
			err = badSpec("name %q is used twice", j.Name)
		}
		cur, ok := byName[j.Name]
		if err == nil {
			if ok {
				j.ID = cur.ID // CreatedAt = now: an every job's grid restarts
			}
			err = s.nameIsNoID(ctx, j)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule.jobs[%d] %q: %w", i, spec.Name, err))
			if cur, ok := byName[spec.Name]; ok && !seen[spec.Name] {
				seen[cur.Name] = true // keep the stored one rather than lose it
			}
			continue
		}
		seen[j.Name] = true
		if ok && sameDefinition(cur, j) {
			continue
		}
		if j.Kind == KindAt && !j.NextRun.After(now) {
			if !ok {
				s.log.Info("config job's time has passed; not scheduling it", "name", j.Name, "at", j.Spec)
				continue
			}
		}
		created := false
		if ok {
			err = s.store.Update(ctx, j)
		} else {
			err = s.store.Create(ctx, j)
			created = err == nil
			if errors.Is(err, ErrExists) {
				err = nil // another instance created it meanwhile
			}
		}
		if err != nil {
			return fmt.Errorf("sync config job %q: %w", j.Name, err)
		}
		if ok || created {
			s.enqueueLogged(ctx, j)
		}
	}
	for _, cur := range existing {
		if !seen[cur.Name] {
			if err := s.store.Delete(ctx, cur.ID); err != nil && !errors.Is(err, ErrNotFound) {
				return fmt.Errorf("remove config job %q: %w", cur.Name, err)
			}
		}
	}
	return errors.Join(errs...)
}

func sameDefinition(a, b Job) bool {
	if a.Kind == KindAt && b.Kind == KindAt {
		ta, ea := time.Parse(time.RFC3339Nano, a.Spec)
		tb, eb := time.Parse(time.RFC3339Nano, b.Spec)
		if ea != nil || eb != nil || !ta.Equal(tb) {
			return false
		}
	} else if a.Kind != b.Kind || a.Spec != b.Spec {
		return false
	}
	return a.TZ == b.TZ && a.Task == b.Task && a.ActorID == b.ActorID &&
		a.Channel == b.Channel && a.ChatID == b.ChatID && a.SessionID == b.SessionID
}

// Pause stops the job with id from firing: its status becomes StatusPaused,
// its queued River runs are deleted (dropQueued; one left behind is
// skipped when it comes due) and no instance claims it. A run already in flight completes and is recorded, and the
// job stays paused (unless that run completes a one-shot, which is then
// done). Pausing a paused or done job changes nothing. It fails with
// ErrNotFound for an unknown id.
func (s *Scheduler) Pause(ctx context.Context, id string) (Job, error) {
	j, err := s.store.Get(ctx, id)
	if err != nil {
		return Job{}, err
	}
	if j.Status == StatusPaused || j.Status == StatusDone {
		return j, nil
	}
	j.Status = StatusPaused
	if err := s.store.Update(ctx, j); err != nil {
		return Job{}, fmt.Errorf("pause job %s: %w", id, err)
	}
	s.dropQueued(ctx, id)
	return j, nil
}

// Resume makes a paused job active again and queues its next run: the
// first regular slot after now (an `at` job whose time passed while paused
// runs now), so runs missed while paused are not replayed; Attempts
// restarts at 0; an `at` job that has fired before (paused while a RunNow
// was pending) runs now. Resuming a job that is not paused changes nothing. It
// fails with ErrNotFound for an unknown id, or ErrBadSpec when the job's
// definition no longer yields a slot.
func (s *Scheduler) Resume(ctx context.Context, id string) (Job, error) {
	j, err := s.store.Get(ctx, id)
	if err != nil {
		return Job{}, err
	}
	if j.Status != StatusPaused {
		return j, nil
	}
	now := normTime(s.clock.Now())
	next, err := j.nextAfter(time.Time{}, now)
	if err != nil {
		return Job{}, fmt.Errorf("resume job %s: %w", id, err)
	}
	if next.Before(now) || j.Kind == KindAt && !j.LastRun.IsZero() {
		// An `at` job that has fired was paused while a run again (RunNow)
		// was pending: that run is what resumes, now, never a second
		// firing at the original time.
		next = now
	}
	j.NextRun, j.Attempts, j.Status = next, 0, StatusActive
	if err := s.store.Update(ctx, j); err != nil {
		return Job{}, fmt.Errorf("resume job %s: %w", id, err)
	}
	s.enqueueLogged(ctx, j)
	return j, nil
}

// History returns the job's last runs (at most MaxRuns), newest first,
// each with the job's Name and ActorID. A done one-shot job keeps its runs
// (see MaxDone). It fails with ErrNotFound for an unknown id.
func (s *Scheduler) History(ctx context.Context, id string) ([]Run, error) {
	j, err := s.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	runs, err := s.store.Runs(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("history of job %s: %w", id, err)
	}
	if runs == nil {
		runs = []Run{}
	}
	for i := range runs {
		runs[i].Name, runs[i].ActorID = j.Name, j.ActorID
	}
	return runs, nil
}
