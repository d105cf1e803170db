package assistant

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// A message that waits behind a paused turn of its session when the actor
// is forgotten does not run afterwards: it fails with ACTOR_FORGOTTEN and
// leaves no session or memory behind. Before, it ran seconds after the
// forget reported nothing left and wrote the actor back.
func TestForgetDropsQueuedMessage(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	a := openApprovalApp(t, fake, 2*time.Minute)
	ctx := context.Background()
	fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "notes", Args: `{"action":"add","text":"fig pruned"}`}}})
	res, err := a.Invoke(ctx, agent.Request{Message: "note: fig pruned", ActorID: "api:me", Channel: "api", SessionID: "s"})
	if err != nil || res.PendingApproval == nil {
		t.Fatalf("no paused turn: %v %+v", err, res)
	}
	waiting := make(chan struct{}, 1)
	wctx := a.WithApprovalWait(ctx, func(p agent.PendingApproval) {
		if p.Status == "" {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := a.Invoke(wctx, agent.Request{Message: "my locker code is 4711", ActorID: "api:me", Channel: "api", SessionID: "s"})
		done <- err
	}()
	select {
	case <-waiting:
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		t.Fatal("the second message never waited behind the paused turn")
	}
	if _, err := a.Forget(ctx, ForgetRequest{ActorID: "api:me", Sessions: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, agent.ErrActorForgotten) || agent.ErrorCode(err) != "ACTOR_FORGOTTEN" {
			t.Fatalf("queued message after the forget: %v, want ACTOR_FORGOTTEN", err)
		}
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("the queued message never returned")
	}
	assertStaysForgotten(t, a, "api:me", fake, "4711")
}

// assertStaysForgotten checks that nothing of actor came back after its
// forget (a second forget finds nothing) and that no model call saw the
// dropped message (its marker text).
func assertStaysForgotten(t *testing.T, a *Assistant, actor string, fake *modeltest.Server, marker string) {
	t.Helper()
	rep, err := a.Forget(context.Background(), ForgetRequest{ActorID: actor, Sessions: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.SessionsRemoved) != 0 || rep.EventsRemoved != 0 || rep.RecordsRemoved != 0 {
		t.Errorf("after the forget the actor came back: %+v", rep)
	}
	for _, s := range fake.Requests() {
		if strings.Contains(s.LastUserText(), marker) {
			t.Error("the queued message reached the model after the forget")
		}
	}
}
