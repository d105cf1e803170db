package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/channel/telegram"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/metrics"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/providers"
	"github.com/tendrilai/tendril/internal/persona"
	"github.com/tendrilai/tendril/internal/runtime"
	"github.com/tendrilai/tendril/internal/session/sessionhttp"
	"github.com/tendrilai/tendril/internal/skill"
)

// skillPaths returns the skills directory and manifest path.
func skillPaths(cfg *config.Config) (dir, manifest string) {
	dir, manifest = cfg.Agent.SkillsDir, cfg.Agent.SkillsManifest
	if dir == "" {
		dir = filepath.Join(cfg.Home, "skills")
	}
	if manifest == "" {
		manifest = filepath.Join(cfg.Home, "skills.json")
	}
	return dir, manifest
}

// wireExtras adds persona, skills, memory, state, the gate and tools to
// deps.
func (a *app) wireExtras(ctx context.Context, deps *agent.Deps) error {
	cfg := a.cfg
	written, err := persona.Install(cfg.Home)
	if err != nil {
		return fmt.Errorf("install default persona: %w", err)
	}
	if len(written) > 0 {
		a.log.Info("installed default persona and skills", "home", cfg.Home, "files", len(written))
	}
	per, err := persona.Load(cfg.Home, cfg.Agent.PersonaFile)
	if err != nil {
		a.log.Error("persona unreadable; using the default Sprout persona", "err", err)
		per = persona.Default()
	}
	anchors := per.Anchors
	if len(cfg.Agent.IdentityAnchors) > 0 {
		anchors = cfg.Agent.IdentityAnchors
	}
	deps.Persona = agent.Persona{Text: per.Text, Anchors: anchors}

	dir, manifest := skillPaths(cfg)
	active, problems, err := skill.Load(dir, manifest)
	if err != nil {
		a.log.Error("skills manifest unreadable; running with no skills", "err", err)
	}
	for _, p := range problems {
		a.log.Warn("skill skipped", "problem", p.Error())
	}
	deps.Skills = skill.PromptSection(active)
	return nil
}

// mount adds channel and management routes to the server.
func (a *app) mount(srv *runtime.Server) error {
	srv.Mount("/api/sessions", sessionhttp.Handler(a.sessions, a.cfg.AgentID), true)
	srv.Mount("/api/sessions/", sessionhttp.Handler(a.sessions, a.cfg.AgentID), true)
	if a.telegram != nil {
		// The webhook authenticates with its own secret header.
		srv.Mount("POST "+telegram.WebhookPath, a.telegram.Handler(), false)
	}
	return nil
}

// ready re-checks dependencies lazily on every invocation, the analogue of
// Sprout's ensure_openclaw_ready() after a frozen container thaws: the home
// directory must still be there (a volume can vanish), and the approval
// ledger is re-read so decisions made while we were stopped are seen. MCP
// servers are re-checked per turn by the tool source.
func (a *app) ready(ctx context.Context) error {
	if _, err := os.Stat(a.cfg.Home); err != nil {
		return fmt.Errorf("home %s: %w", a.cfg.Home, err)
	}
	if a.gate != nil {
		if err := a.gate.Refresh(ctx); err != nil {
			a.log.Warn("approval ledger refresh failed", "err", err)
		}
	}
	return nil
}

// buildModels builds the model router from the config. With no MODEL_ID it
// returns a Router that answers every turn with model.ErrNotConfigured.
func buildModels(ctx context.Context, cfg *config.Config, m *metrics.Metrics) (*model.Router, error) {
	p := cfg.Providers
	r, err := providers.NewRouter(ctx, model.RouterOptions{
		TextRef:    cfg.Model.ID,
		VisionRef:  cfg.Model.VisionID,
		Fallbacks:  cfg.Model.Fallbacks,
		Timeout:    cfg.Model.Timeout.D(),
		MaxRetries: cfg.Model.MaxRetries,
		MaxTokens:  cfg.Model.MaxTokens,
		Observe: func(provider, name string, d time.Duration, err error) {
			outcome := "ok"
			if err != nil {
				outcome = "error"
			}
			m.ModelDuration.WithLabelValues(provider, name, outcome).Observe(d.Seconds())
		},
	}, providers.Options{
		AnthropicAPIKey: p.AnthropicAPIKey, AnthropicBaseURL: p.AnthropicBaseURL,
		OpenAIAPIKey: p.OpenAIAPIKey, OpenAIBaseURL: p.OpenAIBaseURL, OllamaBaseURL: p.OllamaBaseURL,
		AWSRegion: p.AWSRegion, BedrockEndpoint: p.BedrockEndpoint,
	})
	if err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	return r, nil
}
