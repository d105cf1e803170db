package approval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool"
)

// The agent's side of one gated tool call, and the operator's approval.
func Example() {
	dir, _ := os.MkdirTemp("", "gate")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	gate, _ := approval.Open(dir, approval.Options{})
	defer gate.Close()
	gate.OnDecision(func(r approval.Request, approved bool) {
		fmt.Println("decision seen:", r.Tool, approved)
	})

	call := approval.Call{AgentID: "main", ActorID: "telegram:1", SessionID: "s1", Channel: "telegram",
		Tool: "notes_write", Class: tool.ClassWrite, Args: json.RawMessage(`{"title":"basil","body":"water"}`),
		Resume: json.RawMessage(`{"turn":"t1"}`)}
	d, _ := gate.Check(ctx, call, state.Normal)
	fmt.Println(d.Verdict, d.Reason)

	// The operator approves (CLI, Telegram button or dashboard).
	gate.Decide(ctx, d.Request.ID, true, "cli:alice")

	// The agent resumes: Authorize checks every binding and consumes the id.
	ex, err := gate.Authorize(ctx, d.Request.ID, call, state.Normal)
	fmt.Println("authorized:", err == nil)
	gate.RecordResult(ctx, ex, "saved", nil)

	_, err = gate.Authorize(ctx, d.Request.ID, call, state.Normal)
	fmt.Println("replay:", err != nil)
	// Output:
	// ask default rule for write tools
	// decision seen: notes_write true
	// authorized: true
	// replay: true
}
