package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/schedule/scheduletest"
	"github.com/tendrilai/tendril/internal/schedule/sqlitestore"
)

// runLog is a Runner and Deliverer that records what happened.
type runLog struct {
	mu        sync.Mutex
	clock     schedule.Clock
	runs      []run
	delivered []string
	reply     func(j schedule.Job, n int) (string, error) // n counts runs of this job so far, from 0
	deliver   func(j schedule.Job, text string) error
}

type run struct {
	ID   string
	Slot time.Time // the job's NextRun when it ran
	At   time.Time // the clock when it ran
}

func (l *runLog) RunJob(ctx context.Context, j schedule.Job) (string, error) {
	l.mu.Lock()
	n := 0
	for _, r := range l.runs {
		if r.ID == j.ID {
			n++
		}
	}
	l.runs = append(l.runs, run{ID: j.ID, Slot: j.NextRun, At: l.clock.Now()})
	f := l.reply
	l.mu.Unlock()
	if f == nil {
		return "done: " + j.Task, nil
	}
	return f(j, n)
}

func (l *runLog) Deliver(ctx context.Context, j schedule.Job, text string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.deliver != nil {
		if err := l.deliver(j, text); err != nil {
			return err
		}
	}
	l.delivered = append(l.delivered, j.Channel+":"+j.ChatID+" "+text)
	return nil
}

func (l *runLog) snapshot() ([]run, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]run(nil), l.runs...), append([]string(nil), l.delivered...)
}

type env struct {
	clock *scheduletest.Clock
	store schedule.Store
	log   *runLog
	s     *schedule.Scheduler
	path  string
}

func newEnv(t *testing.T, start time.Time) *env {
	t.Helper()
	path := filepath.Join(t.TempDir(), "schedule", "jobs.db")
	e := &env{clock: scheduletest.NewClock(start), path: path}
	e.log = &runLog{clock: e.clock}
	e.store = e.openStore(t)
	e.s = e.newScheduler(t, e.log, schedule.Options{Clock: e.clock, Deliverer: e.log, InstanceID: "a"})
	return e
}

// newScheduler is schedule.New on e's store, closed with the test.
func (e *env) newScheduler(t *testing.T, r schedule.Runner, o schedule.Options) *schedule.Scheduler {
	s := schedule.New(e.store, r, o)
	t.Cleanup(func() { s.Close() })
	return s
}

func (e *env) openStore(t *testing.T) schedule.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), e.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func (e *env) add(t *testing.T, spec schedule.JobSpec) schedule.Job {
	t.Helper()
	if spec.Task == "" {
		spec.Task = "water the tomatoes"
	}
	if spec.ActorID == "" {
		spec.ActorID, spec.Channel, spec.ChatID = "telegram:7", "telegram", "7"
	}
	j, err := e.s.Add(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func (e *env) runDue(t *testing.T) int {
	t.Helper()
	n, err := e.s.RunDue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// driveUntil jumps the clock from due time to due time, running what is due,
// until the next due time is after end.
func (e *env) driveUntil(t *testing.T, end time.Time) {
	t.Helper()
	for i := 0; i < 10000; i++ {
		next, ok, err := e.store.NextWake(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !ok || next.After(end) {
			return
		}
		if next.After(e.clock.Now()) {
			e.clock.Set(next)
		}
		e.runDue(t)
	}
	t.Fatal("driveUntil did not finish")
}

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("no tzdata for %s: %v", name, err)
	}
	return l
}

func TestCronAcrossDST(t *testing.T) {
	ber := mustLoc(t, "Europe/Berlin")
	at := func(y int, m time.Month, d, h, min int) time.Time { return time.Date(y, m, d, h, min, 0, 0, ber) }
	tests := []struct {
		name       string
		cron       string
		start, end time.Time
		want       []time.Time // wall times in Berlin
		wantCount  int         // when want is nil: number of runs
	}{
		{
			// 2026-03-29 02:00 CET jumps to 03:00 CEST: 02:30 does not exist
			// that day and robfig skips it.
			name: "spring forward 02:30 skipped", cron: "30 2 * * *",
			start: at(2026, 3, 27, 12, 0), end: at(2026, 3, 31, 12, 0),
			want: []time.Time{at(2026, 3, 28, 2, 30), at(2026, 3, 30, 2, 30), at(2026, 3, 31, 2, 30)},
		},
		{
			name: "spring forward 08:00 keeps local time", cron: "0 8 * * *",
			start: at(2026, 3, 27, 12, 0), end: at(2026, 3, 30, 12, 0),
			want: []time.Time{at(2026, 3, 28, 8, 0), at(2026, 3, 29, 8, 0), at(2026, 3, 30, 8, 0)},
		},
		{
			// 2026-10-25 03:00 CEST falls back to 02:00 CET: 02:30 happens
			// twice; it fires at the first (CEST) only.
			name: "fall back 02:30 fires once", cron: "30 2 * * *",
			start: at(2026, 10, 23, 12, 0), end: at(2026, 10, 27, 12, 0),
			// time.Date is ambiguous at 02:30 that day: name the CEST one in UTC.
			want: []time.Time{at(2026, 10, 24, 2, 30), time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC).In(ber), at(2026, 10, 26, 2, 30), at(2026, 10, 27, 2, 30)},
		},
		{
			// An hourly job runs in both real 02:00 hours: 25 runs that day.
			name: "fall back hourly keeps both hours", cron: "0 * * * *",
			start: at(2026, 10, 24, 23, 30), end: at(2026, 10, 25, 23, 30),
			wantCount: 25,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.start)
			e.add(t, schedule.JobSpec{Name: "dst", Cron: tt.cron, TZ: "Europe/Berlin"})
			e.driveUntil(t, tt.end)
			runs, _ := e.log.snapshot()
			if tt.want == nil {
				if len(runs) != tt.wantCount {
					t.Fatalf("%d runs, want %d", len(runs), tt.wantCount)
				}
				return
			}
			var got []string
			for _, r := range runs {
				got = append(got, r.At.In(ber).Format(time.RFC3339))
			}
			var want []string
			for _, w := range tt.want {
				want = append(want, w.Format(time.RFC3339))
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("runs\n got %v\nwant %v", got, want)
			}
		})
	}
}

func TestMissedRunsRunOnceAfterDowntime(t *testing.T) {
	ber := mustLoc(t, "Europe/Berlin")
	start := time.Date(2026, 5, 4, 7, 0, 0, 0, ber)
	e := newEnv(t, start)
	hourly := e.add(t, schedule.JobSpec{Name: "hourly", Every: "1h"})
	daily := e.add(t, schedule.JobSpec{Name: "daily", Cron: "0 8 * * *", TZ: "Europe/Berlin"})
	once := e.add(t, schedule.JobSpec{Name: "once", At: "in 30m"})

	// The server is down for three days and ten minutes; then restarts on a
	// fresh store handle and scheduler.
	e.s.Close()
	e.store.Close()
	e.clock.Advance(72*time.Hour + 10*time.Minute)
	e.store = e.openStore(t)
	e.s = e.newScheduler(t, e.log, schedule.Options{Clock: e.clock, Deliverer: e.log, InstanceID: "b"})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := e.s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Wait (in real time) until the start-up runs of all three have
	// finished: the one-shot is done and the others moved past now.
	deadline := time.Now().Add(30 * time.Second)
	for {
		runs, _ := e.log.snapshot()
		o, _ := e.store.Get(ctx, once.ID)
		h, _ := e.store.Get(ctx, hourly.ID)
		d, _ := e.store.Get(ctx, daily.ID)
		if len(runs) >= 3 && o.Status == schedule.StatusDone && h.NextRun.After(e.clock.Now()) && d.NextRun.After(e.clock.Now()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("start-up ran %d jobs", len(runs))
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.s.Stop()
	runs, delivered := e.log.snapshot()
	count := map[string]int{}
	for _, r := range runs {
		count[r.ID]++
	}
	for _, j := range []schedule.Job{hourly, daily, once} {
		if count[j.ID] != 1 {
			t.Errorf("%s ran %d times after downtime, want once", j.Name, count[j.ID])
		}
	}
	if len(delivered) != 3 {
		t.Errorf("delivered %d replies, want 3", len(delivered))
	}
	now := e.clock.Now()
	h, err := e.store.Get(ctx, hourly.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The hourly grid is kept: next run on the original minute, after now.
	if want := hourly.NextRun.Add(72 * time.Hour); !h.NextRun.Equal(want) {
		t.Errorf("hourly next run %v, want %v", h.NextRun, want)
	}
	d, _ := e.store.Get(ctx, daily.ID)
	if want := time.Date(2026, 5, 7, 8, 0, 0, 0, ber); !d.NextRun.Equal(want) || !d.NextRun.After(now) {
		t.Errorf("daily next run %v, want %v", d.NextRun, want)
	}
	if o, err := e.store.Get(ctx, once.ID); err != nil || o.Status != schedule.StatusDone {
		t.Errorf("one-shot after its run: %+v, %v; want done", o, err)
	}
}

func TestRetryBackoff(t *testing.T) {
	start := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, start)
	e.log.reply = func(j schedule.Job, n int) (string, error) { return "", fmt.Errorf("model down (%d)", n) }
	j := e.add(t, schedule.JobSpec{Name: "daily", Cron: "0 9 * * *"})
	slot := j.NextRun
	e.clock.Set(slot)
	var gaps []time.Duration
	var attempts []int
	for i := 0; i < 4; i++ {
		if n := e.runDue(t); n != 1 {
			t.Fatalf("pass %d ran %d jobs", i, n)
		}
		got, err := e.store.Get(context.Background(), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		gaps = append(gaps, got.NextRun.Sub(e.clock.Now()))
		attempts = append(attempts, got.Attempts)
		if !strings.Contains(got.LastError, "model down") {
			t.Errorf("last_error = %q", got.LastError)
		}
		e.clock.Set(got.NextRun)
	}
	want := []time.Duration{60 * time.Second, 120 * time.Second, 300 * time.Second, 24*time.Hour - 8*time.Minute}
	if fmt.Sprint(gaps) != fmt.Sprint(want) {
		t.Errorf("retry gaps %v, want %v", gaps, want)
	}
	if fmt.Sprint(attempts) != fmt.Sprint([]int{1, 2, 3, 0}) {
		t.Errorf("attempts %v, want [1 2 3 0]", attempts)
	}
	// The next day's slot is a fresh start: it succeeds and resets.
	e.log.reply = nil
	e.runDue(t)
	got, _ := e.store.Get(context.Background(), j.ID)
	if got.Attempts != 0 || got.LastError != "" || !got.NextRun.Equal(slot.Add(48*time.Hour)) {
		t.Errorf("after success: attempts %d, last_error %q, next %v", got.Attempts, got.LastError, got.NextRun)
	}
}

func TestRetryNeverPassesNextRegularSlot(t *testing.T) {
	e := newEnv(t, time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	e.log.reply = func(schedule.Job, int) (string, error) { return "", errors.New("boom") }
	j := e.add(t, schedule.JobSpec{Name: "often", Every: "2m"})
	e.clock.Set(j.NextRun)
	e.runDue(t) // attempt 1 → retry in 60s
	e.clock.Advance(60 * time.Second)
	e.runDue(t) // attempt 2 → retry in 120s, but the regular slot comes first
	got, _ := e.store.Get(context.Background(), j.ID)
	if want := j.NextRun.Add(2 * time.Minute); !got.NextRun.Equal(want) || got.Attempts != 0 {
		t.Fatalf("next %v attempts %d, want regular slot %v and attempts 0", got.NextRun, got.Attempts, want)
	}
	// Retries keep the grid: run at 12:04 succeeds, next at 12:06.
	e.log.reply = nil
	e.clock.Set(got.NextRun)
	e.runDue(t)
	got, _ = e.store.Get(context.Background(), j.ID)
	if want := j.NextRun.Add(4 * time.Minute); !got.NextRun.Equal(want) {
		t.Fatalf("next %v, want %v", got.NextRun, want)
	}
}

func TestOneShot(t *testing.T) {
	start := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	t.Run("done after success, history kept", func(t *testing.T) {
		e := newEnv(t, start)
		if _, err := e.s.Add(context.Background(), schedule.JobSpec{At: "2026-06-01T14:00:00+02:00", Task: "x", ActorID: "a"}); !errors.Is(err, schedule.ErrBadSpec) {
			t.Fatalf("at == now accepted: %v", err)
		}
		j := e.add(t, schedule.JobSpec{Name: "tomatoes", At: "2026-06-01T14:00:00+01:00"})
		if !j.NextRun.Equal(start.Add(time.Hour)) {
			t.Fatalf("next run %v", j.NextRun)
		}
		e.clock.Set(j.NextRun)
		if n := e.runDue(t); n != 1 {
			t.Fatalf("ran %d", n)
		}
		got, err := e.store.Get(context.Background(), j.ID)
		if err != nil || got.Status != schedule.StatusDone || !got.LastRun.Equal(j.NextRun) || got.Attempts != 0 || got.LastError != "" {
			t.Fatalf("one-shot after success: %+v, %v; want done, last run at its slot", got, err)
		}
		if n := e.runDue(t); n != 0 {
			t.Fatalf("ran again: %d", n)
		}
		e.clock.Advance(48 * time.Hour)
		if n := e.runDue(t); n != 0 {
			t.Fatalf("ran again two days later: %d", n)
		}
		if _, ok, err := e.store.NextWake(context.Background()); err != nil || ok {
			t.Fatalf("a done job wakes the scheduler: %v %v", ok, err)
		}
		h, err := e.s.History(context.Background(), j.ID)
		if err != nil || len(h) != 1 {
			t.Fatalf("History = %+v, %v; want the one run", h, err)
		}
		if r := h[0]; r.JobID != j.ID || r.Result != schedule.RunOK || r.Detail != "done: water the tomatoes" || !r.Started.Equal(j.NextRun) || r.ActorID != "telegram:7" || r.Name != "tomatoes" {
			t.Fatalf("run = %+v", r)
		}
		// Pause and Resume leave a done job alone; it is listed last.
		if p, err := e.s.Pause(context.Background(), j.ID); err != nil || p.Status != schedule.StatusDone {
			t.Fatalf("Pause of a done job = %+v, %v", p, err)
		}
		if r, err := e.s.Resume(context.Background(), j.ID); err != nil || r.Status != schedule.StatusDone {
			t.Fatalf("Resume of a done job = %+v, %v", r, err)
		}
		later := e.add(t, schedule.JobSpec{Name: "later", Every: "1h"})
		if all, err := e.s.List(context.Background(), schedule.Filter{}); err != nil || len(all) != 2 || all[0].ID != later.ID || all[1].ID != j.ID {
			t.Fatalf("List = %+v, %v; want the scheduled job, then the done one", all, err)
		}
	})
	t.Run("done after a retried success", func(t *testing.T) {
		e := newEnv(t, start)
		e.log.reply = func(_ schedule.Job, n int) (string, error) {
			if n == 0 {
				return "", errors.New("transient")
			}
			return "Time to water the tomatoes.", nil
		}
		j := e.add(t, schedule.JobSpec{At: "in 2h"})
		e.driveUntil(t, start.Add(24*time.Hour))
		runs, delivered := e.log.snapshot()
		if len(runs) != 2 || !runs[1].At.Equal(runs[0].At.Add(time.Minute)) {
			t.Fatalf("runs %+v, want a failure then a retry 60s later", runs)
		}
		if len(delivered) != 1 || delivered[0] != "telegram:7 Time to water the tomatoes." {
			t.Fatalf("delivered %q", delivered)
		}
		if got, err := e.store.Get(context.Background(), j.ID); err != nil || got.Status != schedule.StatusDone {
			t.Fatalf("one-shot after success: %+v, %v", got, err)
		}
		// The failed attempt and the delivery that followed, newest first.
		h, err := e.s.History(context.Background(), j.ID)
		if err != nil || len(h) != 2 || h[0].Result != schedule.RunOK || h[0].Detail != "Time to water the tomatoes." ||
			h[1].Result != schedule.RunError || !strings.Contains(h[1].Detail, "transient") {
			t.Fatalf("History = %+v, %v; want ok then the error", h, err)
		}
	})
	t.Run("failed after retries", func(t *testing.T) {
		e := newEnv(t, start)
		e.log.reply = func(schedule.Job, int) (string, error) { return "", errors.New("down") }
		j := e.add(t, schedule.JobSpec{At: "in 1h"})
		e.driveUntil(t, start.Add(24*time.Hour))
		runs, _ := e.log.snapshot()
		got, err := e.store.Get(context.Background(), j.ID)
		if err != nil || got.Status != schedule.StatusFailed || len(runs) != 4 {
			t.Fatalf("runs %d, job %+v, err %v: want 4 runs then status failed", len(runs), got, err)
		}
		// A failed one-shot can be run again by hand.
		e.log.reply = nil
		if _, err := e.s.RunNow(context.Background(), j.ID); err != nil {
			t.Fatal(err)
		}
		if n := e.runDue(t); n != 1 {
			t.Fatalf("RunNow then RunDue ran %d", n)
		}
		if got, err := e.store.Get(context.Background(), j.ID); err != nil || got.Status != schedule.StatusDone {
			t.Fatalf("after manual success: %+v, %v; want done", got, err)
		}
		if h, err := e.s.History(context.Background(), j.ID); err != nil || len(h) != 5 || h[0].Result != schedule.RunOK {
			t.Fatalf("History = %+v, %v; want 4 failures and the manual success", h, err)
		}
	})
}

func TestNothingDueSuppressed(t *testing.T) {
	tests := []struct {
		reply string
		want  []string
	}{
		{"NOTHING_DUE", nil},
		{"  NOTHING_DUE\n", nil},
		{"`NOTHING_DUE`.", nil},
		{"", nil},
		{"Water the basil today.", []string{"telegram:7 Water the basil today."}},
		{"NOTHING_DUE\n\nBut frost is forecast tonight.", []string{"telegram:7 But frost is forecast tonight."}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.reply), func(t *testing.T) {
			e := newEnv(t, time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
			e.log.reply = func(schedule.Job, int) (string, error) { return tt.reply, nil }
			j := e.add(t, schedule.JobSpec{Every: "1h"})
			e.clock.Set(j.NextRun)
			if n := e.runDue(t); n != 1 {
				t.Fatalf("ran %d", n)
			}
			_, delivered := e.log.snapshot()
			if fmt.Sprint(delivered) != fmt.Sprint(tt.want) {
				t.Fatalf("delivered %q, want %q", delivered, tt.want)
			}
		})
	}
}

func TestDeliveryFailureRetries(t *testing.T) {
	e := newEnv(t, time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	e.log.deliver = func(schedule.Job, string) error { return errors.New("telegram 502") }
	j := e.add(t, schedule.JobSpec{Every: "1d"})
	e.clock.Set(j.NextRun)
	e.runDue(t)
	got, _ := e.store.Get(context.Background(), j.ID)
	if got.Attempts != 1 || !strings.Contains(got.LastError, "telegram 502") || !got.NextRun.Equal(e.clock.Now().Add(time.Minute)) {
		t.Fatalf("after delivery failure: %+v", got)
	}
}

func TestTwoInstancesFireEachRunOnce(t *testing.T) {
	start := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, start)
	const jobs, hours = 12, 4
	for i := 0; i < jobs; i++ {
		e.add(t, schedule.JobSpec{Name: fmt.Sprint("j", i), Every: "1h"})
	}
	// A second instance: its own connection pool on the same file, its own
	// scheduler, the same clock and run log.
	other := schedule.New(e.openStore(t), e.log, schedule.Options{Clock: e.clock, Deliverer: e.log, InstanceID: "b", MaxConcurrent: 3})
	for h := 1; h <= hours; h++ {
		e.clock.Set(start.Add(time.Duration(h) * time.Hour))
		var wg sync.WaitGroup
		for _, s := range []*schedule.Scheduler{e.s, other, e.s, other} {
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
	runs, delivered := e.log.snapshot()
	perSlot := map[string]int{}
	for _, r := range runs {
		perSlot[r.ID+"@"+r.Slot.Format(time.RFC3339)]++
	}
	if len(perSlot) != jobs*hours {
		t.Errorf("%d distinct runs, want %d", len(perSlot), jobs*hours)
	}
	for k, n := range perSlot {
		if n != 1 {
			t.Errorf("run %s fired %d times", k, n)
		}
	}
	if len(runs) != jobs*hours || len(delivered) != jobs*hours {
		t.Errorf("%d runs, %d deliveries, want %d each", len(runs), len(delivered), jobs*hours)
	}
}

func TestStopReleasesRunInFlight(t *testing.T) {
	e := newEnv(t, time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	started := make(chan struct{})
	// Use a runner that honours ctx.
	runner := schedule.RunnerFunc(func(ctx context.Context, j schedule.Job) (string, error) {
		select {
		case <-started:
		default:
			close(started)
		}
		<-ctx.Done()
		return "", ctx.Err()
	})
	s := e.newScheduler(t, runner, schedule.Options{Clock: e.clock, InstanceID: "a"})
	j := e.add(t, schedule.JobSpec{Every: "1h"})
	e.clock.Set(j.NextRun)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-started
	if n := s.InFlight(); n != 1 {
		t.Errorf("InFlight = %d during a run, want 1", n)
	}
	s.Stop()
	if n := s.InFlight(); n != 0 {
		t.Errorf("InFlight = %d after Stop, want 0", n)
	}
	got, err := e.store.Get(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.NextRun.Equal(j.NextRun) || got.Attempts != 0 {
		t.Fatalf("after stop mid-run: next %v attempts %d, want unchanged", got.NextRun, got.Attempts)
	}
	// The lease was released: a restarted scheduler can claim it at once.
	due, _ := e.store.Due(context.Background(), e.clock.Now(), 10)
	if len(due) != 1 {
		t.Fatalf("due after stop = %d, want 1", len(due))
	}
}

func TestStartTwiceAndNoRunner(t *testing.T) {
	e := newEnv(t, time.Now())
	if err := schedule.New(e.store, nil, schedule.Options{}).Start(context.Background()); err == nil {
		t.Error("Start without a runner succeeded")
	}
	if err := e.s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.s.Stop()
	if err := e.s.Start(context.Background()); err == nil {
		t.Error("second Start succeeded")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A started scheduler runs nothing before it is due, and a run made due
// from another process (tendril cron run: another Scheduler on the same
// store, which only manages jobs) reaches it through River at once, with
// no poll of the store.
func TestRunsArriveThroughTheJobQueue(t *testing.T) {
	e := newEnv(t, time.Now())
	s := e.newScheduler(t, e.log, schedule.Options{Deliverer: e.log, InstanceID: "server"}) // the wall clock
	e.log.clock = realClock{}
	j := e.add(t, schedule.JobSpec{Every: "1h"})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	other := e.newScheduler(t, nil, schedule.Options{InstanceID: "cli"})
	if _, err := other.RunNow(context.Background(), j.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the manual run", func() bool { runs, _ := e.log.snapshot(); return len(runs) == 1 })
	// Its outcome moved the job to the next hourly slot, which waits.
	waitFor(t, "the outcome", func() bool {
		got, err := e.store.Get(context.Background(), j.ID)
		return err == nil && !got.LastRun.IsZero() && got.NextRun.After(time.Now().Add(50*time.Minute))
	})
	if runs, _ := e.log.snapshot(); len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func TestCrashedInstanceLeaseExpires(t *testing.T) {
	e := newEnv(t, time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	j := e.add(t, schedule.JobSpec{Every: "1h"})
	e.clock.Set(j.NextRun)
	ctx := context.Background()
	// Another instance claimed the run and died without finishing it.
	if ok, err := e.store.Claim(ctx, schedule.Claim{ID: j.ID, NextRun: j.NextRun, Owner: "dead", Now: e.clock.Now(), Until: e.clock.Now().Add(10 * time.Minute)}); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if n := e.runDue(t); n != 0 {
		t.Fatalf("ran %d while the lease is held", n)
	}
	e.clock.Advance(10 * time.Minute)
	if n := e.runDue(t); n != 1 {
		t.Fatalf("ran %d after the lease expired, want 1", n)
	}
	if err := e.store.Finish(ctx, j.ID, "dead", schedule.Outcome{NextRun: j.NextRun, Status: schedule.StatusActive}); !errors.Is(err, schedule.ErrLeaseLost) {
		t.Fatalf("late finish by the dead owner: %v", err)
	}
}
