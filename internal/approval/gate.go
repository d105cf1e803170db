package approval

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool"
	"github.com/tendrilai/tendril/internal/web/sanitize"
)

// Errors callers branch on. Authorize and Decide wrap them with detail.
var (
	ErrLedgerBroken   = errors.New("approval: ledger failed verification; the gate is closed until an operator runs `tendril approvals reset`")
	ErrNotFound       = errors.New("approval: no such request")
	ErrInvalidID      = errors.New("approval: malformed request id")
	ErrNotApproved    = errors.New("approval: request is still pending")
	ErrDenied         = errors.New("approval: request was denied")
	ErrExpired        = errors.New("approval: request expired")
	ErrConsumed       = errors.New("approval: request already used")
	ErrRulesChanged   = errors.New("approval: rules changed after the request; it is invalid")
	ErrAlreadyDecided = errors.New("approval: request already decided")
	ErrForbidden      = errors.New("approval: the effective rule now forbids this call")
	ErrNotBroken      = errors.New("approval: ledger verifies; nothing to reset")
	ErrInvalidCall    = errors.New("approval: invalid call")
)

// BindingError reports which bound field of an approved request differs
// from the call being authorized. It wraps ErrBindingMismatch.
type BindingError struct {
	Field     string // agent_id, tool_name, args_hash, actor_id or session_id
	Want, Got string
}

// ErrBindingMismatch is wrapped by every BindingError.
var ErrBindingMismatch = errors.New("approval: call does not match the approved request")

func (e *BindingError) Error() string {
	return fmt.Sprintf("approval: %s differs from the approved request (approved %q, got %q)", e.Field, e.Want, e.Got)
}
func (e *BindingError) Unwrap() error { return ErrBindingMismatch }

// Status is a request's state, derived from the ledger and the clock.
type Status string

// Request statuses.
const (
	StatusPending     Status = "pending"     // waiting for a decision
	StatusApproved    Status = "approved"    // approved, not yet executed
	StatusDenied      Status = "denied"      // an operator denied it
	StatusExpired     Status = "expired"     // expires_at passed before it was used
	StatusInvalidated Status = "invalidated" // rules were saved after it was created
	StatusExecuted    Status = "executed"    // consumed by Authorize
	StatusRejected    Status = "rejected"    // the ledger is broken: failed closed
)

// Call is one tool call presented to the gate.
type Call struct {
	AgentID   string
	ActorID   string
	SessionID string
	Channel   string // stored with a request so a resumed turn replies there; not bound
	Tool      string
	Class     tool.Class
	// Args is the JSON the model produced; empty means {}.
	Args json.RawMessage
	// Resume is an opaque JSON payload (the agent's paused turn), at most
	// Options.MaxResumeBytes. When the verdict is Ask it is written to
	// <dir>/resume/<sha256hex>.json (PostgreSQL: a row of approval_resume)
	// before the request is appended, and the
	// request stores only {"ref":"<sha256hex>"} (see LoadResume). Not bound,
	// and ignored (not even validated) for other verdicts.
	Resume json.RawMessage
}

// Request is an approval request as stored and as shown to operators.
type Request struct {
	ID           string          `json:"id"`
	AgentID      string          `json:"agent_id"`
	ActorID      string          `json:"actor_id"`
	SessionID    string          `json:"session_id"`
	Channel      string          `json:"channel,omitempty"`
	Tool         string          `json:"tool_name"`
	Class        tool.Class      `json:"class"`
	ArgsHash     string          `json:"args_hash"`
	Args         json.RawMessage `json:"args"` // RFC 8785 canonical
	CreatedAt    time.Time       `json:"created_at"`
	ExpiresAt    time.Time       `json:"expires_at"`
	RulesVersion int64           `json:"rules_version"`
	Reason       string          `json:"reason,omitempty"` // why it asks
	// Resume is the reference {"ref":"<sha256hex>"} to the paused turn
	// stored beside the ledger, empty when the call carried none. It is
	// never the payload itself: pass the Request to LoadResume for that.
	Resume json.RawMessage `json:"resume,omitempty"`

	Status    Status    `json:"status"`
	DecidedBy string    `json:"decided_by,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
}

// Exec identifies one recorded tool execution (its ledger seq).
type Exec struct {
	Seq       int64  `json:"seq"`
	RequestID string `json:"request_id,omitempty"`
	Tool      string `json:"tool_name"`
	ArgsHash  string `json:"args_hash"`
}

// Decision is the gate's answer to Check.
type Decision struct {
	Verdict Verdict
	Rule    Rule   // the effective rule
	Reason  string // the deciding layer, for logs and the model
	// Request is set for Ask: the persisted pending request.
	Request *Request
	// Exec is set for Allow: the recorded execution start.
	Exec *Exec
}

// Options configure a Gate. Zero fields take defaults.
type Options struct {
	// Rules are per-tool rules. With SyncRules, Open saves them to the ledger
	// when they differ from the ledger's (which invalidates open approvals);
	// without, the ledger's rules are used (the CLI does this).
	Rules     map[string]Rule
	SyncRules bool
	// ExecEnabled mirrors TENDRIL_ENABLE_EXEC_TOOLS=1.
	ExecEnabled bool
	// Expiry of a request; default 120 s.
	Expiry time.Duration
	// MaxArgsBytes bounds a call's args; default 1 MiB.
	MaxArgsBytes int
	// MaxResumeBytes bounds a call's resume payload (and what LoadResume
	// reads back); default DefaultMaxResumeBytes (128 MiB).
	MaxResumeBytes int
	// Now is the wall clock; default time.Now.
	Now func() time.Time
	// Monotonic is a process-local monotonic clock; default time.Since of a
	// fixed start (Go's monotonic reading). Used only for YOLO windows.
	Monotonic func() time.Duration
	// By names this process in the ledger when it saves rules; default "config".
	By string
}

// Gate is the approval gate over one ledger (a Log: a directory by
// default, or PostgreSQL). Safe for concurrent use; several processes may
// share one ledger.
type Gate struct {
	log  Log
	opts Options

	mu        sync.Mutex
	closed    bool
	ctx       context.Context // the current unit's context; set under mu
	st        *ledgerState
	broken    *VerifyReport
	lastLine  []byte
	firedSeq  int64         // decisions up to this seq were delivered to subs (or are history)
	stale     bool          // the ledger must be re-read at the next unit (a unit's writes may be lost)
	failed    bool          // an append of the current unit failed
	write     bool          // the current unit holds the exclusive lock
	fresh     bool          // the current write unit has caught up: nobody else can append until it ends
	yoloMono  time.Duration // monotonic deadline of the current YOLO window, 0 if none
	yoloSeen  int64         // seq of the yolo entry yoloMono was computed for
	subs      []func(Request, bool)
	refreshes int                // Refresh calls, for periodic full verification
	noSync    bool               // tests only: skip fsync when generating large ledgers
	trace     func(event string) // tests only: observes durability steps in order
}

// Open opens (creating if needed) the gate whose ledger is
// <dir>/ledger.jsonl and verifies the whole ledger. A ledger that fails
// verification does not make Open fail: the gate opens closed (Broken
// reports why; every call is denied and every open request rejected) until
// Reset. Errors are for I/O and invalid options only.
func Open(dir string, opts Options) (*Gate, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	l, err := openFileLog(dir)
	if err != nil {
		return nil, err
	}
	return OpenLog(context.Background(), l, opts)
}

// OpenLog opens the gate over log (see Log; pgledger.Open gives the
// PostgreSQL one) and verifies the whole ledger, like Open. The gate owns
// log from then on: Close closes it, and an error closes it too.
func OpenLog(ctx context.Context, log Log, opts Options) (*Gate, error) {
	if err := opts.validate(); err != nil {
		log.Close()
		return nil, err
	}
	opts.defaults()
	g := &Gate{log: log, opts: opts}
	if fl, ok := log.(*fileLog); ok {
		fl.g = g
	}
	if err := g.withLockCtx(ctx, false, func() error { return g.reload() }); err != nil {
		log.Close()
		return nil, err
	}
	if opts.SyncRules {
		want := copyRules(opts.Rules)
		g.mu.Lock()
		same := g.broken != nil || maps.Equal(want, g.st.rules)
		g.mu.Unlock()
		if !same {
			if err := g.SetRules(ctx, want, opts.By); err != nil {
				g.Close()
				return nil, err
			}
		}
	}
	return g, nil
}

func (opts *Options) validate() error {
	for k, v := range opts.Rules {
		if !validToolName(k) {
			return fmt.Errorf("approval: invalid tool name %q in rules", k)
		}
		if _, err := ParseRule(string(v)); err != nil {
			return err
		}
	}
	return nil
}

func (opts *Options) defaults() {
	if opts.Expiry <= 0 {
		opts.Expiry = 120 * time.Second
	}
	if opts.MaxArgsBytes <= 0 {
		opts.MaxArgsBytes = 1 << 20
	}
	if opts.MaxResumeBytes <= 0 {
		opts.MaxResumeBytes = DefaultMaxResumeBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Monotonic == nil {
		start := time.Now()
		opts.Monotonic = func() time.Duration { return time.Since(start) }
	}
	if opts.By == "" {
		opts.By = "config"
	}
}

// Path returns the ledger's name: the file path of the file backend, or
// "postgres:<schema>.approval_ledger".
func (g *Gate) Path() string { return g.log.Name() }

// Close releases the log (files; a PostgreSQL gate leaves its pool open).
func (g *Gate) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	return g.log.Close()
}

// OnDecision registers fn, called (outside the gate's lock, on the calling
// goroutine) for every decision this gate applies: its own Decide or
// ForgetActor, or one another process wrote, seen by Refresh (or Watch) or
// any other call. req.Resume is the stored reference, not the payload: fn
// calls LoadResume(req) for the paused turn and DropResume(req) once it is
// done.
func (g *Gate) OnDecision(fn func(req Request, approved bool)) {
	g.mu.Lock()
	g.subs = append(g.subs, fn)
	g.mu.Unlock()
}

// withLock runs fn as a writing unit without a deadline (tests use it).
func (g *Gate) withLock(fn func() error) error { return g.withLockCtx(context.Background(), true, fn) }

// withLockCtx runs fn under the in-process mutex and the log's lock (the
// cross-process one when write), ends the unit, then fires decision
// callbacks. A unit whose append failed, or whose end failed, leaves the
// gate stale: it re-reads the ledger at the next unit.
func (g *Gate) withLockCtx(ctx context.Context, write bool, fn func() error) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return errors.New("approval: gate closed")
	}
	if err := g.log.Lock(ctx, write); err != nil {
		g.mu.Unlock()
		return err
	}
	g.ctx, g.failed, g.write, g.fresh = ctx, false, write, false
	var err error
	if g.stale || g.st == nil {
		err = g.reload()
	}
	if err == nil {
		err = fn()
	}
	commit := !g.failed
	uerr := g.log.Unlock(context.WithoutCancel(ctx), commit)
	if g.failed || uerr != nil {
		g.stale = true
	}
	if err == nil {
		err = uerr
	}
	var fire []func()
	if g.st != nil {
		if !g.stale {
			g.firedSeq = g.st.seq
			for _, d := range g.st.decisions {
				if rs, ok := g.st.reqs[d.id]; ok {
					req := g.requestLocked(rs)
					approved := d.approved
					for _, s := range g.subs {
						fire = append(fire, func() { s(req, approved) })
					}
				}
			}
		}
		g.st.decisions = nil
	}
	g.ctx = nil
	g.mu.Unlock()
	for _, f := range fire {
		f()
	}
	return err
}

// reload reads and verifies the whole ledger. Caller holds locks.
func (g *Gate) reload() error {
	b, err := g.log.Load(g.ctx)
	if err != nil {
		return err
	}
	g.st = newLedgerState()
	rep := g.st.load(b, g.log.Name())
	news := g.st.decisions
	g.st.decisions = nil // history, not news
	g.broken = nil
	if !rep.OK {
		g.broken = &rep
	}
	if g.stale {
		// Re-read after a failed unit: decisions past what was already
		// delivered are still news.
		for _, d := range news {
			if d.seq > g.firedSeq && d.seq <= g.st.seq {
				g.st.decisions = append(g.st.decisions, d)
			}
		}
	} else {
		g.firedSeq = g.st.seq
	}
	g.stale = false
	g.lastLine = lastLine(b[:g.st.offset])
	g.yoloSeen = 0
	g.updateYoloLocked()
	return nil
}

func lastLine(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	i := bytes.LastIndexByte(b[:len(b)-1], '\n')
	return append([]byte(nil), b[i+1:]...)
}

func (g *Gate) pos() Pos {
	return Pos{Seq: g.st.seq, Entries: g.st.lines, Offset: g.st.offset, Last: g.lastLine}
}

// catchUp applies what other processes appended since we last looked, and
// notices a reset (ledger replaced), truncation, or the last line
// rewritten in place. Caller holds locks.
func (g *Gate) catchUp() error { return g.catchUpDeep(true) }

// catchUpDeep with deep false lets the backend skip re-reading the last
// line: the hot path (Check, RecordResult).
func (g *Gate) catchUpDeep(deep bool) error {
	if g.fresh && !deep {
		return nil
	}
	t, err := g.log.Tail(g.ctx, g.pos(), deep)
	if err != nil {
		return err
	}
	g.fresh = g.write
	switch t.Change {
	case TailRemoved:
		if g.st.lines > 0 || g.broken != nil {
			if g.broken == nil {
				g.fail("%s", t.Reason)
			}
			return nil
		}
		return g.reload()
	case TailReplaced:
		// Only an operator reset replaces the ledger, and its first entry says so.
		had := g.st.lines > 0 || g.broken != nil
		if err := g.reload(); err != nil {
			return err
		}
		if had && g.broken == nil && g.st.firstType != EntryReset {
			g.fail("ledger replaced without a reset entry")
		}
		return nil
	}
	if g.broken != nil {
		return nil
	}
	switch t.Change {
	case TailAltered:
		g.fail("%s", t.Reason)
		return nil
	case TailUnchanged:
		return nil
	}
	before := g.st.offset
	rep := g.st.load(t.Data, g.log.Name())
	if !rep.OK {
		g.broken = &rep
	}
	if g.st.offset > before {
		full := make([]byte, g.st.offset-before)
		copy(full, t.Data)
		g.lastLine = lastLine(full)
	}
	g.updateYoloLocked()
	return nil
}

func (g *Gate) fail(format string, a ...any) {
	g.broken = &VerifyReport{Path: g.log.Name(), Entries: g.st.lines, HeadHash: g.st.head, HeadSeq: g.st.seq,
		FirstBad: &BadEntry{Line: g.st.lines, Reason: fmt.Sprintf(format, a...)}}
}

// appendLocked writes one entry after catching up. Caller holds locks.
func (g *Gate) appendLocked(e *entry) error {
	if g.failed {
		return errors.New("approval: an earlier write of this operation failed")
	}
	if err := g.catchUpDeep(false); err != nil {
		return err
	}
	if g.broken != nil {
		return fmt.Errorf("%w (%s)", ErrLedgerBroken, g.broken.Summary())
	}
	e.Seq = g.st.seq + 1
	e.Prev = g.st.head
	if e.At.IsZero() {
		e.At = g.opts.Now()
	}
	line, err := encode(e)
	if err != nil {
		return err
	}
	// Check semantics before writing. apply is all-or-nothing per entry;
	// a failed write makes the gate stale (re-read at the next unit) or,
	// for a write that may have left a partial line, closed.
	if err := g.st.apply(e); err != nil {
		return fmt.Errorf("approval: refusing to append invalid %s entry: %w", e.Type, err)
	}
	if err := g.log.Append(g.ctx, Record{Seq: e.Seq, Hash: e.Hash, Type: e.Type, RequestID: e.RequestID, Line: line}); err != nil {
		if errors.Is(err, ErrLogDamaged) {
			g.fail("append failed: %v", err) // closed until Reset; a re-read must not reopen it
		} else {
			g.failed = true
		}
		return fmt.Errorf("approval: append: %w", err)
	}
	g.st.head, g.st.seq = e.Hash, e.Seq
	g.st.offset += int64(len(line))
	g.st.lines++
	g.lastLine = line
	g.updateYoloLocked()
	return nil
}

// Broken returns the verification failure that closed the gate, or nil.
func (g *Gate) Broken() *VerifyReport {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.broken == nil {
		return nil
	}
	r := *g.broken
	return &r
}

// MaxByBytes bounds a "by" value: who decided a request, saved rules,
// opened a YOLO window, reset the ledger or forgot an actor.
const MaxByBytes = 128

// ErrInvalidBy is wrapped by every error ValidateBy returns, and so by
// every refusal of a "by" value by Decide, SetRules, Yolo, Reset and
// ForgetActor.
var ErrInvalidBy = errors.New("approval: invalid 'by'")

// ValidateBy checks a "by" value before it is written to the ledger (the
// gate's writers call it; callers may too, to refuse early). by must be
// non-blank, at most MaxByBytes bytes of valid UTF-8, and free of control
// characters (newlines, escapes, NUL). The error wraps ErrInvalidBy and
// says which rule failed, without repeating the value.
func ValidateBy(by string) error {
	switch {
	case strings.TrimSpace(by) == "":
		return fmt.Errorf("%w: it is required (who decides, e.g. \"cli:ana\")", ErrInvalidBy)
	case len(by) > MaxByBytes:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidBy, len(by), MaxByBytes)
	case !utf8.ValidString(by):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidBy)
	}
	for _, r := range by {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: control character %U", ErrInvalidBy, r)
		}
		if sanitize.IsBidi(r) {
			// it would reorder how the ledger and the audit show who decided
			return fmt.Errorf("%w: bidirectional control %U", ErrInvalidBy, r)
		}
	}
	return nil
}

func validField(s string, max int) bool {
	if len(s) > max || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

func (g *Gate) validateCall(c Call) (string, json.RawMessage, error) {
	switch {
	case !validToolName(c.Tool):
		return "", nil, fmt.Errorf("%w: tool name %q", ErrInvalidCall, c.Tool)
	case c.AgentID == "" || !validField(c.AgentID, 256):
		return "", nil, fmt.Errorf("%w: agent id %q", ErrInvalidCall, c.AgentID)
	case c.ActorID == "" || !validField(c.ActorID, 256):
		return "", nil, fmt.Errorf("%w: actor id %q", ErrInvalidCall, c.ActorID)
	case !validField(c.SessionID, 256) || !validField(c.Channel, 64):
		return "", nil, fmt.Errorf("%w: session or channel", ErrInvalidCall)
	case c.Class == "":
		return "", nil, fmt.Errorf("%w: tool %s has no class", ErrInvalidCall, c.Tool)
	case len(c.Args) > g.opts.MaxArgsBytes:
		return "", nil, fmt.Errorf("%w: args over %d bytes", ErrInvalidCall, g.opts.MaxArgsBytes)
	case len(c.Resume) > g.opts.MaxResumeBytes:
		return "", nil, fmt.Errorf("%w: resume payload over %d bytes", ErrInvalidCall, g.opts.MaxResumeBytes)
	}
	args := c.Args
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	canon, err := Canonical(args)
	if err != nil {
		return "", nil, fmt.Errorf("%w: args: %v", ErrInvalidCall, err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), canon, nil
}

// Effective returns the rule that applies to a tool of this class at this
// breaker level now (rules, breaker, floor and YOLO combined) with the
// reason. A tool whose effective rule is never belongs off the tool list.
func (g *Gate) Effective(name string, class tool.Class, level state.Level) (Rule, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.effectiveLocked(name, class, level)
}

func (g *Gate) effectiveLocked(name string, class tool.Class, level state.Level) (Rule, string) {
	return Effective(g.st.rules, name, class, level, g.opts.ExecEnabled, g.yoloActiveLocked())
}

// Check decides one call and records it: Allow appends an execute entry
// (Decision.Exec), Ask appends a pending request (Decision.Request), Deny
// appends a deny entry. For Ask with a non-empty c.Resume, the payload
// must be valid JSON; it is first written durably to
// <dir>/resume/<sha256hex>.json (temp file, fsync, rename, fsync of the
// directory; PostgreSQL: approval_resume, in the request's transaction)
// and only then is the request appended, carrying just
// {"ref":"<sha256hex>"} (Decision.Request.Resume). A closed (broken) gate
// denies everything without appending. The error is for invalid calls
// (ErrInvalidCall) and I/O; nothing is appended when it is non-nil.
func (g *Gate) Check(ctx context.Context, c Call, level state.Level) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	argsHash, canon, err := g.validateCall(c)
	if err != nil {
		return Decision{}, err
	}
	var d Decision
	err = g.withLockCtx(ctx, true, func() error {
		if err := g.catchUpDeep(false); err != nil {
			return err
		}
		if g.broken != nil {
			d = Decision{Verdict: Deny, Rule: RuleNever, Reason: ErrLedgerBroken.Error()}
			return nil
		}
		rule, reason := g.effectiveLocked(c.Tool, c.Class, level)
		cr := &callRecord{AgentID: c.AgentID, ActorID: c.ActorID, SessionID: c.SessionID, Tool: c.Tool, Class: c.Class, ArgsHash: argsHash}
		d = Decision{Rule: rule, Reason: reason}
		switch rule {
		case RuleAlways:
			e := &entry{Type: EntryExecute, Call: cr, Reason: reason}
			if err := g.appendLocked(e); err != nil {
				return err
			}
			d.Verdict = Allow
			d.Exec = &Exec{Seq: e.Seq, Tool: c.Tool, ArgsHash: argsHash}
		case RuleAsk:
			now := g.opts.Now().UTC()
			id, err := ulid.New(ulid.Timestamp(now), rand.Reader)
			if err != nil {
				return fmt.Errorf("approval: request id: %w", err)
			}
			// The paused turn goes beside the ledger, durably, before
			// the request that references it exists.
			var resume json.RawMessage
			var ref string
			if len(bytes.TrimSpace(c.Resume)) > 0 {
				if !json.Valid(c.Resume) {
					return fmt.Errorf("%w: resume payload is not valid JSON", ErrInvalidCall)
				}
				if resume, ref, err = g.storeResumeLocked(c.Resume); err != nil {
					return fmt.Errorf("approval: store paused turn: %w", err)
				}
			}
			rec := &reqRecord{ID: id.String(), AgentID: c.AgentID, ActorID: c.ActorID, SessionID: c.SessionID, Channel: c.Channel,
				Tool: c.Tool, Class: c.Class, ArgsHash: argsHash, Args: canon, CreatedAt: now, ExpiresAt: now.Add(g.opts.Expiry),
				RulesVersion: g.st.rulesVersion, Reason: reason, Resume: resume}
			g.traceEvent("ledger:append")
			if err := g.appendLocked(&entry{At: now, Type: EntryRequest, Request: rec}); err != nil {
				if ref != "" && !g.refOpenLocked(ref, nil) {
					g.removeResume(ref)
				}
				return err
			}
			d.Verdict = Ask
			req := g.requestLocked(g.st.reqs[rec.ID])
			d.Request = &req
		default:
			if err := g.appendLocked(&entry{Type: EntryDeny, Call: cr, Reason: reason}); err != nil {
				return err
			}
			d.Verdict = Deny
		}
		return nil
	})
	if err != nil {
		return Decision{}, err
	}
	return d, nil
}

func (g *Gate) statusLocked(rs *reqState) Status {
	switch {
	case rs.executed:
		return StatusExecuted
	case g.broken != nil:
		return StatusRejected
	case rs.decided && !rs.approved:
		return StatusDenied
	case rs.rec.RulesVersion != g.st.rulesVersion:
		return StatusInvalidated
	case !g.opts.Now().Before(rs.rec.ExpiresAt):
		return StatusExpired
	case rs.decided:
		return StatusApproved
	}
	return StatusPending
}

func (g *Gate) requestLocked(rs *reqState) Request {
	r := rs.rec
	return Request{ID: r.ID, AgentID: r.AgentID, ActorID: r.ActorID, SessionID: r.SessionID, Channel: r.Channel,
		Tool: r.Tool, Class: r.Class, ArgsHash: r.ArgsHash, Args: r.Args, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
		RulesVersion: r.RulesVersion, Reason: r.Reason, Resume: r.Resume,
		Status: g.statusLocked(rs), DecidedBy: rs.by, DecidedAt: rs.decidedAt}
}

// Decide records an operator's decision on a pending request. by names the
// operator ("cli", "telegram:123"; see ValidateBy). Errors: ErrInvalidID,
// ErrInvalidBy, ErrNotFound, ErrAlreadyDecided, ErrExpired,
// ErrRulesChanged, ErrLedgerBroken.
func (g *Gate) Decide(ctx context.Context, requestID string, approve bool, by string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !ValidRequestID(requestID) {
		return fmt.Errorf("%w: %s", ErrInvalidID, quoteID(requestID))
	}
	if err := ValidateBy(by); err != nil {
		return err
	}
	return g.withLockCtx(ctx, true, func() error {
		if err := g.catchUp(); err != nil {
			return err
		}
		if g.broken != nil {
			return fmt.Errorf("%w (%s)", ErrLedgerBroken, g.broken.Summary())
		}
		rs, ok := g.st.reqs[requestID]
		if !ok {
			return fmt.Errorf("%w: %s", ErrNotFound, requestID)
		}
		switch g.statusLocked(rs) {
		case StatusPending:
		case StatusExpired:
			return fmt.Errorf("%w: %s expired at %s", ErrExpired, requestID, rs.rec.ExpiresAt.Format(time.RFC3339))
		case StatusInvalidated:
			return fmt.Errorf("%w: %s", ErrRulesChanged, requestID)
		default:
			return fmt.Errorf("%w: %s is %s", ErrAlreadyDecided, requestID, g.statusLocked(rs))
		}
		return g.appendLocked(&entry{Type: EntryDecision, RequestID: requestID, Approved: &approve, By: by, Binding: binding(&rs.rec)})
	})
}

// Authorize checks that call may run under the approved request requestID:
// the gate is not broken; the request exists, was approved, has not been
// used, has not expired (now < expires_at) and predates no rule change;
// agent_id, tool_name, args_hash (recomputed from call.Args), actor_id and
// session_id all match (a *BindingError otherwise); and the effective rule
// at level does not now forbid it. On success it consumes the request and
// records the execution start; the caller then runs the tool exactly once.
// Refusals are also recorded in the ledger.
func (g *Gate) Authorize(ctx context.Context, requestID string, c Call, level state.Level) (Exec, error) {
	if err := ctx.Err(); err != nil {
		return Exec{}, err
	}
	if !ValidRequestID(requestID) {
		return Exec{}, fmt.Errorf("%w: %s", ErrInvalidID, quoteID(requestID))
	}
	argsHash, _, err := g.validateCall(c)
	if err != nil {
		return Exec{}, err
	}
	var ex Exec
	var refusal error
	err = g.withLockCtx(ctx, true, func() error {
		if err := g.catchUp(); err != nil {
			return err
		}
		if g.broken != nil {
			refusal = fmt.Errorf("%w (%s)", ErrLedgerBroken, g.broken.Summary())
			return nil
		}
		refusal = g.authorizeLocked(requestID, c, argsHash, level)
		cr := &callRecord{AgentID: c.AgentID, ActorID: c.ActorID, SessionID: c.SessionID, Tool: c.Tool, Class: c.Class, ArgsHash: argsHash}
		if refusal != nil {
			if _, known := g.st.reqs[requestID]; !known {
				requestID = ""
			}
			return g.appendLocked(&entry{Type: EntryDeny, RequestID: requestID, Call: cr, Reason: refusal.Error()})
		}
		rs := g.st.reqs[requestID]
		e := &entry{Type: EntryExecute, RequestID: requestID, Call: cr, Binding: binding(&rs.rec), Reason: "approved by " + rs.by}
		if err := g.appendLocked(e); err != nil {
			return err
		}
		ex = Exec{Seq: e.Seq, RequestID: requestID, Tool: c.Tool, ArgsHash: argsHash}
		return nil
	})
	if err != nil {
		return Exec{}, err
	}
	return ex, refusal
}

func (g *Gate) authorizeLocked(id string, c Call, argsHash string, level state.Level) error {
	rs, ok := g.st.reqs[id]
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	switch g.statusLocked(rs) {
	case StatusApproved:
	case StatusExecuted:
		return fmt.Errorf("%w: %s", ErrConsumed, id)
	case StatusDenied:
		return fmt.Errorf("%w: %s", ErrDenied, id)
	case StatusInvalidated:
		return fmt.Errorf("%w: %s", ErrRulesChanged, id)
	case StatusExpired:
		return fmt.Errorf("%w: %s expired at %s", ErrExpired, id, rs.rec.ExpiresAt.Format(time.RFC3339Nano))
	default:
		return fmt.Errorf("%w: %s", ErrNotApproved, id)
	}
	r := rs.rec
	for _, f := range []struct{ name, want, got string }{
		{"agent_id", r.AgentID, c.AgentID},
		{"tool_name", r.Tool, c.Tool},
		{"args_hash", r.ArgsHash, argsHash},
		{"actor_id", r.ActorID, c.ActorID},
		{"session_id", r.SessionID, c.SessionID},
	} {
		if f.want != f.got {
			return &BindingError{Field: f.name, Want: f.want, Got: f.got}
		}
	}
	if c.Class != r.Class {
		return &BindingError{Field: "class", Want: string(r.Class), Got: string(c.Class)}
	}
	if rule, reason := Effective(g.st.rules, c.Tool, c.Class, level, g.opts.ExecEnabled, false); rule == RuleNever {
		return fmt.Errorf("%w: %s", ErrForbidden, reason)
	}
	return nil
}

// RecordResult appends the outcome of an execution started by Check (Allow)
// or Authorize: ok, the SHA-256 of output, and runErr's text (truncated to
// 512 bytes). A zero Exec (Seq 0: no execution was recorded, e.g. no gate
// decision) records nothing and returns nil. Errors: ctx's error,
// ErrLedgerBroken, an Exec that names no open execution, or I/O.
func (g *Gate) RecordResult(ctx context.Context, ex Exec, output string, runErr error) error {
	if ex.Seq == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ok := runErr == nil
	sum := sha256.Sum256([]byte(output))
	e := &entry{Type: EntryResult, ExecSeq: ex.Seq, OK: &ok, OutputHash: hex.EncodeToString(sum[:])}
	if runErr != nil {
		msg := runErr.Error()
		if len(msg) > 512 {
			msg = msg[:512]
		}
		e.Error = string(bytes.ToValidUTF8([]byte(msg), []byte("?")))
	}
	return g.withLockCtx(ctx, true, func() error { return g.appendLocked(e) })
}

// Refresh applies entries other processes appended (decisions from the CLI,
// rule changes, YOLO windows, a reset) and fires OnDecision for new
// decisions. Call it periodically (e.g. every second) in the server, or
// run Watch, which does and also wakes on PostgreSQL notifications. It
// verifies every new entry; a tampered tail closes the gate.
func (g *Gate) Refresh(ctx context.Context) error { return g.refresh(ctx, true) }

// refresh with count false (a notification woke us) does not count toward
// the periodic full verification, so a busy ledger is not re-read whole on
// every tenth append.
func (g *Gate) refresh(ctx context.Context, count bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return g.withLockCtx(ctx, false, func() error {
		if err := g.catchUp(); err != nil {
			return err
		}
		// catchUp sees appends, truncation and a rewritten last line; an
		// edit to an earlier line needs the whole chain. Re-verify it every
		// RefreshVerifyEvery refreshes (about every 10 s for a server
		// refreshing each second), so a running server fails closed too.
		if !count {
			return nil
		}
		g.refreshes++
		if g.broken != nil || g.refreshes%RefreshVerifyEvery != 0 {
			return nil
		}
		b, _, err := g.log.Snapshot(g.ctx)
		if err != nil {
			return err
		}
		if rep := VerifyBytes(b, g.log.Name()); !rep.OK {
			g.broken = &rep
		}
		return nil
	})
}

// RefreshVerifyEvery is how many Refresh calls pass between full chain
// verifications.
const RefreshVerifyEvery = 10

// Replay fires OnDecision(req, true) for every request that is approved but
// not yet executed (and not expired). Decisions made while no server was
// running are history to Open, not news; call Replay once after registering
// OnDecision at start-up so those paused turns resume.
func (g *Gate) Replay(ctx context.Context) error {
	p, err := g.Pending(ctx)
	if err != nil {
		return err
	}
	g.mu.Lock()
	subs := append([]func(Request, bool){}, g.subs...)
	g.mu.Unlock()
	for _, r := range p {
		if r.Status != StatusApproved {
			continue
		}
		for _, s := range subs {
			s(r, true)
		}
	}
	return nil
}

// Get returns one request with its current status.
func (g *Gate) Get(ctx context.Context, requestID string) (Request, error) {
	if !ValidRequestID(requestID) {
		return Request{}, fmt.Errorf("%w: %s", ErrInvalidID, quoteID(requestID))
	}
	var r Request
	err := g.withLockCtx(ctx, false, func() error {
		if err := g.catchUp(); err != nil {
			return err
		}
		rs, ok := g.st.reqs[requestID]
		if !ok {
			return fmt.Errorf("%w: %s", ErrNotFound, requestID)
		}
		r = g.requestLocked(rs)
		return nil
	})
	return r, err
}

// Pending returns the open requests (pending or approved-not-yet-executed),
// oldest first. A broken gate has none: they are all rejected.
func (g *Gate) Pending(ctx context.Context) ([]Request, error) {
	all, err := g.List(ctx)
	var out []Request
	for _, r := range all {
		if r.Status == StatusPending || r.Status == StatusApproved {
			out = append(out, r)
		}
	}
	return out, err
}

// List returns every request in the ledger with its status, oldest first.
func (g *Gate) List(ctx context.Context) ([]Request, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []Request
	err := g.withLockCtx(ctx, false, func() error {
		if err := g.catchUp(); err != nil {
			return err
		}
		for _, id := range g.st.order {
			out = append(out, g.requestLocked(g.st.reqs[id]))
		}
		return nil
	})
	return out, err
}

// Rules returns the current per-tool rules and their version.
func (g *Gate) Rules() (map[string]Rule, int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return copyRules(g.st.rules), g.st.rulesVersion
}

// SetRules saves rules to the ledger, recording by (see ValidateBy; an
// invalid one is an ErrInvalidBy and nothing is written). Every open
// approval is invalidated, even if the rules are unchanged: saving is the
// act that counts.
func (g *Gate) SetRules(ctx context.Context, rules map[string]Rule, by string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateBy(by); err != nil {
		return err
	}
	for k, v := range rules {
		if !validToolName(k) {
			return fmt.Errorf("approval: invalid tool name %q", k)
		}
		if _, err := ParseRule(string(v)); err != nil {
			return err
		}
	}
	return g.withLockCtx(ctx, true, func() error {
		if err := g.catchUp(); err != nil {
			return err
		}
		return g.appendLocked(&entry{Type: EntryRules, Rules: copyRules(rules), RulesVersion: g.st.rulesVersion + 1, By: by})
	})
}

// Yolo opens a YOLO window of d (capped at MaxYolo) in which ask is treated
// as always; it never relaxes never, exec tools or the breaker. d ≤ 0 closes
// the window. It returns the wall-clock end. by is recorded (see
// ValidateBy; an invalid one is an ErrInvalidBy and nothing is written).
//
// The window ends at the earlier of two deadlines: the wall-clock until
// stored in the ledger, and a monotonic deadline. Monotonic clocks are
// process-local, so each process that sees the entry (this one at once,
// others on Refresh or at start-up) sets its own monotonic deadline to
// now_mono + min(d, until − now_wall). A wall clock stepped backwards
// therefore cannot extend the window, and stepping it forward ends it early.
func (g *Gate) Yolo(ctx context.Context, d time.Duration, by string) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	if err := ValidateBy(by); err != nil {
		return time.Time{}, err
	}
	if d < 0 {
		d = 0
	}
	if d > MaxYolo {
		d = MaxYolo
	}
	now := g.opts.Now().UTC()
	until := now.Add(d)
	err := g.withLockCtx(ctx, true, func() error {
		return g.appendLocked(&entry{At: now, Type: EntryYolo, Until: &until, DurationMS: d.Milliseconds(), By: by})
	})
	return until, err
}

// updateYoloLocked computes the monotonic deadline for a newly seen yolo
// entry.
func (g *Gate) updateYoloLocked() {
	e := g.st.yolo
	if e == nil || e.Seq == g.yoloSeen {
		return
	}
	g.yoloSeen = e.Seq
	rem := e.Until.Sub(g.opts.Now())
	if d := time.Duration(e.DurationMS) * time.Millisecond; d < rem {
		rem = d
	}
	if rem <= 0 {
		g.yoloMono = 0
		return
	}
	g.yoloMono = g.opts.Monotonic() + rem
}

func (g *Gate) yoloActiveLocked() bool {
	e := g.st.yolo
	if e == nil || g.yoloMono == 0 || g.broken != nil {
		return false
	}
	return g.opts.Now().Before(*e.Until) && g.opts.Monotonic() < g.yoloMono
}

// YoloUntil reports whether a YOLO window is open and its wall-clock end.
func (g *Gate) YoloUntil() (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.yoloActiveLocked() {
		return time.Time{}, false
	}
	return *g.st.yolo.Until, true
}

// Verify re-reads and verifies the whole ledger (file or table). A
// failure closes the gate (fail closed) until Reset.
func (g *Gate) Verify(ctx context.Context) (VerifyReport, error) {
	if err := ctx.Err(); err != nil {
		return VerifyReport{}, err
	}
	var rep VerifyReport
	err := g.withLockCtx(ctx, false, func() error {
		b, _, err := g.log.Snapshot(g.ctx)
		if err != nil {
			return err
		}
		rep = VerifyBytes(b, g.log.Name())
		if !rep.OK && g.broken == nil {
			g.broken = &rep
		}
		return nil
	})
	return rep, err
}

// Reset is the operator's way out of a closed gate. It refuses
// (ErrNotBroken) when the ledger verifies. Otherwise the broken ledger is
// moved aside (nothing is deleted: the file backend renames it to
// ledger.jsonl.broken-<UTC time>, PostgreSQL moves its rows to
// approval_ledger_archive under that name) and a new ledger starts with a
// reset entry naming by, reason, the archive, its SHA-256, the first bad
// line and the last good hash, carrying over the last good rules under a
// new rules version. Every request of the old ledger stays rejected. An
// invalid by is an ErrInvalidBy (see ValidateBy).
func (g *Gate) Reset(ctx context.Context, by, reason string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateBy(by); err != nil {
		return err
	}
	if !validField(reason, 1024) {
		return errors.New("approval: reset needs a valid reason")
	}
	return g.withLockCtx(ctx, true, func() error {
		if err := g.catchUp(); err != nil {
			return err
		}
		b, exists, err := g.log.Snapshot(g.ctx)
		if err != nil {
			return fmt.Errorf("approval: reset: %w", err)
		}
		st := newLedgerState()
		rep := st.load(b, g.log.Name())
		if rep.OK && g.broken == nil {
			return ErrNotBroken
		}
		if rep.OK {
			rep = *g.broken
		}
		now := g.opts.Now().UTC()
		archive := g.log.ArchiveName(now)
		sum := sha256.Sum256(b)
		e := &entry{Seq: 1, At: now, Type: EntryReset, Prev: genesis, By: by, Reason: reason,
			Archived: archive, ArchivedSHA256: hex.EncodeToString(sum[:]), LastGoodHash: rep.HeadHash,
			Rules: copyRules(st.rules), RulesVersion: st.rulesVersion + 1}
		if rep.FirstBad != nil {
			e.BrokenLine = rep.FirstBad.Line
		}
		if !exists {
			e.Archived, e.ArchivedSHA256 = "", ""
			e.Reason += " (ledger file was missing)"
		}
		line, err := encode(e)
		if err != nil {
			return err
		}
		if err := g.log.Replace(g.ctx, archive, exists, Record{Seq: 1, Hash: e.Hash, Type: e.Type, Line: line}); err != nil {
			g.failed = true
			return err
		}
		return g.reload()
	})
}

func writeSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// quoteID is QuoteID.
func quoteID(id string) string { return QuoteID(id) }

// QuoteID quotes an ID for an error message: Go-quoted, its first 64
// bytes at most (cut at a character boundary) and then "… (N bytes)", so
// a hostile megabyte of input is not echoed back whole.
func QuoteID(id string) string {
	const most = 64
	if len(id) <= most {
		return fmt.Sprintf("%q", id)
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(id[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", id[:cut], len(id))
}
