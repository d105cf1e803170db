// Package assistant is Tendril's application layer: the operations a user
// or an operator performs — run a turn, decide an approval, forget an
// actor, branch or clear a session, review staged memory, manage jobs, pair
// a chat, open or close the YOLO window — over one set of stores.
//
// Every entry point calls it and none re-implements an operation: the HTTP
// runtime and its management API, the Telegram channel, the scheduler, the
// dashboard and (through the management API, or in-process when no server
// runs) the CLI. It also owns the background work (extraction, scheduled
// runs, Telegram workers, resumed turns) and stops and waits for all of it
// in Close.
package assistant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/trace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/channel/telegram"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/jobs"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/pipeline"
	"github.com/tendrilai/tendril/internal/metrics"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool"
	"github.com/tendrilai/tendril/internal/tool/mcp"
)

// Options configure Open.
type Options struct {
	Logger  *slog.Logger
	Metrics *metrics.Metrics // default metrics.New()
	// Busy counts in-flight work for GET /ping (runtime.Tracker).
	Busy interface{ Begin() func() }
	// Owner is set by the process that owns the home (serve, or a CLI
	// command with no server running): it saves tendril.json's approval
	// rules to the ledger and applies session retention.
	Owner bool
	// Clock is the time source of the scheduler (tests); default real time.
	Clock schedule.Clock
}

// Assistant is the wired application. Create it with Open, optionally
// Start its background workers, and Close it.
type Assistant struct {
	cfg     *config.Config
	log     *slog.Logger
	metrics *metrics.Metrics
	busy    interface{ Begin() func() }

	sessions  session.Store
	models    *model.Router
	agent     *agent.Agent
	memory    memory.Admin // sqlitestore in the home, or pgstore
	retrieval *memory.Retrieval
	pipeline  *pipeline.Pipeline
	state     *state.Engine
	gate      *approval.Gate
	mcp       *mcp.Manager
	scheduler *schedule.Scheduler
	telegram  *telegram.Channel
	tgStore   *telegram.Store // the channel's, or opened for forget/pairing without a bot

	hub    *hub
	actors actorLocks
	// db is the shared pool when TENDRIL_DATABASE_URL is set (nil for the
	// embedded stores); locks serialise turns across instances on it.
	db *pgxpool.Pool
	// bus carries deliveries to the other instances on db (nil without).
	bus         *deliveryBus
	dbCheckedAt atomic.Int64 // unix ns of the last good ping (Ready)
	// redisCheckedAt is the same for the Redis session store.
	redisCheckedAt atomic.Int64
	locks          turnLocks
	jobs           *jobs.Queue // River: extraction and scheduled runs
	// tools are the built-in tools; toolSource, when MCP servers are
	// configured, lists built-in plus MCP tools at call time.
	tools      []tool.Tool
	toolSource func(context.Context) []tool.Tool
	// sessionQueue keeps a session's messages in arrival order while they
	// wait behind a paused turn; started says Start ran (only a started
	// assistant resumes paused turns, so only it waits for them).
	sessionQueue fifo
	started      bool
	paused       *paused
	closedIDs    map[string]bool // paused turns closed or resumed (guarded by mu)

	// Background work: bg is cancelled by Close after in-flight work has
	// had ShutdownGrace to finish; wg counts every goroutine we start.
	bg       context.Context
	cancelBG context.CancelFunc
	// stopping ends the watchers as soon as Close begins.
	stopping   context.Context
	cancelStop context.CancelFunc
	wg         sync.WaitGroup
	mu         sync.Mutex
	closing    bool
	stops      []func()

	closers []func() error
}

// Config returns the effective configuration.
func (a *Assistant) Config() *config.Config { return a.cfg }

// Logger returns the assistant's logger.
func (a *Assistant) Logger() *slog.Logger { return a.log }

// Metrics returns the process metrics.
func (a *Assistant) Metrics() *metrics.Metrics { return a.metrics }

// Sessions returns the session store.
func (a *Assistant) Sessions() session.Store { return a.sessions }

// Memory returns the memory store.
func (a *Assistant) Memory() memory.Admin { return a.memory }

// Gate returns the approval gate.
func (a *Assistant) Gate() *approval.Gate { return a.gate }

// State returns the internal-state engine.
func (a *Assistant) State() *state.Engine { return a.state }

// Scheduler returns the scheduler.
func (a *Assistant) Scheduler() *schedule.Scheduler { return a.scheduler }

// Telegram returns the Telegram channel, nil when no bot is configured.
func (a *Assistant) Telegram() *telegram.Channel { return a.telegram }

// ModelConfigured reports whether a text model is configured; when not,
// every turn fails with model.ErrNotConfigured.
func (a *Assistant) ModelConfigured() bool { return a.models.Configured() }

// Invoke runs one turn for any channel: it re-checks dependencies first
// (SPEC §1 readiness), counts the turn in flight and logs a failed turn
// with its error code. Errors are those of agent.Agent.Invoke, or
// ErrNotReady wrapped with the cause.
func (a *Assistant) Invoke(ctx context.Context, req agent.Request) (*agent.Result, error) {
	if a.isClosing() {
		return nil, fmt.Errorf("%w: shutting down", ErrNotReady)
	}
	a.metrics.TurnsInFlight.Inc()
	defer a.metrics.TurnsInFlight.Dec()
	// An execution trace (/debug/pprof/trace, TENDRIL_PPROF_ADDR) shows
	// each turn as a task and its waits and stages as regions.
	ctx, task := trace.NewTask(ctx, "turn")
	defer task.End()
	if err := a.Ready(ctx); err != nil {
		a.log.Error("turn failed", "code", "NOT_READY", "channel", req.Channel, "err", err)
		return nil, err
	}
	channel := req.Channel
	if channel == "" {
		channel = "api"
	}
	key := agent.SessionOwner(req.ActorID, channel)
	if req.SessionID != "" {
		key += agent.SessionSep + req.SessionID
	}
	// A message that waits behind an earlier one of its session notes the
	// actor's forget epoch first: if a forget lands while it waits, it
	// does not run afterwards and write back what was just forgotten.
	epoch := int64(-1)
	waited := func() {
		if epoch < 0 && a.pipeline != nil {
			if e, err := a.pipeline.ForgetEpoch(ctx, req.ActorID); err == nil {
				epoch = e
			}
		}
	}
	queued := waited
	if ctx = withWaitReport(ctx); waitReportOf(ctx) != nil {
		// A message queued behind another that waits for a paused turn
		// hears of the approval now, not when its turn comes; each
		// request is reported once as waiting and once as decided
		// across the two waits.
		queued = func() { waited(); a.reportPending(ctx, channel, key) }
	}
	region := trace.StartRegion(ctx, "wait: session queue")
	release, err := a.sessionQueue.lockOr(ctx, channel+"\x00"+key, queued)
	region.End()
	if err != nil {
		return nil, err
	}
	defer release()
	if err := a.waitPaused(ctx, channel, key, waited); err != nil {
		if errors.Is(err, ErrNotReady) {
			return nil, err
		}
		return nil, fmt.Errorf("wait for the paused turn of this session: %w", err)
	}
	// Forget waits for the actor's turns in flight and holds new ones, so
	// a turn never writes back what a forget just removed.
	unlock := a.actors.rlock(req.ActorID)
	// Across instances: one turn per session, none during a forget.
	// A message that waits there for another instance's turn notes the
	// forget epoch first too.
	region = trace.StartRegion(ctx, "wait: turn lock")
	lctx, dunlock, err := a.locks.turn(ctx, channel+"\x00"+key, req.ActorID, waited)
	region.End()
	if err != nil {
		unlock()
		return nil, fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	if epoch >= 0 {
		if e, err := a.pipeline.ForgetEpoch(lctx, req.ActorID); err == nil && e != epoch {
			dunlock()
			unlock()
			a.log.Info("message not run: its actor was forgotten while it waited", "channel", req.Channel, "actor", req.ActorID)
			return nil, fmt.Errorf("%w while this message waited behind an earlier one of its session: it was not run; send it again to start afresh", agent.ErrActorForgotten)
		}
	}
	res, err := a.agent.Invoke(lctx, req)
	dunlock()
	unlock()
	switch code := agent.ErrorCode(err); code {
	case "":
	case agent.CodeCanceled:
		a.log.Info("turn canceled", "channel", req.Channel, "actor", req.ActorID)
	default:
		a.log.Warn("turn failed", "code", code, "channel", req.Channel, "actor", req.ActorID, "err", err)
	}
	return res, err
}

// actorLocks excludes forgetting an actor from that actor's turns: turns
// share a lock, Forget takes it alone. Actors hash onto 64 locks, so an
// unrelated actor's turn can delay a forget, never the other way round
// for long.
type actorLocks [64]sync.RWMutex

func (l *actorLocks) shard(actor string) *sync.RWMutex {
	h := uint32(2166136261)
	for i := 0; i < len(actor); i++ {
		h = (h ^ uint32(actor[i])) * 16777619
	}
	return &l[h%uint32(len(l))]
}

func (l *actorLocks) rlock(actor string) func() {
	m := l.shard(actor)
	m.RLock()
	return m.RUnlock
}

func (l *actorLocks) lock(actor string) func() {
	m := l.shard(actor)
	m.Lock()
	return m.Unlock
}

// ErrNotReady: a dependency is gone and could not be re-established, or
// the process is shutting down (agent.ErrNotReady: code NOT_READY).
var ErrNotReady = agent.ErrNotReady

// Ready re-checks dependencies lazily, the analogue of Sprout's
// ensure_openclaw_ready() after a frozen container thaws: the home
// directory must still exist (a volume can vanish), the database (when
// set) must answer a ping at most every 5 s, which replaces connections
// the server closed meanwhile, and the approval ledger is re-read so
// decisions made while we were stopped are seen. MCP servers are
// re-checked, and restarted, per turn by the tool source. Errors wrap
// ErrNotReady and the cause.
func (a *Assistant) Ready(ctx context.Context) error {
	if err := a.checkHome(); err != nil {
		return err
	}
	if a.db != nil && time.Since(time.Unix(0, a.dbCheckedAt.Load())) > 5*time.Second {
		// After a freeze the server may have closed every connection: the
		// ping makes the pool replace them now, and a database that is
		// really gone fails the turn here, clearly, not half-way through.
		if err := a.pingDB(ctx); err != nil {
			return err
		}
	}
	if time.Since(time.Unix(0, a.redisCheckedAt.Load())) > 5*time.Second {
		// the Redis session store: a turn fails here, clearly, not with
		// the dial error half-way through loading its session
		if err := a.pingRedis(ctx); err != nil {
			return err
		}
	}
	if err := a.gate.Refresh(ctx); err != nil {
		a.log.Warn("approval ledger refresh failed", "err", err)
	}
	return nil
}

// CheckReady reports whether a turn could run now, for a readiness probe
// (GET /readyz): nil, or ErrNotReady wrapped with the cause — shutting
// down (from BeginShutdown on), the home gone, or the database or the
// Redis session store not answering a ping within ctx. Unlike Ready it
// pings every time (the caller caches its answer) and does not re-read
// the approval ledger. A failed ping also makes the next turn ping again
// instead of trusting an earlier success.
func (a *Assistant) CheckReady(ctx context.Context) error {
	if a.isClosing() || a.stopping.Err() != nil {
		return fmt.Errorf("%w: shutting down", ErrNotReady)
	}
	if err := a.checkHome(); err != nil {
		return err
	}
	if a.db != nil {
		if err := a.pingDB(ctx); err != nil {
			return err
		}
	}
	return a.pingRedis(ctx)
}

func (a *Assistant) checkHome() error {
	if _, err := os.Stat(a.cfg.Home); err != nil {
		// err (an *fs.PathError) names the path for the log; the
		// HTTP layers' SafeMessage keeps it out of responses.
		return fmt.Errorf("%w: home: %w", ErrNotReady, err)
	}
	return nil
}

// pingDB pings the database within 5 s (or ctx) and records a success
// for Ready. The cause stays in the chain (%w) so that the HTTP layers
// can tell a refused connection and keep its details out of responses.
func (a *Assistant) pingDB(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.db.Ping(pctx); err != nil {
		a.dbCheckedAt.Store(0)
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%w: database: no answer in time (%w)", ErrNotReady, err)
		}
		return fmt.Errorf("%w: database: %w", ErrNotReady, err)
	}
	a.dbCheckedAt.Store(time.Now().UnixNano())
	return nil
}

// pingRedis pings the Redis session store, when sessions are on Redis,
// like pingDB.
func (a *Assistant) pingRedis(ctx context.Context) error {
	p, ok := a.sessions.(interface{ Ping(context.Context) error })
	if !ok {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := p.Ping(pctx); err != nil {
		a.redisCheckedAt.Store(0)
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%w: redis: no answer in time (%w)", ErrNotReady, err)
		}
		return fmt.Errorf("%w: redis: %w", ErrNotReady, err)
	}
	a.redisCheckedAt.Store(time.Now().UnixNano())
	return nil
}

func (a *Assistant) isClosing() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closing
}

// goBackground runs fn on a goroutine owned by the assistant: Close waits
// for it. It reports false (and does not run fn) once Close has begun.
func (a *Assistant) goBackground(fn func(ctx context.Context)) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closing {
		return false
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		fn(a.bg)
	}()
	return true
}

// StartOptions choose the background workers Start runs.
type StartOptions struct {
	Scheduler bool // run due jobs (and sync tendril.json's jobs)
	Telegram  bool // process Telegram updates
}

// Start runs the background workers: memory extraction and the approval
// watcher always, the scheduler and Telegram as chosen. Approvals decided
// while no server ran resume now. Close stops them.
func (a *Assistant) Start(ctx context.Context, so StartOptions) error {
	a.pipeline.Start(a.bg)
	a.stops = append(a.stops, a.pipeline.Stop)
	// Build the most recently active actors' search indexes now, in the
	// background, so their first turn after a restart does not.
	if w, ok := a.memory.(interface {
		WarmRecent(ctx context.Context, n int) error
	}); ok {
		a.goBackground(func(ctx context.Context) {
			if err := w.WarmRecent(ctx, warmActors); err != nil && ctx.Err() == nil {
				a.log.Warn("memory warm-up failed", "err", err)
			}
		})
	}
	// Beside it, what else their first turn would read (see warmSessions).
	a.goBackground(func(ctx context.Context) { a.warmSessions(ctx, warmActors) })

	// Only a started assistant resumes paused turns: a CLI command that
	// decides in-process leaves the turn to the next server (Replay).
	a.gate.OnDecision(a.onDecision)
	a.mu.Lock()
	a.started = true
	a.mu.Unlock()
	if err := a.gate.Replay(ctx); err != nil {
		a.log.Warn("replaying approvals decided while stopped failed", "err", err)
	}
	a.goBackground(func(context.Context) { a.watchLedger(a.stopping) })

	if so.Scheduler {
		if err := a.scheduler.SyncConfigJobs(ctx, JobSpecs(a.cfg)); err != nil {
			return fmt.Errorf("schedule.jobs: %w", err)
		}
		if err := a.scheduler.Start(a.bg); err != nil {
			return err
		}
		a.stops = append(a.stops, a.scheduler.Stop)
	}
	if so.Telegram && a.telegram != nil {
		if err := a.telegram.Start(a.bg); err != nil {
			return err
		}
		a.stops = append(a.stops, func() {
			sctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownGrace.D())
			defer cancel()
			a.telegram.Stop(sctx)
		})
	}
	// The queue starts last, once every kind of job is registered, and
	// stops first (stops run last-first): running jobs finish within the
	// grace, the rest are retried by the next instance to start.
	if err := a.jobs.Start(a.bg); err != nil {
		return fmt.Errorf("job queue: %w", err)
	}
	a.stops = append(a.stops, func() {
		sctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownGrace.D())
		defer cancel()
		if err := a.jobs.Stop(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			a.log.Warn("job queue stop", "err", err)
		}
	})
	return nil
}

// watchLedger re-reads the approval ledger when it changes — on a
// PostgreSQL ledger through LISTEN/NOTIFY, with a 1 s poll as the
// fallback (the only way on files) — so decisions made by another process
// (the CLI, another instance) resume their paused turns here, and closes
// paused turns whose requests expired.
func (a *Assistant) watchLedger(ctx context.Context) {
	a.gate.Watch(ctx, approval.WatchOptions{
		Tick: a.closeExpired,
		OnError: func(err error) {
			if ctx.Err() == nil {
				a.log.Warn("approval ledger refresh failed", "err", err)
			}
		},
	})
}

// Tools lists the tools a turn is offered now: the built-in ones and,
// when MCP servers are configured, theirs (named "<server>__<tool>";
// connecting to them is bounded by 10 s).
func (a *Assistant) Tools(ctx context.Context) []tool.Tool {
	if a.toolSource != nil {
		return a.toolSource(ctx)
	}
	return a.tools
}

// BeginShutdown ends waits that would hold requests open (messages behind
// a paused turn, delivery streams), so the HTTP server can drain at once;
// Close follows.
func (a *Assistant) BeginShutdown() { a.cancelStop() }

// Stopping is closed once shutdown begins.
func (a *Assistant) Stopping() <-chan struct{} { return a.stopping.Done() }

// Close stops the background workers, gives in-flight work (resumed turns)
// up to shutdownGrace to finish, cancels what remains, waits for every
// goroutine, then closes the stores in reverse order of opening.
func (a *Assistant) Close() error {
	a.mu.Lock()
	if a.closing {
		a.mu.Unlock()
		return nil
	}
	a.closing = true
	a.mu.Unlock()
	a.cancelStop()

	for i := len(a.stops) - 1; i >= 0; i-- {
		a.stops[i]()
	}
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(a.cfg.ShutdownGrace.D()):
		a.log.Warn("background work still running after shutdownGrace; cancelling it")
	}
	a.cancelBG()
	<-done
	a.hub.close()

	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		if err := a.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	a.closers = nil
	return errors.Join(errs...)
}
