package assistant

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/schedule"
)

// "Run now" runs the job through the queue and records the run: the job
// shows its last run afterwards and keeps its place in the schedule.
func TestRunJobNowRecordsTheRun(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	fake.Otherwise(func(modeltest.Seen) modeltest.Reply { return modeltest.Reply{Text: "watered"} })
	a := openTestApp(t, fake)
	ctx := context.Background()
	if err := a.Start(ctx, StartOptions{Scheduler: true}); err != nil {
		t.Fatal(err)
	}
	j, err := a.AddJob(ctx, schedule.JobSpec{Name: "water", Every: "24h", Task: "water the figs", ActorID: "api:runner"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.RunJobNow(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		jobs, err := a.Jobs(ctx, "api:runner")
		if err != nil || len(jobs) != 1 {
			t.Fatalf("jobs: %v %v", jobs, err)
		}
		if !jobs[0].LastRun.IsZero() {
			if !jobs[0].NextRun.After(time.Now().Add(23 * time.Hour)) {
				t.Fatalf("next run %v: not a day after the run", jobs[0].NextRun)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run was never recorded: %+v (model requests %d)", jobs[0], len(fake.Requests()))
		}
	}
}

// A paused job is listed as paused, resumed it is active again with its
// next slot after now; a run shows in its history.
func TestPauseResumeJobAndHistory(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	fake.Otherwise(func(modeltest.Seen) modeltest.Reply { return modeltest.Reply{Text: "pruned"} })
	a := openTestApp(t, fake)
	ctx := context.Background()
	if err := a.Start(ctx, StartOptions{Scheduler: true}); err != nil {
		t.Fatal(err)
	}
	j, err := a.AddJob(ctx, schedule.JobSpec{Name: "prune", Every: "24h", Task: "prune the roses", ActorID: "api:pruner"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.PauseJob(ctx, "prune")
	if err != nil || p.Status != schedule.StatusPaused {
		t.Fatalf("PauseJob = %+v, %v", p, err)
	}
	r, err := a.ResumeJob(ctx, j.ID)
	if err != nil || r.Status != schedule.StatusActive || !r.NextRun.After(time.Now()) {
		t.Fatalf("ResumeJob = %+v, %v", r, err)
	}
	if _, err := a.RunJobNow(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		runs, err := a.JobHistory(ctx, "prune")
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 1 {
			if runs[0].Result != schedule.RunOK || runs[0].JobID != j.ID {
				t.Fatalf("history = %+v", runs)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never reached the history: %+v", runs)
		}
	}
	if _, err := a.PauseJob(ctx, "nope"); !errors.Is(err, schedule.ErrNotFound) {
		t.Fatalf("PauseJob of an unknown job: %v, want ErrNotFound", err)
	}
}

// A fired one-shot (done) keeps its name for its history only: the same
// name can be scheduled again, the live job wins a lookup by name, and
// once it is removed the name finds the fired job's history.
func TestFiredOneShotNameReused(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	fake.Otherwise(func(modeltest.Seen) modeltest.Reply { return modeltest.Reply{Text: "reminded"} })
	a := openTestApp(t, fake)
	ctx := context.Background()
	if err := a.Start(ctx, StartOptions{Scheduler: true}); err != nil {
		t.Fatal(err)
	}
	first, err := a.AddJob(ctx, schedule.JobSpec{Name: "figs", At: "in 1h", Task: "water the figs", ActorID: "api:figs"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.RunJobNow(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		j, err := a.ResolveJob(ctx, "figs")
		if err != nil {
			t.Fatal(err)
		}
		if j.Status == schedule.StatusDone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the one-shot never fired: %+v", j)
		}
	}
	for _, f := range []func(context.Context, string) (schedule.Job, error){a.PauseJob, a.ResumeJob} {
		if _, err := f(ctx, first.ID); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "is done") {
			t.Fatalf("pause/resume of a done job: %v, want ErrInvalid saying it is done", err)
		}
	}
	second, err := a.AddJob(ctx, schedule.JobSpec{Name: "figs", At: "in 2h", Task: "water the figs again", ActorID: "api:figs"})
	if err != nil {
		t.Fatalf("adding a name a fired one-shot keeps: %v", err)
	}
	if _, err := a.AddJob(ctx, schedule.JobSpec{Name: "figs", At: "in 3h", Task: "a third", ActorID: "api:figs"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a second live job of the same name: %v, want ErrInvalid", err)
	}
	if j, err := a.ResolveJob(ctx, "figs"); err != nil || j.ID != second.ID {
		t.Fatalf("ResolveJob(figs) = %s, %v; want the live job %s", j.ID, err, second.ID)
	}
	if _, err := a.RemoveJob(ctx, second.ID); err != nil {
		t.Fatal(err)
	}
	if j, err := a.ResolveJob(ctx, "figs"); err != nil || j.ID != first.ID {
		t.Fatalf("ResolveJob(figs) = %s, %v; want the fired job %s", j.ID, err, first.ID)
	}
	runs, err := a.JobHistory(ctx, "figs")
	if err != nil || len(runs) != 1 || runs[0].JobID != first.ID {
		t.Fatalf("history by name = %+v, %v", runs, err)
	}
}

// A job reference that names nothing is echoed back short, whatever its
// size; a name is checked like an ID (no invisible formatting characters).
func TestJobRefsAndNames(t *testing.T) {
	a := openTestApp(t, modeltest.NewOpenAI(t))
	ctx := context.Background()
	_, err := a.ResolveJob(ctx, strings.Repeat("x", 100000))
	if !errors.Is(err, schedule.ErrNotFound) || len(err.Error()) > 200 || !strings.Contains(err.Error(), "(100000 bytes)") {
		t.Fatalf("long reference: %d bytes of error: %.300s", len(err.Error()), err)
	}
	for _, name := range []string{"backup\u202egpj.exe", "a\u200bb", "bad\xffutf8"} {
		if _, err := a.AddJob(ctx, schedule.JobSpec{Name: name, Every: "1h", Task: "t", ActorID: "api:me"}); !errors.Is(err, ErrInvalid) {
			t.Errorf("job name %q: %v, want ErrInvalid", name, err)
		}
	}
	// The API and the dashboard refuse an actor without both parts, as the
	// CLI does: its reply would have no channel to go to.
	for actor, want := range map[string]string{"nocolon": "want <channel>:<id>", "telegram:": "want <channel>:<id>",
		":123": "want <channel>:<id>", "\u00a0:1": "begins or ends with a blank", " :1": "begins or ends with a blank"} {
		_, err := a.AddJob(ctx, schedule.JobSpec{Name: "figs", Every: "1h", Task: "t", ActorID: actor})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("actor %q: %v, want ErrInvalid saying %q", actor, err, want)
		}
	}
	for _, spec := range []schedule.JobSpec{{SessionID: "s\u200b1"}, {Channel: "c\u202eli"}, {ChatID: "c\u20281"}} {
		spec.Name, spec.Every, spec.Task, spec.ActorID = "ok", "1h", "t", "api:me"
		if _, err := a.AddJob(ctx, spec); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "invisible") {
			t.Errorf("job %+v: %v, want ErrInvalid naming the invisible character", spec, err)
		}
	}
}
