package jobs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/tendrilai/tendril/internal/jobs"
)

// GreetArgs is a kind of job: JSON args and a stable, dotted Kind.
type GreetArgs struct {
	ChatID string `json:"chat_id"`
}

func (GreetArgs) Kind() string { return "example.greet" }

// Registering a new kind of job: declare the args, register a worker before
// the Queue's first use, start, insert.
func Example() {
	dir, _ := os.MkdirTemp("", "jobs-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	q, err := jobs.OpenSQLite(ctx, filepath.Join(dir, "index", "jobs.db"), jobs.Options{FetchPollInterval: 100 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer q.Close()

	done := make(chan string, 1)
	if err := jobs.RegisterFunc(q, func(ctx context.Context, job *river.Job[GreetArgs]) error {
		done <- "hello " + job.Args.ChatID
		return nil // an error retries the job with backoff
	}); err != nil {
		panic(err)
	}
	if err := q.Start(ctx); err != nil {
		panic(err)
	}
	// Unique while waiting or running: a second insert is skipped.
	opts := &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled}}}
	if _, err := q.Insert(ctx, GreetArgs{ChatID: "42"}, opts); err != nil {
		panic(err)
	}
	fmt.Println(<-done)
	// Output: hello 42
}
