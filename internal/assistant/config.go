package assistant

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/gate"
	"github.com/tendrilai/tendril/internal/memory/pipeline"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/schedule/reminders"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/jsonl"
	"github.com/tendrilai/tendril/internal/session/redisstore"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool"
)

// This file maps tendril.json onto each store's options, once, so the
// server and every CLI command open the same stores the same way.

// ApprovalDir holds the approval ledger: <home>/approvals/ledger.jsonl.
func ApprovalDir(cfg *config.Config) string { return filepath.Join(cfg.Home, "approvals") }

// StateDir holds the per-actor internal-state files: <home>/state.
func StateDir(cfg *config.Config) string { return filepath.Join(cfg.Home, "state") }

// ApprovalOptions maps the config onto approval.Options. syncRules saves
// tendril.json's rules to the ledger (invalidating open approvals when they
// change); only the process that owns the home does so.
func ApprovalOptions(cfg *config.Config, syncRules bool) (approval.Options, error) {
	rules, err := approval.ParseRules(cfg.Approval.Rules)
	if err != nil {
		return approval.Options{}, fmt.Errorf("config approval.rules: %w", err)
	}
	return approval.Options{
		Rules: rules, SyncRules: syncRules, ExecEnabled: cfg.Tools.EnableExec, Expiry: cfg.Approval.Expiry.D(),
	}, nil
}

// StateOptions maps the config onto state.Options (SPEC §6.1–6.2).
func StateOptions(cfg *config.Config) (state.Options, error) {
	p, err := state.DefaultPersona().WithBaseline(cfg.State.Baseline)
	if err != nil {
		return state.Options{}, fmt.Errorf("config state.baseline: %w", err)
	}
	b := cfg.State.Breaker
	return state.Options{
		Persona:  p,
		HalfLife: cfg.State.HalfLife.D(),
		Breaker: state.Breaker{WarnEnter: b.WarnEnter, WarnLeave: b.WarnLeave, CriticalEnter: b.CriticalEnter,
			CriticalLeave: b.CriticalLeave, CooldownTurns: b.CooldownTurns},
	}, nil
}

// MemoryStoreOptions maps the config onto sqlitestore.Options.
func MemoryStoreOptions(cfg *config.Config) sqlitestore.Options {
	o := sqlitestore.Options{AgentID: cfg.AgentID, EventExpiryDays: cfg.Memory.EventExpiryDays, CacheBytes: int64(cfg.Memory.CacheMB) << 20,
		EventWindow: cfg.Memory.EventWindow, RecordWindow: cfg.Memory.RecordWindow}
	// The Markdown under memory/ follows the sessions' fsync policy: both
	// hold the same turns, so fsyncing one on the turn's path and not the
	// other buys nothing.
	switch cfg.Session.Fsync {
	case jsonl.FsyncBatch:
		o.FsyncEvery = jsonl.DefaultBatchInterval
	case jsonl.FsyncNever:
		o.NoFsync = true
	}
	for _, k := range cfg.Memory.IndexedKeys {
		o.IndexedKeys = append(o.IndexedKeys, memory.IndexedKey{Name: k.Name, Type: k.Type})
	}
	return o
}

// PipelineOptions maps the config onto pipeline.Options.
func PipelineOptions(cfg *config.Config) pipeline.Options {
	return pipeline.Options{
		Home:              cfg.Home,
		AgentID:           cfg.AgentID,
		ExtractEveryTurns: cfg.Memory.ExtractEveryTurns,
		IdleAfter:         cfg.Memory.IdleAfter.D(),
		Thresholds:        gate.Thresholds{Stage: cfg.Memory.StageThreshold, Store: cfg.Memory.StoreThreshold},
	}
}

// JobSpecs maps tendril.json schedule.jobs onto scheduler specs. Channel
// and chat default from the actor ("telegram:123" → telegram, 123).
func JobSpecs(cfg *config.Config) []schedule.JobSpec {
	var out []schedule.JobSpec
	for _, j := range cfg.Schedule.Jobs {
		ch, chat := reminders.ChatOf(tool.Call{Channel: j.Channel, ActorID: j.ActorID})
		if j.ChatID != "" {
			chat = j.ChatID
		}
		out = append(out, schedule.JobSpec{
			Name: j.Name, Kind: schedule.Kind(j.Kind), At: j.At, Every: j.Every, Cron: j.Cron, TZ: j.TZ,
			Task: j.Task, ActorID: j.ActorID, Channel: ch, ChatID: chat, Source: schedule.SourceConfig,
		})
	}
	return out
}

// OpenSessionStore opens the session store: Redis when TENDRIL_REDIS_URL is
// set, else the JSONL files under $TENDRIL_HOME/agents.
func OpenSessionStore(cfg *config.Config, opts jsonl.Options) (session.Store, error) {
	if cfg.RedisURL != "" {
		if opts.Logger != nil {
			// go-redis logs its redials with the standard log package,
			// which would put plain lines among serve's JSON ones.
			redis.SetLogger(redisLogger{opts.Logger})
		}
		opt, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("TENDRIL_REDIS_URL (redisUrl): %w (want redis://[user:password@]host:port[/db], or rediss:// for TLS)", err)
		}
		c := redis.NewClient(opt)
		// an unreachable Redis stops the start, as an unreachable
		// database does, rather than failing every turn later
		pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = c.Ping(pctx).Err()
		cancel()
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("redis %s: %w", opt.Addr, err)
		}
		return closingRedis{redisstore.New(c, "tendril"), c}, nil
	}
	dir := filepath.Join(cfg.Home, "agents")
	opts.Fsync = cfg.Session.Fsync
	st, err := jsonl.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("open sessions %s: %w", dir, err)
	}
	return st, nil
}

// redisLogger writes go-redis's messages (connection pool redials) as
// warnings of the process's structured log
// (https://pkg.go.dev/github.com/redis/go-redis/v9#SetLogger).
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", "detail", strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// closingRedis closes its own client with the store.
type closingRedis struct {
	*redisstore.Store
	c *redis.Client
}

func (c closingRedis) Close() error { return c.c.Close() }

// Ping checks that Redis answers (Assistant.Ready).
func (c closingRedis) Ping(ctx context.Context) error { return c.c.Ping(ctx).Err() }
