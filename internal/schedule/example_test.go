package schedule_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/schedule/scheduletest"
	"github.com/tendrilai/tendril/internal/schedule/sqlitestore"
)

// A server wires a store, a runner (normally agentrunner.New(agent)) and a
// deliverer (normally the Telegram sender), syncs tendril.json jobs, then
// calls Start. Here a fake clock and RunDue stand in for time passing.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "schedule-example")
	defer os.RemoveAll(dir)
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "schedule", "jobs.db"))
	if err != nil {
		panic(err)
	}
	defer store.Close()

	clock := scheduletest.NewClock(time.Date(2026, 6, 1, 7, 0, 0, 0, time.UTC))
	runner := schedule.RunnerFunc(func(ctx context.Context, j schedule.Job) (string, error) {
		if j.Name == "quiet" {
			return schedule.NothingDue, nil
		}
		return "Reminder: " + j.Task, nil
	})
	deliver := schedule.DelivererFunc(func(ctx context.Context, j schedule.Job, text string) error {
		fmt.Printf("to %s chat %s: %s\n", j.Channel, j.ChatID, text)
		return nil
	})
	s := schedule.New(store, runner, schedule.Options{Clock: clock, Deliverer: deliver})

	err = s.SyncConfigJobs(ctx, []schedule.JobSpec{
		{Name: "morning", Cron: "0 8 * * *", TZ: "Europe/Berlin", Task: "check the greenhouse", ActorID: "telegram:42", Channel: "telegram", ChatID: "42"},
		{Name: "quiet", Every: "1h", Task: "anything due?", ActorID: "telegram:42", Channel: "telegram", ChatID: "42"},
	})
	if err != nil {
		panic(err)
	}
	j, _ := s.Add(ctx, schedule.JobSpec{At: "in 30m", Task: "take the pills", ActorID: "telegram:42", Channel: "telegram", ChatID: "42"})
	fmt.Println("one-shot at", j.NextRun.Format(time.RFC3339))

	clock.Advance(time.Hour) // 08:00 UTC: the one-shot and the quiet job are due
	n, _ := s.RunDue(ctx)
	fmt.Println("ran", n)
	clock.Set(time.Date(2026, 6, 2, 6, 0, 0, 0, time.UTC)) // 08:00 in Berlin
	n, _ = s.RunDue(ctx)
	fmt.Println("ran", n)
	// Output:
	// one-shot at 2026-06-01T07:30:00Z
	// to telegram chat 42: Reminder: take the pills
	// ran 2
	// to telegram chat 42: Reminder: check the greenhouse
	// ran 2
}
