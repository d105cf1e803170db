// Package memory holds long-term memory (SPEC §4): short-term events,
// long-term records in namespaces, filters, retrieval and assembly.
package memory

import (
	"context"
	"time"
)

// Strategy is the kind of a long-term record.
type Strategy string

const (
	StrategyUserPreference Strategy = "user_preference"
	StrategySemantic       Strategy = "semantic"
	StrategySummary        Strategy = "summary"
	StrategyProcedural     Strategy = "procedural"
	StrategyEpisodic       Strategy = "episodic"
)

// Status of a record.
type Status string

const (
	StatusActive     Status = "active"
	StatusSuperseded Status = "superseded"
	StatusStaged     Status = "staged"
	StatusRejected   Status = "rejected"
)

// Record is one long-term memory record (SPEC §4.2). Metadata values are
// string, []string, float64 or time.Time.
type Record struct {
	ID         string         `json:"id"`
	Namespace  string         `json:"namespace"`
	Strategy   Strategy       `json:"strategy"`
	Content    string         `json:"content"`
	Metadata   map[string]any `json:"metadata,omitempty"`
	CreatedAt  time.Time      `json:"createdAt"`
	UpdatedAt  time.Time      `json:"updatedAt"`
	Sources    []string       `json:"sources,omitempty"` // event or session node IDs
	Importance float64        `json:"importance"`
	Status     Status         `json:"status"`
}

// Explicit reports whether the record states the user's own explicit choice
// (USER_PREFERENCE or PROCEDURAL); everything else is inferred.
func (r Record) Explicit() bool {
	return r.Strategy == StrategyUserPreference || r.Strategy == StrategyProcedural
}

// Event is one short-term event: a turn by user, assistant or tool.
type Event struct {
	ID        string         `json:"id"`
	ActorID   string         `json:"actorId"`
	SessionID string         `json:"sessionId"`
	Role      string         `json:"role"`
	Text      string         `json:"text"`
	Timestamp time.Time      `json:"timestamp"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// Hit is one retrieval result with its score explanation.
type Hit struct {
	Record  Record  `json:"record"`
	Score   float64 `json:"score"`
	Explain string  `json:"explain,omitempty"`
}

// Retriever is what the agent needs on every turn: records relevant to the
// message for one actor, already assembled (explicit first, capped).
type Retriever interface {
	Recall(ctx context.Context, agentID, actorID, query string) ([]Hit, error)
}

// Recorder receives the turn's events after it completes and queues
// extraction. It must not block the turn on slow extraction.
type Recorder interface {
	RecordTurn(ctx context.Context, agentID, actorID, sessionID string, events []Event) error
}
