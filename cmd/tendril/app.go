package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/channel/telegram"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/memory/pipeline"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
	"github.com/tendrilai/tendril/internal/metrics"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/runtime"
	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/jsonl"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool/mcp"
)

// app is the wired process: every store, the agent and the background
// workers. Wiring lives here and nowhere else.
type app struct {
	cfg      *config.Config
	log      *slog.Logger
	metrics  *metrics.Metrics
	tracker  *runtime.Tracker
	sessions session.Store
	agent    *agent.Agent
	models   agent.Models
	modelErr error // why no model is configured, when none is

	memory    *sqlitestore.Store
	pipeline  *pipeline.Pipeline
	state     *state.Engine
	gate      *approval.Gate
	gateAd    gateAdapter
	mcp       *mcp.Manager
	scheduler *schedule.Scheduler
	telegram  *telegram.Channel

	closers []func() error
	// starters run background workers in serve; each returns a stop func.
	starters []func(ctx context.Context) (stop func(), err error)
}

// newLogger logs JSON when stderr is not a terminal, text when it is.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// openApp wires every component from cfg. It creates $TENDRIL_HOME and
// installs the default persona and skills on first run.
func openApp(ctx context.Context, cfg *config.Config, log *slog.Logger) (*app, error) {
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		return nil, fmt.Errorf("create home %s: %w", cfg.Home, err)
	}
	a := &app{cfg: cfg, log: log, metrics: metrics.New(), tracker: runtime.NewTracker(nil)}
	ok := false
	defer func() {
		if !ok {
			a.Close()
		}
	}()

	st, err := openSessions(cfg, log)
	if err != nil {
		return nil, err
	}
	a.sessions = st
	a.closers = append(a.closers, st.Close)

	router, err := buildModels(ctx, cfg, a.metrics)
	if err != nil {
		return nil, err
	}
	if !router.Configured() {
		a.modelErr = model.ErrNotConfigured
	}
	a.models = router

	deps := agent.Deps{Sessions: st, Models: router}
	ctxCfg := session.DefaultContextConfig()
	ctxCfg.Default = session.Limits{MaxHistoryMessages: cfg.Session.MaxHistoryMessages, MaxHistoryTokens: cfg.Session.MaxHistoryTokens}
	for k, v := range cfg.Session.ChannelOverrides {
		ctxCfg.ChannelOverrides[k] = session.Limits{MaxHistoryMessages: v.MaxHistoryMessages, MaxHistoryTokens: v.MaxHistoryTokens}
	}
	// Context building, with auto-compaction when the built context passes
	// the configured share of the model's context window (SPEC §3). The
	// overflow trigger lives in the agent (one compaction, one retry).
	deps.History = func(ctx context.Context, key session.Key, chatType string) ([]session.Node, error) {
		nodes, err := session.BuildContext(ctx, st, key, ctxCfg.For(chatType))
		if err != nil || deps.Compact == nil ||
			!session.ShouldCompact(nodes, cfg.Model.ContextWindow, cfg.Session.Compaction.Threshold) {
			return nodes, err
		}
		if err := deps.Compact(ctx, key); err != nil {
			log.Warn("auto-compaction failed; continuing with the full context", "session", key.String(), "err", err)
			return nodes, nil
		}
		return session.BuildContext(ctx, st, key, ctxCfg.For(chatType))
	}
	if err := a.wireExtras(ctx, &deps); err != nil {
		return nil, err
	}
	if err := a.wireMemory(ctx, &deps, router); err != nil {
		return nil, err
	}
	if err := a.wireSafety(&deps); err != nil {
		return nil, err
	}
	if err := a.wireTools(ctx, &deps); err != nil {
		return nil, err
	}
	deps.Deliverer = a
	ag, err := agent.New(agent.Options{
		AgentID:           cfg.AgentID,
		MaxToolIterations: cfg.Agent.MaxToolIterations,
		ToolTimeout:       cfg.Agent.ToolTimeout.D(),
		RetrieveTimeout:   cfg.Memory.RetrieveTimeout.D(),
		MaxTokens:         cfg.Model.MaxTokens,
		Logger:            log,
		Metrics:           a.metrics,
		Tracker:           a.tracker,
	}, deps)
	if err != nil {
		return nil, err
	}
	a.agent = ag
	if err := a.wireTelegram(); err != nil {
		return nil, err
	}
	a.gate.OnDecision(a.onDecision)
	a.starters = append(a.starters, a.refreshApprovals)
	ok = true
	return a, nil
}

// openSessions archives old session files (retention, SPEC §3) and opens
// the session store: Redis when TENDRIL_REDIS_URL is set, else JSONL.
func openSessions(cfg *config.Config, log *slog.Logger) (session.Store, error) {
	if cfg.RedisURL != "" {
		return openSessionStore(cfg)
	}
	dir := filepath.Join(cfg.Home, "agents")
	ret, err := jsonl.ParseRetention(cfg.Session.Retention.MaxAge, cfg.Session.Retention.MaxSize, cfg.Session.Retention.Delete)
	if err != nil {
		return nil, fmt.Errorf("session.retention: %w", err)
	}
	rep, err := jsonl.Archive(dir, ret, time.Now())
	if err != nil {
		log.Warn("session retention failed; continuing", "err", err)
	} else if len(rep.Archived)+len(rep.Deleted) > 0 {
		log.Info("session retention", "archived", len(rep.Archived), "deleted", len(rep.Deleted), "bytes", rep.Bytes)
	}
	st, err := jsonl.Open(dir, jsonl.Options{Fsync: cfg.Session.Fsync, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open sessions %s: %w", dir, err)
	}
	return st, nil
}

// Close releases every store in reverse order of opening.
func (a *app) Close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		if err := a.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	a.closers = nil
	return errors.Join(errs...)
}
