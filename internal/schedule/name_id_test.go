package schedule_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/schedule"
)

// A job is named by its ID or its name (`tendril cron remove <id|name>`,
// the ID first): a new job, from any source, may not take another job's
// ID as its name, or that reference would name two jobs.
func TestNameMayNotBeAnotherJobsID(t *testing.T) {
	e := newEnv(t, time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	ctx := context.Background()
	figs := e.add(t, schedule.JobSpec{Name: "figs", Every: "24h"})

	spec := schedule.JobSpec{Name: figs.ID, Every: "24h", Task: "prune", ActorID: "telegram:8", Channel: "telegram", ChatID: "8"}
	_, err := e.s.Add(ctx, spec)
	if !errors.Is(err, schedule.ErrBadSpec) || !strings.Contains(err.Error(), `is the ID of another job ("figs" of telegram:7)`) {
		t.Fatalf("Add named %s: err = %v, want ErrBadSpec naming the job figs", figs.ID, err)
	}
	cfg := spec
	cfg.Name = " " + figs.ID + " " // trimmed like any name
	if err := e.s.SyncConfigJobs(ctx, []schedule.JobSpec{cfg}); !errors.Is(err, schedule.ErrBadSpec) || !strings.Contains(err.Error(), "is the ID of another job") {
		t.Fatalf("config job named %s: err = %v, want ErrBadSpec", figs.ID, err)
	}
	jobs, err := e.s.List(ctx, schedule.Filter{})
	if err != nil || len(jobs) != 1 || jobs[0].ID != figs.ID {
		t.Fatalf("jobs = %+v, %v; want only figs", jobs, err)
	}

	// Another name, even one that looks like an ID, is fine.
	spec.Name = schedule.NewID()
	if _, err := e.s.Add(ctx, spec); err != nil {
		t.Fatalf("Add named an unused ID: %v", err)
	}
}
