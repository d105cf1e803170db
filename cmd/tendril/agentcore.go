package main

import (
	"context"
	"errors"

	"github.com/tendrilai/tendril/internal/assistant"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/runtime"
)

// errAgentCoreNoDatabase refuses AgentCore mode without a database.
var errAgentCoreNoDatabase = errors.New("TENDRIL_RUNTIME=agentcore needs TENDRIL_DATABASE_URL: each AgentCore runtime session is a short-lived microVM, " +
	"so sessions, memory, approvals and jobs kept in $TENDRIL_HOME would vanish with it; set TENDRIL_DATABASE_URL=postgres://..., " +
	"or TENDRIL_EPHEMERAL=1 to accept losing all state")

// checkRuntime validates the runtime mode before serve opens anything.
func checkRuntime(cfg *config.Config) error {
	if cfg.AgentCore() && cfg.DatabaseURL == "" && !cfg.Ephemeral {
		return errAgentCoreNoDatabase
	}
	return nil
}

// withRuntimeMode adds the runtime mode to the server options: AgentCore
// mode from the config, and the routes by which relayed invocations reach
// the assistant (Telegram updates to the webhook, cron ticks to the
// scheduler's due jobs).
func withRuntimeMode(a *assistant.Assistant, opt runtime.Options) runtime.Options {
	cfg := a.Config()
	opt.AgentCore = cfg.AgentCore()
	if tg := a.Telegram(); tg != nil {
		opt.Webhook, opt.WebhookSecret = tg.Handler(), cfg.Telegram.WebhookSecret
	}
	if sc := a.Scheduler(); sc != nil {
		opt.Tick = func(ctx context.Context) (int, error) { return sc.RunDue(ctx) }
	}
	return opt
}
