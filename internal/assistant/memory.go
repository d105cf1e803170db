package assistant

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/extract"
	"github.com/tendrilai/tendril/internal/memory/markdown"
	"github.com/tendrilai/tendril/internal/memory/pipeline"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/session"
)

// ErrInvalid marks a request the caller must fix (a bad filter, status or
// ID); entry points map it to 400 / exit status 2.
var ErrInvalid = errors.New("invalid request")

func invalidf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// AllStatuses are every record status, for listings and forget's proof.
var AllStatuses = []memory.Status{memory.StatusActive, memory.StatusSuperseded, memory.StatusStaged, memory.StatusRejected}

// ParseStatuses parses status names; an unknown one is ErrInvalid.
func ParseStatuses(ss []string) ([]memory.Status, error) {
	var out []memory.Status
	for _, s := range ss {
		st := memory.Status(s)
		switch st {
		case memory.StatusActive, memory.StatusSuperseded, memory.StatusStaged, memory.StatusRejected:
			out = append(out, st)
		default:
			return nil, invalidf("unknown status %q (want active, superseded, staged or rejected)", s)
		}
	}
	return out, nil
}

func (a *Assistant) agentID(id string) string {
	if id != "" {
		return id
	}
	return a.cfg.AgentID
}

// actorPath is the namespace path of everything an actor has under
// agentID, for reading and forgetting it (agent.ValidateStoredID: an actor
// stored before IDs refused invisible characters is still reachable).
func actorPath(agentID, actorID string) (string, error) {
	if err := agent.ValidateStoredID(actorID); err != nil {
		return "", invalidf("actor %v", err)
	}
	p, err := memory.Namespace("/{agentId}/{actorId}/", memory.NamespaceVars{AgentID: agentID, ActorID: actorID})
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return p, nil
}

// SearchQuery is one memory search.
type SearchQuery struct {
	ActorID  string   `json:"actor_id"`
	AgentID  string   `json:"agent_id,omitempty"`
	Text     string   `json:"text"`
	K        int      `json:"k,omitempty"`       // 1 to MaxSearchK; 0: 10
	Filters  []string `json:"filters,omitempty"` // key:OP:value, up to 5
	Statuses []string `json:"statuses,omitempty"`
	Explain  bool     `json:"explain,omitempty"`
	Engine   string   `json:"engine,omitempty"` // bm25f (default) or fts5
}

// MaxSearchK bounds SearchQuery.K: a search holds its k best hits while
// it ranks, so an unbounded k is an allocation any caller could make
// arbitrarily large.
const MaxSearchK = 1000

// Search ranks one actor's records and past exchanges. Errors: ErrInvalid
// for bad filters, statuses or engine, or k outside 0–MaxSearchK.
func (a *Assistant) Search(ctx context.Context, q SearchQuery) ([]memory.Hit, error) {
	eng, err := sqlitestore.ParseEngine(q.Engine)
	if err != nil {
		return nil, fmt.Errorf("%w: engine: %v", ErrInvalid, err)
	}
	if q.K < 0 || q.K > MaxSearchK {
		return nil, fmt.Errorf("%w: k %d: want 1 to %d results (0: 10)", ErrInvalid, q.K, MaxSearchK)
	}
	mq := memory.Query{Text: q.Text, TopK: q.K, NoExplain: !q.Explain}
	if mq.TopK <= 0 {
		mq.TopK = 10
	}
	for _, f := range q.Filters {
		pf, err := memory.ParseFilter(f)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		mq.Filters = append(mq.Filters, pf)
	}
	if mq.Statuses, err = ParseStatuses(q.Statuses); err != nil {
		return nil, err
	}
	if mq.NamespacePath, err = actorPath(a.agentID(q.AgentID), q.ActorID); err != nil {
		return nil, err
	}
	var hits []memory.Hit
	if sq, ok := a.memory.(*sqlitestore.Store); ok {
		hits, err = sq.SearchEngine(ctx, mq, eng)
	} else if eng == sqlitestore.EngineFTS5 {
		return nil, fmt.Errorf("%w: engine fts5 is SQLite's; the PostgreSQL store ranks with bm25f", ErrInvalid)
	} else {
		hits, err = a.memory.Search(ctx, mq)
	}
	if errors.Is(err, memory.ErrInvalidFilter) {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err != nil {
		return nil, err
	}
	if !q.Explain {
		for i := range hits {
			hits[i].Explain = ""
		}
	}
	return hits, nil
}

// RecordsQuery lists stored records (or, with Events, past exchanges).
type RecordsQuery struct {
	ActorID   string   `json:"actor_id"`
	AgentID   string   `json:"agent_id,omitempty"`
	Namespace string   `json:"namespace,omitempty"` // instead of the actor's
	Statuses  []string `json:"statuses,omitempty"`  // default active
	Events    bool     `json:"events,omitempty"`
}

// Records lists records in index order.
func (a *Assistant) Records(ctx context.Context, q RecordsQuery) ([]memory.Record, error) {
	sts, err := ParseStatuses(q.Statuses)
	if err != nil {
		return nil, err
	}
	mq := memory.Query{NamespacePath: q.Namespace, Statuses: sts}
	if mq.NamespacePath == "" {
		if mq.NamespacePath, err = actorPath(a.agentID(q.AgentID), q.ActorID); err != nil {
			return nil, err
		}
	}
	if !q.Events {
		mq.Strategies = []memory.Strategy{memory.StrategyUserPreference, memory.StrategySemantic, memory.StrategySummary, memory.StrategyProcedural, memory.StrategyEpisodic}
	}
	hits, err := a.memory.Search(ctx, mq)
	if err != nil {
		return nil, err
	}
	recs := []memory.Record{}
	for _, h := range hits {
		if (h.Record.Metadata["kind"] == "event") == q.Events {
			recs = append(recs, h.Record)
		}
	}
	return recs, nil
}

// Record returns one record or event. Errors: memory.ErrNotFound.
func (a *Assistant) Record(ctx context.Context, id string) (memory.Record, error) {
	return a.memory.Get(ctx, id)
}

// MemoryActors lists the actors that have memory.
func (a *Assistant) MemoryActors(ctx context.Context) ([]string, error) {
	actors, err := a.memory.Actors(ctx)
	if actors == nil {
		actors = []string{}
	}
	return actors, err
}

// Staged lists staged memories of one actor ("" = every actor), oldest
// first.
func (a *Assistant) Staged(ctx context.Context, actorID string) ([]memory.Record, error) {
	recs, err := a.pipeline.Staged(ctx, actorID)
	if recs == nil {
		recs = []memory.Record{}
	}
	return recs, err
}

// ApproveStaged makes a staged memory active (superseding an older one on
// the same topic). Errors: memory.ErrNotFound, ErrInvalid.
func (a *Assistant) ApproveStaged(ctx context.Context, id string) (memory.Record, error) {
	r, err := a.pipeline.Approve(ctx, id)
	return r, stagingErr(err)
}

// RejectStaged rejects a staged memory; its normalised content is never
// proposed again for that actor.
func (a *Assistant) RejectStaged(ctx context.Context, id string) error {
	return stagingErr(a.pipeline.Reject(ctx, id))
}

func stagingErr(err error) error {
	if errors.Is(err, pipeline.ErrInvalid) {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return err
}

// HarvestRequest distils episodic memory into long-term records.
type HarvestRequest struct {
	ActorID string `json:"actor_id,omitempty"` // "" = every actor with memory
	AgentID string `json:"agent_id,omitempty"`
	LLM     bool   `json:"llm,omitempty"` // use the configured model, rules on bad output
}

// HarvestReport says how many new records each actor got.
type HarvestReport struct {
	AgentID string         `json:"agent"`
	Actors  map[string]int `json:"actors"`
	New     int            `json:"new"`
}

// Harvest runs extraction over episodic memory newer than the last
// harvest. Errors: ErrInvalid when LLM is asked with no model.
func (a *Assistant) Harvest(ctx context.Context, req HarvestRequest) (HarvestReport, error) {
	rep := HarvestReport{AgentID: a.agentID(req.AgentID), Actors: map[string]int{}}
	p := a.pipeline
	if req.LLM {
		if !a.models.Configured() {
			return rep, fmt.Errorf("%w: --llm needs a configured model: %v", ErrInvalid, model.ErrNotConfigured)
		}
		opts := PipelineOptions(a.cfg)
		l := extract.NewLLM(Completer(a.models))
		l.OnFallback = func(err error) { a.log.Warn("harvest: model reply unusable, used rules", "err", err) }
		opts.HarvestExtractor = l
		var err error
		if p, err = pipeline.New(a.memory, opts); err != nil {
			return rep, err
		}
		defer p.Close()
	}
	actors := []string{req.ActorID}
	if req.ActorID == "" {
		var err error
		if actors, err = a.memory.Actors(ctx); err != nil {
			return rep, err
		}
	}
	for _, ac := range actors {
		n, err := p.Harvest(ctx, rep.AgentID, ac)
		if err != nil {
			return rep, fmt.Errorf("harvest %s: %w", ac, err)
		}
		rep.Actors[ac] = n
		rep.New += n
	}
	return rep, nil
}

// Rebuild recreates the memory index from the Markdown files; progress
// (may be nil) sees (done, total) actor directories. It returns the
// Markdown warnings met (entries skipped, one line each; none from a
// backend without files).
func (a *Assistant) Rebuild(ctx context.Context, progress func(done, total int)) ([]string, error) {
	if progress == nil {
		progress = func(int, int) {}
	}
	if rw, ok := a.memory.(memory.RebuildWarner); ok {
		return rw.RebuildWarn(ctx, progress)
	}
	return nil, a.memory.Rebuild(ctx, progress)
}

// ExportMemory writes every actor's memory as Markdown layer files under
// dir (absolute; cleaned, created, and checked before anything is written:
// exportDir) and returns the cleaned directory and the number of files.
//
// Errors: ErrInvalid naming dir for a path the caller can fix (relative,
// a NUL byte, a file in the way, no permission, the home or its live
// memory directory); the store's and the disk's failures as they are.
func (a *Assistant) ExportMemory(ctx context.Context, dir string) (string, int, error) {
	clean, err := exportDir(a.cfg.Home, dir)
	if err != nil {
		return "", 0, err
	}
	n, err := a.memory.ExportMarkdown(ctx, clean)
	return clean, n, err
}

// ForgetRequest names the actor to forget.
type ForgetRequest struct {
	ActorID string `json:"actor_id"`
	AgentID string `json:"agent_id,omitempty"`
	// Sessions also deletes every session the actor owns.
	Sessions bool `json:"sessions,omitempty"`
}

// ForgetReport is what Forget removed and the proof that nothing is left.
type ForgetReport struct {
	ActorID         string   `json:"actor"`
	SessionsRemoved []string `json:"sessions_removed"`
	JobsRemoved     int      `json:"jobs_removed"`
	ApprovalsDenied int      `json:"approvals_denied"`
	TelegramRows    int      `json:"telegram_rows_removed"`
	// RecordsRemoved and EventsRemoved count the actor's long-term records
	// (every status) and events found before the forget. All counts 0
	// means nothing was stored under this actor ID (a typo, most likely).
	RecordsRemoved int `json:"records_removed"`
	EventsRemoved  int `json:"events_removed"`
	// Remaining counts what the verification found afterwards: records of
	// any status, events, the Markdown directory, jobs, pending approvals
	// and state. Anything but 0 is a failure.
	Remaining int `json:"remaining"`
}

// Forget removes everything of an actor, in an order that keeps anything
// from coming back: extraction first (queued and running jobs can no
// longer write), then events, records of every status, staging,
// rejections, Markdown and index entries, internal state, paused turns and
// pending approvals (denied), scheduled jobs, Telegram updates, pairing
// and chat→session rows, and with Sessions the session trees. It then
// searches every store for the actor and reports what remains.
func (a *Assistant) Forget(ctx context.Context, req ForgetRequest) (ForgetReport, error) {
	rep := ForgetReport{ActorID: req.ActorID, SessionsRemoved: []string{}}
	// An actor stored before IDs refused invisible characters can still be
	// forgotten.
	if err := agent.ValidateStoredID(req.ActorID); err != nil {
		return rep, invalidf("actor %v", err)
	}
	agentID := a.agentID(req.AgentID)
	defer a.actors.lock(req.ActorID)()
	release, err := a.locks.forget(ctx, req.ActorID)
	if err != nil {
		return rep, err
	}
	defer release()
	if rep.RecordsRemoved, rep.EventsRemoved, err = a.stored(ctx, agentID, req.ActorID); err != nil {
		return rep, fmt.Errorf("count what to forget: %w", err)
	}
	if err := a.pipeline.Forget(ctx, req.ActorID); err != nil {
		return rep, fmt.Errorf("forget extraction state: %w", err)
	}
	// The pipeline's forget clears memory for the configured agent and any
	// agent the actor has extraction rows with; another agent is cleared here.
	if agentID != a.cfg.AgentID {
		if err := a.memory.Forget(ctx, agentID, req.ActorID); err != nil {
			return rep, fmt.Errorf("forget memory: %w", err)
		}
	}
	if err := a.state.Forget(ctx, req.ActorID); err != nil {
		return rep, fmt.Errorf("forget state: %w", err)
	}
	if a.bus != nil {
		if err := a.bus.forget(ctx, req.ActorID); err != nil {
			return rep, err
		}
	}
	n, err := a.gate.ForgetActor(ctx, req.ActorID, "forget")
	// Their paused turns are gone, so resume never counts these denials.
	a.metrics.Approvals.WithLabelValues(outcomeDenied).Add(float64(n))
	if err != nil {
		return rep, fmt.Errorf("forget approvals: %w", err)
	}
	rep.ApprovalsDenied = n
	jobs, err := a.scheduler.RemoveActor(ctx, req.ActorID)
	if err != nil {
		return rep, fmt.Errorf("forget jobs: %w", err)
	}
	rep.JobsRemoved = len(jobs)
	if a.tgStore != nil {
		if rep.TelegramRows, err = a.tgStore.ForgetActor(ctx, req.ActorID); err != nil {
			return rep, fmt.Errorf("forget telegram rows: %w", err)
		}
	}
	if req.Sessions {
		if rep.SessionsRemoved, err = a.clearActorSessions(ctx, req.ActorID); err != nil {
			return rep, err
		}
	}
	rep.Remaining, err = a.remaining(ctx, agentID, req.ActorID)
	if err != nil {
		return rep, fmt.Errorf("verify forget: %w", err)
	}
	a.log.Info("actor forgotten", "actor", req.ActorID, "records", rep.RecordsRemoved, "events", rep.EventsRemoved, "sessions", len(rep.SessionsRemoved), "jobs", rep.JobsRemoved,
		"approvals_denied", rep.ApprovalsDenied, "remaining", rep.Remaining)
	return rep, nil
}

// stored counts an actor's records (every status) and events.
func (a *Assistant) stored(ctx context.Context, agentID, actorID string) (records, events int, err error) {
	path, err := actorPath(agentID, actorID)
	if err != nil {
		return 0, 0, err
	}
	recs, err := a.memory.Search(ctx, memory.Query{NamespacePath: path, Statuses: AllStatuses})
	if err != nil {
		return 0, 0, err
	}
	for _, h := range recs {
		if k, _ := h.Record.Metadata["kind"].(string); k != "event" { // a search lists the events too
			records++
		}
	}
	evs, err := a.memory.Events(ctx, actorID, "")
	return records, len(evs), err
}

// Nothing reports whether the forget found nothing at all of the actor.
func (r ForgetReport) Nothing() bool {
	return r.RecordsRemoved == 0 && r.EventsRemoved == 0 && r.JobsRemoved == 0 && len(r.SessionsRemoved) == 0 &&
		r.ApprovalsDenied == 0 && r.TelegramRows == 0
}

// remaining counts what any store still holds of an actor.
func (a *Assistant) remaining(ctx context.Context, agentID, actorID string) (int, error) {
	path, err := actorPath(agentID, actorID)
	if err != nil {
		return 0, err
	}
	left, err := a.memory.Search(ctx, memory.Query{NamespacePath: path, Statuses: AllStatuses})
	if err != nil {
		return 0, err
	}
	evs, err := a.memory.Events(ctx, actorID, "")
	if err != nil {
		return 0, err
	}
	n := len(left) + len(evs)
	if enc, err := markdown.EncodeActor(actorID); err == nil {
		if sq, ok := a.memory.(*sqlitestore.Store); ok {
			if _, err := os.Stat(filepath.Join(sq.MemoryDir(), enc)); err == nil {
				n++
			}
		}
	}
	jobs, err := a.scheduler.List(ctx, schedule.Filter{ActorID: actorID})
	if err != nil {
		return 0, err
	}
	n += len(jobs)
	pend, err := a.gate.Pending(ctx)
	if err != nil {
		return 0, err
	}
	for _, r := range pend {
		if r.ActorID == actorID {
			n++
		}
	}
	actors, err := a.state.Actors(ctx)
	if err != nil {
		return 0, err
	}
	for _, s := range actors {
		if s == actorID {
			n++
		}
	}
	return n, nil
}

// clearActorSessions removes every session the actor owns, on every
// channel and agent, and returns their keys ("<agent>/<channel>:<id>").
func (a *Assistant) clearActorSessions(ctx context.Context, actorID string) ([]string, error) {
	keys, err := a.sessions.List(ctx, "")
	if err != nil {
		return nil, err
	}
	removed := []string{}
	for _, k := range keys {
		if !agent.OwnsSession(k, actorID) {
			continue
		}
		if err := a.sessions.Clear(ctx, k); err != nil && !errors.Is(err, session.ErrNotFound) {
			return removed, fmt.Errorf("clear session %s: %w", k.String(), err)
		}
		removed = append(removed, k.AgentID+"/"+k.String())
	}
	return removed, nil
}
