// Package pipeline is the memory Recorder (SPEC §4.3–4.5): it appends each
// turn's events to the store, queues durable extraction jobs every
// ExtractEveryTurns turns and when a session goes idle, and runs them —
// extraction, the importance gate, staging and consolidation. It also owns
// staging review, memory_write (episodic writes through the gate) and
// harvest (episodic → semantic).
//
// Jobs are River jobs (internal/jobs): kind memory.extract, unique per
// (agent, actor, session, reason) while one waits, enqueued in the same
// transaction that counts the turn, and completed in the same transaction
// that moves the session's extraction cursor once its records are written;
// kind memory.idle fires IdleAfter after a session's last turn and queues
// its idle extraction. A job whose process dies mid-way is rescued by River
// and runs again; a failed job is retried with backoff. Consolidation makes
// a rerun idempotent: the same candidate merges into the record it already
// produced. The pipeline's state (cursors, counters, forget epochs,
// rejection hashes) lives beside River's tables: in the SQLite job
// database (<home>/index/jobs.db by default) or, on PostgreSQL, in the
// shared pool (memory_pipeline_*).
//
// Forget is immediate: it advances the actor's forget epoch while deleting
// the actor's jobs and memory, and extraction writes commit only while the
// epoch they started under is current, so no job queued or running before
// a Forget re-learns what was forgotten.
package pipeline

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime/trace"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/riverqueue/river"

	"github.com/tendrilai/tendril/internal/jobs"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/extract"
	"github.com/tendrilai/tendril/internal/memory/gate"
)

// Options configure a Pipeline. Zero values take the defaults in brackets.
type Options struct {
	// Jobs is the job queue to use, shared with the process's other
	// background work; its owner starts and stops it (Start and Stop here
	// then only look after the pipeline's own jobs). New registers the
	// pipeline's workers on it, so it must not have been used yet; on a
	// Queue already used or already working the pipeline's kinds (a second
	// Pipeline on one Queue), the Pipeline only enqueues.
	Jobs *jobs.Queue
	// JobsPath is the SQLite job database New opens when Jobs is nil
	// [<Home>/index/jobs.db]; with Jobs nil, one of JobsPath and Home is
	// required. The Pipeline then owns that Queue: Start and Stop run it,
	// Close closes it.
	JobsPath string
	Home     string
	// JobsOptions configure the Queue New opens [jobs' defaults].
	JobsOptions jobs.Options
	// AgentID is the agent used when a staging call names none ["main"].
	AgentID string
	// ExtractEveryTurns queues extraction every N turns of a session [2].
	ExtractEveryTurns int
	// IdleAfter queues extraction and the session summary once a session
	// has had no turn for this long [10m].
	IdleAfter time.Duration
	// ExtractMinInterval spaces a session's turn-count extraction jobs:
	// a job queued sooner than this after the session's previous one (by
	// the wall clock, in this process) is scheduled at that distance, so
	// that under back-to-back turns one job covers every turn that arrives
	// while it waits instead of one job every ExtractEveryTurns turns.
	// Nothing is dropped: the job reads from the session's cursor. A
	// session's first job, or one after a quiet spell, runs at once
	// [2s; < 0 disables].
	ExtractMinInterval time.Duration
	// Thresholds of the importance gate [0.4 stage, 0.7 store].
	Thresholds gate.Thresholds
	// Extractor for turn extraction [extract.Rules]; set an *extract.LLM
	// when a model is configured.
	Extractor extract.Extractor
	// HarvestExtractor for Harvest [Extractor].
	HarvestExtractor extract.Extractor
	// Namespace templates [memory.DefaultLongTermTemplate,
	// memory.DefaultEpisodicTemplate].
	LongTermTemplate string
	EpisodicTemplate string
	// Workers is how many extraction jobs run at once (River queue
	// "memory") [1].
	Workers int
	// MaxAttempts before a job is discarded, kept for inspection with its
	// errors in River's table [8].
	MaxAttempts int
	// DuplicateOverlap is the token Jaccard at or above which a candidate
	// merges into an existing record of the same strategy [0.8].
	DuplicateOverlap float64
	// ListLimit bounds the records read per namespace for consolidation
	// [10000].
	ListLimit int
	// Now is the clock [time.Now].
	Now    func() time.Time
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.JobsPath == "" && o.Home != "" {
		o.JobsPath = filepath.Join(o.Home, "index", "jobs.db")
	}
	if o.AgentID == "" {
		o.AgentID = "main"
	}
	if o.ExtractEveryTurns <= 0 {
		o.ExtractEveryTurns = 2
	}
	if o.IdleAfter <= 0 {
		o.IdleAfter = 10 * time.Minute
	}
	if o.ExtractMinInterval == 0 {
		o.ExtractMinInterval = 2 * time.Second
	}
	if o.Thresholds == (gate.Thresholds{}) {
		o.Thresholds = gate.DefaultThresholds
	}
	if o.Extractor == nil {
		o.Extractor = extract.Rules{}
	}
	if o.HarvestExtractor == nil {
		o.HarvestExtractor = o.Extractor
	}
	if o.LongTermTemplate == "" {
		o.LongTermTemplate = memory.DefaultLongTermTemplate
	}
	if o.EpisodicTemplate == "" {
		o.EpisodicTemplate = memory.DefaultEpisodicTemplate
	}
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 8
	}
	if o.DuplicateOverlap <= 0 {
		o.DuplicateOverlap = 0.8
	}
	if o.ListLimit <= 0 {
		o.ListLimit = 10000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Pipeline implements memory.Recorder with durable extraction jobs.
type Pipeline struct {
	store memory.Store
	opts  Options
	q     *queue
	// working is set when this Pipeline's workers are registered on the
	// Queue (not when it only enqueues).
	working bool
	// ran counts the jobs this Pipeline's workers finished (completed or
	// dropped for a forget), for tests and benchmarks.
	ran atomic.Int64
	// beforeComplete, when set (tests), runs in the job's completing
	// transaction after its records are written; an error aborts it, as a
	// crash there would.
	beforeComplete func() error

	locks sync.Map // actor key → *sync.Mutex: one extraction per actor at a time
	// afterList, when set (tests), runs after consolidation's listing and
	// before its write.
	afterList func(actorID, sessionID string)

	cands candCache // candidate indexes kept between jobs (consolidateInto)

	flightMu sync.Mutex
	flights  map[string]map[*flight]struct{} // actor → extractions in progress here

	mu      sync.Mutex
	started bool
}

var _ memory.Recorder = (*Pipeline)(nil)

// ErrInvalid marks bad arguments: empty or oversize IDs and text.
var ErrInvalid = errors.New("memory pipeline: invalid argument")

// MaxWriteBytes bounds the text of one WriteEpisodic call.
const MaxWriteBytes = 4 << 10

// New returns a Pipeline over store, with its jobs on opts.Jobs or, when
// that is nil, on a SQLite job database it opens at opts.JobsPath. It
// creates the pipeline's tables (pg.Migrate on PostgreSQL) and registers
// its workers. Jobs do not run until Start (or, on a shared Queue, until
// its owner starts it); RecordTurn, Flush and the staging calls work
// without them.
func New(store memory.Store, opts Options) (*Pipeline, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalid)
	}
	opts = opts.withDefaults()
	if opts.Jobs == nil && opts.JobsPath == "" {
		return nil, fmt.Errorf("%w: Options.Jobs, Options.JobsPath or Options.Home is required", ErrInvalid)
	}
	if err := opts.Thresholds.Validate(); err != nil {
		return nil, err
	}
	ctx := context.Background()
	q := &queue{jobs: opts.Jobs, minGap: opts.ExtractMinInterval}
	if q.jobs == nil {
		jq, err := jobs.OpenSQLite(ctx, opts.JobsPath, opts.JobsOptions)
		if err != nil {
			return nil, fmt.Errorf("memory pipeline: %w", err)
		}
		q.jobs, q.owned = jq, true
	}
	if err := openState(ctx, q.jobs); err != nil {
		q.close()
		return nil, err
	}
	if db := q.jobs.DB(); db != nil {
		q.stmts = newStmtCache(db)
	}
	p := &Pipeline{store: store, opts: opts, q: q, flights: map[string]map[*flight]struct{}{}}
	err := q.jobs.AddQueue(Queue, opts.Workers)
	if err == nil {
		err = jobs.Register[ExtractArgs](q.jobs, extractWorker{p: p})
	}
	if err == nil {
		err = jobs.Register[IdleArgs](q.jobs, idleWorker{p: p})
	}
	switch {
	case err == nil:
		p.working = true
	case q.owned:
		q.close()
		return nil, fmt.Errorf("memory pipeline: %w", err)
	default:
		opts.Logger.Info("memory pipeline: enqueue only on this job queue", "reason", err)
	}
	if opts.JobsPath != "" && q.owned && opts.Home != "" {
		if err := p.importLegacy(ctx, filepath.Join(opts.Home, "memory", "jobs.db")); err != nil {
			opts.Logger.Warn("memory pipeline: importing the old job database failed; continuing", "err", err)
		}
	}
	return p, nil
}

// Close stops the workers and, when the Pipeline opened its job database,
// closes it (never the store).
func (p *Pipeline) Close() error {
	p.Stop()
	return p.q.close()
}

// Start makes sure every session waiting for its idle extraction has an
// idle job, and, when the Pipeline owns its Queue, starts it until ctx
// ends or Stop is called. On a shared Queue its owner starts the workers.
// Calling Start twice is a no-op.
func (p *Pipeline) Start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return
	}
	p.started = true
	if err := p.ensureIdleJobs(ctx); err != nil {
		p.opts.Logger.Warn("memory: idle jobs", "err", err)
	}
	if p.q.owned {
		if err := p.q.jobs.Start(ctx); err != nil {
			p.opts.Logger.Error("memory: start extraction workers", "err", err)
		}
	}
}

// Stop waits (up to 30 s) for the extraction jobs running in this process
// when the Pipeline owns its Queue; a job cut short then is retried.
func (p *Pipeline) Stop() {
	p.mu.Lock()
	started := p.started
	p.started = false
	p.mu.Unlock()
	if !started || !p.q.owned {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.q.jobs.Stop(ctx); err != nil {
		p.opts.Logger.Warn("memory: stop extraction workers", "err", err)
	}
}

// ensureIdleJobs inserts the idle job of every session still waiting for
// its idle extraction (uniqueness drops the ones already there).
func (p *Pipeline) ensureIdleJobs(ctx context.Context) error {
	pend, err := p.q.pendingIdle(ctx)
	if err != nil {
		return err
	}
	for _, a := range pend {
		due, err := p.q.idleDue(ctx, sessionKey{a.AgentID, a.ActorID, a.SessionID}, p.opts.IdleAfter)
		if err != nil || due.IsZero() {
			continue
		}
		wait := max(due.Sub(p.opts.Now()), 0)
		if _, err := p.q.jobs.Insert(ctx, a, &river.InsertOpts{Queue: Queue, ScheduledAt: time.Now().Add(wait), UniqueOpts: uniqueWhileLive}); err != nil {
			return err
		}
	}
	return nil
}

// extractWorker runs memory.extract jobs.
type extractWorker struct {
	river.WorkerDefaults[ExtractArgs]
	p *Pipeline
}

// NextRetry backs a failed extraction off attempt² seconds (capped at 10
// minutes).
func (w extractWorker) NextRetry(job *river.Job[ExtractArgs]) time.Time {
	return time.Now().Add(retryAfter(job.Attempt))
}

func (w extractWorker) Work(ctx context.Context, job *river.Job[ExtractArgs]) error {
	return w.p.runJob(ctx, job)
}

// idleWorker runs memory.idle jobs.
type idleWorker struct {
	river.WorkerDefaults[IdleArgs]
	p *Pipeline
}

func (w idleWorker) Work(ctx context.Context, job *river.Job[IdleArgs]) error {
	p, a := w.p, job.Args
	k := sessionKey{a.AgentID, a.ActorID, a.SessionID}
	for i := 0; i < 3; i++ {
		due, err := p.q.idleDue(ctx, k, p.opts.IdleAfter)
		if err != nil {
			return fmt.Errorf("idle %s/%s/%s: %w", a.AgentID, a.ActorID, a.SessionID, err)
		}
		if due.IsZero() {
			return nil // already swept, or forgotten
		}
		if wait := due.Sub(p.opts.Now()); wait > 0 {
			return river.JobSnooze(wait) // a turn came meanwhile
		}
		if _, err := p.q.enqueueIdle(ctx, p.opts.IdleAfter, p.opts.Now(), p.opts.MaxAttempts, &k); err != nil {
			return fmt.Errorf("idle %s/%s/%s: %w", a.AgentID, a.ActorID, a.SessionID, err)
		}
		// Loop: a turn that raced the sweep left the session pending.
	}
	// Still pending: look again shortly. Returning nil would leave the
	// session without an idle job (turns insert one only for a new
	// idle_gen).
	return river.JobSnooze(time.Second)
}

// runJob runs one memory.extract job. A failure is returned to River,
// which retries the job with backoff. A job whose actor is forgotten while
// it runs writes nothing and is deleted.
func (p *Pipeline) runJob(ctx context.Context, job *river.Job[ExtractArgs]) error {
	a := job.Args
	epoch, err := p.q.begin(ctx, a)
	if err != nil {
		return fmt.Errorf("extraction job %d: begin: %w", job.ID, err)
	}
	rctx, done := p.track(ctx, a.ActorID)
	defer done()
	err = p.extractSession(rctx, epoch, a.AgentID, a.ActorID, a.SessionID, a.Reason == reasonIdle, func(tx txn, cur sessionState, moved bool) error {
		if moved {
			if err := setCursorTx(ctx, tx, a.AgentID, a.ActorID, a.SessionID, cur); err != nil {
				return err
			}
		}
		if p.beforeComplete != nil {
			if err := p.beforeComplete(); err != nil {
				return err
			}
		}
		return jobs.CompleteTx(context.WithoutCancel(ctx), tx.raw(), job)
	})
	if err != nil && (errors.Is(err, errForgotten) || errors.Is(context.Cause(rctx), errForgotten)) {
		// Forget removed the actor's memory; nothing was written. The job
		// row goes too: nothing of the actor stays behind.
		p.opts.Logger.Info("memory: extraction job dropped: actor forgotten", "job", job.ID, "actor", a.ActorID)
		derr := p.q.tx(context.WithoutCancel(ctx), a.ActorID, func(tx txn) error {
			if err := jobs.CompleteTx(ctx, tx.raw(), job); err != nil {
				return err
			}
			return p.q.jobs.DeleteJobTx(ctx, tx.raw(), job.ID)
		})
		if derr != nil {
			p.opts.Logger.Warn("memory: delete dropped job", "job", job.ID, "err", derr)
		}
		p.ran.Add(1)
		return nil
	}
	if err != nil {
		return fmt.Errorf("extraction job %d (%s/%s/%s, attempt %d): %w", job.ID, a.AgentID, a.ActorID, a.SessionID, job.Attempt, err)
	}
	p.ran.Add(1)
	return nil
}

// flight is one extraction in progress, cancelled by Forget of its actor.
type flight struct{ cancel context.CancelCauseFunc }

// track returns ctx made cancellable by Forget of actorID (with cause
// errForgotten), and the func that ends the tracking.
func (p *Pipeline) track(ctx context.Context, actorID string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	f := &flight{cancel: cancel}
	p.flightMu.Lock()
	if p.flights[actorID] == nil {
		p.flights[actorID] = map[*flight]struct{}{}
	}
	p.flights[actorID][f] = struct{}{}
	p.flightMu.Unlock()
	return ctx, func() {
		p.flightMu.Lock()
		delete(p.flights[actorID], f)
		if len(p.flights[actorID]) == 0 {
			delete(p.flights, actorID)
		}
		p.flightMu.Unlock()
		cancel(nil)
	}
}

// cancelFlights cancels the actor's extractions in progress in this
// process: an extractor call (an LLM request) stops early. Their writes are
// refused anyway (queue.guard); this only saves the work.
func (p *Pipeline) cancelFlights(actorID string) {
	p.flightMu.Lock()
	defer p.flightMu.Unlock()
	for f := range p.flights[actorID] {
		f.cancel(errForgotten)
	}
}

// SweepIdle enqueues the idle extraction of every session quiet for
// IdleAfter by the pipeline's clock and returns how many it enqueued. The
// memory.idle jobs do this per session on their own; SweepIdle serves
// tests and a manual catch-up.
func (p *Pipeline) SweepIdle(ctx context.Context) (int, error) {
	return p.q.enqueueIdle(ctx, p.opts.IdleAfter, p.opts.Now(), p.opts.MaxAttempts, nil)
}

// Depth reports the extraction backlog for metrics, from River's job
// table: jobs is the number of live memory.extract jobs — waiting, running
// or backing off after a failure; oldest is the age of the oldest of them
// by the pipeline's clock (0 when there are none). Discarded jobs, kept for
// inspection, are not counted, nor are idle timers (memory.idle). It fails
// only when the job database cannot be read.
func (p *Pipeline) Depth(ctx context.Context) (jobs int, oldest time.Duration, err error) {
	n, age, err := p.q.lag(ctx, p.opts.Now())
	if err != nil {
		return 0, 0, fmt.Errorf("memory pipeline: extraction depth: %w", err)
	}
	return n, age, nil
}

// Lag is Depth with a 2 s timeout and the error logged (reported as 0, 0).
func (p *Pipeline) Lag() (jobs int, oldest time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, age, err := p.Depth(ctx)
	if err != nil {
		p.opts.Logger.Warn("memory: extraction lag", "err", err)
	}
	return n, age
}

func validID(kind, id string) error {
	limit := 256
	if kind == "session" {
		// A session key is its owner (channel and actor, up to 256 bytes
		// each) plus its own ID (up to 256): agent.ValidateID's limits.
		limit = 1024
	}
	if id == "" || len(id) > limit || strings.ContainsAny(id, "\x00\n\r") {
		return fmt.Errorf("%w: %s %q", ErrInvalid, kind, id)
	}
	return nil
}

// validSession checks the agent, actor and session IDs of a call (validID).
func validSession(agentID, actorID, sessionID string) error {
	for _, c := range [][2]string{{"agent", agentID}, {"actor", actorID}, {"session", sessionID}} {
		if err := validID(c[0], c[1]); err != nil {
			return err
		}
	}
	return nil
}

// RecordTurn implements memory.Recorder. It fills in missing event IDs
// (ULIDs), actor, session, timestamps and metadata "agentId", counts the turn (queuing a job
// every ExtractEveryTurns turns) and appends the events to the store. The
// turn is counted before the append, so events that reach the store are
// always extracted, at the latest when the session goes idle. It never
// runs extraction itself.
func (p *Pipeline) RecordTurn(ctx context.Context, agentID, actorID, sessionID string, events []memory.Event) error {
	evs, now, err := p.turnEvents(agentID, actorID, sessionID, events)
	if err != nil || len(evs) == 0 {
		return err
	}
	region := trace.StartRegion(ctx, "count turn")
	_, err = p.q.noteTurn(ctx, agentID, actorID, sessionID, p.opts.ExtractEveryTurns, p.opts.MaxAttempts, p.opts.IdleAfter, now)
	region.End()
	if err != nil {
		return fmt.Errorf("record turn %s/%s: queue: %w", actorID, sessionID, err)
	}
	defer trace.StartRegion(ctx, "append events").End()
	if err := p.store.AppendEvents(ctx, evs); err != nil {
		return fmt.Errorf("record turn %s/%s: append events: %w", actorID, sessionID, err)
	}
	return nil
}

// ReconcileTurn implements memory.TurnReconciler: it writes a turn's
// events as RecordTurn would, without counting the turn, for a turn the
// session holds but memory may lack. Events already stored are skipped
// (AppendEvents is idempotent by ID); the session's next counted turn
// extracts the ones written here.
func (p *Pipeline) ReconcileTurn(ctx context.Context, agentID, actorID, sessionID string, events []memory.Event) error {
	evs, _, err := p.turnEvents(agentID, actorID, sessionID, events)
	if err != nil || len(evs) == 0 {
		return err
	}
	// Forget removes the actor's session counters with its memory but may
	// leave its sessions: a turn of a forgotten actor's session that no
	// turn has been counted in since is from before the forget, and must
	// not come back. (A turn counted and lost after a forget is left out
	// too: the check cannot tell the two apart, and forgetting wins.)
	epoch, err := p.q.epoch(ctx, actorID)
	if err != nil {
		return fmt.Errorf("reconcile turn %s/%s: %w", actorID, sessionID, err)
	}
	if epoch > 0 {
		var one int
		err := p.q.db().queryRow(ctx, `SELECT 1 FROM memory_pipeline_sessions WHERE agent_id = ? AND actor_id = ? AND session_id = ?`, agentID, actorID, sessionID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reconcile turn %s/%s: %w", actorID, sessionID, err)
		}
	}
	if err := p.store.AppendEvents(ctx, evs); err != nil {
		return fmt.Errorf("reconcile turn %s/%s: append events: %w", actorID, sessionID, err)
	}
	return nil
}

// turnEvents validates a turn's IDs and fills in its events as RecordTurn
// stores them (IDs, actor, session, timestamps, redaction, "agentId").
func (p *Pipeline) turnEvents(agentID, actorID, sessionID string, events []memory.Event) ([]memory.Event, time.Time, error) {
	if err := validSession(agentID, actorID, sessionID); err != nil {
		return nil, time.Time{}, err
	}
	if len(events) == 0 {
		return nil, time.Time{}, nil
	}
	now := p.opts.Now().UTC()
	evs := make([]memory.Event, len(events))
	for i, ev := range events {
		if ev.ID == "" {
			ev.ID = ulid.Make().String()
		}
		if ev.ActorID == "" {
			ev.ActorID = actorID
		}
		if ev.SessionID == "" {
			ev.SessionID = sessionID
		}
		if ev.ActorID != actorID || ev.SessionID != sessionID {
			return nil, time.Time{}, fmt.Errorf("%w: event %s belongs to %s/%s, not %s/%s", ErrInvalid, ev.ID, ev.ActorID, ev.SessionID, actorID, sessionID)
		}
		if ev.Timestamp.IsZero() {
			ev.Timestamp = now
		}
		// Credentials never become memory (they would be re-injected into
		// later prompts); the session keeps the conversation itself.
		ev.Text, _ = memory.Redact(ev.Text)
		if _, ok := ev.Metadata["agentId"]; !ok {
			md := make(map[string]any, len(ev.Metadata)+1)
			for k, v := range ev.Metadata {
				md[k] = v
			}
			md["agentId"] = agentID // the store files the event under this agent's episodic namespace
			ev.Metadata = md
		}
		evs[i] = ev
	}
	return evs, now, nil
}

// Flush runs extraction synchronously for the session's events not yet
// extracted, and writes or updates its session summary. The session
// compaction hook calls it before nodes are compacted.
// A Flush overtaken by Forget of the actor writes nothing and returns nil.
func (p *Pipeline) Flush(ctx context.Context, agentID, actorID, sessionID string) error {
	if err := validSession(agentID, actorID, sessionID); err != nil {
		return err
	}
	epoch, err := p.q.epoch(ctx, actorID)
	if err != nil {
		return fmt.Errorf("flush %s/%s: %w", actorID, sessionID, err)
	}
	ctx, done := p.track(ctx, actorID)
	defer done()
	err = p.extractSession(ctx, epoch, agentID, actorID, sessionID, true, func(tx txn, cur sessionState, moved bool) error {
		if !moved {
			return nil
		}
		return setCursorTx(ctx, tx, agentID, actorID, sessionID, cur)
	})
	if err != nil && (errors.Is(err, errForgotten) || errors.Is(context.Cause(ctx), errForgotten)) {
		return nil // forgotten meanwhile: there is nothing left to flush
	}
	if err != nil {
		return fmt.Errorf("flush %s/%s: %w", actorID, sessionID, err)
	}
	return nil
}

// actorLock is the in-process lock of an actor's extractions: one lock per
// actor, not per session, because consolidation reads and writes the
// actor's long-term namespace, so two sessions' extractions in one process
// take turns instead of racing (and retrying: advanceConsolidationGen).
func (p *Pipeline) actorLock(agentID, actorID string) *sync.Mutex {
	k := agentID + "\x00" + actorID
	m, _ := p.locks.LoadOrStore(k, &sync.Mutex{})
	return m.(*sync.Mutex)
}

// maxConsolidationRetries bounds how often an extraction starts over
// because another process consolidated the same actor meanwhile.
const maxConsolidationRetries = 8

// extractSession extracts the events after the session's cursor and, when
// summarize is set, refreshes the session summary. It writes the records
// and then calls commit with the new cursor (moved is false when there was
// nothing new), both inside queue.guard for the actor's forget epoch as of
// before the events were read: if the actor was forgotten since, nothing
// is written and it returns errForgotten. It holds the actor's lock
// throughout so cursors never move backwards.
//
// Consolidation decides against a listing of the actor's long-term
// records taken before the write transaction; another process (another
// instance on the same database) may consolidate the same actor in
// between. The write transaction therefore advances the actor's
// consolidation generation only if it is still the one read before the
// listing (optimistic concurrency); if not, nothing is written and the
// extraction starts over from a fresh listing, so two processes never both
// add the same record or both keep contradicting ones.
func (p *Pipeline) extractSession(ctx context.Context, epoch int64, agentID, actorID, sessionID string, summarize bool, commit func(tx txn, cur sessionState, moved bool) error) error {
	mu := p.actorLock(agentID, actorID)
	mu.Lock()
	defer mu.Unlock()
	for attempt := 0; ; attempt++ {
		err := p.extractOnce(ctx, epoch, agentID, actorID, sessionID, summarize, commit)
		if !errors.Is(err, errConsolidationRace) || attempt == maxConsolidationRetries {
			return err
		}
	}
}

// errConsolidationRace: another process consolidated the actor between
// this extraction's listing and its write.
var errConsolidationRace = errors.New("memory pipeline: the actor was consolidated by another process meanwhile")

func (p *Pipeline) extractOnce(ctx context.Context, epoch int64, agentID, actorID, sessionID string, summarize bool, commit func(tx txn, cur sessionState, moved bool) error) error {
	cur, err := p.q.cursor(ctx, agentID, actorID, sessionID)
	if err != nil {
		return fmt.Errorf("cursor: %w", err)
	}
	// Only what is new since the cursor is read when the store can (a
	// summary needs the whole session).
	var events, fresh []memory.Event
	if es, ok := p.store.(EventsSincer); ok && !summarize {
		if fresh, err = es.EventsSince(ctx, actorID, sessionID, cur.CursorID, cur.CursorTS); err != nil {
			return fmt.Errorf("events: %w", err)
		}
	} else {
		if events, err = p.store.Events(ctx, actorID, sessionID); err != nil {
			return fmt.Errorf("events: %w", err)
		}
		fresh = eventsAfter(events, cur)
	}
	b := newBatch()
	gen, listed := int64(0), false
	if len(fresh) > 0 {
		cands, err := p.opts.Extractor.Extract(ctx, fresh)
		if err != nil {
			return fmt.Errorf("extract: %w", err)
		}
		ns, err := p.longTerm(agentID, actorID)
		if err != nil {
			return err
		}
		if len(cands) > 0 {
			if gen, err = consolidationGenOf(ctx, p.q.db(), actorID); err != nil {
				return fmt.Errorf("consolidation generation of %s: %w", actorID, err)
			}
			listed = true
			existing, err := p.list(ctx, ns)
			if err != nil {
				return err
			}
			if p.afterList != nil {
				p.afterList(actorID, sessionID)
			}
			if _, err := p.consolidateInto(ctx, actorID, ns, cands, existing, b); err != nil {
				return err
			}
		}
	}
	if summarize && len(events) > 0 {
		if err := p.summarize(ctx, agentID, actorID, sessionID, events, b); err != nil {
			return err
		}
	}
	next, moved := cur, false
	if len(fresh) > 0 {
		last := fresh[len(fresh)-1]
		next, moved = sessionState{CursorID: last.ID, CursorTS: last.Timestamp}, true
	}
	defer trace.StartRegion(ctx, "extraction: write").End()
	return p.q.guard(context.WithoutCancel(ctx), actorID, epoch, func(tx txn) error {
		if listed {
			if err := advanceConsolidationGen(ctx, tx, actorID, gen); err != nil {
				return err
			}
		}
		if err := b.flush(ctx, p.store); err != nil {
			return err
		}
		return commit(tx, next, moved)
	})
}

// EventsSincer is implemented by stores that read a session's events
// after a cursor without reading the whole session (sqlitestore): the
// events after afterID when it is still stored, else those newer than
// afterTS, oldest first. Extraction then costs O(new turns).
type EventsSincer interface {
	EventsSince(ctx context.Context, actorID, sessionID, afterID string, afterTS time.Time) ([]memory.Event, error)
}

// eventsAfter returns the events after the cursor: after the cursor event
// when it is still listed, else those newer than the cursor's timestamp.
func eventsAfter(events []memory.Event, cur sessionState) []memory.Event {
	if cur.CursorID == "" && cur.CursorTS.IsZero() {
		return events
	}
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].ID == cur.CursorID {
			return events[i+1:]
		}
	}
	var out []memory.Event
	for _, ev := range events {
		if ev.Timestamp.After(cur.CursorTS) {
			out = append(out, ev)
		}
	}
	return out
}

func (p *Pipeline) longTerm(agentID, actorID string) (string, error) {
	return memory.Namespace(p.opts.LongTermTemplate, memory.NamespaceVars{AgentID: agentID, ActorID: actorID})
}

func (p *Pipeline) episodic(agentID, actorID, sessionID string) (string, error) {
	return memory.Namespace(p.opts.EpisodicTemplate, memory.NamespaceVars{AgentID: agentID, ActorID: actorID, SessionID: sessionID})
}

// SummaryID is the fixed record ID of a session's SUMMARIZATION record:
// "sum_" and 32 hex digits of SHA-256 over agent, actor and session. A
// fixed ID lets the summary be read with Get and updated in place without
// listing the namespace.
func SummaryID(agentID, actorID, sessionID string) string {
	sum := sha256.Sum256([]byte(agentID + "\x00" + actorID + "\x00" + sessionID))
	return "sum_" + hex.EncodeToString(sum[:16])
}

// summarize writes (to w) the new or updated SUMMARIZATION record of the
// session (ID SummaryID). A summary that was approved stays active; one
// that was rejected or superseded is replaced only by different content.
func (p *Pipeline) summarize(ctx context.Context, agentID, actorID, sessionID string, events []memory.Event, w sink) error {
	// A summary must not re-propose what the user rejected: leave out the
	// utterances a rejected candidate came from.
	kept := make([]memory.Event, 0, len(events))
	for _, ev := range events {
		drop := false
		if ev.Role == "user" {
			for _, c := range extract.ExtractText(ev.ID, ev.Role, ev.Text, ev.Timestamp) {
				rej, err := p.rejected(ctx, actorID, c.Content)
				if err != nil {
					return fmt.Errorf("rejections: %w", err)
				}
				drop = drop || rej
			}
		}
		if !drop {
			kept = append(kept, ev)
		}
	}
	c, ok := extract.Summarize(sessionID, kept)
	if !ok {
		return nil
	}
	ns, err := p.episodic(agentID, actorID, sessionID)
	if err != nil {
		return err
	}
	if rej, err := p.rejected(ctx, actorID, c.Content); err != nil || rej {
		return err
	}
	now := p.opts.Now().UTC()
	_, score, outcome := p.opts.Thresholds.Evaluate(c.GateInput(nil))
	id := SummaryID(agentID, actorID, sessionID)
	old, err := p.store.Get(ctx, id)
	switch {
	case errors.Is(err, memory.ErrNotFound):
		if outcome == gate.Dropped {
			return nil
		}
		rec := p.newRecord(ns, c, score, now)
		rec.ID = id
		if outcome == gate.Staged {
			rec.Status = memory.StatusStaged
		}
		if _, err := w.put(ctx, rec); err != nil {
			return fmt.Errorf("put summary %s: %w", id, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("get summary %s: %w", id, err)
	}
	if old.Content == c.Content || outcome == gate.Dropped {
		return nil
	}
	switch {
	case outcome == gate.Stored:
		old.Status = memory.StatusActive
	case old.Status != memory.StatusActive:
		old.Status = memory.StatusStaged
	}
	old.Content = c.Content
	old.Metadata = mergeMeta(old.Metadata, c.Metadata)
	old.Metadata[keyStatedAt] = c.Time.UTC()
	old.Sources = unionStrings(nil, c.Sources)
	old.Importance = score
	old.UpdatedAt = now
	if _, err := w.put(ctx, old); err != nil {
		return fmt.Errorf("update summary %s: %w", id, err)
	}
	return nil
}

func mergeMeta(dst, src map[string]any) map[string]any {
	out := make(map[string]any, len(dst)+len(src))
	for k, v := range dst {
		out[k] = v
	}
	for k, v := range src {
		out[k] = v
	}
	return out
}

func unionStrings(a, b []string) []string {
	seen := make(map[string]bool, len(a)+len(b))
	out := make([]string, 0, len(a)+len(b))
	for _, xs := range [][]string{a, b} {
		for _, x := range xs {
			if x != "" && !seen[x] {
				seen[x] = true
				out = append(out, x)
			}
		}
	}
	return out
}

func sortByTime(cs []extract.Candidate) {
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Time.Before(cs[j].Time) })
}
