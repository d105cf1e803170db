package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/tendrilai/tendril/internal/jobs"
)

// Clock is the scheduler's source of time; tests inject a fake
// (scheduletest.Clock) so that hours pass instantly.
type Clock interface {
	Now() time.Time
	// After fires once d has passed on this clock (at once if d <= 0).
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Runner performs a job's run: the integrator's runner invokes the agent
// turn with invocation_type=cron, the job's channel, actor and session, and
// the retrieval fallback query "tasks due: <task>" (SPEC §7.2). It returns
// the reply text; an error makes the run fail and be retried.
type Runner interface {
	RunJob(ctx context.Context, j Job) (reply string, err error)
}

// Deliverer sends a run's reply to the job's chat (j.Channel, j.ChatID). It
// is never called for a NOTHING_DUE reply. An error fails the run, which is
// then retried (running the turn again).
type Deliverer interface {
	Deliver(ctx context.Context, j Job, text string) error
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context, j Job) (string, error)

func (f RunnerFunc) RunJob(ctx context.Context, j Job) (string, error) { return f(ctx, j) }

// DelivererFunc adapts a function to Deliverer.
type DelivererFunc func(ctx context.Context, j Job, text string) error

func (f DelivererFunc) Deliver(ctx context.Context, j Job, text string) error { return f(ctx, j, text) }

// DefaultBackoff is the retry delay after the 1st, 2nd and 3rd consecutive
// failure of a run (SPEC §7.2). After the last, the job waits for its next
// regular slot; an `at` job becomes StatusFailed.
var DefaultBackoff = []time.Duration{60 * time.Second, 120 * time.Second, 300 * time.Second}

// Options configures a Scheduler. Zero fields take the defaults noted.
type Options struct {
	Clock  Clock        // default: the wall clock
	Logger *slog.Logger // default: discard
	// Deliverer sends non-NOTHING_DUE replies; nil drops them (logged).
	Deliverer Deliverer
	// Backoff is the retry delay per consecutive failure; default
	// DefaultBackoff (60s, 120s, 300s).
	Backoff []time.Duration
	// InstanceID names this scheduler as lease owner; default
	// "<hostname>-<pid>-<random>". Instances sharing a store need distinct IDs.
	InstanceID string
	// Lease is how long a claimed run is owned (default 10m). The run's
	// context is cancelled at 90% of it so that no other instance can claim
	// a run still in progress; a run whose instance dies is retried by
	// another once the lease expires (then at-least-once, not exactly-once).
	Lease time.Duration
	// MaxConcurrent bounds runs in flight in this instance (default 4):
	// the River queue "schedule" runs this many at once.
	MaxConcurrent int
	// Jobs is the job queue the runs go through (River, shared with the
	// process's other background work; its owner starts and stops it).
	// Each run of a job is a schedule.run River job scheduled at the job's
	// NextRun, unique per (job, slot), so each run fires once across
	// instances. When nil, New opens a queue of the store's own (a store
	// implementing JobsOpener: the SQLite and PostgreSQL stores do) and
	// the Scheduler owns it.
	Jobs *jobs.Queue
	// ReconcileInterval is how often the leader among the instances makes
	// sure every active job has its run queued, catching definitions
	// changed by a process without the queue (default 5m).
	ReconcileInterval time.Duration
}

// JobsOpener is implemented by stores that can host a job queue of their
// own, used when Options.Jobs is nil.
type JobsOpener interface {
	OpenJobs(ctx context.Context, opts jobs.Options) (*jobs.Queue, error)
}

// Queue is the River queue of scheduled runs.
const Queue = "schedule"

// RunArgs are a schedule.run job's args: the run of job JobID scheduled at
// Slot (its NextRun, UTC, millisecond precision).
type RunArgs struct {
	JobID string    `json:"job_id" river:"unique"`
	Slot  time.Time `json:"slot" river:"unique"`
}

func (RunArgs) Kind() string { return "schedule.run" }

// ReconcileArgs are the periodic job that queues every active job's run.
type ReconcileArgs struct{}

func (ReconcileArgs) Kind() string { return "schedule.reconcile" }

// Scheduler runs due jobs from a Store. Its methods are safe for concurrent
// use; the management methods (Add, Remove, List, Get, RunNow,
// SyncConfigJobs) work without Start, e.g. from the CLI.
type Scheduler struct {
	store  Store
	runner Runner
	opts   Options
	log    *slog.Logger
	clock  Clock

	q        *jobs.Queue
	ownedQ   bool // opened by New: Start/Stop run it, Close closes it
	working  bool // the run worker is registered on q
	setupErr error

	sem      chan struct{}
	inFlight atomic.Int64

	runsMu sync.Mutex
	runs   map[string]context.CancelCauseFunc // job ID → its run in flight here

	mu      sync.Mutex
	started bool
	done    chan struct{}
	running sync.WaitGroup
}

// errStopping is the cancellation cause of runs cut short by Stop.
var errStopping = errors.New("schedule: stopping")

// New returns a Scheduler over store. runner may be nil for a scheduler that
// only manages jobs (Start then fails).
func New(store Store, runner Runner, opts Options) *Scheduler {
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Backoff == nil {
		opts.Backoff = DefaultBackoff
	}
	if opts.InstanceID == "" {
		host, _ := os.Hostname()
		opts.InstanceID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), strings.ToLower(ulid.Make().String()[20:]))
	}
	if opts.Lease <= 0 {
		opts.Lease = 10 * time.Minute
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = 4
	}
	if opts.ReconcileInterval <= 0 {
		opts.ReconcileInterval = 5 * time.Minute
	}
	s := &Scheduler{
		store:  store,
		runner: runner,
		opts:   opts,
		log:    opts.Logger.With("component", "schedule", "instance", opts.InstanceID),
		clock:  opts.Clock,
		sem:    make(chan struct{}, opts.MaxConcurrent),
		runs:   map[string]context.CancelCauseFunc{},
		q:      opts.Jobs,
	}
	s.setupErr = s.setupJobs()
	if s.setupErr != nil {
		s.log.Warn("schedule: runs cannot be queued", "err", s.setupErr)
	}
	return s
}

// setupJobs opens the store's own queue when none is given and registers
// the run and reconcile workers. On a queue already in use, or already
// working schedule runs (a second Scheduler), the Scheduler only queues
// runs.
func (s *Scheduler) setupJobs() error {
	if s.q == nil {
		o, ok := s.store.(JobsOpener)
		if !ok {
			return errors.New("no job queue: set Options.Jobs")
		}
		q, err := o.OpenJobs(context.Background(), jobs.Options{Logger: s.opts.Logger})
		if err != nil {
			return fmt.Errorf("open the store's job queue: %w", err)
		}
		s.q, s.ownedQ = q, true
	}
	if s.runner == nil {
		return nil // manages jobs only: queues runs, never works them
	}
	err := s.q.AddQueue(Queue, s.opts.MaxConcurrent)
	if err == nil {
		err = jobs.Register[RunArgs](s.q, runWorker{s: s})
	}
	if err == nil {
		err = jobs.Register[ReconcileArgs](s.q, reconcileWorker{s: s})
	}
	if err == nil {
		err = s.q.AddPeriodic("schedule.reconcile", s.opts.ReconcileInterval, func() (river.JobArgs, *river.InsertOpts) {
			return ReconcileArgs{}, &river.InsertOpts{Queue: Queue, UniqueOpts: river.UniqueOpts{ByState: jobs.LiveStates}}
		})
	}
	if err != nil {
		s.log.Info("schedule: this scheduler queues runs but does not work them", "reason", err)
		return nil
	}
	s.working = true
	return nil
}

// Close stops the Scheduler and closes the job queue it opened, if any
// (not the store).
func (s *Scheduler) Close() error {
	s.Stop()
	if s.ownedQ {
		return s.q.Close()
	}
	return nil
}

// Store returns the scheduler's store.
func (s *Scheduler) Store() Store { return s.store }

// Start lets this Scheduler's worker run the schedule.run jobs River hands
// it, until ctx ends or Stop is called, and queues the run of every active
// job, so a job that fell due while the server was down runs once (missed
// slots are not replayed). When the Scheduler opened its own queue, Start
// starts it. It fails if already started, without a Runner, or when the
// Scheduler cannot work runs (its queue was used before New registered
// the worker).
func (s *Scheduler) Start(ctx context.Context) error {
	if s.runner == nil {
		return errors.New("schedule: start: no runner")
	}
	if s.setupErr != nil {
		return fmt.Errorf("schedule: start: %w", s.setupErr)
	}
	if !s.working {
		return errors.New("schedule: start: the job queue was used before this scheduler registered its worker")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("schedule: already started")
	}
	if err := s.reconcile(ctx); err != nil {
		return fmt.Errorf("schedule: start: %w", err)
	}
	if s.ownedQ {
		if err := s.q.Start(ctx); err != nil {
			return fmt.Errorf("schedule: start: %w", err)
		}
	}
	s.started = true
	s.done = make(chan struct{})
	done := s.done
	go func() {
		select {
		case <-ctx.Done():
			s.Stop()
		case <-done:
		}
	}()
	return nil
}

// Stop cancels this instance's runs in flight and waits for them; a run
// cancelled this way releases its lease with its schedule unchanged, so it
// runs again at the next start. When the Scheduler owns its queue, Stop
// stops it too. Stop is a no-op if not started.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	if !s.started {
		s.mu.Unlock()
		return
	}
	s.started = false
	close(s.done)
	s.mu.Unlock()
	s.runsMu.Lock()
	for _, cancel := range s.runs {
		cancel(errStopping)
	}
	s.runsMu.Unlock()
	s.running.Wait()
	if s.ownedQ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.q.Stop(ctx); err != nil {
			s.log.Warn("schedule: stop job queue", "err", err)
		}
	}
}

// enqueue queues the run of j at its NextRun (a no-op for a job that is not
// active or whose run is already queued). River's scheduled_at is the wall
// clock: the slot is placed as far from now as it is from the scheduler's
// clock's now (the same instant with the real clock).
func (s *Scheduler) enqueue(ctx context.Context, j Job) error {
	if j.Status != StatusActive || s.q == nil {
		return nil
	}
	at := time.Now().Add(j.NextRun.Sub(s.clock.Now()))
	args := RunArgs{JobID: j.ID, Slot: normTime(j.NextRun)}
	opts := &river.InsertOpts{
		Queue: Queue, ScheduledAt: at, MaxAttempts: 10,
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: jobs.LiveStates},
	}
	res, err := s.q.Insert(ctx, args, opts)
	if err == nil && res.UniqueSkippedAsDuplicate && res.Job.State == rivertype.JobStateScheduled && res.Job.ScheduledAt.After(at.Add(time.Second)) {
		// The slot's run waits for a later wall-clock time than the
		// scheduler's clock now says (the clock jumped: a test's fake
		// clock, a wall-clock step): queue it again at the right time.
		if derr := s.q.Delete(ctx, res.Job.ID); derr == nil {
			_, err = s.q.Insert(ctx, args, opts)
		}
	}
	if err != nil {
		return fmt.Errorf("queue run of job %s at %s: %w", j.ID, j.NextRun.Format(time.RFC3339), err)
	}
	return nil
}

// enqueueLogged is enqueue for paths that already succeeded in the store:
// a failure is logged, and the next reconcile queues the run.
func (s *Scheduler) enqueueLogged(ctx context.Context, j Job) {
	if err := s.enqueue(ctx, j); err != nil {
		s.log.Warn("schedule: queue run; the next reconcile retries", "err", err)
	}
}

// reconcile queues the run of every active job (uniqueness drops those
// already queued).
func (s *Scheduler) reconcile(ctx context.Context) error {
	all, err := s.store.List(ctx, Filter{})
	if err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	for _, j := range all {
		if err := s.enqueue(ctx, j); err != nil {
			return err
		}
	}
	return nil
}

// runWorker works schedule.run jobs.
type runWorker struct {
	river.WorkerDefaults[RunArgs]
	s *Scheduler
}

// Timeout is the run's lease: the run itself gives up at 90% of it.
func (w runWorker) Timeout(*river.Job[RunArgs]) time.Duration { return w.s.opts.Lease }

// Work runs the slot when it is still the job's NextRun and this instance
// claims it in the store; a slot that moved on (the job was rescheduled,
// run by RunDue or removed) is a no-op. Only a store failure is an error
// (River retries it).
func (w runWorker) Work(ctx context.Context, job *river.Job[RunArgs]) error {
	s, a := w.s, job.Args
	s.mu.Lock()
	if !s.started {
		s.mu.Unlock()
		// This process manages jobs but does not run them (or is
		// stopping): hand the run back for a started instance.
		return river.JobSnooze(10 * time.Second)
	}
	s.running.Add(1) // under mu: Stop's Wait never races an Add
	s.mu.Unlock()
	defer s.running.Done()
	j, err := s.store.Get(ctx, a.JobID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("run %s: %w", a.JobID, err)
	}
	if j.Status != StatusActive || !j.NextRun.Equal(normTime(a.Slot)) {
		return nil
	}
	now := s.clock.Now()
	if d := j.NextRun.Sub(now); d > 0 {
		return river.JobSnooze(d)
	}
	ok, err := s.store.Claim(ctx, Claim{ID: j.ID, NextRun: j.NextRun, Owner: s.opts.InstanceID, Now: now, Until: normTime(now.Add(s.opts.Lease))})
	if err != nil {
		return fmt.Errorf("claim job %s: %w", j.ID, err)
	}
	if !ok {
		return nil // another instance (or RunDue) has this run
	}
	s.run(ctx, j)
	return nil
}

// reconcileWorker works the periodic schedule.reconcile job.
type reconcileWorker struct {
	river.WorkerDefaults[ReconcileArgs]
	s *Scheduler
}

func (w reconcileWorker) Work(ctx context.Context, job *river.Job[ReconcileArgs]) error {
	return w.s.reconcile(ctx)
}

// RunDue claims and runs every job due now (bounded by MaxConcurrent at a
// time) and waits for those runs. It returns how many runs it started. Tests
// drive the scheduler with it on a fake clock; Start calls the same pass.
func (s *Scheduler) RunDue(ctx context.Context) (int, error) {
	if s.runner == nil {
		return 0, errors.New("schedule: run due: no runner")
	}
	var wg sync.WaitGroup
	total := 0
	for {
		n, err := s.dispatchInto(ctx, &wg, true)
		total += n
		if err != nil || n == 0 {
			wg.Wait()
			return total, err
		}
		wg.Wait()
	}
}

// dispatchInto claims due jobs while run slots are free and starts a
// goroutine per claimed run. With block it waits for a slot instead of
// leaving the rest for the next pass.
func (s *Scheduler) dispatchInto(ctx context.Context, wg *sync.WaitGroup, block bool) (int, error) {
	now := s.clock.Now()
	due, err := s.store.Due(ctx, now, 2*s.opts.MaxConcurrent)
	if err != nil {
		return 0, fmt.Errorf("list due jobs: %w", err)
	}
	started := 0
	for _, j := range due {
		if block {
			select {
			case s.sem <- struct{}{}:
			case <-ctx.Done():
				return started, ctx.Err()
			}
		} else {
			select {
			case s.sem <- struct{}{}:
			default:
				return started, nil
			}
		}
		now = s.clock.Now()
		ok, err := s.store.Claim(ctx, Claim{ID: j.ID, NextRun: j.NextRun, Owner: s.opts.InstanceID, Now: now, Until: normTime(now.Add(s.opts.Lease))})
		if err != nil || !ok {
			<-s.sem
			if err != nil {
				return started, fmt.Errorf("claim job %s: %w", j.ID, err)
			}
			continue
		}
		started++
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-s.sem }()
			s.run(ctx, j)
		}()
	}
	return started, nil
}

// InFlight returns how many runs this instance has in progress (for
// /ping's HealthyBusy).
func (s *Scheduler) InFlight() int { return int(s.inFlight.Load()) }

// run executes one claimed run and records its outcome.
func (s *Scheduler) run(ctx context.Context, j Job) {
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	log := s.log.With("job", j.ID, "name", j.Name, "slot", j.NextRun)
	tctx, cancel := context.WithTimeout(ctx, s.opts.Lease*9/10)
	defer cancel()
	rctx, cancelRun := context.WithCancelCause(tctx)
	defer cancelRun(nil)
	s.runsMu.Lock()
	s.runs[j.ID] = cancelRun
	s.runsMu.Unlock()
	defer func() {
		s.runsMu.Lock()
		delete(s.runs, j.ID)
		s.runsMu.Unlock()
	}()
	started := normTime(s.clock.Now())
	delivered, err := s.invoke(rctx, j, log)
	stopping := errors.Is(context.Cause(rctx), errStopping)
	if errors.Is(context.Cause(rctx), ErrJobRemoved) {
		log.Info("run cancelled: job removed")
		return // the job is gone: there is no outcome to record
	}
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer fcancel()
	var o Outcome
	if err != nil && (ctx.Err() != nil || stopping) {
		// Shutdown, not a failure: give the slot back untouched.
		o = Outcome{NextRun: j.NextRun, LastRun: j.LastRun, Attempts: j.Attempts, Status: j.Status, LastError: j.LastError}
		log.Info("run interrupted by shutdown; will run again at start-up")
	} else {
		finished := s.clock.Now()
		o = s.outcome(j, finished, err, log)
		r := Run{JobID: j.ID, Started: started, Finished: normTime(finished), Result: RunOK, Detail: truncRunes(delivered, MaxRunDetail)}
		if err != nil {
			r.Result, r.Detail = RunError, truncRunes(err.Error(), 1000)
		}
		o.Run = &r
	}
	if ferr := s.store.Finish(fctx, j.ID, s.opts.InstanceID, o); ferr != nil {
		log.Warn("record run outcome", "err", ferr)
		return
	}
	if !o.Delete && !stopping && ctx.Err() == nil {
		next := j
		next.NextRun, next.LastRun, next.Attempts, next.Status, next.LastError = o.NextRun, o.LastRun, o.Attempts, o.Status, o.LastError
		s.enqueueLogged(fctx, next)
	}
}

func (s *Scheduler) invoke(ctx context.Context, j Job, log *slog.Logger) (delivered string, err error) {
	defer func() {
		// A runner bug must not take the scheduler down.
		if r := recover(); r != nil {
			err = fmt.Errorf("runner panicked: %v", r)
		}
	}()
	reply, err := s.runner.RunJob(ctx, j)
	if err != nil {
		return "", fmt.Errorf("run: %w", err)
	}
	text, suppressed := StripNothingDue(reply)
	if suppressed {
		log.Info("run done: nothing due")
		return NothingDue, nil
	}
	if s.opts.Deliverer == nil {
		log.Warn("run done: no deliverer, reply dropped", "bytes", len(text))
		return text, nil
	}
	if err := s.opts.Deliverer.Deliver(ctx, j, text); err != nil {
		return "", fmt.Errorf("deliver to %s:%s: %w", j.Channel, j.ChatID, err)
	}
	log.Info("run done: delivered", "bytes", len(text))
	return text, nil
}

// StripNothingDue removes the NothingDue sentinel from a reply. suppressed
// is true when nothing but the sentinel, whitespace and Markdown/quote
// punctuation remains, i.e. nothing must be sent; otherwise text is the
// reply without the sentinel.
func StripNothingDue(reply string) (text string, suppressed bool) {
	if !strings.Contains(reply, NothingDue) {
		t := strings.TrimSpace(reply)
		return t, t == ""
	}
	t := strings.TrimSpace(strings.ReplaceAll(reply, NothingDue, ""))
	if strings.Trim(t, " \t\r\n`*_\"'.!:;-—()[]") == "" {
		return "", true
	}
	return t, false
}

// outcome computes the schedule after a run of j's slot that ended at now
// with err.
func (s *Scheduler) outcome(j Job, now time.Time, err error, log *slog.Logger) Outcome {
	now = normTime(now)
	slot := j.NextRun
	if err == nil {
		if j.Kind == KindAt {
			// Done, not deleted: the job and its runs stay for `cron
			// history`; Store.Finish bounds how many done jobs are kept.
			return Outcome{NextRun: slot, LastRun: now, Status: StatusDone}
		}
		next, nerr := j.nextAfter(slot, now)
		if nerr != nil {
			log.Error("job no longer schedulable", "err", nerr)
			return Outcome{NextRun: slot, LastRun: now, Status: StatusFailed, LastError: nerr.Error()}
		}
		return Outcome{NextRun: next, LastRun: now, Status: StatusActive}
	}
	msg := err.Error()
	if len(msg) > 1000 {
		msg = msg[:1000]
	}
	attempts := j.Attempts + 1
	var regular time.Time
	if j.Kind != KindAt {
		regular, _ = j.nextAfter(slot, now)
	}
	if attempts <= len(s.opts.Backoff) {
		retry := normTime(now.Add(s.opts.Backoff[attempts-1]))
		if !regular.IsZero() && !regular.After(retry) {
			log.Warn("run failed; next regular slot comes before the retry", "err", err, "next_run", regular)
			return Outcome{NextRun: regular, LastRun: now, Status: StatusActive, LastError: msg}
		}
		log.Warn("run failed; retrying", "err", err, "attempt", attempts, "retry_at", retry)
		return Outcome{NextRun: retry, LastRun: now, Attempts: attempts, Status: StatusActive, LastError: msg}
	}
	if j.Kind == KindAt || regular.IsZero() {
		log.Error("run failed; retries exhausted, giving up", "err", err, "attempts", attempts)
		return Outcome{NextRun: slot, LastRun: now, Attempts: attempts, Status: StatusFailed, LastError: msg}
	}
	log.Error("run failed; retries exhausted, waiting for the next regular slot", "err", err, "attempts", attempts, "next_run", regular)
	return Outcome{NextRun: regular, LastRun: now, Status: StatusActive, LastError: msg}
}
