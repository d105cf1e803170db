package approval

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Paused turns live beside the ledger, never in it.
//
// A Call's Resume payload (the agent's paused turn: conversation, system
// prompt with the memory block) is what a user may later ask to forget, and
// the append-only ledger can never forget. So when Check opens a request it
// writes the payload to <dir>/resume/<sha256hex>.json, where sha256hex is
// the lower-case hex SHA-256 of the payload bytes, durably (temp file,
// fsync, rename, fsync of the directory) before the request entry is
// appended, and the ledger stores only the reference {"ref":"<sha256hex>"}.
// That reference is what Request.Resume holds wherever a Request is
// returned (Get, List, Pending, Decision.Request and OnDecision callbacks);
// LoadResume turns it back into the payload, DropResume deletes the file
// once the turn has resumed, and ForgetActor deletes every file of an
// actor. Identical payloads share one file; a file still referenced by
// another open request is never deleted on behalf of a different one.
//
// That describes the file backend; a PostgreSQL gate (pgledger) keeps the
// payloads in the table approval_resume (ref, payload BYTEA) instead,
// stored in the same transaction as the request that references them.

// ResumeDir is the directory, under a gate's directory, holding the paused
// turns.
const ResumeDir = "resume"

// DefaultMaxResumeBytes is the default Options.MaxResumeBytes: 128 MiB,
// room for a turn carrying ten 5 MiB images in base64 plus its history.
const DefaultMaxResumeBytes = 128 << 20

// Errors of LoadResume. A missing file is reported as an error wrapping
// os.ErrNotExist.
var (
	// ErrResumeRef: the request carries no paused turn, or its reference is
	// not {"ref":"<64 lower-case hex>"}.
	ErrResumeRef = errors.New("approval: request has no valid paused-turn reference")
	// ErrResumeCorrupt: the file's SHA-256 differs from its reference (torn
	// write, disk corruption or tampering), or it is over MaxResumeBytes.
	ErrResumeCorrupt = errors.New("approval: paused-turn file does not match its reference")
)

// resumeRef is what the ledger stores in place of a payload.
type resumeRef struct {
	Ref string `json:"ref"`
}

// validRef reports whether s is 64 lower-case hex digits, so that it can
// only ever name a file directly inside the resume directory.
func validRef(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// parseRef extracts and validates the reference a stored Request.Resume
// holds.
func parseRef(stored json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(stored)) == 0 {
		return "", fmt.Errorf("%w: none stored", ErrResumeRef)
	}
	var r resumeRef
	if err := json.Unmarshal(stored, &r); err != nil {
		return "", fmt.Errorf("%w: %v", ErrResumeRef, err)
	}
	if !validRef(r.Ref) {
		return "", fmt.Errorf("%w: %q is not 64 lower-case hex digits", ErrResumeRef, r.Ref)
	}
	return r.Ref, nil
}

// storeResumeLocked stores payload under its content address durably
// and returns the reference JSON for the ledger and the bare ref. Caller
// holds the locks.
func (g *Gate) storeResumeLocked(payload json.RawMessage) (json.RawMessage, string, error) {
	sum := sha256.Sum256(payload)
	ref := hex.EncodeToString(sum[:])
	if err := g.log.StoreResume(g.ctx, ref, payload); err != nil {
		g.failed = true
		return nil, "", err
	}
	raw, err := json.Marshal(resumeRef{Ref: ref})
	return raw, ref, err
}

// refOpenLocked reports whether an open (pending or approved) request
// other than those in skip references ref. Caller holds g.mu.
func (g *Gate) refOpenLocked(ref string, skip func(*reqState) bool) bool {
	for _, rs := range g.st.reqs {
		if len(rs.rec.Resume) == 0 || skip != nil && skip(rs) {
			continue
		}
		if st := g.statusLocked(rs); st != StatusPending && st != StatusApproved {
			continue
		}
		if r, err := parseRef(rs.rec.Resume); err == nil && r == ref {
			return true
		}
	}
	return false
}

// removeResume deletes the payload of ref; a missing one is not an error.
// Caller holds the locks.
func (g *Gate) removeResume(ref string) error { return g.log.DeleteResume(g.ctx, ref) }

// LoadResume returns the paused-turn payload of req: the bytes that were
// Call.Resume when Check opened it, read from <dir>/resume/<ref>.json.
// req.Resume must be the stored reference {"ref":"<64 lower-case hex>"}
// (as in any Request the gate returns, including OnDecision's); nothing
// else is ever used as a path. Errors: ErrResumeRef (no or malformed
// reference), an error wrapping os.ErrNotExist when the file is gone
// (resumed already, forgotten, or never written), ErrResumeCorrupt, or a
// wrapped I/O error.
func (g *Gate) LoadResume(req Request) (json.RawMessage, error) {
	ref, err := parseRef(req.Resume)
	if err != nil {
		return nil, fmt.Errorf("approval: paused turn of %s: %w", req.ID, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), resumeTimeout)
	defer cancel()
	b, err := g.log.LoadResume(ctx, ref, g.opts.MaxResumeBytes)
	if errors.Is(err, ErrResumeCorrupt) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("approval: paused turn of %s: %w", req.ID, err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != ref {
		return nil, fmt.Errorf("%w: %s (request %s)", ErrResumeCorrupt, ref, req.ID)
	}
	return b, nil
}

// resumeTimeout bounds LoadResume and DropResume, which take no context.
const resumeTimeout = 30 * time.Second

// DropResume deletes the paused-turn file of req, typically once the turn
// has resumed (or its denial was handled). It is best-effort and silent: a
// missing or malformed reference, a file already gone or an I/O error do
// nothing. A file that another open request also references (an identical
// payload) is kept.
func (g *Gate) DropResume(req Request) {
	ref, err := parseRef(req.Resume)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), resumeTimeout)
	defer cancel()
	g.withLockCtx(ctx, true, func() error {
		if err := g.catchUpDeep(false); err != nil {
			return err
		}
		if g.refOpenLocked(ref, func(rs *reqState) bool { return rs.rec.ID == req.ID }) {
			return nil
		}
		return g.removeResume(ref)
	})
}

// ForgetActor forgets the paused turns of actorID: it deletes the resume
// file of every request of that actor (any status), then denies each of
// its pending requests as Decide(id, false, by) would, and returns how
// many it denied. Files go first, so an OnDecision callback fired for
// these denials finds no payload (LoadResume wraps os.ErrNotExist) and
// nothing of the conversation is resumed or re-persisted. Requests of
// other actors and their files are untouched. On a broken ledger nothing
// can be denied (every request is rejected already); the files of the
// requests before the first bad line are still deleted. Errors: an invalid
// actorID (ErrInvalidCall) or by (ErrInvalidBy), ctx's error, or the first I/O or ledger error (the rest
// is still attempted).
func (g *Gate) ForgetActor(ctx context.Context, actorID, by string) (denied int, err error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if actorID == "" || !validField(actorID, 256) {
		return 0, fmt.Errorf("%w: actor id %q", ErrInvalidCall, actorID)
	}
	if err := ValidateBy(by); err != nil {
		return 0, err
	}
	err = g.withLockCtx(ctx, true, func() error {
		if err := g.catchUp(); err != nil {
			return err
		}
		var first error
		keep := func(e error) {
			if first == nil {
				first = e
			}
		}
		var pending []*reqState
		refs := map[string]bool{}
		for _, id := range g.st.order {
			rs := g.st.reqs[id]
			if rs.rec.ActorID != actorID {
				continue
			}
			if ref, err := parseRef(rs.rec.Resume); err == nil {
				refs[ref] = true
			}
			if g.statusLocked(rs) == StatusPending {
				pending = append(pending, rs)
			}
		}
		for ref := range refs {
			if g.refOpenLocked(ref, func(rs *reqState) bool { return rs.rec.ActorID == actorID }) {
				continue // another actor's open request has the same payload
			}
			if err := g.removeResume(ref); err != nil {
				keep(fmt.Errorf("approval: forget paused turn %s: %w", ref, err))
				continue
			}
		}
		if g.broken != nil {
			return first
		}
		no := false
		for _, rs := range pending {
			e := &entry{Type: EntryDecision, RequestID: rs.rec.ID, Approved: &no, By: by, Binding: binding(&rs.rec)}
			if err := g.appendLocked(e); err != nil {
				keep(fmt.Errorf("approval: deny %s: %w", rs.rec.ID, err))
				if g.broken != nil {
					break
				}
				continue
			}
			denied++
		}
		return first
	})
	return denied, err
}

// traceEvent reports a durability step to a test's trace hook.
func (g *Gate) traceEvent(ev string) {
	if g.trace != nil {
		g.trace(ev)
	}
}
