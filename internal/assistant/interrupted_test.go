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
// saved turn. The session's next message finishes that turn first, with
// the call's outcome unknown and the call not run again, and is then
// answered; before, it waited behind the saved turn until it timed out,
// and so did every later message of the session.
func TestInterruptedResumeDoesNotBlockTheSession(t *testing.T) {
	fake, c, req, call := interruptedResume(t)
	ctx := context.Background()
	id := req.ID
	before := len(fake.Requests())
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

// With several instances every one of them hears the approval and waits
// for the session's lock to resume the turn; when the one that took it
// dies mid-call, the next takes the lock and finds the request executed.
// It finishes the turn as interrupted. Before, it tried to redeem the
// approval again, was refused ("request already used"), and dropped the
// turn: the session kept only the user message, and the model, seeing it
// again with the next one, asked for the same call again.
func TestInterruptedResumeFinishedByAnotherInstance(t *testing.T) {
	fake, c, req, _ := interruptedResume(t)
	before := len(fake.Requests())
	ended := c.paused.wait()
	c.onDecision(req, true) // what the ledger watcher does on each instance
	select {
	case <-ended:
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		t.Fatal("the resume never ended")
	}
	seen := fake.Requests()[before:]
	if len(seen) != 1 || !strings.HasSuffix(seen[0].LastUserText(), agent.InterruptedOutcome) {
		var got []string
		for _, s := range seen {
			got = append(got, s.LastUserText())
		}
		t.Fatalf("model calls of the resume saw %q, want one with the interrupted call's outcome", got)
	}
	if _, err := c.gate.LoadResume(req); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("saved turn after it finished: %v, want it dropped", err)
	}
}

// interruptedResume leaves, in a fresh home, a paused turn whose approval
// was redeemed (its call started) by a process that then died, and
// returns a started assistant on that home with the request and its call.
func interruptedResume(t *testing.T) (*modeltest.Server, *Assistant, approval.Request, approval.Call) {
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
	c := open(true)
	if req, err = c.gate.Get(ctx, id); err != nil || req.Status != approval.StatusExecuted {
		t.Fatalf("request %s: %v %v, want executed", id, req.Status, err)
	}
	return fake, c, req, call
}
