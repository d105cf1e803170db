package assistant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/approval"
)

// A paused turn owns its session until it is approved, denied or expired
// (SPEC §5, §6.3): a new message to that session waits behind it and is
// answered as its own turn afterwards, so it is never merged into the
// paused message and never re-opens the same call. An expired request is
// closed like a denied one, with a stored "not approved: expired" tool
// result, so the tree stays well formed.
//
// A request blocks its session while its saved paused turn exists: the
// file is dropped when the resume (or the close) finishes.

// ErrBusySession: the session's turn waits for an approval that nothing
// in this process can resume. It is an agent.ErrApprovalPending too, so
// its code is APPROVAL_PENDING (HTTP 409), not INTERNAL_ERROR.
var ErrBusySession error = busySession{}

type busySession struct{}

func (busySession) Error() string { return "session busy" }

// Is makes errors.Is(ErrBusySession, agent.ErrApprovalPending) hold.
func (busySession) Is(target error) bool { return target == agent.ErrApprovalPending }

// paused tracks resumes in flight and wakes waiting turns when one ends.
type paused struct {
	mu      sync.Mutex
	running map[string]bool // request IDs being resumed or closed
	changed chan struct{}   // closed and replaced when a resume ends
}

func newPaused() *paused {
	return &paused{running: map[string]bool{}, changed: make(chan struct{})}
}

// begin marks a request as being resumed; false if it already is.
func (p *paused) begin(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running[id] {
		return false
	}
	p.running[id] = true
	return true
}

// resuming reports whether a resume of id runs in this process.
func (p *paused) resuming(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running[id]
}

func (p *paused) end(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.running, id)
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *paused) wait() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

type approvalWaitKey struct{}

// WithApprovalWait returns a context whose turns call report once for each
// approval request they wait behind: a paused turn of the same session
// whose tool call is still pending a decision (a chained pause of the
// resumed turn is reported too). Without it such a wait is silent; the
// CLI prints it, and the runtime streams it as an "approval_wait" frame
// (runtime.ApprovalWaitReporter). report is called from the turn's
// goroutine, before the turn runs.
func (a *Assistant) WithApprovalWait(ctx context.Context, report func(agent.PendingApproval)) context.Context {
	return context.WithValue(ctx, approvalWaitKey{}, report)
}

// waitReport is one turn's reporting of the approvals it waits behind
// (WithApprovalWait): each request once as waiting, then once more, with
// its status, when it is decided, expires or is closed. The turn may hear
// of a request while queued behind its session's earlier messages
// (reportPending) and then while it waits for the paused turn itself
// (waitPaused); one waitReport spans both.
type waitReport struct {
	report func(agent.PendingApproval)
	mu     sync.Mutex
	open   map[string]agent.PendingApproval // reported as waiting, not yet as decided
	seen   map[string]bool
}

type waitReportKey struct{}

// withWaitReport puts a waitReport around ctx's WithApprovalWait function
// (ctx unchanged when it has none).
func withWaitReport(ctx context.Context) context.Context {
	report, ok := ctx.Value(approvalWaitKey{}).(func(agent.PendingApproval))
	if !ok || report == nil {
		return ctx
	}
	return context.WithValue(ctx, waitReportKey{}, &waitReport{report: report, open: map[string]agent.PendingApproval{}, seen: map[string]bool{}})
}

func waitReportOf(ctx context.Context) *waitReport {
	w, _ := ctx.Value(waitReportKey{}).(*waitReport)
	return w
}

// waiting reports r as a request the turn waits for, once.
func (w *waitReport) waiting(r approval.Request) {
	if w == nil {
		return
	}
	w.mu.Lock()
	if w.seen[r.ID] {
		w.mu.Unlock()
		return
	}
	p := pendingApproval(r)
	w.seen[r.ID], w.open[r.ID] = true, p
	w.mu.Unlock()
	w.report(p)
}

// settle reports, with their status, the requests reported as waiting
// that are no longer pending: status looks one up ("" when it is still
// pending).
func (w *waitReport) settle(status func(id string) string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	var done []agent.PendingApproval
	for id, p := range w.open {
		if st := status(id); st != "" {
			p.Status = st
			done = append(done, p)
			delete(w.open, id)
		}
	}
	w.mu.Unlock()
	slices.SortFunc(done, func(a, b agent.PendingApproval) int { return strings.Compare(a.RequestID, b.RequestID) })
	for _, p := range done {
		w.report(p)
	}
}

// reportPending reports the pending requests of the paused turns of the
// session (channel, id) to the turn's waitReport: what a message queued
// behind the session's earlier messages waits for. A ledger that cannot
// be read reports nothing (waitPaused says why later).
func (a *Assistant) reportPending(ctx context.Context, channel, sessionID string) {
	w := waitReportOf(ctx)
	if w == nil {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	reqs, err := a.gate.List(lctx)
	cancel()
	if err != nil {
		return
	}
	for _, r := range reqs {
		if r.SessionID != sessionID || r.Channel != channel || len(r.Resume) == 0 || r.Status != approval.StatusPending {
			continue
		}
		if _, err := a.gate.LoadResume(r); err == nil {
			w.waiting(r)
		}
	}
}

// settleReported reports the decided ones among the requests the turn was
// told it waits for, by their status in the ledger (a request the ledger
// no longer holds is "closed").
func (a *Assistant) settleReported(ctx context.Context, reqs []approval.Request) {
	w := waitReportOf(ctx)
	if w == nil {
		return
	}
	w.mu.Lock()
	none := len(w.open) == 0
	w.mu.Unlock()
	if none {
		return
	}
	byID := make(map[string]approval.Status, len(reqs))
	for _, r := range reqs {
		byID[r.ID] = r.Status
	}
	w.settle(func(id string) string {
		st, ok := byID[id]
		switch {
		case !ok:
			return "closed"
		case st == approval.StatusPending:
			return ""
		}
		return string(st)
	})
}

// pendingApproval is req as the API shows a paused call.
func pendingApproval(req approval.Request) agent.PendingApproval {
	return agent.PendingApproval{RequestID: req.ID, ToolName: req.Tool, Args: string(req.Args), ExpiresAt: req.ExpiresAt.Unix()}
}

// waitPaused blocks until no paused turn owns the session (channel, id):
// approved and denied ones are resumed by onDecision, expired ones are
// closed here. A decision made by another process is seen within the
// ledger watcher's second. Each pending request it waits behind is
// reported once to the context's WithApprovalWait function.
func (a *Assistant) waitPaused(ctx context.Context, channel, sessionID string, blocked func()) error {
	w := waitReportOf(ctx)
	for {
		blocking := false
		var undecided []approval.Request
		lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		reqs, err := a.gate.List(lctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: approval ledger: %v", ErrNotReady, err)
		}
		for _, r := range reqs {
			if r.SessionID != sessionID || r.Channel != channel || len(r.Resume) == 0 {
				continue
			}
			if _, err := a.gate.LoadResume(r); err != nil {
				continue // resumed, closed or forgotten
			}
			switch r.Status {
			case approval.StatusPending:
				blocking = true
				undecided = append(undecided, r)
			case approval.StatusApproved:
				blocking = true
			case approval.StatusExpired, approval.StatusInvalidated, approval.StatusRejected:
				a.closePaused(r, "the approval request "+string(r.Status))
				blocking = true
			case approval.StatusExecuted:
				// Its call started. A resume still running holds the
				// session's lock and drops the saved turn when it ends; one
				// saved with the lock free was cut short (kill -9 mid-call):
				// finish it, or the session waits for it for ever.
				if err := a.finishInterrupted(ctx, r); err != nil {
					return err
				}
				blocking = true
			default:
				// Denied or executed but not yet resumed here (decided by
				// another process before we saw it): Refresh fires it.
				blocking = true
			}
		}
		a.settleReported(ctx, reqs)
		if !blocking {
			return nil
		}
		a.mu.Lock()
		started := a.started
		a.mu.Unlock()
		if !started {
			// Nothing in this process resumes paused turns (a CLI command
			// without a server): say so instead of waiting for the expiry.
			// With a database another instance may serve the session:
			// it resumes the turn once decided, and the message can
			// then be sent again.
			then := "or start tendril serve"
			if a.db != nil {
				then = "then send this message again (an instance serving this database resumes the paused turn)"
			}
			if len(undecided) > 0 {
				id := undecided[0].ID
				return fmt.Errorf("%w: a turn of this session waits for approval %s; decide it (tendril approvals approve %s, or deny), %s", ErrBusySession, id, id, then)
			}
			return fmt.Errorf("%w: a turn of this session waits for approval; decide it (tendril approvals list), %s", ErrBusySession, then)
		}
		blocked() // before the report: what hears it may act at once
		for _, r := range undecided {
			w.waiting(r)
		}
		t := time.NewTimer(time.Second)
		select {
		case <-a.stopping.Done():
			t.Stop()
			return fmt.Errorf("%w: shutting down", ErrNotReady)
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-a.paused.wait():
		case <-t.C:
			if err := a.gate.Refresh(ctx); err != nil {
				a.log.Warn("approval ledger refresh failed", "err", err)
			}
		}
		t.Stop()
	}
}

// closeExpired closes every paused turn whose request expired (or was
// invalidated or rejected) without a decision, and finishes every paused
// turn cut short mid-call: its request executed, its saved turn still
// there and no resume of it running here (a process killed after it
// redeemed the approval; resume finds it executed with the session's lock
// free and finishes it as finishAsInterrupted does). So the person who
// approved the call gets the turn's reply after a crash and a restart
// without writing again, and with several instances the survivors finish
// what a dead one left (a resume still running in another instance holds
// the session's lock and drops the saved turn before releasing it, so the
// one waiting here then finds nothing to do). The ledger watcher calls it
// on each tick (approval.WatchOptions.Tick).
func (a *Assistant) closeExpired(ctx context.Context) {
	reqs, err := a.gate.List(ctx)
	if err != nil {
		return
	}
	for _, r := range reqs {
		switch r.Status {
		case approval.StatusExpired, approval.StatusInvalidated, approval.StatusRejected, approval.StatusExecuted:
		default:
			continue
		}
		if len(r.Resume) == 0 || a.closed(r.ID) || a.paused.resuming(r.ID) {
			continue
		}
		if _, err := a.gate.LoadResume(r); err != nil {
			a.markClosed(r.ID)
			continue
		}
		if r.Status == approval.StatusExecuted {
			a.resume(r, true, "", outcomeApproved)
			continue
		}
		a.closePaused(r, "the approval request "+string(r.Status))
	}
}

func (a *Assistant) closed(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closedIDs[id]
}

func (a *Assistant) markClosed(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closedIDs[id] = true
}

// Outcomes of tendril_approvals_total{outcome} counted by the assistant
// (the agent counts "requested" when a call pauses). Each request is
// counted once, by the instance that resumes or closes its paused turn,
// whichever process recorded the decision; a request forgotten with its
// actor counts as denied when Forget denies it.
const (
	outcomeApproved = "approved" // an operator approved it
	outcomeDenied   = "denied"   // an operator denied it, or Forget did
	outcomeExpired  = "expired"  // it expired undecided
	outcomeRefused  = "refused"  // the gate can no longer honour it: rules changed since, or the ledger is broken
)

// closeOutcome is the outcome of a request closed without a decision.
func closeOutcome(s approval.Status) string {
	if s == approval.StatusExpired {
		return outcomeExpired
	}
	return outcomeRefused
}

// closePaused ends a paused turn whose request can no longer be approved
// (expired, invalidated or rejected, as req.Status says): the pending call
// gets the tool result "not approved: <why>" and the model finishes the
// turn.
func (a *Assistant) closePaused(req approval.Request, why string) {
	a.resume(req, false, why, closeOutcome(req.Status))
}

// resume continues (approved) or closes (not approved, with reason) the
// paused turn of req on a goroutine the assistant owns; a request is
// resumed at most once at a time, and its saved turn is dropped after.
// The instance that takes the paused turn counts outcome in
// tendril_approvals_total, once per request.
func (a *Assistant) resume(req approval.Request, approved bool, reason, outcome string) {
	payload, err := a.gate.LoadResume(req)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("paused turn cannot resume: its saved state is unreadable", "request", req.ID, "err", err)
		}
		return
	}
	if !a.paused.begin(req.ID) {
		return
	}
	started := a.goBackground(func(bg context.Context) {
		defer a.paused.end(req.ID)
		defer a.markClosed(req.ID)
		defer a.gate.DropResume(req)
		defer a.busy.Begin()()
		defer a.actors.rlock(req.ActorID)()
		ctx, cancel := context.WithTimeout(bg, ResumeTimeout)
		defer cancel()
		// Every instance sharing the ledger sees the decision: the one that
		// takes the session's lock first resumes, and the saved turn is
		// dropped before the lock is released, so the others find nothing.
		lctx, release, err := a.locks.turn(ctx, req.Channel+"\x00"+req.SessionID, req.ActorID, nil)
		if err != nil {
			a.log.Warn("paused turn did not resume", "request", req.ID, "err", err)
			return
		}
		defer func() { a.gate.DropResume(req); release() }()
		if payload, err = a.gate.LoadResume(req); err != nil {
			return // resumed or closed by another instance meanwhile
		}
		if approved {
			// Redeemed already, its saved turn still here and the lock
			// ours: the instance that redeemed it died mid-call (it held
			// the lock until then). Redeeming again would be refused and
			// lose the turn.
			if cur, err := a.gate.Get(lctx, req.ID); err == nil && cur.Status == approval.StatusExecuted {
				a.finishAsInterrupted(lctx, req, payload)
				return
			}
		}
		a.metrics.Approvals.WithLabelValues(outcome).Inc()
		res, err := a.agent.Resume(lctx, req.ID, approved, reason, payload)
		if err != nil {
			a.log.Warn("paused turn did not resume", "request", req.ID, "code", agent.ErrorCode(err), "err", err)
			return
		}
		a.log.Info("paused turn finished", "request", req.ID, "approved", approved, "reason", reason, "session", res.SessionID)
	})
	if !started {
		a.paused.end(req.ID)
		a.log.Info("shutting down: the paused turn resumes at the next start", "request", req.ID)
	}
}

// finishInterrupted finishes the paused turn of req, an executed request
// whose saved turn is still there once the session's lock is free: the
// process that redeemed the approval and started the call stopped before
// the turn was recorded (a resume in flight, here or on another instance,
// holds the lock until it drops the saved turn). The call is not run again
// (an approval is redeemed once); it gets agent.InterruptedOutcome as its
// result and the model finishes the turn, which is stored and delivered.
// Nothing happens while this process resumes req itself, or when another
// instance finished it meanwhile. Errors: ErrNotReady when the session's
// lock cannot be taken; ctx's error.
func (a *Assistant) finishInterrupted(ctx context.Context, req approval.Request) error {
	if !a.paused.begin(req.ID) {
		return nil // resuming here: the wait sees it end
	}
	defer a.paused.end(req.ID)
	defer a.actors.rlock(req.ActorID)()
	lctx, release, err := a.locks.turn(ctx, req.Channel+"\x00"+req.SessionID, req.ActorID, nil)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %v", ErrNotReady, err)
	}
	defer release()
	payload, err := a.gate.LoadResume(req)
	if err != nil {
		return nil // finished (or forgotten) while we waited for the lock
	}
	if cur, err := a.gate.Get(lctx, req.ID); err != nil || cur.Status != approval.StatusExecuted {
		return nil
	}
	a.finishAsInterrupted(lctx, req, payload)
	a.gate.DropResume(req)
	a.markClosed(req.ID)
	return nil
}

// finishAsInterrupted finishes the paused turn payload of req, executed by
// a process that stopped mid-call, with agent.ResumeInterrupted. The
// caller holds the session's lock and drops the saved turn after.
func (a *Assistant) finishAsInterrupted(lctx context.Context, req approval.Request, payload json.RawMessage) {
	a.log.Warn("paused turn was cut short after its approved call started; finishing it with an unknown outcome",
		"request", req.ID, "tool", req.Tool, "session", req.SessionID)
	if _, err := a.agent.ResumeInterrupted(lctx, req.ID, payload); err != nil {
		a.log.Warn("interrupted paused turn did not finish; its saved turn is dropped so the session goes on",
			"request", req.ID, "code", agent.ErrorCode(err), "err", err)
	}
}
