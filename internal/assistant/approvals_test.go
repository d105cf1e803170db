package assistant

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// openApprovalApp is a started assistant in a temp home whose approval
// requests expire after expiry.
func openApprovalApp(t *testing.T, fake *modeltest.Server, expiry time.Duration) *Assistant {
	t.Helper()
	cfg := testConfig(t, fake, nil)
	cfg.Approval.Expiry = config.Duration(expiry)
	return openConfig(t, cfg, true)
}

// approvalsCount reads tendril_approvals_total{outcome}.
func approvalsCount(t *testing.T, a *Assistant, outcome string) float64 {
	t.Helper()
	var m dto.Metric
	if err := a.Metrics().Approvals.WithLabelValues(outcome).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// pauseAndEnd pauses a turn of session at the approval gate, runs end
// (which must make the paused turn resume or close), and waits until it
// has. It returns the request.
func pauseAndEnd(t *testing.T, a *Assistant, fake *modeltest.Server, session string, end func(req approval.Request)) approval.Request {
	t.Helper()
	ctx := context.Background()
	ended := a.paused.wait() // before the pause: a short expiry may close it at once
	fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "notes", Args: `{"action":"add","text":"fig pruned"}`}}})
	res, err := a.Invoke(ctx, agent.Request{Message: "note: fig pruned", ActorID: "api:me", Channel: "api", SessionID: session})
	if err != nil || res.PendingApproval == nil {
		t.Fatalf("no paused turn: %v %+v", err, res)
	}
	req, err := a.gate.Get(ctx, res.PendingApproval.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	end(req)
	select {
	case <-ended:
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		t.Fatalf("the paused turn of %s never ended", req.ID)
	}
	return req
}

// tendril_approvals_total counts each request as "requested" and then by
// how it ended: approved and denied by an operator, denied by forgetting
// the actor, expired undecided, refused after a rule change. Nothing ends
// as a decision it was not.
func TestApprovalOutcomesCounted(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	a := openApprovalApp(t, fake, 2*time.Minute)
	ctx := context.Background()
	want := map[string]float64{}
	check := func(step string) {
		t.Helper()
		for _, o := range []string{"requested", "approved", "denied", "expired", "refused"} {
			if got := approvalsCount(t, a, o); got != want[o] {
				t.Errorf("after %s: tendril_approvals_total{outcome=%q} = %g, want %g", step, o, got, want[o])
			}
		}
	}

	pauseAndEnd(t, a, fake, "approve", func(req approval.Request) {
		if _, err := a.Decide(ctx, req.ID, true, "cli:ana", ""); err != nil {
			t.Fatal(err)
		}
	})
	want["requested"]++
	want["approved"]++
	check("an approval")

	pauseAndEnd(t, a, fake, "deny", func(req approval.Request) {
		if _, err := a.Decide(ctx, req.ID, false, "cli:ana", ""); err != nil {
			t.Fatal(err)
		}
	})
	want["requested"]++
	want["denied"]++
	check("a denial")

	// Saving rules voids the open request; the ledger watcher closes it.
	pauseAndEnd(t, a, fake, "rules", func(req approval.Request) {
		rules, _ := a.gate.Rules()
		if err := a.gate.SetRules(ctx, rules, "test"); err != nil {
			t.Fatal(err)
		}
	})
	want["requested"]++
	want["refused"]++
	check("a rule change")

	// Forgetting the actor denies its open request; no paused turn is left
	// to resume, so Forget counts it.
	fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "notes", Args: `{"action":"add","text":"fig pruned"}`}}})
	if res, err := a.Invoke(ctx, agent.Request{Message: "note: fig pruned", ActorID: "api:me", Channel: "api", SessionID: "forget"}); err != nil || res.PendingApproval == nil {
		t.Fatalf("no paused turn: %v %+v", err, res)
	}
	rep, err := a.Forget(ctx, ForgetRequest{ActorID: "api:me", Sessions: true})
	if err != nil || rep.ApprovalsDenied != 1 {
		t.Fatalf("forget: %v %+v", err, rep)
	}
	want["requested"]++
	want["denied"]++
	check("forgetting the actor")

	// A request nobody decides expires; the ledger watcher closes its turn.
	short := openApprovalApp(t, fake, time.Millisecond)
	a, want = short, map[string]float64{}
	req := pauseAndEnd(t, a, fake, "expire", func(approval.Request) {})
	if r, _ := a.gate.Get(ctx, req.ID); r.Status != approval.StatusExpired {
		t.Fatalf("request is %s, want expired", r.Status)
	}
	want["requested"]++
	want["expired"]++
	check("an expiry")
}
