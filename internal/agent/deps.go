package agent

import (
	"context"
	"encoding/json"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/tool"
)

// Models answers model requests; *model.Router implements it. vision
// selects VISION_MODEL_ID. It returns model.ErrNotConfigured when no model
// is set and a wrapped model.ErrContextOverflow when the prompt is too long.
type Models interface {
	Generate(ctx context.Context, req *model.Request, vision bool) (*model.Response, error)
}

// Level is the circuit-breaker level of SPEC §6.2.
type Level string

const (
	LevelNormal   Level = "NORMAL"
	LevelWarning  Level = "WARNING"
	LevelCritical Level = "CRITICAL"
)

// StateTracker is the internal-state engine as the turn sees it.
type StateTracker interface {
	// Level is the breaker level for the actor now (decay applied).
	Level(ctx context.Context, actorID string) (Level, error)
	// Observe classifies the user's message and updates state, recording
	// the cause (turn ID).
	Observe(ctx context.Context, actorID, turnID, text string) error
}

// Verdict of the approval gate for one tool call.
type Verdict string

const (
	Allow Verdict = "allow"
	Ask   Verdict = "ask"
	Deny  Verdict = "deny"
)

// GateCall is one tool call presented to the gate.
type GateCall struct {
	AgentID   string
	ActorID   string
	SessionID string
	Channel   string
	Tool      string
	Class     tool.Class
	Args      json.RawMessage
}

// GateDecision is the gate's answer. For Ask, RequestID names the pending
// approval request and ExpiresAt its deadline. For Allow, Exec is the
// gate's handle on the recorded execution start, passed back to
// RecordExecution.
type GateDecision struct {
	Verdict   Verdict
	Reason    string
	RequestID string
	ExpiresAt time.Time
	Exec      any
}

// Gate is the approval gate (SPEC §6.3) as the turn sees it.
type Gate interface {
	// Visible reports whether a tool may be offered to the model at this
	// breaker level (rule "never" and breaker removals hide it).
	Visible(name string, class tool.Class, level Level) bool
	// Check decides a call. For Ask it persists a pending request carrying
	// resume, the opaque state needed to continue the turn after a restart.
	Check(ctx context.Context, call GateCall, level Level, resume json.RawMessage) (GateDecision, error)
	// Authorize verifies that requestID was approved for exactly this call
	// (every binding, at the current level) and consumes it. It returns the
	// execution handle, or an error when anything differs.
	Authorize(ctx context.Context, requestID string, call GateCall, level Level) (exec any, err error)
	// RecordExecution appends the outcome of a tool run to the ledger.
	RecordExecution(ctx context.Context, exec any, output string, execErr error) error
}

// Persona is the system prompt's fixed part.
type Persona struct {
	Text    string   // persona.md
	Anchors []string // identity anchors, re-injected when the breaker trips
}

// Deliverer sends a reply on a channel outside the request that started it,
// e.g. a turn resumed after an approval. chatID comes from Request.Metadata.
type Deliverer interface {
	Deliver(ctx context.Context, channel, actorID string, metadata map[string]any, text string) error
}

// HistoryFunc builds the model context for a session (SPEC §3 context
// building): nodes oldest first, already limited and repaired.
type HistoryFunc func(ctx context.Context, key session.Key, chatType string) ([]session.Node, error)

// CompactFunc compacts a session (SPEC §3 auto-compaction).
type CompactFunc func(ctx context.Context, key session.Key) error

// Deps are the agent's collaborators. Only Sessions is required; a nil
// dependency disables its stage (no memory, no state, no tools...).
type Deps struct {
	Models    Models
	Sessions  session.Store
	History   HistoryFunc
	Compact   CompactFunc
	Retriever memory.Retriever
	Recorder  memory.Recorder
	// RenderMemory renders retrieved hits as the prompt's memory block.
	RenderMemory func([]memory.Hit) string
	State        StateTracker
	Gate         Gate
	Tools        []tool.Tool
	// ToolSource, when set, supplies the tools per turn instead of Tools
	// (MCP servers are re-checked, and restarted lazily, each turn).
	ToolSource func(ctx context.Context) []tool.Tool
	Persona    Persona
	// Skills is the prompt section listing the active skills.
	Skills    string
	Deliverer Deliverer
	Media     MediaStore
}

// MediaStore keeps inbound image bytes so session nodes hold references.
type MediaStore interface {
	Put(ctx context.Context, mediaType string, data []byte) (ref string, err error)
}
