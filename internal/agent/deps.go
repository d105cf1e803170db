package agent

import (
	"context"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool"
)

// Models answers model requests; *model.Router implements it. vision
// selects VISION_MODEL_ID. It returns model.ErrNotConfigured when no model
// is set and a wrapped model.ErrContextOverflow when the prompt is too long.
type Models interface {
	Generate(ctx context.Context, req *model.Request, vision bool) (*model.Response, error)
}

// StateTracker is the internal-state engine (SPEC §6.1–6.2) as the turn
// sees it; *state.Engine implements it.
type StateTracker interface {
	// Level is the actor's breaker level now (decay applied): state.Normal,
	// state.Warning or state.Critical. On error the turn assumes Normal.
	Level(ctx context.Context, actorID string) (state.Level, error)
	// Observe classifies the user's message text and applies it to the
	// actor's state. turn is the turn number recorded as the cause; the
	// agent passes 0, letting the engine use its own per-actor count. The
	// Event says what changed; the agent only logs the error.
	Observe(ctx context.Context, actorID string, turn int, text string) (state.Event, error)
}

// Gate is the approval gate (SPEC §6.3) as the turn sees it;
// *approval.Gate implements it. Without a gate only read-class tools are
// offered and run.
type Gate interface {
	// Effective is the rule for a tool of this class at this breaker level
	// now, with its reason. The tool is offered to the model iff the rule
	// is not approval.RuleNever.
	Effective(name string, class tool.Class, level state.Level) (approval.Rule, string)
	// Check decides one call. c.Resume is the serialised paused turn
	// (JSON), which the gate keeps with an approval.Ask request so the
	// turn can continue after a restart (see Agent.Resume). An Allow
	// decision carries the execution handle (Decision.Exec) for
	// RecordResult; Ask carries the pending Request (ID, ExpiresAt). The
	// error is for invalid calls and I/O: the tool then does not run.
	Check(ctx context.Context, c approval.Call, level state.Level) (approval.Decision, error)
	// Authorize verifies that requestID was approved for exactly this
	// call (every binding, at the current level), consumes it and returns
	// the execution handle; an error when anything differs.
	Authorize(ctx context.Context, requestID string, c approval.Call, level state.Level) (approval.Exec, error)
	// RecordResult appends the outcome of a tool run started by Check or
	// Authorize. The agent never passes a zero Exec.
	RecordResult(ctx context.Context, ex approval.Exec, output string, runErr error) error
}

// The production collaborators satisfy the interfaces as they are.
var (
	_ Gate         = (*approval.Gate)(nil)
	_ StateTracker = (*state.Engine)(nil)
)

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
	// RenderMemory renders retrieved hits as the prompt's memory block;
	// nil means memory.RenderBlock, the production renderer. The agent
	// hands it hits already filtered and ranked by memory.Assemble and
	// fits its output to the block's budget with memory.FitBlock (the
	// longest prefix of the ranked hits that fits).
	RenderMemory func([]memory.Hit) string
	// HitsAssembled says the Retriever's hits are memory.Assemble's output
	// already (memory.Retrieval's are): the default memory block then fits
	// and renders them without filtering them again. Ignored with
	// RenderMemory set.
	HitsAssembled bool
	// State supplies the breaker level; nil means always state.Normal.
	State StateTracker
	// Gate decides every tool call; nil offers and runs read tools only.
	Gate  Gate
	Tools []tool.Tool
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
