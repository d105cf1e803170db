package assistant

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/session"
)

// A turn that reached the session but not memory (the process was killed
// between the two writes) reaches memory with the session's next turn, on
// the real pipeline and store: its events are stored once, under their
// node IDs.
func TestTurnLostToACrashReachesMemory(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	a := openTestApp(t, fake)
	ctx := context.Background()
	key := session.Key{AgentID: a.cfg.AgentID, Channel: "api", ID: agent.SessionOwner("api:me", "api") + agent.SessionSep + "s"}
	now := time.Now().Unix()
	user := session.Node{ID: session.NewNodeID(), Role: session.RoleUser, Text: "my dog is called Rex", Timestamp: now, Channel: "api",
		Metadata: map[string]any{"turnId": "turn_crashed", "actorId": "api:me"}}
	reply := session.Node{ID: session.NewNodeID(), ParentID: user.ID, Role: session.RoleAssistant, Text: "Rex, noted.", Timestamp: now, Channel: "api",
		Metadata: map[string]any{"turnId": "turn_crashed"}}
	if err := a.sessions.Append(ctx, key, user, reply); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := a.Invoke(ctx, agent.Request{Message: "what is my dog called?", ActorID: "api:me", Channel: "api", SessionID: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := a.memory.Events(ctx, "api:me", key.ID)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, e := range evs {
		count[e.ID]++
	}
	if count[user.ID] != 1 || count[reply.ID] != 1 || len(evs) != 6 {
		t.Fatalf("events %v (%d), want the crashed turn's two once and the two turns' four", count, len(evs))
	}
	for _, e := range evs {
		if e.ID == user.ID && e.Text != "my dog is called Rex" {
			t.Fatalf("reconciled event text %q", e.Text)
		}
	}
}

// A forgotten actor's memory does not come back from its kept sessions:
// after `memory forget` without --sessions and a restart, the session's
// next turn does not re-append the last turn from before the forget.
func TestForgottenTurnIsNotReconciled(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	a := openTestApp(t, fake)
	ctx := context.Background()
	turn := func(a *Assistant, msg string) {
		t.Helper()
		if _, err := a.Invoke(ctx, agent.Request{Message: msg, ActorID: "api:me", Channel: "api", SessionID: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	turn(a, "my dog is called Rex")
	if _, err := a.Forget(ctx, ForgetRequest{ActorID: "api:me"}); err != nil {
		t.Fatal(err)
	}
	cfg := a.cfg
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := Open(ctx, cfg, Options{Logger: a.log, Owner: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	turn(b, "hello again")
	evs, err := b.memory.Events(ctx, "api:me", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if strings.Contains(e.Text, "Rex") {
			t.Fatalf("a forgotten turn came back into memory: %+v", e)
		}
	}
	if len(evs) != 2 {
		t.Fatalf("%d events after the forget, want the new turn's 2", len(evs))
	}
}
