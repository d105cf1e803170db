package assistant

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/session"
)

// spySessions records what the warm-up asks of the session store; the
// first Path waits for release when gate is set. Writes fail the test.
type spySessions struct {
	session.Store
	recent recentSessions
	t      *testing.T

	mu      sync.Mutex
	paths   []session.Key
	gate    chan struct{} // closed to let the first Path through
	entered chan struct{} // closed when the first Path is waiting
	first   atomic.Bool   // the first Path has been called
}

func (s *spySessions) Recent(ctx context.Context, n int) ([]session.Key, error) {
	return s.recent.Recent(ctx, n)
}

func (s *spySessions) Path(ctx context.Context, key session.Key, leafID string, max int) ([]session.Node, error) {
	// Only the first call waits: the turn's own reads (the assistant
	// reads history through a.sessions) pass.
	if s.gate != nil && s.first.CompareAndSwap(false, true) {
		close(s.entered)
		<-s.gate
	}
	s.mu.Lock()
	s.paths = append(s.paths, key)
	s.mu.Unlock()
	return s.Store.Path(ctx, key, leafID, max)
}

func (s *spySessions) Append(context.Context, session.Key, ...session.Node) error {
	s.t.Error("warm-up appended to a session")
	return nil
}

func (s *spySessions) SetLeaf(context.Context, session.Key, string) error {
	s.t.Error("warm-up moved a leaf")
	return nil
}

func (s *spySessions) Clear(context.Context, session.Key) error {
	s.t.Error("warm-up cleared a session")
	return nil
}

// The warm-up reads the context of the sessions written last, most recent
// first, and writes nothing; a turn that arrives while it is under way,
// even on a session it is reading, is not held up by it.
func TestWarmSessions(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	a := openTestApp(t, fake)
	ctx := context.Background()
	turn := func(actor, sess string) string {
		t.Helper()
		res, err := a.Invoke(ctx, agent.Request{Message: "hello from " + actor, ActorID: actor, SessionID: sess, Channel: "api"})
		if err != nil {
			t.Fatal(err)
		}
		return res.SessionID
	}
	turn("api:old", "s1")
	turn("api:new", "s2")
	real := a.sessions
	keys, err := real.(recentSessions).Recent(ctx, 10)
	if err != nil || len(keys) != 2 {
		t.Fatalf("Recent = %v, %v; want the two sessions", keys, err)
	}

	spy := &spySessions{Store: real, recent: real.(recentSessions), t: t}
	a.sessions = spy
	a.warmSessions(ctx, warmActors)
	a.sessions = real
	if len(spy.paths) != 2 || spy.paths[0] != keys[0] || spy.paths[1] != keys[1] {
		t.Fatalf("warm-up read %v, want %v", spy.paths, keys)
	}

	// A warm-up stalled inside its first read does not stall a turn on
	// that session.
	spy = &spySessions{Store: real, recent: real.(recentSessions), t: t, gate: make(chan struct{}), entered: make(chan struct{})}
	a.sessions = spy
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.warmSessions(ctx, warmActors)
	}()
	<-spy.entered
	turn("api:new", "s2")
	close(spy.gate)
	<-done
	a.sessions = real

	// Cancelled, it reads nothing.
	spy = &spySessions{Store: real, recent: real.(recentSessions), t: t}
	a.sessions = spy
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	a.warmSessions(cctx, warmActors)
	a.sessions = real
	if len(spy.paths) != 0 {
		t.Fatalf("cancelled warm-up read %v", spy.paths)
	}
}

func TestLastActor(t *testing.T) {
	nodes := []session.Node{
		{ID: "1", Metadata: map[string]any{"actorId": "api:a"}},
		{ID: "2", Metadata: map[string]any{"turnId": "t"}},
	}
	if got := lastActor(nodes); got != "api:a" {
		t.Fatalf("lastActor = %q, want api:a", got)
	}
	if got := lastActor(nil); got != "" {
		t.Fatalf("lastActor(nil) = %q", got)
	}
}
