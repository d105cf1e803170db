package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/session"
)

// reconcileRecorder is a memory.Recorder and memory.TurnReconciler that
// keeps the events it was given by ID, and fails RecordTurn while failRecord
// is set.
type reconcileRecorder struct {
	mu         sync.Mutex
	events     map[string]memory.Event
	reconciles int
	failRecord bool
}

func (r *reconcileRecorder) RecordTurn(ctx context.Context, agentID, actorID, sessionID string, events []memory.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failRecord {
		return errors.New("memory index: disk I/O error")
	}
	for _, e := range events {
		r.events[e.ID] = e
	}
	return nil
}

func (r *reconcileRecorder) ReconcileTurn(ctx context.Context, agentID, actorID, sessionID string, events []memory.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reconciles++
	for _, e := range events {
		if e.ActorID != actorID || e.SessionID != sessionID {
			return fmt.Errorf("event %s of %s/%s reconciled as %s/%s", e.ID, e.ActorID, e.SessionID, actorID, sessionID)
		}
		r.events[e.ID] = e
	}
	return nil
}

func (r *reconcileRecorder) has(ids ...string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		if _, ok := r.events[id]; !ok {
			return false
		}
	}
	return true
}

// lastTurnIDs returns the IDs of the user node and the final reply of the
// session's last turn.
func lastTurnIDs(t *testing.T, st session.Store, key session.Key) (user, reply string) {
	t.Helper()
	ctx := context.Background()
	leaf, err := st.Leaf(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := st.Path(ctx, key, leaf, 2)
	if err != nil || len(nodes) < 2 {
		t.Fatalf("session %v: %d nodes, %v", key, len(nodes), err)
	}
	return nodes[len(nodes)-2].ID, nodes[len(nodes)-1].ID
}

// restarted is a new Agent (as in a new process) on the session store st,
// recording to rec.
func restarted(t *testing.T, st session.Store, m Models, rec memory.Recorder) *Agent {
	t.Helper()
	a, err := New(Options{AgentID: "main", MaxToolIterations: 4, ToolTimeout: 200 * time.Millisecond},
		Deps{Sessions: st, Models: m, Recorder: rec, Persona: Persona{Text: "You are Sprout."}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A turn the session holds but memory lacks (the process died between the
// session's append and RecordTurn, or RecordTurn failed) is written to
// memory by the session's next turn: once per session per process, and
// again after a failed RecordTurn. Cron turns stay out of memory.
func TestReconcileLastTurn(t *testing.T) {
	ctx := context.Background()
	m := &scriptModel{}
	// Process 1 dies after appending its turn to the session: no Recorder
	// ever sees the turn.
	a1, st := newTestAgent(t, m, Deps{})
	req := Request{Message: "my dog is called Rex", ActorID: "api:u", Channel: "api", SessionID: "s"}
	if _, err := a1.Invoke(ctx, req); err != nil {
		t.Fatal(err)
	}
	key := a1.sessionKey(req)
	u1, r1 := lastTurnIDs(t, st, key)

	// Process 2, same session store.
	rec := &reconcileRecorder{events: map[string]memory.Event{}}
	a2 := restarted(t, st, m, rec)
	if _, err := a2.Invoke(ctx, Request{Message: "what is my dog called?", ActorID: "api:u", Channel: "api", SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	if !rec.has(u1, r1) {
		t.Fatalf("the first turn's events %s, %s were not reconciled: %v", u1, r1, rec.events)
	}
	if e := rec.events[u1]; e.Text != "my dog is called Rex" || e.Role != "user" || e.ActorID != "api:u" {
		t.Fatalf("reconciled user event %+v", e)
	}
	if e := rec.events[r1]; e.Role != "assistant" || e.Text == "" {
		t.Fatalf("reconciled reply event %+v", e)
	}
	if rec.reconciles != 1 {
		t.Fatalf("%d reconciliations after one turn, want 1", rec.reconciles)
	}

	// Checked once per session: the next turn does not look again.
	if _, err := a2.Invoke(ctx, Request{Message: "thanks", ActorID: "api:u", Channel: "api", SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	if rec.reconciles != 1 {
		t.Fatalf("%d reconciliations, want still 1", rec.reconciles)
	}

	// A RecordTurn that fails leaves the turn to the session's next turn.
	rec.mu.Lock()
	rec.failRecord = true
	rec.mu.Unlock()
	if _, err := a2.Invoke(ctx, Request{Message: "I moved to Seattle", ActorID: "api:u", Channel: "api", SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	u3, r3 := lastTurnIDs(t, st, key)
	if rec.has(u3) {
		t.Fatal("the failed turn's events were recorded")
	}
	rec.mu.Lock()
	rec.failRecord = false
	rec.mu.Unlock()
	if _, err := a2.Invoke(ctx, Request{Message: "where do I live?", ActorID: "api:u", Channel: "api", SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	if !rec.has(u3, r3) || rec.reconciles != 2 {
		t.Fatalf("after a failed RecordTurn: reconciled %v (%d times), want %s and %s", rec.has(u3, r3), rec.reconciles, u3, r3)
	}

	// A cron turn is not memory: a new process finds nothing to write.
	if _, err := a1.Invoke(ctx, Request{Message: "water the figs", ActorID: "api:u", Channel: "api", SessionID: "s", InvocationType: "cron"}); err != nil {
		t.Fatal(err)
	}
	uc, rc := lastTurnIDs(t, st, key)
	rec3 := &reconcileRecorder{events: map[string]memory.Event{}}
	a3 := restarted(t, st, m, rec3)
	if _, err := a3.Invoke(ctx, Request{Message: "hello", ActorID: "api:u", Channel: "api", SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	if rec3.has(uc) || rec3.has(rc) || rec3.reconciles != 0 {
		t.Fatalf("a cron turn was reconciled into memory: %v", rec3.events)
	}
}

// lastTurnEvents reads the turn's user text from its blocks when the
// message carried images, and finds no turn in a path that ends inside
// one (a reply with tool calls) or in nodes of no turn.
func TestLastTurnEvents(t *testing.T) {
	user := func(id, turn string, md map[string]any) session.Node {
		m := map[string]any{"turnId": turn, "actorId": "api:u"}
		for k, v := range md {
			m[k] = v
		}
		return session.Node{ID: id, Role: session.RoleUser, Text: "hi", Metadata: m}
	}
	reply := session.Node{ID: "r", Role: session.RoleAssistant, Text: "hello", Metadata: map[string]any{"turnId": "t1"}}
	tool := session.Node{ID: "tl", Role: session.RoleTool, Blocks: []session.Block{{Type: "tool_result"}}, Metadata: map[string]any{"turnId": "t1"}}
	call := session.Node{ID: "c", Role: session.RoleAssistant, Blocks: []session.Block{{Type: "tool_use"}}, Metadata: map[string]any{"turnId": "t1"}}
	img := user("u", "t1", nil)
	img.Text, img.Blocks = "", []session.Block{{Type: "image", ImageRef: "media:x"}, {Type: "text", Text: "(image)"}}
	for name, tc := range map[string]struct {
		path []session.Node
		want []string // user text, reply text; nil: none
	}{
		"plain":           {[]session.Node{user("u0", "t0", nil), user("u", "t1", nil), reply}, []string{"hi", "hello"}},
		"with tool calls": {[]session.Node{user("u", "t1", nil), call, tool, reply}, []string{"hi", "hello"}},
		"image only":      {[]session.Node{img, reply}, []string{"", "hello"}},
		"cron":            {[]session.Node{user("u", "t1", map[string]any{"invocationType": "cron"}), reply}, nil},
		"ends in a call":  {[]session.Node{user("u", "t1", nil), call}, nil},
		"reply alone":     {[]session.Node{user("u0", "t0", nil), reply}, nil},
		"empty":           {nil, nil},
	} {
		actor, evs := lastTurnEvents(tc.path, "s")
		if tc.want == nil {
			if evs != nil {
				t.Errorf("%s: events %+v, want none", name, evs)
			}
			continue
		}
		if actor != "api:u" || len(evs) != 2 || evs[0].Text != tc.want[0] || evs[1].Text != tc.want[1] || evs[0].ID != "u" || evs[1].ID != "r" {
			t.Errorf("%s: %s %+v, want texts %q", name, actor, evs, tc.want)
		}
	}
}
