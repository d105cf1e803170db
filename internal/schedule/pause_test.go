package schedule_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/schedule"
)

// A paused job does not fire; resumed, it runs at its first slot after the
// resume, not the slots it missed.
func TestPauseResume(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, start)
	j := e.add(t, schedule.JobSpec{Every: "1h"})
	p, err := e.s.Pause(ctx, j.ID)
	if err != nil || p.Status != schedule.StatusPaused {
		t.Fatalf("Pause = %+v, %v", p, err)
	}
	if again, err := e.s.Pause(ctx, j.ID); err != nil || again.Status != schedule.StatusPaused || !again.NextRun.Equal(p.NextRun) {
		t.Fatalf("second Pause = %+v, %v", again, err)
	}
	e.clock.Set(start.Add(5*time.Hour + 30*time.Minute))
	if n := e.runDue(t); n != 0 {
		t.Fatalf("a paused job ran %d times", n)
	}
	if n, _ := e.s.Due(ctx); n != 0 {
		t.Fatalf("Due counts %d paused jobs", n)
	}
	r, err := e.s.Resume(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Grid of CreatedAt + n·1h: the next slot after 17:30 is 18:00.
	if want := start.Add(6 * time.Hour); r.Status != schedule.StatusActive || !r.NextRun.Equal(want) || r.Attempts != 0 {
		t.Fatalf("Resume = %+v, want active at %v", r, want)
	}
	if n := e.runDue(t); n != 0 {
		t.Fatalf("resume replayed %d missed runs", n)
	}
	e.clock.Set(r.NextRun)
	if n := e.runDue(t); n != 1 {
		t.Fatalf("after resume ran %d, want 1", n)
	}
	if again, err := e.s.Resume(ctx, j.ID); err != nil || again.Status != schedule.StatusActive {
		t.Fatalf("Resume of an active job = %+v, %v", again, err)
	}
	for _, f := range []func(context.Context, string) (schedule.Job, error){e.s.Pause, e.s.Resume} {
		if _, err := f(ctx, "nope"); !errors.Is(err, schedule.ErrNotFound) {
			t.Errorf("unknown id: %v, want ErrNotFound", err)
		}
	}
}

// An `at` job paused past its time runs once, at the resume.
func TestResumeOneShotPastItsTime(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, start)
	j := e.add(t, schedule.JobSpec{At: "in 1h"})
	if _, err := e.s.Pause(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	e.clock.Set(start.Add(3 * time.Hour))
	if n := e.runDue(t); n != 0 {
		t.Fatalf("ran %d while paused", n)
	}
	r, err := e.s.Resume(ctx, j.ID)
	if err != nil || !r.NextRun.Equal(e.clock.Now()) {
		t.Fatalf("Resume = %+v, %v; want due now", r, err)
	}
	if n := e.runDue(t); n != 1 {
		t.Fatalf("ran %d, want 1", n)
	}
	if got, err := e.s.Get(ctx, j.ID); err != nil || got.Status != schedule.StatusDone {
		t.Fatalf("one-shot after its run: %+v, %v; want done", got, err)
	}
	e.clock.Advance(time.Hour)
	if n := e.runDue(t); n != 0 {
		t.Fatalf("a done one-shot ran again: %d", n)
	}
}

// A fired one-shot run again (RunNow), paused before that run and resumed
// runs once, at the resume, and never fires a second time at its original
// `at` (a new user's repro: it did).
func TestResumeFiredOneShotRunsAgainOnce(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, start)
	j := e.add(t, schedule.JobSpec{At: "in 2h"})
	if _, err := e.s.RunNow(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if n := e.runDue(t); n != 1 {
		t.Fatalf("ran %d, want 1", n)
	}
	if _, err := e.s.RunNow(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Pause(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	r, err := e.s.Resume(ctx, j.ID)
	if err != nil || !r.NextRun.Equal(e.clock.Now()) {
		t.Fatalf("Resume = %+v, %v; want due now, not at its original time", r, err)
	}
	if n := e.runDue(t); n != 1 {
		t.Fatalf("ran %d at the resume, want 1", n)
	}
	e.clock.Set(start.Add(3 * time.Hour)) // past the original `at`
	if n := e.runDue(t); n != 0 {
		t.Fatalf("the one-shot fired again at its original time: %d", n)
	}
	if got, err := e.s.Get(ctx, j.ID); err != nil || got.Status != schedule.StatusDone {
		t.Fatalf("after the run again: %+v, %v; want done", got, err)
	}
	if h, err := e.s.History(ctx, j.ID); err != nil || len(h) != 2 {
		t.Fatalf("history = %d runs, %v; want 2", len(h), err)
	}
}

// History lists finished runs newest first: ok with the start of what was
// delivered (or NOTHING_DUE), error with the error text.
func TestHistory(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, start)
	long := strings.Repeat("물", 300)
	e.log.reply = func(_ schedule.Job, n int) (string, error) {
		switch n {
		case 0:
			return long, nil
		case 1:
			return "", errors.New("model overloaded")
		default:
			return schedule.NothingDue, nil
		}
	}
	j := e.add(t, schedule.JobSpec{Every: "1h"})
	if h, err := e.s.History(ctx, j.ID); err != nil || len(h) != 0 {
		t.Fatalf("History before any run = %v, %v", h, err)
	}
	e.driveUntil(t, start.Add(3*time.Hour))
	h, err := e.s.History(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	// 13:00 ok, 14:00 error, 14:01 retry, 15:00: newest first.
	if len(h) != 4 {
		t.Fatalf("History = %+v, want 4 runs", h)
	}
	for i, at := range []time.Time{start.Add(3 * time.Hour), start.Add(2*time.Hour + time.Minute), start.Add(2 * time.Hour), start.Add(time.Hour)} {
		if !h[i].Started.Equal(at) {
			t.Errorf("runs[%d] started %v, want %v", i, h[i].Started, at)
		}
	}
	if h[0].Result != schedule.RunOK || h[0].Detail != schedule.NothingDue || h[1].Detail != schedule.NothingDue {
		t.Errorf("newest runs = %+v, %+v; want ok NOTHING_DUE", h[0], h[1])
	}
	if h[2].Result != schedule.RunError || !strings.Contains(h[2].Detail, "model overloaded") {
		t.Errorf("failed run = %+v, want the error", h[2])
	}
	if h[3].Result != schedule.RunOK || h[3].Detail != strings.Repeat("물", schedule.MaxRunDetail) {
		t.Errorf("first run detail = %q (%d bytes), want the first %d characters", h[3].Detail, len(h[3].Detail), schedule.MaxRunDetail)
	}
	for _, r := range h {
		if r.JobID != j.ID || r.Started.IsZero() || r.Finished.Before(r.Started) {
			t.Errorf("run times: %+v", r)
		}
	}
	if _, err := e.s.History(ctx, "nope"); !errors.Is(err, schedule.ErrNotFound) {
		t.Errorf("History of an unknown job: %v, want ErrNotFound", err)
	}
	if _, err := e.s.RemoveActor(ctx, j.ActorID); err != nil {
		t.Fatal(err)
	}
	if runs, err := e.store.Runs(ctx, j.ID); err != nil || len(runs) != 0 {
		t.Fatalf("runs after RemoveActor = %d, %v", len(runs), err)
	}
}
