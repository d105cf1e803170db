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

// TurnReconciler is a Recorder that can write the events of a turn the
// session holds but memory may lack (the process died between the
// session's append and RecordTurn, or RecordTurn failed): events already
// stored are left as they are, and the turn is not counted again.
type TurnReconciler interface {
	ReconcileTurn(ctx context.Context, agentID, actorID, sessionID string, events []Event) error
}

// Filter operators (SPEC §4.6).
const (
	OpEquals    = "EQUALS_TO"
	OpContains  = "CONTAINS"
	OpExists    = "EXISTS"
	OpNotExists = "NOT_EXISTS"
	OpBefore    = "BEFORE"
	OpAfter     = "AFTER"
	OpGreater   = "GREATER_THAN"
	OpGreaterEq = "GREATER_THAN_OR_EQUALS"
	OpLess      = "LESS_THAN"
	OpLessEq    = "LESS_THAN_OR_EQUALS"
)

// Filter is one metadata condition. Key must be a declared indexed key,
// "createdAt" or "updatedAt"; Value is string, []string, float64 or
// time.Time depending on Op and the key's type.
type Filter struct {
	Key   string `json:"key"`
	Op    string `json:"op"`
	Value any    `json:"value,omitempty"`
}

// Query selects records. Exactly one of Namespace (exact) and NamespacePath
// (prefix, matched on whole "/" segments) is set. Text "" lists without
// ranking. Statuses defaults to active only. Up to 5 Filters, AND-ed,
// applied before ranking.
type Query struct {
	Namespace     string     `json:"namespace,omitempty"`
	NamespacePath string     `json:"namespacePath,omitempty"`
	Text          string     `json:"text,omitempty"`
	Filters       []Filter   `json:"filters,omitempty"`
	Strategies    []Strategy `json:"strategies,omitempty"`
	Statuses      []Status   `json:"statuses,omitempty"`
	TopK          int        `json:"topK,omitempty"`
	// NoExplain leaves every Hit's Explain empty: the same hits, order and
	// scores without the cost of the explanations (about a tenth of a
	// ranked search's CPU), for callers that never show them (the turn's
	// retrieval). Not part of the HTTP API.
	NoExplain bool `json:"-"`
}

// CacheStats describe a Store's in-memory cache of actors: the actors it
// holds, their estimated heap in bytes, its budget in bytes (0 or less: no
// bound), and the actors it has read from disk (Loads) and dropped
// (Evictions) since it was opened.
type CacheStats struct {
	Actors      int
	Bytes       int64
	BudgetBytes int64
	Loads       uint64
	Evictions   uint64
}

// CacheReporter is implemented by stores that keep actors in memory
// (sqlitestore); /metrics exposes it as tendril_memory_cache_*.
type CacheReporter interface {
	CacheStats() CacheStats
}

// EmbedStats describe a Store's background embedding (hybrid search):
// passes whose embedding call failed since it was opened, and actors
// waiting for a retry.
type EmbedStats struct {
	Failures uint64
	Retrying int
}

// EmbedReporter is implemented by stores with an embedding worker
// (sqlitestore, pgstore, when an embedder is configured); /metrics exposes
// it as tendril_memory_embed_*.
type EmbedReporter interface {
	EmbedStats() (EmbedStats, bool) // false: no embedder configured
}

// Store is a long-term memory backend (embedded: Markdown + SQLite index;
// later PostgreSQL). All backends pass memorytest.Exercise.
type Store interface {
	// Put inserts a record, or updates it when the ID exists. Missing ID,
	// timestamps and status are filled in; the stored record is returned.
	Put(ctx context.Context, rec Record) (Record, error)
	Get(ctx context.Context, id string) (Record, error)
	// Search ranks records for q.Text; every Hit explains its score.
	Search(ctx context.Context, q Query) ([]Hit, error)
	// AppendEvents records short-term events (also the episodic log).
	AppendEvents(ctx context.Context, events []Event) error
	// Events lists an actor's events, oldest first; sessionID "" = all.
	Events(ctx context.Context, actorID, sessionID string) ([]Event, error)
	// Forget removes every event, record, Markdown file, index entry and
	// staged item of the actor.
	Forget(ctx context.Context, agentID, actorID string) error
	Close() error
}
