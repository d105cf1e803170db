package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool"
)

// stateAdapter presents the state engine as agent.StateTracker.
type stateAdapter struct{ e *state.Engine }

func agentLevel(l state.Level) agent.Level {
	switch l {
	case state.Warning:
		return agent.LevelWarning
	case state.Critical:
		return agent.LevelCritical
	}
	return agent.LevelNormal
}

func stateLevel(l agent.Level) state.Level {
	switch l {
	case agent.LevelWarning:
		return state.Warning
	case agent.LevelCritical:
		return state.Critical
	}
	return state.Normal
}

func (s stateAdapter) Level(ctx context.Context, actorID string) (agent.Level, error) {
	l, err := s.e.Level(ctx, actorID)
	return agentLevel(l), err
}

// Observe records the stimulus with the actor's next turn number (the
// engine's own per-actor count), so every change names its turn.
func (s stateAdapter) Observe(ctx context.Context, actorID, _ string, text string) error {
	snap, err := s.e.Snapshot(ctx, actorID)
	if err != nil {
		return err
	}
	_, err = s.e.Observe(ctx, actorID, snap.Turns+1, text)
	return err
}

// gateAdapter presents the approval gate as agent.Gate.
type gateAdapter struct{ g *approval.Gate }

func (a gateAdapter) call(c agent.GateCall, resume json.RawMessage) approval.Call {
	return approval.Call{AgentID: c.AgentID, ActorID: c.ActorID, SessionID: c.SessionID, Channel: c.Channel,
		Tool: c.Tool, Class: c.Class, Args: c.Args, Resume: resume}
}

func (a gateAdapter) Visible(name string, class tool.Class, level agent.Level) bool {
	rule, _ := a.g.Effective(name, class, stateLevel(level))
	return rule != approval.RuleNever
}

func (a gateAdapter) Check(ctx context.Context, c agent.GateCall, level agent.Level, resume json.RawMessage) (agent.GateDecision, error) {
	d, err := a.g.Check(ctx, a.call(c, resume), stateLevel(level))
	if err != nil {
		return agent.GateDecision{}, err
	}
	out := agent.GateDecision{Reason: d.Reason}
	switch d.Verdict {
	case approval.Allow:
		out.Verdict = agent.Allow
		if d.Exec != nil {
			out.Exec = *d.Exec
		}
	case approval.Ask:
		out.Verdict = agent.Ask
		if d.Request == nil {
			return agent.GateDecision{}, fmt.Errorf("approval gate asked without a request")
		}
		out.RequestID, out.ExpiresAt = d.Request.ID, d.Request.ExpiresAt
	default:
		out.Verdict = agent.Deny
	}
	return out, nil
}

func (a gateAdapter) Authorize(ctx context.Context, requestID string, c agent.GateCall, level agent.Level) (any, error) {
	ex, err := a.g.Authorize(ctx, requestID, a.call(c, nil), stateLevel(level))
	if err != nil {
		return nil, err
	}
	return ex, nil
}

func (a gateAdapter) RecordExecution(ctx context.Context, exec any, output string, runErr error) error {
	ex, ok := exec.(approval.Exec)
	if !ok {
		return nil // nothing was recorded at start (no gate decision)
	}
	return a.g.RecordResult(ctx, ex, output, runErr)
}

// approvalExpiry bounds the wait for a resumed turn.
const resumeTimeout = 5 * time.Minute

// standingRetriever puts the actor's explicit standing records (user
// preferences and procedural instructions) into every turn's memory, ahead
// of the query-ranked hits. Keyword search alone would miss "I only use
// organic fertiliser" when the user asks about aphids, yet that preference
// is exactly what the answer must respect (the seed's fertiliser example).
// They are few per user (consolidation supersedes contradictions), and the
// list is capped with everything else by memory.Assemble.
type standingRetriever struct {
	store   memory.Store
	ranked  memory.Retriever
	agentID string
	topK    int
}

func (s standingRetriever) Recall(ctx context.Context, agentID, actorID, query string) ([]memory.Hit, error) {
	ns, err := memory.Namespace(memory.DefaultLongTermTemplate, memory.NamespaceVars{AgentID: agentID, ActorID: actorID})
	if err != nil {
		return nil, err
	}
	standing, err := s.store.Search(ctx, memory.Query{NamespacePath: ns, TopK: s.topK,
		Strategies: []memory.Strategy{memory.StrategyUserPreference, memory.StrategyProcedural}})
	if err != nil {
		return nil, err
	}
	ranked, err := s.ranked.Recall(ctx, agentID, actorID, query)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []memory.Hit
	for _, h := range append(standing, ranked...) {
		if seen[h.Record.ID] {
			continue
		}
		seen[h.Record.ID] = true
		if h.Explain == "" {
			h.Explain = "standing explicit record"
		}
		out = append(out, h)
	}
	return memory.Assemble(out, s.topK), nil
}
