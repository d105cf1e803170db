package assistant

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// A turn that waits behind a paused turn of its session reports each
// pending request it waits for, once as waiting and once as decided: the
// paused call, then the call the resumed turn pauses on next. Its own run
// starts after both are decided.
func TestApprovalWaitReportsEachRequestOnce(t *testing.T) {
	fake, a, res := pausedNote(t)
	ctx := context.Background()
	first := res.PendingApproval.RequestID
	fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "notes", Args: `{"action":"add","text":"fig fed"}`}}},
		modeltest.Reply{Text: "I did not save the second note."}, modeltest.Reply{Text: "Hi!"})

	reports := make(chan agent.PendingApproval, 8)
	type result struct {
		res *agent.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		wctx := a.WithApprovalWait(ctx, func(p agent.PendingApproval) { reports <- p })
		res, err := a.Invoke(wctx, agent.Request{Message: "hi", ActorID: "api:me", Channel: "api", SessionID: "s"})
		done <- result{res, err}
	}()
	next := func() agent.PendingApproval {
		t.Helper()
		select {
		case p := <-reports:
			return p
		case r := <-done:
			t.Fatalf("the turn finished without reporting its wait: %+v %v", r.res, r.err)
		case <-time.After(time.Minute): // a hang guard
			t.Fatal("no approval wait reported")
		}
		return agent.PendingApproval{}
	}
	p := next()
	if p.RequestID != first || p.ToolName != "notes" || p.Args != `{"action":"add","text":"fig pruned"}` || p.ExpiresAt == 0 {
		t.Fatalf("first report %+v, want request %s", p, first)
	}
	if _, err := a.Decide(ctx, first, true, "cli:ana", ""); err != nil {
		t.Fatal(err)
	}
	if p = next(); p.RequestID != first || (p.Status != "approved" && p.Status != "executed") {
		t.Fatalf("report after the approval %+v, want %s approved", p, first)
	}
	p = next()
	if p.RequestID == first || p.Args != `{"action":"add","text":"fig fed"}` || p.Status != "" {
		t.Fatalf("third report %+v, want the resumed turn's new request, waiting", p)
	}
	if req, err := a.gate.Get(ctx, p.RequestID); err != nil || req.Status != approval.StatusPending {
		t.Fatalf("reported request %+v %v is not pending", req, err)
	}
	second := p.RequestID
	if _, err := a.Decide(ctx, second, false, "cli:ana", ""); err != nil {
		t.Fatal(err)
	}
	if p = next(); p.RequestID != second || p.Status != "denied" {
		t.Fatalf("report after the denial %+v, want %s denied", p, second)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("the waiting turn never ran")
	}
	if r.err != nil || r.res.Text != "Hi!" {
		t.Fatalf("waiting turn: %+v %v", r.res, r.err)
	}
	if len(reports) != 0 {
		t.Fatalf("a request was reported again: %+v", <-reports)
	}
}

// A message queued behind another that waits for a paused turn hears of
// the approval at once (not when its own turn comes), once, and of its
// denial; both run in order after the decision.
func TestApprovalWaitReportsQueuedMessage(t *testing.T) {
	fake, a, res := pausedNote(t)
	ctx := context.Background()
	id := res.PendingApproval.RequestID
	fake.Push(modeltest.Reply{Text: "I did not save the note."}, modeltest.Reply{Text: "second"}, modeltest.Reply{Text: "third"})
	type result struct {
		text string
		err  error
	}
	send := func(msg string, reports chan agent.PendingApproval, done chan result) {
		wctx := a.WithApprovalWait(ctx, func(p agent.PendingApproval) { reports <- p })
		res, err := a.Invoke(wctx, agent.Request{Message: msg, ActorID: "api:me", Channel: "api", SessionID: "s"})
		if err != nil {
			done <- result{err: err}
			return
		}
		done <- result{text: res.Text}
	}
	reports2, reports3 := make(chan agent.PendingApproval, 4), make(chan agent.PendingApproval, 4)
	done2, done3 := make(chan result, 1), make(chan result, 1)
	go send("second message", reports2, done2)
	wait := func(ch chan agent.PendingApproval, who, status string) {
		t.Helper()
		select {
		case p := <-ch:
			if p.RequestID != id || p.Status != status {
				t.Fatalf("%s: reported %+v, want %s %q", who, p, id, status)
			}
		case <-time.After(time.Minute): // a hang guard
			t.Fatalf("%s: no approval report %q", who, status)
		}
	}
	wait(reports2, "the second message", "")
	go send("third message", reports3, done3)
	wait(reports3, "the third message (queued behind the second)", "")
	if _, err := a.Decide(ctx, id, false, "cli:ana", ""); err != nil {
		t.Fatal(err)
	}
	wait(reports2, "the second message", "denied")
	wait(reports3, "the third message", "denied")
	for i, done := range []chan result{done2, done3} {
		select {
		case r := <-done:
			if r.err != nil || r.text != []string{"second", "third"}[i] {
				t.Fatalf("message %d: %q %v", i+2, r.text, r.err)
			}
		case <-time.After(time.Minute): // a hang guard
			t.Fatalf("message %d never ran", i+2)
		}
	}
	if len(reports2)+len(reports3) != 0 {
		t.Fatal("a request was reported twice to one message")
	}
}

// With nothing in the process to resume paused turns (a CLI command with
// no server), a message behind a paused turn fails at once with
// ErrBusySession, naming the approval to decide.
func TestBusySessionNamesTheApproval(t *testing.T) {
	_, a, res := pausedNote(t)
	ctx := context.Background()
	a.mu.Lock()
	a.started = false // as in a CLI process without a server
	a.mu.Unlock()
	_, err := a.Invoke(ctx, agent.Request{Message: "hi", ActorID: "api:me", Channel: "api", SessionID: "s"})
	id := res.PendingApproval.RequestID
	if !errors.Is(err, ErrBusySession) || !strings.Contains(err.Error(), "tendril approvals approve "+id) {
		t.Fatalf("message behind a paused turn without a server: %v; want ErrBusySession naming %s", err, id)
	}
	if code := agent.ErrorCode(err); code != "APPROVAL_PENDING" {
		t.Fatalf("busy session coded %s, want APPROVAL_PENDING", code)
	}
}

// pausedNote opens an app with the approval gate (2 minute expiry) and
// runs a turn of api:me in session s whose notes call pauses; it returns
// the fake model, the app and the paused turn's result.
func pausedNote(t *testing.T) (*modeltest.Server, *Assistant, *agent.Result) {
	t.Helper()
	fake := modeltest.NewOpenAI(t)
	a := openApprovalApp(t, fake, 2*time.Minute)
	fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "notes", Args: `{"action":"add","text":"fig pruned"}`}}})
	res, err := a.Invoke(context.Background(), agent.Request{Message: "note: fig pruned", ActorID: "api:me", Channel: "api", SessionID: "s"})
	if err != nil || res.PendingApproval == nil {
		t.Fatalf("no paused turn: %v %+v", err, res)
	}
	return fake, a, res
}
