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
