package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Turns noted while another commit holds the job database are committed
// together, one savepoint each: every turn is counted exactly once, and a
// turn whose note fails fails alone (its caller gets the error, the rest of
// its batch commits).
func TestGroupCommitCountsEveryTurn(t *testing.T) {
	f := newFixture(t, "sqlite")
	q := f.p.q
	boom := errors.New("injected")
	testNoteFault = func(k sessionKey) error {
		if k.se == "bad" {
			return boom
		}
		return nil
	}
	t.Cleanup(func() { testNoteFault = nil })

	// Hold the commit slot so that every note below queues up, then let
	// them go: the first to take the slot commits them all in one batch.
	q.noteMu.Lock()
	slot := q.slot()
	q.noteMu.Unlock()
	slot <- struct{}{}

	const sessions = 24
	var wg sync.WaitGroup
	errs := make([]error, sessions+1)
	for i := 0; i <= sessions; i++ {
		se := fmt.Sprintf("s%d", i)
		if i == sessions {
			se = "bad"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = q.noteTurn(ctx, "main", "u1", se, 1000, 3, time.Hour, time.Now())
		}()
	}
	for {
		q.noteMu.Lock()
		n := len(q.notePending)
		q.noteMu.Unlock()
		if n == sessions+1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	<-slot
	wg.Wait()

	for i, err := range errs {
		if i == sessions {
			if !errors.Is(err, boom) {
				t.Errorf("failing note: err %v, want the injected error", err)
			}
		} else if err != nil {
			t.Errorf("note %d: %v (one note's failure must not fail its batch)", i, err)
		}
	}
	// A second round, not held: each session is counted once more.
	for i := 0; i < sessions; i++ {
		if _, err := q.noteTurn(ctx, "main", "u1", fmt.Sprintf("s%d", i), 1000, 3, time.Hour, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := q.jobs.DB().QueryContext(ctx, `SELECT session_id, pending_turns FROM memory_pipeline_sessions WHERE actor_id = 'u1'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int{}
	for rows.Next() {
		var se string
		var n int
		if err := rows.Scan(&se, &n); err != nil {
			t.Fatal(err)
		}
		got[se] = n
	}
	if len(got) != sessions || got["bad"] != 0 {
		t.Fatalf("sessions counted: %v, want %d sessions and none for the failing one", got, sessions)
	}
	for se, n := range got {
		if n != 2 {
			t.Errorf("session %s counted %d turns, want 2", se, n)
		}
	}
}

// A caller whose context ends while it waits for the commit slot returns
// the context's error instead of waiting on.
func TestGroupCommitWaitHonoursContext(t *testing.T) {
	f := newFixture(t, "sqlite")
	q := f.p.q
	q.noteMu.Lock()
	slot := q.slot()
	q.noteMu.Unlock()
	slot <- struct{}{}
	defer func() { <-slot }()
	c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := q.noteTurn(c, "main", "u1", "s1", 1000, 3, time.Hour, time.Now()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the context's deadline", err)
	}
}
