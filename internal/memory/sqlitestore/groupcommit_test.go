package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// holdCommitSlot takes the event group commit's slot, so that every event
// write queues behind it, and returns the function that gives it back.
func holdCommitSlot(s *Store) func() {
	s.commitSlot <- struct{}{}
	return func() { <-s.commitSlot }
}

// waitPending waits until n event writes wait for the group commit.
func waitPending(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second) // a hang guard, not a timing assertion
	for {
		s.commitMu.Lock()
		got := len(s.commitPending)
		s.commitMu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d event writes pending, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Event writes of many actors that arrive while the writer is busy are
// committed together, one savepoint per actor: every actor's events are
// stored and searchable once, and an actor whose rows fail fails alone
// (its caller gets the error, its events are neither stored nor indexed,
// the rest of its batch commits).
func TestEventGroupCommit(t *testing.T) {
	s, err := Open(t.TempDir(), Options{SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	boom := errors.New("injected")
	testCommitFault = func(actor string) error {
		if actor == "bad" {
			return boom
		}
		return nil
	}
	t.Cleanup(func() { testCommitFault = nil })

	const actors = 12
	release := holdCommitSlot(s)
	var wg sync.WaitGroup
	errs := make([]error, actors+1)
	for i := 0; i <= actors; i++ {
		actor := fmt.Sprintf("u%d", i)
		if i == actors {
			actor = "bad"
		}
		wg.Go(func() {
			errs[i] = s.AppendEvents(bg, []memory.Event{
				{ID: actor + "-1", ActorID: actor, SessionID: "s", Role: "user", Text: "walrus number " + actor},
				{ID: actor + "-2", ActorID: actor, SessionID: "s", Role: "assistant", Text: "noted " + actor},
			})
		})
	}
	waitPending(t, s, actors+1)
	release()
	wg.Wait()

	for i, err := range errs {
		if i == actors {
			if !errors.Is(err, boom) {
				t.Errorf("failing actor: err %v, want the injected error", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("actor u%d: %v (one actor's failure must not fail its batch)", i, err)
		}
	}
	var rows int
	if err := s.db.QueryRowContext(bg, `SELECT count(*) FROM events`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 2*actors {
		t.Errorf("%d event rows, want %d (the failing actor's rolled back, the rest once each)", rows, 2*actors)
	}
	for i := 0; i < actors; i++ {
		actor := fmt.Sprintf("u%d", i)
		evs, err := s.Events(bg, actor, "")
		if err != nil || len(evs) != 2 {
			t.Fatalf("%s: %d events, %v", actor, len(evs), err)
		}
		hits, err := s.Search(bg, memory.Query{NamespacePath: "/main/" + actor + "/", Text: "walrus", TopK: 3})
		if err != nil || len(hits) == 0 {
			t.Fatalf("%s: search after the group commit: %v, %v", actor, hitIDs(hits), err)
		}
	}
	if evs, _ := s.Events(bg, "bad", ""); len(evs) != 0 {
		t.Errorf("failing actor: %d events in memory, want none", len(evs))
	}

	// Its write failed, so writing the same events again stores them.
	testCommitFault = nil
	if err := s.AppendEvents(bg, []memory.Event{{ID: "bad-1", ActorID: "bad", SessionID: "s", Role: "user", Text: "walrus again"}}); err != nil {
		t.Fatal(err)
	}
	if evs, _ := s.Events(bg, "bad", ""); len(evs) != 1 {
		t.Errorf("retried actor: %d events, want 1", len(evs))
	}
}

// A caller whose context ends while its events wait for the group commit
// withdraws them: it gets the context's error, and nothing of its write
// reaches the index later, so a retry stores the events once.
func TestEventGroupCommitWithdraws(t *testing.T) {
	s, err := Open(t.TempDir(), Options{SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	release := holdCommitSlot(s)
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() {
		done <- s.AppendEvents(ctx, []memory.Event{{ID: "e1", ActorID: "u", SessionID: "s", Role: "user", Text: "otter"}})
	}()
	waitPending(t, s, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled write: err %v, want context.Canceled", err)
	}
	waitPending(t, s, 0)
	release()
	// The next write commits only its own rows.
	if err := s.AppendEvents(bg, []memory.Event{{ID: "e2", ActorID: "u", SessionID: "s", Role: "user", Text: "heron"}}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	rows, err := s.db.QueryContext(bg, `SELECT id FROM events ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		ids = append(ids, id)
	}
	rows.Close()
	if fmt.Sprint(ids) != "[e2]" {
		t.Fatalf("event rows %v, want [e2]: the withdrawn write reached the index", ids)
	}
	if err := s.AppendEvents(bg, []memory.Event{{ID: "e1", ActorID: "u", SessionID: "s", Role: "user", Text: "otter"}}); err != nil {
		t.Fatal(err)
	}
	if evs, _ := s.Events(bg, "u", ""); len(evs) != 2 {
		t.Fatalf("after the retry: %d events, want 2", len(evs))
	}
}
