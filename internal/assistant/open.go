package assistant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/approval/pgledger"
	"github.com/tendrilai/tendril/internal/channel/telegram"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/extract"
	"github.com/tendrilai/tendril/internal/memory/pipeline"
	"github.com/tendrilai/tendril/internal/metrics"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/providers"
	"github.com/tendrilai/tendril/internal/persona"
	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/schedule/agentrunner"
	"github.com/tendrilai/tendril/internal/schedule/reminders"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/jsonl"
	"github.com/tendrilai/tendril/internal/skill"
	"github.com/tendrilai/tendril/internal/tool"
	"github.com/tendrilai/tendril/internal/tool/builtin"
	"github.com/tendrilai/tendril/internal/tool/mcp"
)

// Open wires every store, the model router, the agent and the channels
// from cfg. It creates $TENDRIL_HOME and installs the default persona and
// skills on first run. Nothing runs in the background until Start.
func Open(ctx context.Context, cfg *config.Config, opts Options) (*Assistant, error) {
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		return nil, fmt.Errorf("create home %s: %w", cfg.Home, err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.New()
	}
	if opts.Busy == nil {
		opts.Busy = noBusy{}
	}
	a := &Assistant{cfg: cfg, log: opts.Logger, metrics: opts.Metrics, busy: opts.Busy, hub: newHub(),
		paused: newPaused(), closedIDs: map[string]bool{}, locks: localLocks{}}
	a.bg, a.cancelBG = context.WithCancel(context.Background())
	a.stopping, a.cancelStop = context.WithCancel(context.Background())
	ok := false
	defer func() {
		if !ok {
			a.Close()
		}
	}()
	if err := a.openStores(ctx, opts); err != nil {
		return nil, err
	}
	router, err := BuildModels(ctx, cfg, a.metrics)
	if err != nil {
		return nil, err
	}
	a.models = router
	if err := a.openMemory(ctx, router); err != nil {
		return nil, err
	}
	deps := agent.Deps{Sessions: a.sessions, Models: router, State: a.state, Gate: a.gate, Deliverer: a,
		Retriever: a.retrieval, Recorder: a.pipeline, HitsAssembled: true}
	deps.Compact = a.compact
	deps.History = a.history
	if deps.Persona, deps.Skills, err = a.loadPersona(); err != nil {
		return nil, err
	}
	if err := a.wireTools(ctx, &deps); err != nil {
		return nil, err
	}
	a.tools, a.toolSource = deps.Tools, deps.ToolSource
	ag, err := agent.New(agent.Options{
		AgentID:           cfg.AgentID,
		MaxToolIterations: cfg.Agent.MaxToolIterations,
		ToolTimeout:       cfg.Agent.ToolTimeout.D(),
		MaxTokens:         cfg.Model.MaxTokens,
		ContextWindow:     cfg.Model.ContextWindow,
		MemoryBlockShare:  cfg.Memory.BlockShare,
		Logger:            a.log,
		Metrics:           a.metrics,
		Tracker:           a.busy,
	}, deps)
	if err != nil {
		return nil, err
	}
	a.agent = ag
	if err := a.openTelegram(ctx); err != nil {
		return nil, err
	}
	a.registerMetricSources()
	ok = true
	return a, nil
}

type noBusy struct{}

func (noBusy) Begin() func() { return func() {} }

func (a *Assistant) openStores(ctx context.Context, opts Options) error {
	cfg := a.cfg
	if err := a.openDatabase(ctx); err != nil {
		return err
	}
	if a.db != nil {
		bus, err := newDeliveryBus(ctx, a.db, a.hub, a.log)
		if err != nil {
			return err
		}
		a.bus = bus
		a.stops = append(a.stops, bus.stop)
	}
	if opts.Owner && cfg.RedisURL == "" && cfg.DatabaseURL == "" {
		maxAge, maxSize, err := cfg.Session.Retention.Limits()
		if err != nil {
			return err
		}
		ret := jsonl.RetentionOptions{MaxAge: maxAge, MaxSize: maxSize, Delete: cfg.Session.Retention.Delete}
		rep, err := jsonl.Archive(filepath.Join(cfg.Home, "agents"), ret, time.Now())
		if err != nil {
			a.log.Warn("session retention failed; continuing", "err", err)
		} else if len(rep.Archived)+len(rep.Deleted) > 0 {
			a.log.Info("session retention", "archived", len(rep.Archived), "deleted", len(rep.Deleted), "bytes", rep.Bytes)
		}
	}
	st, err := a.openSessions(ctx)
	if err != nil {
		return err
	}
	a.sessions = st
	a.closers = append(a.closers, st.Close)

	if err := a.openState(ctx); err != nil {
		return err
	}

	gopts, err := ApprovalOptions(cfg, opts.Owner)
	if err != nil {
		return err
	}
	gopts.By = "serve"
	if a.db != nil {
		a.gate, err = pgledger.OpenGate(ctx, a.db, gopts)
	} else {
		a.gate, err = approval.Open(ApprovalDir(cfg), gopts)
	}
	if err != nil {
		return fmt.Errorf("open approval gate: %w", err)
	}
	a.closers = append(a.closers, a.gate.Close)
	if r := a.gate.Broken(); r != nil {
		a.log.Error("approval ledger failed verification: the gate is closed until `tendril approvals reset`", "report", fmt.Sprint(*r))
	}

	if err := a.openJobs(ctx); err != nil {
		return err
	}
	jobs, err := a.openScheduleStore(ctx)
	if err != nil {
		return fmt.Errorf("open schedule: %w", err)
	}
	a.closers = append(a.closers, jobs.Close)
	so := schedule.Options{Logger: a.log, Jobs: a.jobs, Deliverer: schedule.DelivererFunc(func(ctx context.Context, j schedule.Job, text string) error {
		return a.deliverTo(ctx, j.Channel, j.ActorID, j.ChatID, text)
	})}
	if opts.Clock != nil {
		so.Clock = opts.Clock
	}
	a.scheduler = schedule.New(jobs, schedule.RunnerFunc(func(ctx context.Context, j schedule.Job) (string, error) {
		return agentrunner.New(a).RunJob(ctx, j)
	}), so)
	return nil
}

// openMemory opens the memory store, the extraction pipeline and the
// retrieval component.
func (a *Assistant) openMemory(ctx context.Context, router *model.Router) error {
	cfg := a.cfg
	st, err := a.openMemoryStore(ctx)
	if err != nil {
		return err
	}
	a.memory = st
	a.closers = append(a.closers, st.Close)
	popts := PipelineOptions(cfg)
	popts.Logger = a.log
	popts.Jobs = a.jobs
	if router.Configured() && cfg.Memory.LLMExtraction {
		popts.Extractor = extract.NewLLM(Completer(router))
	}
	p, err := pipeline.New(st, popts)
	if err != nil {
		return fmt.Errorf("memory pipeline: %w", err)
	}
	a.pipeline = p
	a.closers = append(a.closers, p.Close)
	a.retrieval = memory.NewRetriever(st, memory.RetrieveOptions{TopK: cfg.Memory.TopK, Timeout: cfg.Memory.RetrieveTimeout.D(), Logger: a.log,
		Metrics: func(s memory.RetrieveStats) {
			a.metrics.RetrievalDuration.Observe(s.Duration.Seconds())
			if s.Failed {
				a.metrics.RetrievalTimeouts.Inc()
			}
		}})
	return nil
}

// history builds the model context for a session (SPEC §3), compacting
// first when it passes the configured share of the model's context window.
// The overflow trigger lives in the agent (one compaction, one retry).
func (a *Assistant) history(ctx context.Context, key session.Key, chatType string) ([]session.Node, error) {
	cfg := a.cfg
	limits := a.historyLimits(chatType)
	nodes, err := session.BuildContext(ctx, a.sessions, key, limits)
	if err != nil || !session.ShouldCompact(nodes, cfg.Model.ContextWindow, cfg.Session.Compaction.Threshold) {
		return nodes, err
	}
	if err := a.compact(ctx, key); err != nil {
		a.log.Warn("auto-compaction failed; continuing with the full context", "session", key.String(), "err", err)
		return nodes, nil
	}
	return session.BuildContext(ctx, a.sessions, key, limits)
}

// historyLimits are the history limits of a chat type ("" for the
// default): session.maxHistoryMessages / maxHistoryTokens, or the
// channel override.
func (a *Assistant) historyLimits(chatType string) session.Limits {
	cfg := a.cfg
	cc := session.DefaultContextConfig()
	cc.Default = session.Limits{MaxHistoryMessages: cfg.Session.MaxHistoryMessages, MaxHistoryTokens: cfg.Session.MaxHistoryTokens}
	for k, v := range cfg.Session.ChannelOverrides {
		cc.ChannelOverrides[k] = session.Limits{MaxHistoryMessages: v.MaxHistoryMessages, MaxHistoryTokens: v.MaxHistoryTokens}
	}
	return cc.For(chatType)
}

// compact summarises a session's older nodes (SPEC §3 compaction); memory
// extraction consumes them first.
func (a *Assistant) compact(ctx context.Context, key session.Key) error {
	comp := a.cfg.Session.Compaction
	_, err := session.Compact(ctx, a.sessions, key, session.CompactOptions{
		Strategy: comp.Strategy, KeepLast: comp.KeepLast,
		Summarize: func(ctx context.Context, older []session.Node) (string, error) {
			return summarize(ctx, a.models, older)
		},
		PreCompact: func(ctx context.Context, key session.Key, older []session.Node) error {
			for _, n := range older {
				if actor, ok := n.Metadata["actorId"].(string); ok && actor != "" {
					return a.pipeline.Flush(ctx, a.cfg.AgentID, actor, key.ID)
				}
			}
			return nil
		},
	})
	return err
}

// summarize asks the model for a compaction summary of older nodes.
func summarize(ctx context.Context, r *model.Router, older []session.Node) (string, error) {
	var b strings.Builder
	for _, n := range older {
		if t := strings.TrimSpace(n.PlainText()); t != "" {
			fmt.Fprintf(&b, "%s: %s\n", n.Role, t)
		}
	}
	return Completer(r)(ctx, "Summarise this conversation for your own later reference. Keep every fact, preference, decision, open question and commitment. Be concise; write plain prose.", b.String())
}

// Completer adapts the model router to the extractors' Completer.
func Completer(r *model.Router) extract.Completer {
	return func(ctx context.Context, system, user string) (string, error) {
		resp, err := r.Generate(ctx, &model.Request{System: system, Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text(user)}}}}, false)
		if err != nil {
			return "", err
		}
		return resp.TextContent(), nil
	}
}

// SkillPaths returns the skills directory and manifest path.
func SkillPaths(cfg *config.Config) (dir, manifest string) {
	dir, manifest = cfg.Agent.SkillsDir, cfg.Agent.SkillsManifest
	if dir == "" {
		dir = filepath.Join(cfg.Home, "skills")
	}
	if manifest == "" {
		manifest = filepath.Join(cfg.Home, "skills.json")
	}
	return dir, manifest
}

// LoadPersona loads cfg's persona. Named explicitly (agent.personaFile or
// TENDRIL_PERSONA_FILE), the file must exist and load: a missing,
// unreadable or empty one is an error naming the variable or key and the
// path. Left at the default, a missing persona.md is the embedded Sprout.
func LoadPersona(cfg *config.Config) (persona.Persona, error) {
	per, err := persona.Load(cfg.Home, cfg.Agent.PersonaFile)
	from := cfg.Agent.PersonaFileFrom
	if from == "" {
		return per, err
	}
	path := cfg.Agent.PersonaFile
	if !filepath.IsAbs(path) {
		path = filepath.Join(cfg.Home, path)
	}
	if err == nil && strings.HasPrefix(per.Source, "embedded:") {
		err = errors.New("no such file")
	}
	if err != nil {
		return persona.Persona{}, fmt.Errorf("%s %s: persona file unusable: %w", from, path, err)
	}
	return per, nil
}

// CheckSkillPaths reports an explicitly configured skills directory
// (agent.skillsDir, TENDRIL_SKILLS_DIR) that is not a directory, or
// skills manifest (agent.skillsManifest, TENDRIL_SKILLS_MANIFEST) that is
// missing or does not parse; the error names the variable or key. The
// defaults are not checked: a home without skills runs with none.
func CheckSkillPaths(cfg *config.Config) error {
	dir, manifest := SkillPaths(cfg)
	if from := cfg.Agent.SkillsDirFrom; from != "" {
		st, err := os.Stat(dir)
		if err == nil && !st.IsDir() {
			err = errors.New("not a directory")
		}
		if err != nil {
			return fmt.Errorf("%s %s: skills directory unusable: %w", from, dir, err)
		}
	}
	if from := cfg.Agent.SkillsManifestFrom; from != "" {
		if _, err := skill.LoadManifest(manifest); err != nil {
			return fmt.Errorf("%s: %w", from, err) // err names the path
		}
	}
	return nil
}

// loadPersona installs the default persona on first run and loads the
// persona and the active skills' prompt section.
func (a *Assistant) loadPersona() (agent.Persona, string, error) {
	cfg := a.cfg
	written, err := persona.Install(cfg.Home)
	if err != nil {
		a.log.Error("default persona could not be installed", "err", err)
	} else if len(written) > 0 {
		a.log.Info("installed default persona and skills", "home", cfg.Home, "files", len(written))
	}
	per, err := LoadPersona(cfg)
	if err != nil && cfg.Agent.PersonaFileFrom != "" {
		return agent.Persona{}, "", err
	}
	if err != nil {
		a.log.Error("persona unreadable; using the default Sprout persona", "err", err)
		per = persona.Default()
	}
	anchors := per.Anchors
	if len(cfg.Agent.IdentityAnchors) > 0 {
		anchors = cfg.Agent.IdentityAnchors
	}
	if err := CheckSkillPaths(cfg); err != nil {
		return agent.Persona{}, "", err
	}
	dir, manifest := SkillPaths(cfg)
	active, problems, err := skill.Load(dir, manifest)
	if err != nil {
		a.log.Error("skills manifest unreadable; running with no skills", "err", err)
	}
	for _, p := range problems {
		a.log.Warn("skill skipped", "problem", p.Error())
	}
	return agent.Persona{Text: per.Text, Anchors: anchors}, skill.PromptSection(active), nil
}

// wireTools registers the built-in tools, reminders and MCP servers.
func (a *Assistant) wireTools(ctx context.Context, deps *agent.Deps) error {
	cfg := a.cfg
	reg := tool.NewRegistry()
	err := builtin.Register(reg, builtin.Deps{
		Memory: a.memory,
		Episodic: builtin.EpisodicFunc(func(ctx context.Context, ag, ac, s, t string) (string, error) {
			r, err := a.pipeline.WriteEpisodic(ctx, ag, ac, s, t)
			return r.Describe(), err
		}),
		Weather:    builtin.WeatherOptions{ForecastBaseURL: cfg.Tools.WeatherBaseURL, GeocodingBaseURL: cfg.Tools.GeocodingBaseURL},
		EnableExec: cfg.Tools.EnableExec,
		Reminders:  reminders.New(a.scheduler, reminders.Options{}),
	})
	if err != nil {
		return fmt.Errorf("register tools: %w", err)
	}
	deps.Tools = reg.List()
	if len(cfg.MCP) == 0 {
		return nil
	}
	servers := map[string]mcp.ServerConfig{}
	for name, s := range cfg.MCP {
		servers[name] = mcp.ServerConfig{Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers, Class: tool.Class(s.Class)}
	}
	a.mcp = mcp.NewManager(servers, a.log)
	a.closers = append(a.closers, a.mcp.Close)
	base := reg.List()
	deps.ToolSource = func(ctx context.Context) []tool.Tool {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		extra, err := a.mcp.Tools(ctx)
		if err != nil {
			a.log.Warn("MCP servers unavailable this turn", "err", err)
		}
		return append(append([]tool.Tool(nil), base...), extra...)
	}
	return nil
}

// openTelegram builds the Telegram channel when a bot token is set, and
// otherwise opens its store if one exists, so pairing and forget still
// reach the rows a bot left behind.
func (a *Assistant) openTelegram(ctx context.Context) error {
	cfg := a.cfg
	var pgStore *telegram.Store
	if a.db != nil {
		st, err := telegram.OpenPostgresStore(ctx, a.db)
		if err != nil {
			return fmt.Errorf("telegram store: %w", err)
		}
		pgStore = st
		a.closers = append(a.closers, st.Close)
	}
	if cfg.Telegram.BotToken == "" {
		if pgStore != nil {
			a.tgStore = pgStore
			return nil
		}
		dir := telegram.StoreDir(cfg.Home)
		if _, err := os.Stat(dir); err != nil {
			return nil
		}
		st, err := telegram.OpenStore(dir)
		if err != nil {
			return fmt.Errorf("telegram store: %w", err)
		}
		a.tgStore = st
		a.closers = append(a.closers, st.Close)
		return nil
	}
	topts := telegram.OptionsFromConfig(cfg.Telegram, cfg.Home)
	topts.Logger = a.log
	if pgStore != nil {
		topts.Store = pgStore // nothing is written to the home
	}
	ch, err := telegram.New(topts, telegram.Deps{
		Invoker: a, Approver: telegramApprover{a}, Memory: telegramMemory{a},
	})
	if err != nil {
		return fmt.Errorf("telegram: %w", err)
	}
	a.telegram, a.tgStore = ch, ch.Store()
	a.closers = append(a.closers, ch.Close)
	return nil
}

// BuildModels builds the model router. With no MODEL_ID it returns a
// Router that answers every turn with model.ErrNotConfigured.
func BuildModels(ctx context.Context, cfg *config.Config, m *metrics.Metrics) (*model.Router, error) {
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

// ErrNoTelegram: the operation needs Telegram, which is not configured.
var ErrNoTelegram = errors.New("telegram is not configured: set TELEGRAM_BOT_TOKEN and TELEGRAM_WEBHOOK_SECRET")
