package agent

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/jsonl"
)

// racingStore is a real session store where another writer lands between
// the turn's Leaf and its Append: before each of the first `races`
// appends of the turn, a foreign pair of nodes is appended after the
// current leaf (as a killed instance's late commit does).
type racingStore struct {
	session.Store
	mu    sync.Mutex
	races int
	n     int
}

func (r *racingStore) Append(ctx context.Context, key session.Key, nodes ...session.Node) error {
	r.mu.Lock()
	race := r.n < r.races
	r.n++
	r.mu.Unlock()
	if race {
		leaf, err := r.Store.Leaf(ctx, key)
		if err != nil && !errors.Is(err, session.ErrNotFound) {
			return err
		}
		u := session.Node{ID: session.NewNodeID(), ParentID: leaf, Role: "user", Text: "late write"}
		if err := r.Store.Append(ctx, key, u, session.Node{ID: session.NewNodeID(), ParentID: u.ID, Role: "assistant", Text: "late reply"}); err != nil {
			return err
		}
	}
	return r.Store.Append(ctx, key, nodes...)
}

func TestAppendAfterAMovedLeaf(t *testing.T) {
	for _, tc := range []struct {
		races   int
		wantErr bool
	}{{1, false}, {appendAttempts - 1, false}, {appendAttempts, true}} {
		js, err := jsonl.Open(t.TempDir(), jsonl.Options{Fsync: jsonl.FsyncNever})
		if err != nil {
			t.Fatal(err)
		}
		rs := &racingStore{Store: js, races: tc.races}
		a, _ := newTestAgent(t, &scriptModel{}, Deps{})
		a.deps.Sessions = rs
		req := Request{Message: "hello", ActorID: "api:u", SessionID: "s", Channel: "api"}
		res, err := a.Invoke(context.Background(), req)
		if tc.wantErr {
			if !errors.Is(err, session.ErrLeafMoved) {
				t.Fatalf("%d races: err = %v, want ErrLeafMoved after %d attempts", tc.races, err, appendAttempts)
			}
			js.Close()
			continue
		}
		if err != nil || res.Text != "echo: hello" {
			t.Fatalf("%d races: %v, %+v", tc.races, err, res)
		}
		key := a.sessionKey(req)
		leaf, _ := js.Leaf(context.Background(), key)
		path, err := js.Path(context.Background(), key, leaf, 0)
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, n := range path {
			texts = append(texts, n.Text)
		}
		// every late write stays, and the turn's nodes follow the last one
		if len(path) != 2*tc.races+2 || path[len(path)-2].Text != "hello" || path[len(path)-1].Text != "echo: hello" || path[len(path)-3].Text != "late reply" {
			t.Fatalf("%d races: active path %q", tc.races, texts)
		}
		js.Close()
	}
}

// TestActorIDWithSessionSep: "api:alice~work" is refused as an actor, or
// it would own the key of alice's session "work" and lock her out.
func TestActorIDWithSessionSep(t *testing.T) {
	a, _ := newTestAgent(t, &scriptModel{}, Deps{})
	_, err := a.Invoke(context.Background(), Request{Message: "hi", ActorID: "api:alice~work", Channel: "api"})
	if !errors.Is(err, ErrInvalidActorID) {
		t.Fatalf("err = %v, want ErrInvalidActorID", err)
	}
	if _, err := a.Invoke(context.Background(), Request{Message: "hi", ActorID: "api:alice", SessionID: "work", Channel: "api"}); err != nil {
		t.Fatalf("alice's own session: %v", err)
	}
}
