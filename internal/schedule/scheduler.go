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
	// PollInterval bounds how long the loop sleeps without reading the
	// store, so changes from other processes (tendril cron run, another
	// instance) are seen (default 15s).
	PollInterval time.Duration
	// MaxConcurrent bounds runs in flight in this instance (default 4).
	MaxConcurrent int
}

// Scheduler runs due jobs from a Store. Its methods are safe for concurrent
// use; the management methods (Add, Remove, List, Get, RunNow,
// SyncConfigJobs) work without Start, e.g. from the CLI.
type Scheduler struct {
	store  Store
	runner Runner
	opts   Options
	log    *slog.Logger
	clock  Clock

	wake     chan struct{}
	sem      chan struct{}
	inFlight atomic.Int64

	runsMu sync.Mutex
	runs   map[string]context.CancelCauseFunc // job ID → its run in flight here

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	running sync.WaitGroup
}

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
	if opts.PollInterval <= 0 {
		opts.PollInterval = 15 * time.Second
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = 4
	}
	return &Scheduler{
		store:  store,
		runner: runner,
		opts:   opts,
		log:    opts.Logger.With("component", "schedule", "instance", opts.InstanceID),
		clock:  opts.Clock,
		wake:   make(chan struct{}, 1),
		sem:    make(chan struct{}, opts.MaxConcurrent),
		runs:   map[string]context.CancelCauseFunc{},
	}
}

// Store returns the scheduler's store.
func (s *Scheduler) Store() Store { return s.store }

// Start runs the scheduling loop until ctx ends or Stop is called. Its first
// pass runs every job that fell due while the server was down, once each
// (missed slots are not replayed). It fails if already started or if the
// scheduler has no Runner.
func (s *Scheduler) Start(ctx context.Context) error {
	if s.runner == nil {
		return errors.New("schedule: start: no runner")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return errors.New("schedule: already started")
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go s.loop(ctx, s.done)
	return nil
}

// Stop ends the loop, cancels runs in flight and waits for them. A run
// cancelled this way releases its lease with its schedule unchanged, so it
// runs again at the next start. Stop is a no-op if not started.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.cancel, s.done = nil, nil
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	s.running.Wait()
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Scheduler) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	for {
		n, err := s.dispatch(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("schedule pass failed", "err", err)
		}
		now := s.clock.Now()
		d := s.opts.PollInterval
		if t, ok, err := s.store.NextWake(ctx); err == nil && ok {
			if dd := t.Sub(now); dd < d {
				d = dd
			}
		}
		if d <= 0 && n == 0 {
			// Due but nothing claimed: all slots busy or lost to another
			// instance. Don't spin.
			d = time.Second
		}
		select {
		case <-s.wake: // don't start a timer only to abandon it
			continue
		default:
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-s.clock.After(d):
		}
	}
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

func (s *Scheduler) dispatch(ctx context.Context) (int, error) {
	return s.dispatchInto(ctx, &s.running, false)
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
			defer func() { <-s.sem; s.poke() }()
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
	err := s.invoke(rctx, j, log)
	if errors.Is(context.Cause(rctx), ErrJobRemoved) {
		log.Info("run cancelled: job removed")
		return // the job is gone: there is no outcome to record
	}
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer fcancel()
	var o Outcome
	if err != nil && ctx.Err() != nil {
		// Shutdown, not a failure: give the slot back untouched.
		o = Outcome{NextRun: j.NextRun, LastRun: j.LastRun, Attempts: j.Attempts, Status: j.Status, LastError: j.LastError}
		log.Info("run interrupted by shutdown; will run again at start-up")
	} else {
		o = s.outcome(j, s.clock.Now(), err, log)
	}
	if ferr := s.store.Finish(fctx, j.ID, s.opts.InstanceID, o); ferr != nil {
		log.Warn("record run outcome", "err", ferr)
	}
}

func (s *Scheduler) invoke(ctx context.Context, j Job, log *slog.Logger) (err error) {
	defer func() {
		// A runner bug must not take the scheduler down.
		if r := recover(); r != nil {
			err = fmt.Errorf("runner panicked: %v", r)
		}
	}()
	reply, err := s.runner.RunJob(ctx, j)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	text, suppressed := StripNothingDue(reply)
	if suppressed {
		log.Info("run done: nothing due")
		return nil
	}
	if s.opts.Deliverer == nil {
		log.Warn("run done: no deliverer, reply dropped", "bytes", len(text))
		return nil
	}
	if err := s.opts.Deliverer.Deliver(ctx, j, text); err != nil {
		return fmt.Errorf("deliver to %s:%s: %w", j.Channel, j.ChatID, err)
	}
	log.Info("run done: delivered", "bytes", len(text))
	return nil
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
			return Outcome{Delete: true}
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
