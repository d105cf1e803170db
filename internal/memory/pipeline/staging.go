package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/extract"
	"github.com/tendrilai/tendril/internal/memory/gate"
)

// ErrNotStaged is returned by Approve and Reject for a record that is not
// waiting in staging.
var ErrNotStaged = errors.New("memory: record is not staged")

// scopePath is the namespace path of an agent's actor (or of all its actors
// when actorID is ""), assuming templates that start /{agentId}/{actorId}/
// as the defaults do.
func scopePath(agentID, actorID string) string {
	if actorID == "" {
		return "/" + memory.EscapeSegment(agentID) + "/"
	}
	return "/" + memory.EscapeSegment(agentID) + "/" + memory.EscapeSegment(actorID) + "/"
}

// Staged lists the records waiting in staging for an actor ("" = every
// actor), oldest first, across Options.AgentID and every agent the actor
// has recorded turns with.
func (p *Pipeline) Staged(ctx context.Context, actorID string) ([]memory.Record, error) {
	agents, err := p.q.agentsOf(ctx, actorID)
	if err != nil {
		return nil, fmt.Errorf("staged: %w", err)
	}
	agents = unionStrings([]string{p.opts.AgentID}, agents)
	var out []memory.Record
	seen := map[string]bool{}
	for _, ag := range agents {
		recs, err := p.listQuery(ctx, memory.Query{NamespacePath: scopePath(ag, actorID),
			Statuses: []memory.Status{memory.StatusStaged}, TopK: p.opts.ListLimit})
		if err != nil {
			return nil, fmt.Errorf("staged %s/%s: %w", ag, actorID, err)
		}
		for _, r := range recs {
			if r.Status == memory.StatusStaged && !isEvent(r) && !seen[r.ID] {
				seen[r.ID] = true
				out = append(out, r)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

func (p *Pipeline) getStaged(ctx context.Context, id string) (memory.Record, error) {
	if err := validID("record", id); err != nil {
		return memory.Record{}, err
	}
	r, err := p.store.Get(ctx, id)
	if err != nil {
		return memory.Record{}, err // the store's error names the ID: `get "id": …`
	}
	if r.Status != memory.StatusStaged {
		return memory.Record{}, fmt.Errorf("%w: %s is %s", ErrNotStaged, id, r.Status)
	}
	return r, nil
}

// Approve makes a staged record active; like a stored candidate it then
// supersedes the active records on its topic. It returns the record.
//
// It takes the actor's extraction lock and, like an extraction's write,
// advances the actor's consolidation generation in the job database's
// transaction (advanceConsolidationGen): an extraction in another process
// that listed the records before this approval starts over instead of
// writing from its stale listing, and an approval whose own listing was
// outdated meanwhile starts over itself.
func (p *Pipeline) Approve(ctx context.Context, id string) (memory.Record, error) {
	r, err := p.getStaged(ctx, id)
	if err != nil {
		return memory.Record{}, err
	}
	agentID, actorID, ok := memory.NamespaceActor(r.Namespace)
	if !ok {
		return memory.Record{}, fmt.Errorf("approve %s: namespace %q names no actor", id, r.Namespace)
	}
	mu := p.actorLock(agentID, actorID)
	mu.Lock()
	defer mu.Unlock()
	for attempt := 0; ; attempt++ {
		put, err := p.approveOnce(ctx, id, actorID)
		if !errors.Is(err, errConsolidationRace) || attempt == maxConsolidationRetries {
			return put, err
		}
	}
}

func (p *Pipeline) approveOnce(ctx context.Context, id, actorID string) (memory.Record, error) {
	gen, err := consolidationGenOf(ctx, p.q.db(), actorID)
	if err != nil {
		return memory.Record{}, fmt.Errorf("consolidation generation of %s: %w", actorID, err)
	}
	r, err := p.getStaged(ctx, id)
	if err != nil {
		return memory.Record{}, err
	}
	now := p.opts.Now().UTC()
	r.Status = memory.StatusActive
	r.UpdatedAt = now
	existing, err := p.list(ctx, r.Namespace)
	if err != nil {
		return memory.Record{}, err
	}
	old := contradicted(r, existing)
	if len(old) > 0 {
		r.Metadata = mergeMeta(r.Metadata, nil)
		var ids []string
		for _, o := range old {
			ids = append(ids, o.ID)
		}
		r.Metadata[keySupersedes] = unionStrings(stringsMeta(r.Metadata[keySupersedes]), ids)
	}
	var put memory.Record
	err = p.q.tx(ctx, actorID, func(tx txn) error {
		if err := advanceConsolidationGen(ctx, tx, actorID, gen); err != nil {
			return err
		}
		var err error
		if put, err = p.store.Put(ctx, r); err != nil {
			return fmt.Errorf("approve %s: %w", id, err)
		}
		_, err = p.supersede(ctx, direct{p.store}, put, old, now)
		return err
	})
	return put, err
}

func stringsMeta(v any) []string {
	switch x := v.(type) {
	case []string:
		return x
	case string:
		return []string{x}
	}
	return nil
}

// Reject marks a staged record rejected and remembers its content hash for
// the actor (memory.ContentHash), so that it is never proposed again.
func (p *Pipeline) Reject(ctx context.Context, id string) error {
	r, err := p.getStaged(ctx, id)
	if err != nil {
		return err
	}
	_, actorID, ok := memory.NamespaceActor(r.Namespace)
	if !ok {
		return fmt.Errorf("reject %s: namespace %q names no actor", id, r.Namespace)
	}
	// Remember first: a crash after this leaves a staged record that can be
	// rejected again, never a rejected one whose hash is forgotten.
	if err := p.markRejected(ctx, actorID, r.Content); err != nil {
		return fmt.Errorf("reject %s: remember hash: %w", id, err)
	}
	r.Status = memory.StatusRejected
	r.UpdatedAt = p.opts.Now().UTC()
	if _, err := p.store.Put(ctx, r); err != nil {
		return fmt.Errorf("reject %s: %w", id, err)
	}
	return nil
}

// WriteResult is the outcome of WriteEpisodic.
type WriteResult struct {
	Outcome Outcome       `json:"outcome"` // dropped, rejected, merged, staged or stored
	Score   float64       `json:"score"`   // gate score in [0,1]
	Record  memory.Record `json:"record"`  // zero when dropped or rejected
}

// WriteEpisodic is the memory_write tool: it writes text to the episodic
// layer only (strategy episodic, the session's episodic namespace), through
// the importance gate like every other candidate. Text must be 1 to
// MaxWriteBytes bytes of UTF-8.
func (p *Pipeline) WriteEpisodic(ctx context.Context, agentID, actorID, sessionID, text string) (WriteResult, error) {
	if err := validSession(agentID, actorID, sessionID); err != nil {
		return WriteResult{}, err
	}
	text, _ = memory.Redact(strings.TrimSpace(text))
	if text == "" || len(text) > MaxWriteBytes || !utf8.ValidString(text) {
		return WriteResult{}, fmt.Errorf("%w: memory_write text must be 1..%d bytes of UTF-8", ErrInvalid, MaxWriteBytes)
	}
	ns, err := p.episodic(agentID, actorID, sessionID)
	if err != nil {
		return WriteResult{}, err
	}
	md, ents := extract.Annotate(text)
	c := extract.Candidate{Strategy: memory.StrategyEpisodic, Content: text, Metadata: md, Evidence: text,
		Role: "assistant", Entities: ents, Time: p.opts.Now().UTC()}
	existing, err := p.list(ctx, ns)
	if err != nil {
		return WriteResult{}, err
	}
	r, err := p.consolidate(ctx, actorID, ns, c, existing, direct{p.store})
	if err != nil {
		return WriteResult{}, fmt.Errorf("memory_write: %w", err)
	}
	return WriteResult{Outcome: r.Outcome, Score: r.Score, Record: r.Record}, nil
}

// Harvest distils the actor's episodic layer — events and memory_write
// notes newer than the last harvest — into long-term records with
// Options.HarvestExtractor (rules by default, an LLM when configured),
// through the gate and consolidation. Notes are read as the assistant's
// words, so only third-person "the user …" statements in them count. n
// counts new records, stored or staged; duplicates of what turn extraction
// already wrote merge and are not counted. It is safe to run repeatedly.
// A Harvest overtaken by Forget of the actor writes nothing and returns 0,
// nil.
func (p *Pipeline) Harvest(ctx context.Context, agentID, actorID string) (n int, err error) {
	if err := validID("agent", agentID); err != nil {
		return 0, err
	}
	if err := validID("actor", actorID); err != nil {
		return 0, err
	}
	epoch, err := p.q.epoch(ctx, actorID)
	if err != nil {
		return 0, fmt.Errorf("harvest: %w", err)
	}
	ctx, done := p.track(ctx, actorID)
	defer done()
	defer func() {
		if errors.Is(context.Cause(ctx), errForgotten) {
			n, err = 0, nil // forgotten meanwhile: nothing was written
		}
	}()
	since, err := p.q.harvestCursor(ctx, agentID, actorID)
	if err != nil {
		return 0, fmt.Errorf("harvest cursor: %w", err)
	}
	events, err := p.store.Events(ctx, actorID, "")
	if err != nil {
		return 0, fmt.Errorf("harvest events: %w", err)
	}
	var batch []memory.Event
	latest := since
	for _, ev := range events {
		if ev.Timestamp.After(since) {
			batch = append(batch, ev)
			if ev.Timestamp.After(latest) {
				latest = ev.Timestamp
			}
		}
	}
	root, err := memory.Namespace(memory.EpisodicRootTemplate, memory.NamespaceVars{AgentID: agentID, ActorID: actorID})
	if err != nil {
		return 0, err
	}
	notes, err := p.listQuery(ctx, memory.Query{NamespacePath: root, Strategies: []memory.Strategy{memory.StrategyEpisodic},
		Statuses: []memory.Status{memory.StatusActive}, TopK: p.opts.ListLimit})
	if err != nil {
		return 0, fmt.Errorf("harvest notes: %w", err)
	}
	for _, r := range notes {
		if isEvent(r) {
			continue // read above as an event
		}
		at := r.CreatedAt
		if t, ok := timeMeta(r.Metadata[keyStatedAt]); ok {
			at = t
		}
		if !at.After(since) {
			continue
		}
		// Notes are read as the assistant's words: only "the user …" statements count.
		batch = append(batch, memory.Event{ID: r.ID, ActorID: actorID, Role: "assistant", Text: r.Content, Timestamp: at})
		if at.After(latest) {
			latest = at
		}
	}
	if len(batch) == 0 {
		return 0, nil
	}
	sort.SliceStable(batch, func(i, j int) bool { return batch[i].Timestamp.Before(batch[j].Timestamp) })
	cands, err := p.opts.HarvestExtractor.Extract(ctx, batch)
	if err != nil {
		return 0, fmt.Errorf("harvest extract: %w", err)
	}
	ns, err := p.longTerm(agentID, actorID)
	if err != nil {
		return 0, err
	}
	existing, err := p.list(ctx, ns)
	if err != nil {
		return 0, err
	}
	b := newBatch()
	res, err := p.consolidateInto(ctx, actorID, ns, cands, existing, b)
	if err != nil {
		return 0, fmt.Errorf("harvest: %w", err)
	}
	err = p.q.guard(ctx, actorID, epoch, func(tx txn) error {
		if err := b.flush(ctx, p.store); err != nil {
			return err
		}
		if err := setHarvestCursorTx(ctx, tx, agentID, actorID, latest); err != nil {
			return fmt.Errorf("harvest cursor: %w", err)
		}
		return nil
	})
	if errors.Is(err, errForgotten) {
		return 0, nil // forgotten meanwhile: nothing was written
	}
	if err != nil {
		return 0, fmt.Errorf("harvest: %w", err)
	}
	for _, r := range res {
		if r.Outcome == OutcomeStored || r.Outcome == OutcomeStaged {
			n++
		}
	}
	return n, nil
}

// Forget forgets actorID as far as memory goes, at once: when it returns
// nil, the actor has no waiting, finished or discarded extraction jobs
// (one running is dropped by its worker, row and all), session
// cursors, harvest position or rejection hashes in the job database, and
// memory.Store.Forget has removed the actor's events, records of every
// status (staged ones included), rejection hashes kept by the store,
// Markdown and index entries — for Options.AgentID and every agent the
// actor has pipeline rows with (the embedded store forgets the actor under
// every agent anyway). Calling memory.Store.Forget as well, before or
// after, is harmless.
//
// No extraction, Flush or Harvest that began before Forget writes anything
// for the actor afterwards, in this process or another one sharing the job
// database: Forget advances the actor's forget epoch in the transaction
// that deletes the rows and forgets the store, and every such write
// commits only inside a write transaction of the job database that finds
// the epoch unchanged. Forget does not wait for an extraction in progress
// (an LLM call may take long): it cancels those of this process, whose
// writes would be refused in any case, and the job is dropped.
//
// It fails with ErrInvalid for a bad actor ID, or with the database's or
// the store's error, in which case the job database is unchanged (records
// the store already removed stay removed) and Forget may be retried.
func (p *Pipeline) Forget(ctx context.Context, actorID string) error {
	if err := validID("actor", actorID); err != nil {
		return err
	}
	err := p.q.forget(ctx, actorID, func(agents []string) error {
		for _, ag := range unionStrings([]string{p.opts.AgentID}, agents) {
			if err := p.store.Forget(ctx, ag, actorID); err != nil {
				return fmt.Errorf("forget memory of %s/%s: %w", ag, actorID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("memory pipeline: forget %s: %w", actorID, err)
	}
	p.cancelFlights(actorID)
	return nil
}

// Gate exposes the thresholds in use, for the CLI and the dashboard.
func (p *Pipeline) Gate() gate.Thresholds { return p.opts.Thresholds }

// Describe is a short phrase for the memory_write tool's reply: "stored",
// "staged for review (importance 0.55)", "dropped (importance 0.21)",
// "already remembered" or "rejected earlier by the user".
func (r WriteResult) Describe() string {
	switch r.Outcome {
	case OutcomeStored:
		return "stored"
	case OutcomeStaged:
		return fmt.Sprintf("staged for review (importance %.2f)", r.Score)
	case OutcomeMerged:
		return "already remembered"
	case OutcomeRejected:
		return "rejected earlier by the user"
	default:
		return fmt.Sprintf("dropped (importance %.2f)", r.Score)
	}
}
