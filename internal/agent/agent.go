// Package agent runs the turn of SPEC §5 in three stages: preTurn (actor,
// session, memory, state, tool set, system prompt), runLoop (model and tool
// calls, every call through the approval gate) and postTurn (persist nodes,
// update state, queue memory extraction, deliver).
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/trace"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/tendrilai/tendril/internal/metrics"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool"
)

// Options tune the turn.
type Options struct {
	AgentID           string
	MaxToolIterations int           // default 20
	ToolTimeout       time.Duration // per tool call, default 30s
	// MaxTokens is the reply room of every model request (its max_tokens),
	// default 4096; with a ContextWindow it is capped at ReplyShare of the
	// window (see ReplyRoom).
	MaxTokens int
	// ContextWindow is the model's context window in tokens
	// (model.contextWindow). When > 0 every request is fitted to it, by
	// session.EstimateTokens' estimate (see EstimateRequest):
	//
	//	system prompt (persona, anchors, memory block, skills, tools)
	//	+ tool definitions + history + this turn + ReplyRoom ≤ ContextWindow
	//
	// The memory block gets at most MemoryBlockShare of the window; history
	// gives way next, oldest first; the persona and anchors never do (see
	// fitRequest). 0 fits nothing: requests carry what History returns and
	// the whole memory block, as before.
	ContextWindow int
	// MemoryBlockShare is the memory block's budget as a fraction of
	// ContextWindow (memory.blockShare): default 0.15, at most 1.
	MemoryBlockShare float64
	// ReplyShare caps the reply room at this fraction of ContextWindow,
	// so that a small window is not all reserved for the reply: default
	// 0.25, at most 0.9.
	ReplyShare float64
	Clock      func() time.Time
	Logger     *slog.Logger
	Metrics    *metrics.Metrics
	// Tracker counts in-flight work for /ping HealthyBusy.
	Tracker interface{ Begin() func() }
}

// Agent runs turns. It is safe for concurrent use: turns on one session run
// one after another in arrival order, different sessions run in parallel.
type Agent struct {
	opt   Options
	deps  Deps
	locks *keyedFIFO
	seq   atomic.Uint64
	// reconciled holds the sessions (Key.String) whose last turn's memory
	// events this process has checked (reconcile).
	reconciled sync.Map
}

// New returns an Agent. deps.Sessions must be set.
func New(opt Options, deps Deps) (*Agent, error) {
	if deps.Sessions == nil {
		return nil, errors.New("agent: a session store is required")
	}
	if opt.AgentID == "" {
		opt.AgentID = "main"
	}
	if opt.MaxToolIterations <= 0 {
		opt.MaxToolIterations = 20
	}
	if opt.ToolTimeout <= 0 {
		opt.ToolTimeout = 30 * time.Second
	}
	if opt.MaxTokens <= 0 {
		opt.MaxTokens = 4096
	}
	if opt.ContextWindow < 0 {
		opt.ContextWindow = 0
	}
	if opt.MemoryBlockShare <= 0 {
		opt.MemoryBlockShare = DefaultMemoryBlockShare
	}
	if opt.MemoryBlockShare > 1 {
		opt.MemoryBlockShare = 1
	}
	if opt.ReplyShare <= 0 {
		opt.ReplyShare = DefaultReplyShare
	}
	if opt.ReplyShare > 0.9 {
		opt.ReplyShare = 0.9
	}
	if opt.Clock == nil {
		opt.Clock = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if deps.History == nil {
		store := deps.Sessions
		deps.History = func(ctx context.Context, key session.Key, _ string) ([]session.Node, error) {
			leaf, err := store.Leaf(ctx, key)
			if err != nil || leaf == "" {
				return nil, err
			}
			return store.Path(ctx, key, leaf, 50)
		}
	}
	return &Agent{opt: opt, deps: deps, locks: newKeyedFIFO()}, nil
}

// turn is the working state of one turn, shared by the three stages and
// serialised into the approval request when the turn pauses.
type turn struct {
	ID        string          `json:"id"`
	Req       Request         `json:"req"`
	Key       session.Key     `json:"key"`
	Level     state.Level     `json:"level"` // "NORMAL" | "WARNING" | "CRITICAL"
	System    string          `json:"system"`
	ToolNames []string        `json:"tools"`
	Vision    bool            `json:"vision"`
	Messages  []model.Message `json:"messages"`
	// Pending tool uses of the last assistant message, and the results
	// gathered so far; used when the turn pauses mid-batch.
	PendingUses []model.Block `json:"pendingUses,omitempty"`
	Results     []model.Block `json:"results,omitempty"`
	Iteration   int           `json:"iteration"`
	// Nodes to persist in postTurn (the user node is persisted up front
	// when a turn pauses).
	Nodes        []session.Node `json:"nodes"`
	UserNodeSent bool           `json:"userNodeSent"`
	MemoriesUsed int            `json:"memoriesUsed"`
	Model        string         `json:"model"`
	Compacted    bool           `json:"compacted"`
	started      time.Time
	tools        map[string]tool.Tool
	// modelTime sums the wall time of this process's model calls for the
	// turn (not persisted: a resumed turn counts its own calls).
	modelTime time.Duration
}

// Invoke runs one turn to completion, or until it pauses at the approval
// gate (Result.PendingApproval set). Errors: ErrInvalidRequest,
// ErrInvalidActorID, model.ErrNotConfigured, a *model.APIError or a wrapped
// storage error.
func (a *Agent) Invoke(ctx context.Context, req Request) (*Result, error) {
	if err := validate(&req); err != nil {
		return nil, err
	}
	if a.opt.Tracker != nil {
		defer a.opt.Tracker.Begin()()
	}
	key := a.sessionKey(req)
	region := trace.StartRegion(ctx, "wait: session lock")
	unlock, err := a.locks.Lock(ctx, keyString(key))
	region.End()
	if err != nil {
		return nil, err
	}
	defer unlock()

	start := a.opt.Clock()
	t, err := a.preTurn(ctx, req, key)
	if err != nil {
		a.observeTurn(req.Channel, start, err)
		return nil, err
	}
	t.started = start
	res, err := a.runLoop(ctx, t)
	if err == nil && res.PendingApproval == nil {
		err = a.postTurn(ctx, t, res)
	}
	a.observeTurn(req.Channel, start, err)
	return res, err
}

func (a *Agent) observeTurn(channel string, start time.Time, err error) {
	if a.opt.Metrics == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = ErrorCode(err)
		if outcome != CodeCanceled { // a Stop is not an error
			a.opt.Metrics.Errors.WithLabelValues(outcome).Inc()
		}
	}
	a.opt.Metrics.TurnDuration.WithLabelValues(channel, outcome).Observe(time.Since(start).Seconds())
}

// CodeCanceled is ErrorCode's code for a turn its caller canceled (the
// dashboard's Stop, a client that closed a CLI chat): the turn ended on
// request, not because the model failed, so it counts in
// tendril_turn_duration_seconds{outcome="CANCELED"} and not in
// tendril_errors_total.
const CodeCanceled = "CANCELED"

// ErrorCode maps an Invoke error to the SPEC §1 error code, or
// CodeCanceled for a turn whose context was canceled (a turn that ran
// past its deadline is MODEL_ERROR).
func ErrorCode(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.Canceled):
		return CodeCanceled
	case errors.Is(err, ErrInvalidRequest):
		return "INVALID_REQUEST"
	case errors.Is(err, ErrInvalidActorID):
		return "INVALID_ACTOR_ID"
	case errors.Is(err, model.ErrNotConfigured):
		return "MODEL_NOT_CONFIGURED"
	case errors.Is(err, ErrApprovalPending):
		return "APPROVAL_PENDING"
	case errors.Is(err, ErrNotReady):
		return "NOT_READY"
	case errors.Is(err, ErrForbidden):
		return "FORBIDDEN"
	case errors.Is(err, ErrActorForgotten):
		return "ACTOR_FORGOTTEN"
	case errors.Is(err, context.DeadlineExceeded):
		return "MODEL_ERROR"
	}
	var apiErr *model.APIError
	if errors.As(err, &apiErr) || errors.Is(err, model.ErrContextOverflow) || errors.Is(err, errModel) {
		return "MODEL_ERROR"
	}
	return "INTERNAL_ERROR"
}

var errModel = errors.New("model call failed")

// validate checks and normalises a request.
func validate(req *Request) error {
	if strings.TrimSpace(req.Message) == "" && len(req.Images) == 0 {
		return fmt.Errorf("%w: message is required", ErrInvalidRequest)
	}
	if len(req.Images) > MaxImages {
		return fmt.Errorf("%w: at most %d images per turn, got %d", ErrInvalidRequest, MaxImages, len(req.Images))
	}
	if len(req.Message) > 256<<10 {
		return fmt.Errorf("%w: message longer than 256 KiB", ErrInvalidRequest)
	}
	if strings.ContainsRune(req.Message, 0) || !utf8.ValidString(req.Message) {
		// Neither can be stored in every backend's memory (PostgreSQL text
		// refuses NUL): refuse the turn rather than forget it silently.
		return fmt.Errorf("%w: message contains a NUL byte or invalid UTF-8", ErrInvalidRequest)
	}
	if err := ValidateActorID(req.ActorID); err != nil {
		return fmt.Errorf("%w: actor_id %v", ErrInvalidActorID, err)
	}
	if !hasVisible(req.Message) && len(req.Images) == 0 {
		return fmt.Errorf("%w: message has no visible text", ErrInvalidRequest)
	}
	if req.SessionID != "" {
		if err := ValidateID(req.SessionID); err != nil {
			return fmt.Errorf("%w: session_id %v", ErrInvalidRequest, err)
		}
	}
	if req.Channel == "" {
		req.Channel = "api"
	}
	if err := ValidateID(req.Channel); err != nil {
		return fmt.Errorf("%w: channel %v", ErrInvalidRequest, err)
	}
	if strings.ContainsAny(req.Channel, ":/") {
		// Session keys are "<channel>:<id>": a channel is one name.
		return fmt.Errorf("%w: channel %q may not contain ':' or '/'", ErrInvalidRequest, req.Channel)
	}
	if req.InvocationType == "" {
		req.InvocationType = "api"
	}
	for i, img := range req.Images {
		if len(img.Data) == 0 {
			return fmt.Errorf("%w: images[%d] has no data", ErrInvalidRequest, i)
		}
		if len(img.Data) > MaxImageBytes {
			return fmt.Errorf("%w: images[%d] is %d bytes; the limit is %d", ErrInvalidRequest, i, len(img.Data), MaxImageBytes)
		}
		switch img.MediaType {
		case "image/jpeg", "image/png", "image/gif", "image/webp":
		default:
			return fmt.Errorf("%w: images[%d] media_type %q is not image/jpeg, image/png, image/gif or image/webp", ErrInvalidRequest, i, img.MediaType)
		}
		// The bytes must be an image too (WHATWG MIME sniffing), or the
		// provider would reject the whole turn.
		if sniffed := http.DetectContentType(img.Data); !strings.HasPrefix(sniffed, "image/") {
			return fmt.Errorf("%w: images[%d] is declared %s but its bytes look like %s", ErrInvalidRequest, i, img.MediaType, sniffed)
		}
	}
	return nil
}

// Image limits per turn: Telegram albums hold up to 10 images, and the
// providers reject images over a few MiB.
const (
	MaxImages     = 10
	MaxImageBytes = 5 << 20
)

// hasVisible reports whether s has a letter, digit, mark, punctuation or
// symbol (not only spaces, zero-width or control characters).
func hasVisible(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsPunct(r) || unicode.IsSymbol(r) || unicode.IsMark(r) {
			return true
		}
	}
	return false
}

// ValidateID accepts 1–256 bytes with no control characters, no invisible
// characters that disguise an ID (invisible: bidirectional overrides,
// zero-width spaces, line separators, blank fillers), no blank at either
// end, and at least one visible character. Storage backends encode IDs further; this
// only rejects what no channel produces.
func ValidateID(id string) error { return validateID(id, false) }

// ValidateStoredID is ValidateID without the invisible-character rule:
// for paths that must reach IDs stored before that rule (reading and
// forgetting an actor), never for creating one.
func ValidateStoredID(id string) error { return validateID(id, true) }

func validateID(id string, stored bool) error {
	if strings.TrimSpace(id) == "" {
		return errors.New("is required")
	}
	if len(id) > 256 {
		return errors.New("is longer than 256 bytes")
	}
	for _, r := range id {
		switch {
		case unicode.IsControl(r) || r == unicode.ReplacementChar:
			return errors.New("contains a control or invalid character")
		case !stored && invisible(r):
			return fmt.Errorf("contains the invisible character U+%04X", r)
		}
	}
	if !hasVisible(id) {
		return errors.New("has no visible character")
	}
	if !stored && strings.TrimSpace(id) != id {
		// "s1 " lists beside "s1" as if it were the same ID
		return errors.New("begins or ends with a blank")
	}
	return nil
}

// invisible reports the characters an ID may not hold: an ID
// holding one displays as another ID, or as none. They are the
// bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E,
// U+2066–U+2069; Unicode UAX #9, CVE-2021-42574), the zero-width space
// and word joiners (U+200B, U+2060–U+2064, U+FEFF), the soft hyphen
// (U+00AD), the line and paragraph separators (U+2028, U+2029), and the
// letters and marks that render blank: the Hangul fillers (U+115F, U+1160,
// U+3164, U+FFA0), the combining grapheme joiner (U+034F), the Mongolian
// vowel separator (U+180E), the Khmer inherent vowels (U+17B4, U+17B5) and
// the Braille pattern blank (U+2800). The joiners that scripts and emoji
// need (U+200C, U+200D, the tag characters of flag sequences) stay
// allowed.
func invisible(r rune) bool {
	switch {
	case r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
		return true
	case r == 0x200b || (r >= 0x2060 && r <= 0x2064) || r == 0xfeff || r == 0x00ad:
		return true
	case r == 0x2028 || r == 0x2029:
		return true
	case r == 0x115f || r == 0x1160 || r == 0x3164 || r == 0xffa0:
		return true
	case r == 0x034f || r == 0x180e || r == 0x17b4 || r == 0x17b5 || r == 0x2800:
		return true
	}
	return false
}

// ValidateActorID is ValidateID for an actor, which also may not contain
// SessionSep: "api:alice~work" would own the key of alice's session
// "work" (sessionKey) and lock her out of it.
func ValidateActorID(id string) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	if strings.Contains(id, SessionSep) {
		return fmt.Errorf("contains %q, which joins an actor and a session ID in session keys", SessionSep)
	}
	return nil
}

// sessionKey derives the session of a request. Sessions are namespaced by
// their actor so that no request can name, squat on or read another
// actor's session:
//
//   - without a session_id the session is the actor's own on that channel:
//     "telegram:123" on channel telegram is "123" (the file
//     telegram_123.jsonl); an actor whose prefix differs from the channel
//     keeps its whole ID, so "api:me" and "other:me" never share one;
//   - a session_id S chosen by the client becomes "<owner>~S".
func (a *Agent) sessionKey(req Request) session.Key {
	owner := SessionOwner(req.ActorID, req.Channel)
	id := owner
	if req.SessionID != "" {
		id = owner + SessionSep + req.SessionID
	}
	return session.Key{AgentID: a.opt.AgentID, Channel: req.Channel, ID: id}
}

// SessionOwner is the owner part of an actor's session keys on a channel:
// the actor ID without the channel's own prefix ("telegram:123" on
// telegram → "123"), or the whole actor ID.
func SessionOwner(actorID, channel string) string {
	if rest, ok := strings.CutPrefix(actorID, channel+":"); ok && rest != "" && !strings.Contains(rest, ":") {
		return rest
	}
	return actorID
}

// OwnsSession reports whether key belongs to actorID under the naming of
// sessionKey.
func OwnsSession(key session.Key, actorID string) bool {
	owner := SessionOwner(actorID, key.Channel)
	return key.ID == owner || strings.HasPrefix(key.ID, owner+SessionSep)
}

// SessionSep joins a session's owner and the client's session_id in its
// key ("bea~garden").
const SessionSep = "~"

// checkOwner refuses a session whose messages were written by another
// actor: a session belongs to the actor that started it, and its history
// must never reach another actor's model call. When the two actors name
// the same keys on channel (SessionOwner: "carol" and "api:carol" on api)
// the error says so, since only the form of the ID differs.
func checkOwner(history []session.Node, actorID, channel string) error {
	for _, n := range history {
		if owner, ok := n.Metadata["actorId"].(string); ok && owner != "" && owner != actorID {
			if SessionOwner(owner, channel) == SessionOwner(actorID, channel) {
				return fmt.Errorf("%w: session belongs to actor %q: on channel %q the actor IDs %q and %q name the same sessions; send one form of the ID, or another session_id",
					ErrForbidden, owner, channel, owner, actorID)
			}
			return fmt.Errorf("%w: session belongs to another actor", ErrForbidden)
		}
	}
	return nil
}

func keyString(k session.Key) string { return k.AgentID + "\x00" + k.Channel + "\x00" + k.ID }

func (a *Agent) newID(prefix string) string {
	return prefix + ulid.MustNew(ulid.Timestamp(a.opt.Clock()), ulid.DefaultEntropy()).String()
}
