package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/channel/telegram"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/extract"
	"github.com/tendrilai/tendril/internal/memory/pipeline"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
	"github.com/tendrilai/tendril/internal/metrics"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/schedule/agentrunner"
	"github.com/tendrilai/tendril/internal/schedule/reminders"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool"
	"github.com/tendrilai/tendril/internal/tool/builtin"
	"github.com/tendrilai/tendril/internal/tool/mcp"
)

// openMemory opens the embedded memory store (Markdown + SQLite index).
func openMemory(cfg *config.Config, log *slog.Logger) (*sqlitestore.Store, error) {
	var keys []memory.IndexedKey
	for _, k := range cfg.Memory.IndexedKeys {
		keys = append(keys, memory.IndexedKey{Name: k.Name, Type: k.Type})
	}
	st, err := sqlitestore.Open(cfg.Home, sqlitestore.Options{
		AgentID: cfg.AgentID, IndexedKeys: keys, EventExpiryDays: cfg.Memory.EventExpiryDays, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("open memory: %w", err)
	}
	return st, nil
}

// completer adapts the model router to the extractors' Completer.
func completer(r *model.Router) extract.Completer {
	return func(ctx context.Context, system, user string) (string, error) {
		resp, err := r.Generate(ctx, &model.Request{System: system, Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text(user)}}}}, false)
		if err != nil {
			return "", err
		}
		return resp.TextContent(), nil
	}
}

// wireMemory adds retrieval, extraction and the compaction hook.
func (a *app) wireMemory(ctx context.Context, deps *agent.Deps, router *model.Router) error {
	cfg := a.cfg
	st, err := openMemory(cfg, a.log)
	if err != nil {
		return err
	}
	a.memory = st
	a.closers = append(a.closers, st.Close)

	popts := memoryPipelineOptions(cfg)
	popts.Logger = a.log
	if router.Configured() && cfg.Memory.LLMExtraction {
		popts.Extractor = extract.NewLLM(completer(router))
	}
	p, err := pipeline.New(st, popts)
	if err != nil {
		return fmt.Errorf("memory pipeline: %w", err)
	}
	a.pipeline = p
	a.closers = append(a.closers, p.Close)
	a.starters = append(a.starters, func(ctx context.Context) (func(), error) {
		p.Start(ctx)
		return p.Stop, nil
	})

	ranked := memory.NewRetriever(st, memory.RetrieveOptions{TopK: cfg.Memory.TopK, Timeout: cfg.Memory.RetrieveTimeout.D(), Logger: a.log})
	deps.Retriever = standingRetriever{store: st, ranked: ranked, agentID: cfg.AgentID, topK: cfg.Memory.TopK}
	deps.RenderMemory = memory.RenderBlock
	deps.Recorder = p

	sessions := deps.Sessions
	comp := cfg.Session.Compaction
	deps.Compact = func(ctx context.Context, key session.Key) error {
		_, err := session.Compact(ctx, sessions, key, session.CompactOptions{
			Strategy: comp.Strategy, KeepLast: comp.KeepLast,
			Summarize: func(ctx context.Context, older []session.Node) (string, error) {
				return summarize(ctx, router, older)
			},
			// Memory extraction consumes the nodes before they are
			// summarised away.
			PreCompact: func(ctx context.Context, key session.Key, older []session.Node) error {
				actor := actorOf(older)
				if actor == "" {
					return nil
				}
				return p.Flush(ctx, cfg.AgentID, actor, key.ID)
			},
		})
		return err
	}
	return nil
}

func actorOf(nodes []session.Node) string {
	for _, n := range nodes {
		if a, ok := n.Metadata["actorId"].(string); ok && a != "" {
			return a
		}
	}
	return ""
}

// summarize asks the model for a compaction summary of older nodes.
func summarize(ctx context.Context, r *model.Router, older []session.Node) (string, error) {
	var b strings.Builder
	for _, n := range older {
		if t := strings.TrimSpace(n.PlainText()); t != "" {
			fmt.Fprintf(&b, "%s: %s\n", n.Role, t)
		}
	}
	resp, err := r.Generate(ctx, &model.Request{
		System:   "Summarise this conversation for your own later reference. Keep every fact, preference, decision, open question and commitment. Be concise; write plain prose.",
		Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text(b.String())}}},
	}, false)
	if err != nil {
		return "", err
	}
	return resp.TextContent(), nil
}

// wireSafety opens the state engine and the approval gate.
func (a *app) wireSafety(deps *agent.Deps) error {
	cfg := a.cfg
	sopts, err := stateOptions(cfg)
	if err != nil {
		return err
	}
	// State is derived, not user data: each save is an atomic rename, but
	// not fsynced, so one actor's turn does not wait on the disk under the
	// engine's lock. A power cut can lose the last change (values then
	// decay from the previous one).
	sopts.NoSync = true
	// Each save re-encodes the kept history: 32 recent causes are plenty
	// for `state show` and keep the save off the turn's critical path
	// (200 cost about a fifth of a turn's CPU).
	sopts.HistoryLimit = 32
	eng, err := state.Open(stateDir(cfg), sopts)
	if err != nil {
		return fmt.Errorf("open state: %w", err)
	}
	a.state = eng
	deps.State = stateAdapter{eng}

	gopts, err := approvalOptions(cfg, true)
	if err != nil {
		return err
	}
	gopts.By = "serve"
	g, err := approval.Open(approvalDir(cfg), gopts)
	if err != nil {
		return fmt.Errorf("open approval gate: %w", err)
	}
	if r := g.Broken(); r != nil {
		a.log.Error("approval ledger failed verification: the gate is closed until `tendril approvals reset`", "report", fmt.Sprint(*r))
	}
	a.gate = g
	a.closers = append(a.closers, g.Close)
	a.gateAd = gateAdapter{g: g, resumeDir: filepath.Join(approvalDir(cfg), "resume")}
	deps.Gate = a.gateAd
	return nil
}

// wireTools registers built-in tools, reminders and MCP servers.
func (a *app) wireTools(ctx context.Context, deps *agent.Deps) error {
	cfg := a.cfg
	sched, err := a.openScheduler(ctx)
	if err != nil {
		return err
	}
	reg := tool.NewRegistry()
	err = builtin.Register(reg, builtin.Deps{
		Memory: a.memory,
		Episodic: builtin.EpisodicFunc(func(ctx context.Context, ag, ac, s, t string) (string, error) {
			r, err := a.pipeline.WriteEpisodic(ctx, ag, ac, s, t)
			return r.Describe(), err
		}),
		Weather:    builtin.WeatherOptions{ForecastBaseURL: cfg.Tools.WeatherBaseURL, GeocodingBaseURL: cfg.Tools.GeocodingBaseURL},
		EnableExec: cfg.Tools.EnableExec,
		Reminders:  reminders.New(sched, reminders.Options{}),
	})
	if err != nil {
		return fmt.Errorf("register tools: %w", err)
	}
	deps.Tools = reg.List()
	if len(cfg.MCP) > 0 {
		servers := map[string]mcp.ServerConfig{}
		for name, s := range cfg.MCP {
			servers[name] = mcp.ServerConfig{Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers, Class: tool.Class(s.Class)}
		}
		mgr := mcp.NewManager(servers, a.log)
		a.mcp = mgr
		a.closers = append(a.closers, mgr.Close)
		base := reg.List()
		deps.ToolSource = func(ctx context.Context) []tool.Tool {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			extra, err := mgr.Tools(ctx)
			if err != nil {
				a.log.Warn("MCP servers unavailable this turn", "err", err)
			}
			return append(append([]tool.Tool(nil), base...), extra...)
		}
	}
	return nil
}

// openScheduler opens the jobs store and a scheduler whose runner is the
// agent (bound late: the agent is built after its tools).
func (a *app) openScheduler(ctx context.Context) (*schedule.Scheduler, error) {
	st, err := openScheduleStore(ctx, a.cfg)
	if err != nil {
		return nil, fmt.Errorf("open schedule: %w", err)
	}
	a.closers = append(a.closers, st.Close)
	runner := schedule.RunnerFunc(func(ctx context.Context, j schedule.Job) (string, error) {
		return agentrunner.New(a.agent).RunJob(ctx, j)
	})
	s := schedule.New(st, runner, schedule.Options{
		Logger: a.log,
		Deliverer: schedule.DelivererFunc(func(ctx context.Context, j schedule.Job, text string) error {
			return a.deliverTo(ctx, j.Channel, j.ChatID, text)
		}),
	})
	a.scheduler = s
	a.starters = append(a.starters, func(ctx context.Context) (func(), error) {
		if err := s.SyncConfigJobs(ctx, scheduleJobSpecs(a.cfg)); err != nil {
			return nil, fmt.Errorf("schedule.jobs: %w", err)
		}
		if err := s.Start(ctx); err != nil {
			return nil, err
		}
		return s.Stop, nil
	})
	return s, nil
}

// deliverTo sends text to a chat on a channel. Only Telegram can push;
// replies for other channels stay in their session.
func (a *app) deliverTo(ctx context.Context, channel, chatID, text string) error {
	switch channel {
	case "telegram":
		if a.telegram == nil {
			return errors.New("telegram is not configured: set TELEGRAM_BOT_TOKEN and TELEGRAM_WEBHOOK_SECRET")
		}
		return a.telegram.Deliver(ctx, chatID, text)
	}
	a.log.Info("reply kept in the session; channel has no push delivery", "channel", channel, "chat", chatID)
	return nil
}

// Deliver implements agent.Deliverer for turns resumed after an approval.
func (a *app) Deliver(ctx context.Context, channel, actorID string, meta map[string]any, text string) error {
	chat := ""
	switch v := meta["telegram_chat_id"].(type) {
	case float64:
		chat = strconv.FormatInt(int64(v), 10)
	case int64:
		chat = strconv.FormatInt(v, 10)
	case string:
		chat = v
	}
	if chat == "" {
		if v, ok := meta["chat_id"].(string); ok {
			chat = v
		}
	}
	if chat == "" && channel == "telegram" {
		chat = strings.TrimPrefix(actorID, "telegram:")
	}
	return a.deliverTo(ctx, channel, chat, text)
}

// wireTelegram starts the Telegram channel when a bot token is set.
func (a *app) wireTelegram() error {
	cfg := a.cfg
	if cfg.Telegram.BotToken == "" {
		return nil
	}
	ch, err := telegram.New(telegram.OptionsFromConfig(cfg.Telegram, cfg.Home), telegram.Deps{
		Invoker:  a.agent,
		Approver: telegramApprover{a},
		Memory:   memoryLister{a},
	})
	if err != nil {
		return fmt.Errorf("telegram: %w", err)
	}
	a.telegram = ch
	a.closers = append(a.closers, ch.Close)
	a.starters = append(a.starters, func(ctx context.Context) (func(), error) {
		if err := ch.Start(ctx); err != nil {
			return nil, err
		}
		return func() {
			sctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownGrace.D())
			defer cancel()
			ch.Stop(sctx)
		}, nil
	})
	return nil
}

// telegramApprover decides approvals from inline buttons and /approve; the
// resumed turn replies through app.Deliver.
type telegramApprover struct{ a *app }

func (t telegramApprover) Decide(ctx context.Context, requestID string, approve bool, actorID string) (*agent.Result, error) {
	req, err := t.a.gate.Get(ctx, requestID)
	if err != nil {
		return nil, err
	}
	if req.ActorID != actorID {
		return nil, errors.New("this approval belongs to someone else")
	}
	return nil, t.a.gate.Decide(ctx, requestID, approve, actorID)
}

// memoryLister backs /memory and /forget.
type memoryLister struct{ a *app }

func (m memoryLister) Remember(ctx context.Context, actorID string) ([]string, error) {
	ns, err := memory.Namespace(memory.DefaultLongTermTemplate, memory.NamespaceVars{AgentID: m.a.cfg.AgentID, ActorID: actorID})
	if err != nil {
		return nil, err
	}
	hits, err := m.a.memory.Search(ctx, memory.Query{NamespacePath: ns, TopK: 50})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, h := range memory.Assemble(hits, 50) {
		tag := "[Inferred]"
		if h.Record.Explicit() {
			tag = "[Explicit]"
		}
		out = append(out, tag+" "+h.Record.Content)
	}
	return out, nil
}

func (m memoryLister) Forget(ctx context.Context, actorID string) error {
	if err := m.a.memory.Forget(ctx, m.a.cfg.AgentID, actorID); err != nil {
		return err
	}
	if err := m.a.pipeline.Forget(ctx, actorID); err != nil {
		return err
	}
	if err := m.a.state.Forget(ctx, actorID); err != nil {
		return err
	}
	// "Forget everything" includes the conversation itself.
	if _, err := clearActorSessions(ctx, m.a.sessions, actorID); err != nil {
		return err
	}
	return m.a.forgetPaused(ctx, actorID)
}

// clearActorSessions removes every session the actor owns, on every channel
// and agent, and returns their keys.
func clearActorSessions(ctx context.Context, st session.Store, actorID string) ([]string, error) {
	keys, err := st.List(ctx, "")
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, k := range keys {
		if !agent.OwnsSession(k, actorID) {
			continue
		}
		if err := st.Clear(ctx, k); err != nil {
			return removed, fmt.Errorf("clear session %s: %w", k.String(), err)
		}
		removed = append(removed, k.AgentID+"/"+k.String())
	}
	return removed, nil
}

func init() {
	// `memory forget --sessions` removes every session the actor owns.
	forgetSessions = func(ctx context.Context, cfg *config.Config, actorID string) ([]string, error) {
		st, err := openSessionStore(cfg)
		if err != nil {
			return nil, err
		}
		defer st.Close()
		return clearActorSessions(ctx, st, actorID)
	}
}

// forgetActorExtras is the CLI side of forgetting beyond the memory store:
// extraction jobs, internal state and saved paused turns.
func forgetActorExtras(ctx context.Context, cfg *config.Config, st memory.Store, actor string) error {
	p, err := pipeline.New(st, memoryPipelineOptions(cfg))
	if err == nil {
		err = p.Forget(ctx, actor)
		p.Close()
	}
	if err != nil {
		return fmt.Errorf("forget extraction state: %w", err)
	}
	sopts, err := stateOptions(cfg)
	if err != nil {
		return err
	}
	eng, err := state.Open(stateDir(cfg), sopts)
	if err != nil {
		return err
	}
	if err := eng.Forget(ctx, actor); err != nil {
		return err
	}
	gopts, err := approvalOptions(cfg, false)
	if err != nil {
		return err
	}
	g, err := approval.Open(approvalDir(cfg), gopts)
	if err != nil {
		return err
	}
	defer g.Close()
	return forgetApprovals(ctx, g, gateAdapter{g: g, resumeDir: filepath.Join(approvalDir(cfg), "resume")}, actor)
}

// forgetPaused deletes the saved conversations of the actor's paused
// turns, then denies their open requests so nothing waits on them; the
// ledger entries keep only the tool name, arguments and hash.
func (a *app) forgetPaused(ctx context.Context, actorID string) error {
	return forgetApprovals(ctx, a.gate, a.gateAd, actorID)
}

func forgetApprovals(ctx context.Context, g *approval.Gate, ga gateAdapter, actorID string) error {
	reqs, err := g.List(ctx)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		if r.ActorID != actorID {
			continue
		}
		if len(r.Resume) > 0 {
			if _, ref, _ := ga.loadResume(r.Resume); ref != "" {
				ga.dropResume(ref)
			}
		}
		if r.Status == approval.StatusPending {
			if err := g.Decide(ctx, r.ID, false, "forget"); err != nil {
				return fmt.Errorf("deny %s: %w", r.ID, err)
			}
		}
	}
	return nil
}

// onDecision resumes a paused turn when its approval is decided, here or in
// another process (seen through gate.Refresh).
func (a *app) onDecision(req approval.Request, approved bool) {
	if len(req.Resume) == 0 {
		return
	}
	payload, ref, err := a.gateAd.loadResume(req.Resume)
	if err != nil {
		a.log.Warn("paused turn cannot resume: its saved state is missing", "request", req.ID, "err", err)
		return
	}
	req.Resume = payload
	go func() {
		defer a.gateAd.dropResume(ref)
		defer a.tracker.Begin()()
		ctx, cancel := context.WithTimeout(context.Background(), resumeTimeout)
		defer cancel()
		reason := ""
		if !approved {
			reason = "denied by " + req.DecidedBy
		}
		res, err := a.agent.Resume(ctx, req.ID, approved, reason, req.Resume)
		if err != nil {
			a.log.Warn("approved turn did not resume", "request", req.ID, "err", err)
			return
		}
		a.log.Info("approved turn resumed", "request", req.ID, "approved", approved, "session", res.SessionID)
	}()
}

// refreshApprovals replays decisions made while the server was down, then
// polls the ledger for decisions made by the CLI in
// another process; the gate fires OnDecision for each new one.
func (a *app) refreshApprovals(ctx context.Context) (func(), error) {
	// Approvals given while no server ran resume their turns now.
	if err := a.gate.Replay(ctx); err != nil {
		a.log.Warn("replaying approvals decided while stopped failed", "err", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := a.gate.Refresh(ctx); err != nil && ctx.Err() == nil {
					a.log.Warn("approval ledger refresh failed", "err", err)
				}
			}
		}
	}()
	return func() { cancel(); <-done }, nil
}

func init() {
	// `tendril memory harvest --llm` uses the configured model.
	memoryLLMCompleter = func(ctx context.Context, cfg *config.Config) (extract.Completer, error) {
		r, err := buildModels(ctx, cfg, metrics.New())
		if err != nil {
			return nil, err
		}
		if !r.Configured() {
			// --llm without a model is a usage mistake (exit 2).
			return nil, usageError{fmt.Errorf("--llm needs a model: %w", model.ErrNotConfigured)}
		}
		return completer(r), nil
	}
}
