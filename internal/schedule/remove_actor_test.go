package schedule_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/schedule"
)

// RemoveActor deletes every job of one actor (tool, CLI and config jobs
// alike), cancels its run in flight so it neither delivers nor records an
// outcome, and leaves the other actor's jobs and runs alone. Due counts
// what is due and not running, before and after.
func TestRemoveActor(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	e := newEnv(t, t0)
	ctx := context.Background()

	started := make(chan struct{})
	causes := make(chan error, 1)
	gone := []schedule.Job{
		e.add(t, schedule.JobSpec{Name: "water", Every: "1h", ActorID: "telegram:7", Channel: "telegram", ChatID: "7"}),
		e.add(t, schedule.JobSpec{Name: "once", At: "in 2h", ActorID: "telegram:7", Channel: "telegram", ChatID: "7", Source: schedule.SourceTool}),
		e.add(t, schedule.JobSpec{Name: "cfg", Every: "2h", ActorID: "telegram:7", Channel: "telegram", ChatID: "7", Source: schedule.SourceConfig}),
	}
	kept := []schedule.Job{
		e.add(t, schedule.JobSpec{Name: "feed", Every: "1h", ActorID: "telegram:8", Channel: "telegram", ChatID: "8"}),
		e.add(t, schedule.JobSpec{Name: "later", Every: "3h", ActorID: "telegram:70", Channel: "telegram", ChatID: "70"}),
	}
	if n, err := e.s.Due(ctx); err != nil || n != 0 {
		t.Fatalf("Due before anything is due = %d, %v", n, err)
	}
	e.clock.Set(t0.Add(time.Hour)) // water and feed are due; once, cfg and later are not
	if n, err := e.s.Due(ctx); err != nil || n != 2 {
		t.Fatalf("Due = %d, %v; want 2", n, err)
	}

	// water's run blocks until its context ends; feed's finishes at once.
	block := gone[0].ID
	blocking := &blockingRunner{inner: e.log, id: block, started: started, causes: causes}
	s := schedule.New(e.store, blocking, schedule.Options{Clock: e.clock, Deliverer: e.log, InstanceID: "b"})
	ran := make(chan error, 1)
	go func() { _, err := s.RunDue(ctx); ran <- err }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the blocking run did not start")
	}
	// water is leased and feed rescheduled: nothing is due, though water's
	// slot has passed (a run in flight is not queue depth).
	waitFor(t, "Due = 0 while water runs", func() bool { n, err := s.Due(ctx); return err == nil && n == 0 })

	removed, err := s.RemoveActor(ctx, "telegram:7")
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != len(gone) {
		t.Fatalf("removed %d jobs, want %d: %+v", len(removed), len(gone), removed)
	}
	ids := map[string]bool{}
	for _, j := range removed {
		ids[j.ID] = true
		if j.ActorID != "telegram:7" {
			t.Errorf("removed a job of %s", j.ActorID)
		}
	}
	for _, j := range gone {
		if !ids[j.ID] {
			t.Errorf("job %s not reported removed", j.Name)
		}
	}
	expectCancelled(t, ran, causes)

	if left, err := s.List(ctx, schedule.Filter{ActorID: "telegram:7"}); err != nil || len(left) != 0 {
		t.Fatalf("jobs of telegram:7 left: %+v %v", left, err)
	}
	for _, j := range gone {
		if _, err := s.Get(ctx, j.ID); !errors.Is(err, schedule.ErrNotFound) {
			t.Errorf("%s: Get = %v, want ErrNotFound", j.Name, err)
		}
	}
	for _, j := range kept {
		got, err := s.Get(ctx, j.ID)
		if err != nil || got.ActorID != j.ActorID || got.Task != j.Task {
			t.Fatalf("job %s of %s: %+v %v", j.Name, j.ActorID, got, err)
		}
	}
	// feed ran and was rescheduled; nothing was delivered to chat 7.
	if got, _ := s.Get(ctx, kept[0].ID); got.LastRun.IsZero() || !got.NextRun.After(e.clock.Now()) {
		t.Fatalf("feed after its run: %+v", got)
	}
	if _, delivered := e.log.snapshot(); len(delivered) != 1 || delivered[0] != "telegram:8 done: water the tomatoes" {
		t.Fatalf("delivered %q, want only feed's reply", delivered)
	}
	if n, _ := s.Due(ctx); n != 0 {
		t.Fatalf("Due after = %d", n)
	}
	// Nothing left to remove; an empty actor is refused.
	if again, err := s.RemoveActor(ctx, "telegram:7"); err != nil || len(again) != 0 || again == nil {
		t.Fatalf("second RemoveActor = %#v, %v; want an empty list", again, err)
	}
	if _, err := s.RemoveActor(ctx, ""); !errors.Is(err, schedule.ErrBadSpec) {
		t.Fatalf("RemoveActor(\"\") = %v, want ErrBadSpec", err)
	}
}

// blockingRunner runs job id until its context ends, reporting the
// context's cause; other jobs go to inner.
type blockingRunner struct {
	inner   schedule.Runner
	id      string
	started chan struct{}
	causes  chan error
}

func (b *blockingRunner) RunJob(ctx context.Context, j schedule.Job) (string, error) {
	if j.ID != b.id {
		return b.inner.RunJob(ctx, j)
	}
	close(b.started)
	<-ctx.Done()
	b.causes <- context.Cause(ctx)
	return "", ctx.Err()
}

// Remove cancels the removed job's run in flight here, as RemoveActor
// does: the reminder the person cancelled is not delivered after all.
func TestRemoveCancelsTheRunInFlight(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	e := newEnv(t, t0)
	ctx := context.Background()
	j := e.add(t, schedule.JobSpec{Name: "water", Every: "1h"})
	e.clock.Set(t0.Add(time.Hour))
	started, causes := make(chan struct{}), make(chan error, 1)
	blocking := &blockingRunner{inner: e.log, id: j.ID, started: started, causes: causes}
	s := schedule.New(e.store, blocking, schedule.Options{Clock: e.clock, Deliverer: e.log, InstanceID: "b"})
	ran := make(chan error, 1)
	go func() { _, err := s.RunDue(ctx); ran <- err }()
	select {
	case <-started:
	case <-time.After(10 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("the run did not start")
	}
	if err := s.Remove(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	expectCancelled(t, ran, causes)
	if _, delivered := e.log.snapshot(); len(delivered) != 0 {
		t.Fatalf("delivered %q after the job was removed", delivered)
	}
	if _, err := s.Get(ctx, j.ID); !errors.Is(err, schedule.ErrNotFound) {
		t.Fatalf("Get after Remove = %v, want ErrNotFound", err)
	}
}

// expectCancelled waits for RunDue to return (ran) after its blocking run
// was cancelled because its job was removed (causes), and fails the test
// otherwise.
func expectCancelled(t *testing.T, ran, causes <-chan error) {
	t.Helper()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("RunDue still waiting: the removed job's run was not cancelled")
	}
	if cause := <-causes; !errors.Is(cause, schedule.ErrJobRemoved) {
		t.Fatalf("run context cause %v, want ErrJobRemoved", cause)
	}
}
