package agent

import (
	"context"
	"encoding/json"
)

// ToolEvent is one step of a tool call as a turn runs it, for live
// displays (the dashboard's chat): Phase "call" before the call (Args
// set), then "result" (Result and IsError set) or "pending" when the call
// waits at the approval gate (RequestID set).
type ToolEvent struct {
	Phase     string          `json:"phase"` // call | result | pending
	ID        string          `json:"id"`    // the model's tool_use id
	Name      string          `json:"name"`
	Args      json.RawMessage `json:"args,omitempty"`
	Result    string          `json:"result,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	RequestID string          `json:"request_id,omitempty"`
}

type toolEventsKey struct{}

// WithToolEvents returns a context whose turns report each tool call to f
// as it starts and ends. f is called from the turn's goroutine.
func WithToolEvents(ctx context.Context, f func(ToolEvent)) context.Context {
	return context.WithValue(ctx, toolEventsKey{}, f)
}

func toolEvent(ctx context.Context, ev ToolEvent) {
	if f, _ := ctx.Value(toolEventsKey{}).(func(ToolEvent)); f != nil {
		f(ev)
	}
}
