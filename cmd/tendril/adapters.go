package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/model"
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

// Observe records the stimulus with the actor's next turn number (turn 0
// asks the engine for its own per-actor count), so every change names its
// turn.
func (s stateAdapter) Observe(ctx context.Context, actorID, _ string, text string) error {
	_, err := s.e.Observe(ctx, actorID, 0, text)
	return err
}

// gateAdapter presents the approval gate as agent.Gate.
//
// The paused turn (conversation, system prompt with the memory block) is
// kept out of the append-only ledger, which can never forget: it is written
// to resumeDir/<sha256>.json and the ledger stores only {"ref": sha256}.
// The file is deleted when the turn resumes or its actor is forgotten.
type gateAdapter struct {
	g         *approval.Gate
	resumeDir string
}

type resumeRef struct {
	Ref string `json:"ref"`
}

func (a gateAdapter) call(c agent.GateCall, resume json.RawMessage) approval.Call {
	return approval.Call{AgentID: c.AgentID, ActorID: c.ActorID, SessionID: c.SessionID, Channel: c.Channel,
		Tool: c.Tool, Class: c.Class, Args: c.Args, Resume: resume}
}

// storeResume writes the payload beside the ledger and returns its reference.
func (a gateAdapter) storeResume(payload json.RawMessage) (json.RawMessage, error) {
	if len(payload) == 0 {
		return nil, nil
	}
	sum := sha256.Sum256(payload)
	ref := hex.EncodeToString(sum[:])
	if err := os.MkdirAll(a.resumeDir, 0o700); err != nil {
		return nil, err
	}
	tmp := filepath.Join(a.resumeDir, ref+".tmp")
	if err := os.WriteFile(tmp, payload, 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, filepath.Join(a.resumeDir, ref+".json")); err != nil {
		return nil, err
	}
	return json.Marshal(resumeRef{Ref: ref})
}

// loadResume returns the payload a ledger reference points to.
func (a gateAdapter) loadResume(stored json.RawMessage) (json.RawMessage, string, error) {
	var r resumeRef
	if err := json.Unmarshal(stored, &r); err != nil || len(r.Ref) != 64 {
		return nil, "", fmt.Errorf("approval resume reference is malformed")
	}
	if _, err := hex.DecodeString(r.Ref); err != nil {
		return nil, "", fmt.Errorf("approval resume reference is malformed")
	}
	b, err := os.ReadFile(filepath.Join(a.resumeDir, r.Ref+".json"))
	return b, r.Ref, err
}

func (a gateAdapter) dropResume(ref string) {
	if len(ref) == 64 {
		os.Remove(filepath.Join(a.resumeDir, ref+".json"))
	}
}

func (a gateAdapter) Visible(name string, class tool.Class, level agent.Level) bool {
	rule, _ := a.g.Effective(name, class, stateLevel(level))
	return rule != approval.RuleNever
}

func (a gateAdapter) Check(ctx context.Context, c agent.GateCall, level agent.Level, resume json.RawMessage) (agent.GateDecision, error) {
	ref, err := a.storeResume(resume)
	if err != nil {
		return agent.GateDecision{}, fmt.Errorf("store paused turn: %w", err)
	}
	d, err := a.g.Check(ctx, a.call(c, ref), stateLevel(level))
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

// The router streams text deltas to SSE clients.
var _ agent.StreamModels = (*model.Router)(nil)
