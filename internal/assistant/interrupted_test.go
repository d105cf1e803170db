package assistant

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/state"
)

// A process killed after it redeemed an approval and started the call, but
// before the resumed turn was recorded, leaves an executed request with its
// saved turn. The session's next message finishes that turn first (unless
// the restarted server's ledger watcher did already), with the call's
// outcome unknown and the call not run again, and is then answered;
// before, it waited behind the saved turn until it timed out, and so did
// every later message of the session.
func TestInterruptedResumeDoesNotBlockTheSession(t *testing.T) {
	fake, c, req, call, before := interruptedResume(t)
	ctx := context.Background()
	id := req.ID
	tctx, cancel := context.WithTimeout(ctx, time.Minute) // a hang guard, not a timing assertion
	defer cancel()
	res, err := c.Invoke(tctx, agent.Request{Message: "what next?", ActorID: "api:me", Channel: "api", SessionID: "s1"})
	if err != nil {
		t.Fatalf("the session's next message: %v", err)
	}
	if res.Text != "echo: what next?" {
		t.Errorf("reply %q, want the echo of the new message", res.Text)
	}
	var outcomes []string
	for _, s := range fake.Requests()[before:] {
		outcomes = append(outcomes, s.LastUserText())
	}
	if len(outcomes) != 2 || !strings.HasSuffix(outcomes[0], agent.InterruptedOutcome) || outcomes[1] != "what next?" {
		t.Errorf("model calls after the restart saw %q, want the interrupted call's outcome, then the new message", outcomes)
	}
	if _, err := c.gate.LoadResume(req); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("saved turn after it finished: %v, want it dropped", err)
	}
	// The call ran no second time: the gate refuses the spent approval.
	if _, err := c.gate.Authorize(ctx, id, call, state.Normal); err == nil {
		t.Error("the executed approval was redeemed again")
	}
}

// The restarted server finishes the cut-short turn by itself, with no new
// message and no decision: its ledger watcher finds the request executed,
// its saved turn still there and the session's lock free. The person who
// approved the call gets the turn's reply without writing again. (With
// several instances the one that took the lock and died leaves the same
// state, and the survivors' watchers finish it the same way.) The call is
// not run again, and the next message of the session is answered at once.
func TestInterruptedResumeFinishedWithoutANewMessage(t *testing.T) {
	fake, c, req, call, before := interruptedResume(t)
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute) // a hang guard, not a timing assertion
	for {
		if _, err := c.gate.LoadResume(req); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cut-short turn was not finished without a new message")
		}
		time.Sleep(20 * time.Millisecond)
	}
	seen := fake.Requests()[before:]
	if len(seen) != 1 || !strings.HasSuffix(seen[0].LastUserText(), agent.InterruptedOutcome) {
		var got []string
		for _, s := range seen {
			got = append(got, s.LastUserText())
		}
		t.Fatalf("model calls after the restart saw %q, want one with the interrupted call's outcome", got)
	}
	if _, err := c.gate.Authorize(ctx, req.ID, call, state.Normal); err == nil {
		t.Error("the executed approval was redeemed again")
	}
	tctx, cancel := context.WithTimeout(ctx, time.Minute) // a hang guard
	defer cancel()
	res, err := c.Invoke(tctx, agent.Request{Message: "and now?", ActorID: "api:me", Channel: "api", SessionID: "s1"})
	if err != nil || res.Text != "echo: and now?" {
		t.Fatalf("the next message: %+v, %v", res, err)
	}
}

// interruptedResume leaves, in a fresh home, a paused turn whose approval
// was redeemed (its call started) by a process that then died, and
// returns a started assistant on that home with the request, its call and
// how many model requests the fake had seen before that assistant started.
func interruptedResume(t *testing.T) (*modeltest.Server, *Assistant, approval.Request, approval.Call, int) {
	t.Helper()
	fake := modeltest.NewOpenAI(t)
	cfg := testConfig(t, fake, nil)
	ctx := context.Background()
	open := func(start bool) *Assistant { t.Helper(); return openConfig(t, cfg, start) }

	// 1. A turn pauses at the gate.
	a := open(true)
	fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "notes", Args: `{"action":"add","text":"fig pruned"}`}}})
	res, err := a.Invoke(ctx, agent.Request{Message: "note: fig pruned", ActorID: "api:me", Channel: "api", SessionID: "s1"})
	if err != nil || res.PendingApproval == nil {
		t.Fatalf("no paused turn: %v %+v", err, res)
	}
	id := res.PendingApproval.RequestID
	a.Close()

	// 2. The crash: the approval is redeemed (the call starts) and the
	// process dies before the turn is recorded. A process that does not
	// serve decides and redeems it without resuming anything.
	b := open(false)
	req, err := b.gate.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.gate.Decide(ctx, id, true, "cli:ana"); err != nil {
		t.Fatal(err)
	}
	call := approval.Call{AgentID: req.AgentID, ActorID: req.ActorID, SessionID: req.SessionID, Channel: req.Channel, Tool: req.Tool, Class: req.Class, Args: req.Args}
	if _, err := b.gate.Authorize(ctx, id, call, state.Normal); err != nil {
		t.Fatal(err)
	}
	b.Close()

	// 3. Restarted.
	before := len(fake.Requests())
	c := open(true)
	if req, err = c.gate.Get(ctx, id); err != nil || req.Status != approval.StatusExecuted {
		t.Fatalf("request %s: %v %v, want executed", id, req.Status, err)
	}
	return fake, c, req, call, before
}
