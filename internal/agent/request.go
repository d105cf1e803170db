package agent

import (
	"context"
	"errors"
	"time"
)

// Image is an inbound image: raw bytes and their media type.
type Image struct {
	Data      []byte `json:"data"` // base64 in JSON
	MediaType string `json:"media_type"`
}

// Request is one inbound turn, from any channel.
type Request struct {
	Message        string         `json:"message"`
	ActorID        string         `json:"actor_id"`             // e.g. "telegram:12345"
	SessionID      string         `json:"session_id,omitempty"` // default: derived from the actor
	Channel        string         `json:"channel"`              // api | telegram | web | cron | cli
	ChatType       string         `json:"chat_type,omitempty"`  // dm | group (context overrides)
	InvocationType string         `json:"invocation_type"`      // api | webhook | cron
	Images         []Image        `json:"images,omitempty"`
	Metadata       map[string]any `json:"metadata,omitempty"`
}

// Result is a completed (or paused) turn.
type Result struct {
	Text      string `json:"text"`
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
	// MemoriesUsed counts the memory records in the turn's prompt: those
	// retrieved, less what the block's filter dropped (echoes, duplicates,
	// contentless lines, conflicts) and what its token budget cut.
	MemoriesUsed int    `json:"memories_used"`
	Model        string `json:"model,omitempty"`
	// PendingApproval is set when the turn paused at the approval gate.
	PendingApproval *PendingApproval `json:"pending_approval,omitempty"`
	Metadata        map[string]any   `json:"metadata,omitempty"`
	// ModelTime is the wall time the turn spent in model calls, retries
	// included: the provider's share of the turn's latency. POST
	// /invocations reports it in its Server-Timing header.
	ModelTime time.Duration `json:"-"`
}

// PendingApproval describes a paused tool call awaiting a decision.
type PendingApproval struct {
	RequestID string `json:"request_id"`
	ToolName  string `json:"tool_name"`
	// Args is the call's arguments in RFC 8785 canonical form
	// (approval.Request.Args): the bytes whose SHA-256 is the args hash.
	Args      string `json:"args"`
	ExpiresAt int64  `json:"expires_at"` // unix seconds
	// Status is "" while a turn waits behind the request, then the
	// request's approval.Status once it no longer waits for a decision
	// ("approved", "executed", "denied", "expired", "invalidated",
	// "rejected"), or "closed" when the ledger no longer holds it.
	Status string `json:"status,omitempty"`
}

// Invoker runs turns. Channels and the scheduler depend on this interface,
// never on the concrete agent.
type Invoker interface {
	Invoke(ctx context.Context, req Request) (*Result, error)
}

// Errors callers branch on. They map to the HTTP error codes of SPEC §1.
var (
	ErrInvalidRequest  = errors.New("INVALID_REQUEST")
	ErrInvalidActorID  = errors.New("INVALID_ACTOR_ID")
	ErrApprovalPending = errors.New("APPROVAL_PENDING")
	// ErrNotReady: a dependency of the turn (a database, the approval
	// ledger, a lock) is gone and could not be re-established, or the
	// process is shutting down; the turn did not run and may be sent
	// again. Code NOT_READY (HTTP 503).
	ErrNotReady = errors.New("not ready")
	// ErrForbidden: the session belongs to another actor.
	ErrForbidden = errors.New("FORBIDDEN")
	// ErrActorForgotten: the actor was forgotten while the message waited
	// behind an earlier one of its session; it was not run, so nothing of
	// it outlives the forget. Sent again, it starts afresh. Code
	// ACTOR_FORGOTTEN (HTTP 409).
	ErrActorForgotten = errors.New("actor forgotten")
)
