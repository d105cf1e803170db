package schedule_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/schedule/scheduletest"
	"github.com/tendrilai/tendril/internal/schedule/sqlitestore"
)

// BenchmarkRunDue measures scheduler overhead per run on SQLite with a
// runner that answers NOTHING_DUE at once: list due, claim, run, finish.
func BenchmarkRunDue(b *testing.B) {
	const jobs = 200
	st, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "jobs.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	start := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	clock := scheduletest.NewClock(start)
	runner := schedule.RunnerFunc(func(context.Context, schedule.Job) (string, error) { return schedule.NothingDue, nil })
	s := schedule.New(st, runner, schedule.Options{Clock: clock, MaxConcurrent: 4})
	for i := 0; i < jobs; i++ {
		if _, err := s.Add(context.Background(), schedule.JobSpec{Name: fmt.Sprint(i), Every: "1h", Task: "t", ActorID: "a"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	total := 0
	for i := 0; i < b.N; i++ {
		clock.Advance(time.Hour)
		n, err := s.RunDue(context.Background())
		if err != nil || n != jobs {
			b.Fatalf("ran %d of %d: %v", n, jobs, err)
		}
		total += n
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "runs/s")
}
