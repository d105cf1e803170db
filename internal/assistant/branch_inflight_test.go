package assistant

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/session"
)

// TestBranchWaitsForTheTurnInFlight: a branch made while a turn is being
// answered lands after that turn. The turn's nodes stay where its answer
// came from (after the previous reply), and the branch point is the active
// leaf for the next message, as `session branch` promises.
func TestBranchWaitsForTheTurnInFlight(t *testing.T) {
	fake, a, asked, unblock := slowTurnApp(t)
	defer unblock() // a failing check must not leave the model waiting
	ctx := context.Background()
	req := func(msg string) agent.Request {
		return agent.Request{Message: msg, ActorID: "api:br", SessionID: "s", Channel: "api"}
	}
	var first *agent.Result
	for _, m := range []string{"a1", "a2", "a3"} {
		res, err := a.Invoke(ctx, req(m))
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = res
		}
	}
	k := session.Key{AgentID: "main", Channel: "api", ID: "br~s"}
	tree, err := a.Session(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	branchAt := tree.ActivePath[1].ID // a1's reply
	prevLeaf := tree.Leaf             // a3's reply
	done := make(chan error, 1)
	go func() { _, err := a.Invoke(ctx, req("slow")); done <- err }()
	<-asked
	branched := make(chan error, 1)
	go func() { branched <- a.BranchFrom(ctx, k, branchAt) }()
	select {
	case err := <-branched:
		t.Fatalf("branch returned while the turn was in flight (err %v)", err)
	case <-time.After(200 * time.Millisecond): // it is waiting (a check that it did not return early)
	}
	unblock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-branched; err != nil {
		t.Fatal(err)
	}
	tree, err = a.Session(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if tree.Leaf != branchAt {
		t.Fatalf("active leaf %s, want the branch point %s", tree.Leaf, branchAt)
	}
	for _, n := range tree.Nodes {
		if n.Role == "user" && n.Text == "slow" && n.ParentID != prevLeaf {
			t.Fatalf("the in-flight turn was stored under %s, want under the reply it was answered after (%s)", n.ParentID, prevLeaf)
		}
	}
	if !strings.Contains(fake.Requests()[len(fake.Requests())-1].LastUserText(), "slow") {
		t.Fatal("the slow turn never reached the model")
	}
}

// TestClearWaitsForTheTurnInFlight: clearing a session while a turn is
// being answered lands after that turn, so the cleared session stays
// empty; before, the turn wrote its message and reply back after the
// clear.
func TestClearWaitsForTheTurnInFlight(t *testing.T) {
	_, a, asked, unblock := slowTurnApp(t)
	defer unblock() // a failing check must not leave the model waiting
	ctx := context.Background()
	req := func(msg string) agent.Request {
		return agent.Request{Message: msg, ActorID: "api:cl", SessionID: "s", Channel: "api"}
	}
	if _, err := a.Invoke(ctx, req("first")); err != nil {
		t.Fatal(err)
	}
	k := session.Key{AgentID: "main", Channel: "api", ID: "cl~s"}
	done := make(chan error, 1)
	go func() { _, err := a.Invoke(ctx, req("slow")); done <- err }()
	<-asked
	cleared := make(chan error, 1)
	go func() { _, err := a.ClearSessions(ctx, "main", []session.Key{k}, false); cleared <- err }()
	select {
	case err := <-cleared:
		t.Fatalf("clear returned while the turn was in flight (err %v)", err)
	case <-time.After(200 * time.Millisecond): // it is waiting (a check that it did not return early)
	}
	unblock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-cleared; err != nil {
		t.Fatal(err)
	}
	if tree, err := a.Session(ctx, k); err == nil && len(tree.Nodes) > 0 {
		t.Fatalf("the cleared session has %d nodes after the turn in flight finished", len(tree.Nodes))
	}
}

// slowTurnApp opens an app on a fake model that echoes each message, but
// holds the reply to "slow" until unblock is called, after signalling
// asked that the turn reached the model.
func slowTurnApp(t *testing.T) (fake *modeltest.Server, a *Assistant, asked <-chan struct{}, unblock func()) {
	fake = modeltest.NewOpenAI(t)
	a = openTestApp(t, fake)
	release := make(chan struct{})
	var once sync.Once
	reached := make(chan struct{}, 1)
	fake.Otherwise(func(s modeltest.Seen) modeltest.Reply {
		if s.LastUserText() == "slow" {
			reached <- struct{}{}
			<-release
		}
		return modeltest.Reply{Text: "echo: " + s.LastUserText()}
	})
	return fake, a, reached, func() { once.Do(func() { close(release) }) }
}
