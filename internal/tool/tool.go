// Package tool defines the Tool interface, tool classes and the registry the
// agent draws its tool set from.
package tool

import (
	"context"
	"encoding/json"
)

// Class is a tool's risk class; it picks the default approval rule
// (SPEC §6.3): read → always, write → ask, exec → never (ask when enabled).
type Class string

const (
	ClassRead  Class = "read"
	ClassWrite Class = "write"
	ClassExec  Class = "exec"
)

// Call is one invocation of a tool by the model on behalf of an actor.
type Call struct {
	AgentID   string
	ActorID   string
	SessionID string
	Channel   string
	Args      json.RawMessage // the JSON object the model produced
}

// Tool is something the model can call.
type Tool interface {
	Name() string
	Description() string
	// Schema is the JSON Schema (type "object") of the arguments.
	Schema() json.RawMessage
	Class() Class
	// Run executes the call. A returned error is sent back to the model as
	// an error tool_result; it never fails the turn.
	Run(ctx context.Context, call Call) (string, error)
}
