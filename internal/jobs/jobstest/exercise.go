// Package jobstest is the conformance suite every jobs backend passes
// (River on SQLite and on PostgreSQL): a job runs once; a failing job is
// retried with the retry policy's backoff; unique jobs de-duplicate; a job
// inserted in a rolled-back transaction never runs; a job scheduled in the
// future waits; two clients (two instances) on one database run each job
// exactly once; a job whose worker process is killed is rescued and run
// again; shutdown waits for running jobs within a deadline and then
// cancels them without losing them.
//
// The suite waits for jobs to reach a state with generous deadlines (River
// moves scheduled and retried jobs every few seconds); it asserts states,
// counts and attempts, never durations.
package jobstest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/tendrilai/tendril/internal/jobs"
)

// Backend tells the suite how to reach one kind of database.
type Backend struct {
	Name string
	// NewDatabase prepares an empty database for one test and returns its
	// DSN (a SQLite file path, a PostgreSQL URL); the test cleans it up.
	NewDatabase func(t testing.TB) string
	// Open opens another Queue — another instance — on dsn. It is also
	// called in a child process (see Child), so it may use nothing but dsn.
	// release frees what Open opened besides the Queue (a pool).
	Open func(ctx context.Context, dsn string, opts jobs.Options) (q *jobs.Queue, release func(), err error)
}

// CountArgs is a job that records each run in the test's Counter.
type CountArgs struct {
	N     int    `json:"n"`
	Label string `json:"label,omitempty"`
}

func (CountArgs) Kind() string { return "jobstest.count" }

// CrashArgs is the job the child process takes and dies with.
type CrashArgs struct {
	Mark string `json:"mark"`
}

func (CrashArgs) Kind() string { return "jobstest.crash" }

// Exercise runs the suite against b.
func Exercise(t *testing.T, b Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b Backend)
	}{
		{"RunsOnce", testRunsOnce},
		{"RetryWithBackoff", testRetry},
		{"UniqueDeduplicates", testUnique},
		{"RolledBackInsertNeverRuns", testRollback},
		{"ScheduledWaits", testScheduled},
		{"TwoInstancesEachJobOnce", testTwoInstances},
		{"RescueAfterWorkerProcessDies", testRescue},
		{"ShutdownWaitsForRunningJobs", testShutdownWaits},
		{"ShutdownDeadlineCancels", testShutdownDeadline},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, b) })
	}
}

// fast are the suite's options: prompt fetches and a deterministic 1 s
// retry backoff.
func fast(o jobs.Options) jobs.Options {
	if o.FetchPollInterval == 0 {
		o.FetchPollInterval = 200 * time.Millisecond
	}
	if o.FetchCooldown == 0 {
		o.FetchCooldown = 20 * time.Millisecond
	}
	if o.RetryPolicy == nil {
		o.RetryPolicy = fixedRetry(time.Second)
	}
	return o
}

type fixedRetry time.Duration

func (f fixedRetry) NextRetry(job *rivertype.JobRow) time.Time {
	return time.Now().Add(time.Duration(f))
}

func open(t *testing.T, b Backend, dsn string, o jobs.Options) *jobs.Queue {
	t.Helper()
	q, release, err := b.Open(context.Background(), dsn, fast(o))
	if err != nil {
		t.Fatalf("open %s: %v", b.Name, err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if release != nil {
			release()
		}
	})
	return q
}

// counter records the runs of CountArgs jobs by job ID.
type counter struct {
	mu     sync.Mutex
	runs   map[int64]int
	by     map[int64][]string // job ID → the instances that ran it
	labels []string
	fail   func(job *river.Job[CountArgs]) error
}

func newCounter() *counter { return &counter{runs: map[int64]int{}, by: map[int64][]string{}} }

func (c *counter) worker(instance string) river.Worker[CountArgs] {
	return river.WorkFunc(func(ctx context.Context, job *river.Job[CountArgs]) error {
		c.mu.Lock()
		c.runs[job.ID]++
		c.by[job.ID] = append(c.by[job.ID], instance)
		c.labels = append(c.labels, job.Args.Label)
		fail := c.fail
		c.mu.Unlock()
		if fail != nil {
			return fail(job)
		}
		return nil
	})
}

func (c *counter) count(id int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[id]
}

// waitState waits (up to a minute) for job id to reach one of states and
// returns its row.
func waitState(t *testing.T, q *jobs.Queue, id int64, states ...rivertype.JobState) *rivertype.JobRow {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last *rivertype.JobRow
	for time.Now().Before(deadline) {
		rows, err := q.List(context.Background(), river.NewJobListParams().IDs(id).States(allStates...))
		if err != nil {
			t.Fatalf("list job %d: %v", id, err)
		}
		if len(rows) == 1 {
			last = rows[0]
			for _, s := range states {
				if last.State == s {
					return last
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if last == nil {
		t.Fatalf("job %d: not found, want %v", id, states)
	}
	t.Fatalf("job %d: state %s after a minute, want %v (errors %v)", id, last.State, states, last.Errors)
	return nil
}

var allStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStateCancelled, rivertype.JobStateCompleted,
	rivertype.JobStateDiscarded, rivertype.JobStatePending, rivertype.JobStateRetryable,
	rivertype.JobStateRunning, rivertype.JobStateScheduled,
}

func insert(t *testing.T, q *jobs.Queue, args river.JobArgs, opts *river.InsertOpts) *rivertype.JobInsertResult {
	t.Helper()
	res, err := q.Insert(context.Background(), args, opts)
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	return res
}

func testRunsOnce(t *testing.T, b Backend) {
	dsn := b.NewDatabase(t)
	q := open(t, b, dsn, jobs.Options{})
	c := newCounter()
	if err := jobs.Register(q, c.worker("a")); err != nil {
		t.Fatal(err)
	}
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := 0; i < 20; i++ {
		ids = append(ids, insert(t, q, CountArgs{N: i}, nil).Job.ID)
	}
	for _, id := range ids {
		row := waitState(t, q, id, rivertype.JobStateCompleted)
		if row.Attempt != 1 {
			t.Errorf("job %d: attempt %d, want 1", id, row.Attempt)
		}
	}
	for _, id := range ids {
		if n := c.count(id); n != 1 {
			t.Errorf("job %d ran %d times, want once", id, n)
		}
	}
	if err := jobs.Register(q, c.worker("late")); !errors.Is(err, jobs.ErrBuilt) {
		t.Errorf("Register after Start = %v, want ErrBuilt", err)
	}
}

func testRetry(t *testing.T, b Backend) {
	dsn := b.NewDatabase(t)
	q := open(t, b, dsn, jobs.Options{RetryPolicy: fixedRetry(2 * time.Second)})
	c := newCounter()
	c.fail = func(job *river.Job[CountArgs]) error {
		if job.Attempt == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	}
	if err := jobs.Register(q, c.worker("a")); err != nil {
		t.Fatal(err)
	}
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := insert(t, q, CountArgs{N: 1}, nil).Job.ID
	row := waitState(t, q, id, rivertype.JobStateCompleted, rivertype.JobStateDiscarded)
	if row.State != rivertype.JobStateCompleted || row.Attempt != 2 || c.count(id) != 2 {
		t.Fatalf("state %s attempt %d runs %d; want completed on the 2nd attempt", row.State, row.Attempt, c.count(id))
	}
	if len(row.Errors) != 1 || row.Errors[0].Error != "first attempt fails" || row.Errors[0].Attempt != 1 {
		t.Fatalf("recorded errors %+v; want the first attempt's", row.Errors)
	}
	// The second attempt was scheduled by the policy: 2 s after the first
	// attempt failed, not at once.
	if row.AttemptedAt == nil || row.AttemptedAt.Sub(row.Errors[0].At) < 2*time.Second-50*time.Millisecond {
		t.Fatalf("second attempt at %v, first failed at %v: backoff not applied", row.AttemptedAt, row.Errors[0].At)
	}
}

func testUnique(t *testing.T, b Backend) {
	dsn := b.NewDatabase(t)
	q := open(t, b, dsn, jobs.Options{})
	c := newCounter()
	if err := jobs.Register(q, c.worker("a")); err != nil {
		t.Fatal(err)
	}
	uo := &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
	first := insert(t, q, CountArgs{N: 7, Label: "u"}, uo)
	dup := insert(t, q, CountArgs{N: 7, Label: "u"}, uo)
	other := insert(t, q, CountArgs{N: 8, Label: "u"}, uo)
	if first.UniqueSkippedAsDuplicate || !dup.UniqueSkippedAsDuplicate || other.UniqueSkippedAsDuplicate {
		t.Fatalf("skipped: first %v dup %v other %v; want only the duplicate skipped", first.UniqueSkippedAsDuplicate, dup.UniqueSkippedAsDuplicate, other.UniqueSkippedAsDuplicate)
	}
	if dup.Job.ID != first.Job.ID {
		t.Fatalf("duplicate insert returned job %d, want the existing %d", dup.Job.ID, first.Job.ID)
	}
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitState(t, q, first.Job.ID, rivertype.JobStateCompleted)
	waitState(t, q, other.Job.ID, rivertype.JobStateCompleted)
	if c.count(first.Job.ID) != 1 || c.count(other.Job.ID) != 1 {
		t.Fatalf("runs %v; want each unique job once", c.runs)
	}
	// Completed is not among the unique states: the same args enqueue again.
	again := insert(t, q, CountArgs{N: 7, Label: "u"}, uo)
	if again.UniqueSkippedAsDuplicate {
		t.Fatal("insert after completion was skipped; completed is not a unique state here")
	}
	waitState(t, q, again.Job.ID, rivertype.JobStateCompleted)
}

// begin starts a caller transaction on q's database; done commits or rolls
// back.
func begin(t *testing.T, q *jobs.Queue) (tx any, done func(commit bool)) {
	t.Helper()
	ctx := context.Background()
	if db := q.DB(); db != nil {
		stx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return stx, func(commit bool) {
			var err error
			if commit {
				err = stx.Commit()
			} else {
				err = stx.Rollback()
			}
			if err != nil && !errors.Is(err, sql.ErrTxDone) {
				t.Fatal(err)
			}
		}
	}
	ptx, err := q.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ptx, func(commit bool) {
		var err error
		if commit {
			err = ptx.Commit(ctx)
		} else {
			err = ptx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func testRollback(t *testing.T, b Backend) {
	dsn := b.NewDatabase(t)
	q := open(t, b, dsn, jobs.Options{})
	c := newCounter()
	if err := jobs.Register(q, c.worker("a")); err != nil {
		t.Fatal(err)
	}
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tx, done := begin(t, q)
	res, err := q.InsertTx(ctx, tx, CountArgs{N: 1, Label: "rolled back"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rolled := res.Job.ID
	done(false)

	tx, done = begin(t, q)
	res, err = q.InsertTx(ctx, tx, CountArgs{N: 2, Label: "committed"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	done(true)
	committed := res.Job.ID
	// A job inserted after both has run, so the rolled-back one had its
	// chance too.
	marker := insert(t, q, CountArgs{N: 3, Label: "marker"}, nil).Job.ID
	waitState(t, q, committed, rivertype.JobStateCompleted)
	waitState(t, q, marker, rivertype.JobStateCompleted)
	// SQLite may give the committed job the rolled-back one's ID (its
	// sequence rolls back too); the labels tell the jobs apart.
	rows, err := q.List(ctx, river.NewJobListParams().States(allStates...).First(100))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if strings.Contains(string(r.EncodedArgs), "rolled back") {
			t.Fatalf("rolled-back job is in the table: %d %s", r.ID, r.EncodedArgs)
		}
	}
	_ = rolled
	c.mu.Lock()
	for _, l := range c.labels {
		if l == "rolled back" {
			t.Fatal("the rolled-back job ran")
		}
	}
	c.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.runs) != 2 {
		t.Fatalf("ran jobs %v; want only the committed one and the marker", c.runs)
	}
	if _, err := q.InsertTx(ctx, "not a tx", CountArgs{}, nil); !errors.Is(err, jobs.ErrTx) {
		t.Fatalf("InsertTx with a string = %v, want ErrTx", err)
	}
}

func testScheduled(t *testing.T, b Backend) {
	dsn := b.NewDatabase(t)
	q := open(t, b, dsn, jobs.Options{})
	c := newCounter()
	if err := jobs.Register(q, c.worker("a")); err != nil {
		t.Fatal(err)
	}
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	later := insert(t, q, CountArgs{N: 1}, &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)}).Job.ID
	soon := insert(t, q, CountArgs{N: 2}, &river.InsertOpts{ScheduledAt: time.Now().Add(time.Second)}).Job.ID
	if row := waitState(t, q, later, rivertype.JobStateScheduled); row.ScheduledAt.Before(time.Now().Add(50 * time.Minute)) {
		t.Fatalf("scheduled_at %v, want an hour ahead", row.ScheduledAt)
	}
	waitState(t, q, soon, rivertype.JobStateCompleted)
	marker := insert(t, q, CountArgs{N: 3}, nil).Job.ID
	waitState(t, q, marker, rivertype.JobStateCompleted)
	waitState(t, q, later, rivertype.JobStateScheduled)
	if c.count(later) != 0 {
		t.Fatalf("the job scheduled an hour ahead ran %d times", c.count(later))
	}
	if n, oldest, err := q.Stats(context.Background(), (CountArgs{}).Kind()); err != nil || n != 1 || oldest.IsZero() {
		t.Fatalf("Stats = %d, %v, %v; want the one scheduled job", n, oldest, err)
	}
}

func testTwoInstances(t *testing.T, b Backend) {
	dsn := b.NewDatabase(t)
	c := newCounter()
	var qs []*jobs.Queue
	for _, name := range []string{"a", "b"} {
		q := open(t, b, dsn, jobs.Options{ID: "jobstest-" + name, Workers: 3})
		if err := jobs.Register(q, c.worker(name)); err != nil {
			t.Fatal(err)
		}
		if err := q.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		qs = append(qs, q)
	}
	var ids []int64
	for i := 0; i < 60; i++ {
		ids = append(ids, insert(t, qs[i%2], CountArgs{N: i}, nil).Job.ID)
	}
	for _, id := range ids {
		waitState(t, qs[0], id, rivertype.JobStateCompleted)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	per := map[string]int{}
	for _, id := range ids {
		if c.runs[id] != 1 {
			t.Errorf("job %d ran %d times (%v), want exactly once", id, c.runs[id], c.by[id])
		}
		for _, in := range c.by[id] {
			per[in]++
		}
	}
	t.Logf("runs per instance: %v", per)
}

// Child environment.
const (
	envChild = "TENDRIL_JOBSTEST_CHILD"
	envDSN   = "TENDRIL_JOBSTEST_DSN"
)

// Child turns this process into the crash test's child when it was started
// as one: it opens backends[i] (the one named by the environment) on the
// parent's database, takes the CrashArgs job, writes its mark file and
// blocks until killed. Call it first in TestMain; it returns at once in any
// other process.
func Child(backends ...Backend) {
	name := os.Getenv(envChild)
	if name == "" {
		return
	}
	for _, b := range backends {
		if b.Name != name {
			continue
		}
		ctx := context.Background()
		q, _, err := b.Open(ctx, os.Getenv(envDSN), jobs.Options{ID: "jobstest-child", JobTimeout: -1, RescueStuckJobsAfter: time.Hour})
		if err != nil {
			fmt.Fprintln(os.Stderr, "jobstest child:", err)
			os.Exit(2)
		}
		err = jobs.RegisterFunc(q, func(ctx context.Context, job *river.Job[CrashArgs]) error {
			if err := os.WriteFile(job.Args.Mark, []byte("running"), 0o600); err != nil {
				fmt.Fprintln(os.Stderr, "jobstest child:", err)
			}
			select {} // the process is killed here
		})
		if err == nil {
			err = q.Start(ctx)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "jobstest child:", err)
			os.Exit(2)
		}
		select {}
	}
	fmt.Fprintln(os.Stderr, "jobstest child: no backend", name)
	os.Exit(2)
}

func testRescue(t *testing.T, b Backend) {
	if testing.Short() {
		t.Skip("the rescue waits for River's leader election and rescuer (~10-40 s)")
	}
	dsn := b.NewDatabase(t)
	mark := filepath.Join(t.TempDir(), "running")
	ins := open(t, b, dsn, jobs.Options{}) // insert-only: no worker, never started
	id := insert(t, ins, CrashArgs{Mark: mark}, nil).Job.ID

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+b.Name, envDSN+"="+dsn)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child never took the job")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no cleanup at all
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true
	if row := waitState(t, ins, id, rivertype.JobStateRunning); row.Attempt != 1 {
		t.Fatalf("after the kill: attempt %d, want the job left running on attempt 1", row.Attempt)
	}

	var mu sync.Mutex
	var attempts []int
	q := open(t, b, dsn, jobs.Options{ID: "jobstest-rescuer", JobTimeout: time.Second, RescueStuckJobsAfter: 2 * time.Second, RetryPolicy: fixedRetry(0)})
	if err := jobs.RegisterFunc(q, func(ctx context.Context, job *river.Job[CrashArgs]) error {
		mu.Lock()
		attempts = append(attempts, job.Attempt)
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	row := waitState(t, q, id, rivertype.JobStateCompleted)
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 1 || attempts[0] != 2 || row.Attempt != 2 {
		t.Fatalf("rescued runs %v, row attempt %d; want one rerun as attempt 2", attempts, row.Attempt)
	}
	if len(row.Errors) != 1 {
		t.Fatalf("errors %+v; want the rescue's 'stuck' error recorded for attempt 1", row.Errors)
	}
}

func testShutdownWaits(t *testing.T, b Backend) {
	dsn := b.NewDatabase(t)
	q := open(t, b, dsn, jobs.Options{})
	started := make(chan struct{})
	release := make(chan struct{})
	var finished sync.WaitGroup
	finished.Add(1)
	var ctxErr error
	if err := jobs.RegisterFunc(q, func(ctx context.Context, job *river.Job[CountArgs]) error {
		close(started)
		<-release
		ctxErr = ctx.Err()
		finished.Done()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := insert(t, q, CountArgs{N: 1}, nil).Job.ID
	<-started
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stopped <- q.Stop(ctx)
	}()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a job was running", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	finished.Wait()
	if ctxErr != nil {
		t.Fatalf("the job's context was cancelled (%v) within the deadline", ctxErr)
	}
	// The job's completion was recorded before Stop returned.
	rows, err := q.List(context.Background(), river.NewJobListParams().IDs(id).States(allStates...))
	if err != nil || len(rows) != 1 || rows[0].State != rivertype.JobStateCompleted {
		t.Fatalf("after Stop: %v %v; want the job completed", rows, err)
	}
}

func testShutdownDeadline(t *testing.T, b Backend) {
	dsn := b.NewDatabase(t)
	q := open(t, b, dsn, jobs.Options{})
	started := make(chan struct{})
	if err := jobs.RegisterFunc(q, func(ctx context.Context, job *river.Job[CountArgs]) error {
		close(started)
		<-ctx.Done() // only a cancelled context ends this job
		return ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := insert(t, q, CountArgs{N: 1}, nil).Job.ID
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := q.Stop(ctx); err != nil {
		t.Fatalf("Stop past its deadline: %v; want the running job cancelled and nil", err)
	}
	// Cancelled, not lost: the job waits for a retry on the next start.
	rows, err := q.List(context.Background(), river.NewJobListParams().IDs(id).States(allStates...))
	if err != nil || len(rows) != 1 {
		t.Fatalf("after Stop: %v %v", rows, err)
	}
	if s := rows[0].State; s != rivertype.JobStateRetryable && s != rivertype.JobStateAvailable {
		t.Fatalf("after a cancelling Stop the job is %s; want retryable", s)
	}
}
