package state

import (
	"context"
	"time"
)

// Backend persists the engine's per-actor state. The engine owns the
// logic (classification, decay, stimuli, the saturation guard, the breaker
// and the history); a Backend only stores, per actor, the current Record
// and the last changes, and makes each update atomic.
//
// Implementations: FileBackend (Open; one append-only log per actor under
// a directory) and internal/state/pgstate (PostgreSQL, shared by several
// instances). internal/state/statetest.Exercise is the conformance suite
// every implementation passes.
//
// Actor IDs reaching a Backend have passed the engine's validation: 1–256
// bytes of UTF-8 without control characters (so no NUL); they may still
// contain "/", "..", "%" and anything else, and must be stored under an
// encoding that cannot escape the backend's namespace.
type Backend interface {
	// Load returns the actor's stored record; ok is false (and err nil)
	// when nothing is stored. With history it also returns the stored
	// changes, oldest first: at least the last limit of the last Update
	// (when that many exist), possibly more; the engine keeps its
	// HistoryLimit.
	Load(ctx context.Context, actor string, history bool) (rec Record, changes []Change, ok bool, err error)

	// Update reads the actor's record, calls fn with it (the zero Record
	// and ok false when nothing is stored), and stores fn's record and
	// appends fn's changes as one atomic step, keeping only the last
	// limit changes (limit ≥ 1). Updates of one actor are serialised
	// against every other Update through the same store, including other
	// processes sharing it where the backend supports that, so none is
	// lost. fn may be called more than once (a retry after a conflict) and
	// must not have side effects beyond its result; when fn returns an
	// error nothing is stored and Update returns that error.
	Update(ctx context.Context, actor string, limit int, fn func(cur Record, ok bool) (Record, []Change, error)) error

	// Actors lists the actors with stored state, in any order.
	Actors(ctx context.Context) ([]string, error)

	// Records returns the record of every actor with stored state, keyed
	// by actor ID, without history (for LevelCounts).
	Records(ctx context.Context) (map[string]Record, error)

	// Forget deletes the actor's record and changes. Nothing stored is
	// not an error.
	Forget(ctx context.Context, actor string) error
}

// Record is the persisted head of one actor's state: everything Apply
// needs besides the history. Values are as of UpdatedAt (decay is applied
// on read); a zero UpdatedAt means the values never changed.
type Record struct {
	ActorID   string    `json:"actor_id"`
	Values    Vector    `json:"values"`
	UpdatedAt time.Time `json:"updated_at"`
	Level     Level     `json:"level"`
	// TurnsInCritical counts turns spent in CRITICAL since it was entered.
	TurnsInCritical int `json:"turns_in_critical"`
	// Turns counts Observe and Apply calls, Neutral ones included.
	Turns int `json:"turns"`
	// Saturated counts, per value, consecutive stimulus turns spent within
	// Guard.Margin of a bound (the floor-recovery counter).
	Saturated [NumDims]int `json:"saturated"`
	// Recent are the last stimuli, oldest first, at most Guard.Window of
	// them (the habituation window).
	Recent []RecentStimulus `json:"recent,omitempty"`
}

// RecentStimulus is one entry of the habituation window.
type RecentStimulus struct {
	Category Category  `json:"category"`
	At       time.Time `json:"at"`
}
