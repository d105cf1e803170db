package scheduletest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/schedule"
)

// ExerciseInstances checks SPEC §9 "each cron run fires once": two
// schedulers, on stores a and b that share one backend (two connection
// pools), run their due passes concurrently on a shared fake clock for
// several hours of hourly jobs; every (job, slot) must run exactly once.
func ExerciseInstances(t *testing.T, a, b schedule.Store) {
	t.Helper()
	start := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	clock := NewClock(start)
	var mu sync.Mutex
	perSlot := map[string]int{}
	runner := schedule.RunnerFunc(func(ctx context.Context, j schedule.Job) (string, error) {
		mu.Lock()
		perSlot[j.ID+"@"+j.NextRun.Format(time.RFC3339Nano)]++
		mu.Unlock()
		return schedule.NothingDue, nil
	})
	sa := schedule.New(a, runner, schedule.Options{Clock: clock, InstanceID: "a", MaxConcurrent: 3})
	sb := schedule.New(b, runner, schedule.Options{Clock: clock, InstanceID: "b", MaxConcurrent: 5})
	const jobs, hours = 16, 4
	for i := 0; i < jobs; i++ {
		if _, err := sa.Add(context.Background(), schedule.JobSpec{Name: fmt.Sprint("j", i), Every: "1h", Task: "t", ActorID: "telegram:1"}); err != nil {
			t.Fatal(err)
		}
	}
	for h := 1; h <= hours; h++ {
		clock.Set(start.Add(time.Duration(h) * time.Hour))
		var wg sync.WaitGroup
		for _, s := range []*schedule.Scheduler{sa, sb, sa, sb} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.RunDue(context.Background()); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(perSlot) != jobs*hours {
		t.Errorf("%d distinct runs, want %d", len(perSlot), jobs*hours)
	}
	for k, n := range perSlot {
		if n != 1 {
			t.Errorf("run %s fired %d times, want once", k, n)
		}
	}
}

// ExerciseStartedInstances checks "each cron run fires once" through the
// job queue: two started schedulers on stores a and b (one backend, two
// connection pools), each with the queue its store opens (River on one
// database), on the wall clock. Every job is made due (RunNow) from one
// instance or the other, twice over; each (job, slot) runs exactly once,
// and both runs of each job happen.
func ExerciseStartedInstances(t *testing.T, a, b schedule.Store) {
	t.Helper()
	var mu sync.Mutex
	perSlot := map[string]int{}
	perJob := map[string]int{}
	runner := schedule.RunnerFunc(func(ctx context.Context, j schedule.Job) (string, error) {
		mu.Lock()
		perSlot[j.ID+"@"+j.NextRun.Format(time.RFC3339Nano)]++
		perJob[j.ID]++
		mu.Unlock()
		return schedule.NothingDue, nil
	})
	sa := schedule.New(a, runner, schedule.Options{InstanceID: "a", MaxConcurrent: 3})
	sb := schedule.New(b, runner, schedule.Options{InstanceID: "b", MaxConcurrent: 5})
	defer sa.Close()
	defer sb.Close()
	ctx := context.Background()
	const jobs = 12
	var ids []string
	for i := 0; i < jobs; i++ {
		j, err := sa.Add(ctx, schedule.JobSpec{Name: fmt.Sprint("r", i), Every: "1h", Task: "t", ActorID: "telegram:1"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	for _, s := range []*schedule.Scheduler{sa, sb} {
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitRuns := func(n int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			mu.Lock()
			done := 0
			for _, id := range ids {
				if perJob[id] >= n {
					done++
				}
			}
			mu.Unlock()
			finished := 0
			for _, id := range ids {
				// The outcome is recorded: the job waits for its next hour.
				if j, err := a.Get(ctx, id); err == nil && j.NextRun.After(time.Now().Add(30*time.Minute)) {
					finished++
				}
			}
			if done == jobs && finished == jobs {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after a minute %d of %d jobs ran %d times (%d finished)", done, jobs, n, finished)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for round := 1; round <= 2; round++ {
		for i, id := range ids {
			s := []*schedule.Scheduler{sa, sb}[(i+round)%2]
			if _, err := s.RunNow(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		waitRuns(round)
	}
	sa.Stop()
	sb.Stop()
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if perJob[id] != 2 {
			t.Errorf("job %s ran %d times, want twice (once per RunNow)", id, perJob[id])
		}
	}
	for k, n := range perSlot {
		if n != 1 {
			t.Errorf("run %s fired %d times, want once", k, n)
		}
	}
}
