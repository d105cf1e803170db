package approval

import (
	"context"
	"errors"
	"time"
)

// Log is where a Gate keeps its hash-chained ledger and the paused turns
// its requests reference. The Gate owns every rule of the chain (encoding,
// hashes, prev links, seq numbers, entry semantics); a Log only stores
// lines, serialises writers across processes, and says when lines it
// already handed out were changed behind its back.
//
// Two implementations exist: the file backend (Open: <dir>/ledger.jsonl
// under a flock, <dir>/resume/<ref>.json) and PostgreSQL
// (internal/approval/pgledger: tables approval_ledger and approval_resume
// under a transaction-scoped advisory lock). approvaltest.Exercise runs
// the same conformance suite against both.
//
// A Gate calls every method except LoadResume, Name and Close between
// Lock and Unlock, from one goroutine at a time. LoadResume may be called
// at any time, concurrently with a unit of work.
type Log interface {
	// Name identifies the ledger in reports (VerifyReport.Path, Gate.Path):
	// the file path, or "postgres:<schema>.approval_ledger".
	Name() string

	// Lock begins a unit of work. With write true it holds the log's
	// exclusive cross-process lock until Unlock, so that what the caller
	// reads (Tail) and then appends is one linear step of the chain. With
	// write false the caller only reads; a backend whose reads always see
	// a committed prefix of the chain may skip the lock.
	Lock(ctx context.Context, write bool) error
	// Unlock ends the unit. With commit true every Append, StoreResume and
	// DeleteResume of the unit becomes durable and visible to other
	// processes (a transactional backend commits here; an error means the
	// unit's writes may or may not have been kept). With commit false a
	// transactional backend discards them.
	Unlock(ctx context.Context, commit bool) error

	// Load returns the whole ledger as '\n'-terminated lines in seq order
	// (a torn last line may lack its '\n'), creating an empty ledger if
	// there is none, and makes this ledger the one later Tail calls compare
	// against (the file backend re-opens the file; PostgreSQL remembers its
	// first row).
	Load(ctx context.Context) ([]byte, error)
	// Snapshot returns the whole ledger like Load without changing what
	// Tail compares against; exists is false when there is no ledger at
	// all (a removed file).
	Snapshot(ctx context.Context) (data []byte, exists bool, err error)
	// Tail reports what happened after the prefix the gate accepted: new
	// lines (TailAppended), nothing, or that the accepted prefix itself was
	// replaced, removed or altered. With deep false a backend may skip
	// re-reading the last accepted line (the file backend's hot path).
	Tail(ctx context.Context, at Pos, deep bool) (Tail, error)
	// Append writes one encoded entry after the last line. An error
	// wrapping ErrLogDamaged means a partial line may have been written
	// (the gate then fails closed); any other error means nothing of the
	// unit can be trusted to be kept (the gate re-reads the ledger at its
	// next unit).
	Append(ctx context.Context, r Record) error
	// ArchiveName returns the name Replace will archive the current ledger
	// under at time now, as recorded in a reset entry.
	ArchiveName(now time.Time) string
	// Replace moves the whole ledger (if exists) to the archive named
	// archive, keeping every line, and starts a new ledger whose only line
	// is first (a reset entry with seq 1).
	Replace(ctx context.Context, archive string, exists bool, first Record) error

	// StoreResume stores a paused-turn payload under ref (the lower-case
	// hex SHA-256 of payload) durably; storing an existing ref is a no-op.
	StoreResume(ctx context.Context, ref string, payload []byte) error
	// LoadResume returns the payload stored under ref, at most limit bytes:
	// an error wrapping os.ErrNotExist when there is none, ErrResumeCorrupt
	// when it is over limit. The caller checks its hash.
	LoadResume(ctx context.Context, ref string, limit int) ([]byte, error)
	// DeleteResume deletes the payload of ref; a missing one is not an
	// error.
	DeleteResume(ctx context.Context, ref string) error

	// Close releases what the log holds (files; never a shared pool).
	Close() error
}

// Notifier is implemented by a Log that can announce appends made by
// other processes (PostgreSQL LISTEN/NOTIFY). Gate.Watch uses it.
type Notifier interface {
	// Listen calls fn with each notification's payload (the appended seq
	// as decimal text, or "reset") until ctx ends or the listening
	// connection fails; it returns ctx's error or the failure. ready, when
	// not nil, is called once the log is listening.
	Listen(ctx context.Context, ready func(), fn func(payload string)) error
}

// ErrLogDamaged is wrapped by Log.Append errors after which the ledger may
// end in a partial line (a failed write or fsync of the file backend).
var ErrLogDamaged = errors.New("approval: ledger write failed part-way")

// Pos is the prefix of the ledger a gate has accepted.
type Pos struct {
	Seq     int64  // seq of the last accepted entry; 0 before the first
	Entries int    // accepted entries
	Offset  int64  // bytes of the accepted lines, '\n' included
	Last    []byte // the last accepted line with its '\n'; nil before the first
}

// TailChange says what Log.Tail found.
type TailChange int

// Outcomes of Log.Tail.
const (
	TailUnchanged TailChange = iota // nothing new
	TailAppended                    // Tail.Data holds new lines
	TailReplaced                    // a different ledger is there now (a reset, or a swap): reload
	TailRemoved                     // there is no ledger any more
	TailAltered                     // accepted lines changed (truncated, rewritten): Tail.Reason says how
)

// Tail is the result of Log.Tail.
type Tail struct {
	Change TailChange
	Data   []byte // TailAppended: '\n'-terminated lines after Pos (a torn last line may lack it)
	Reason string // TailRemoved, TailAltered: for the verification report
}

// Record is one encoded ledger entry handed to Log.Append.
type Record struct {
	Seq       int64
	Hash      string // the entry's hash (64 lower-case hex)
	Type      string // EntryRequest, EntryDecision, …
	RequestID string // the request the entry names, "" if none
	Line      []byte // the RFC 8785 canonical entry with its '\n'
}
