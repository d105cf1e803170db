package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/schedule/scheduletest"
	"github.com/tendrilai/tendril/internal/schedule/sqlitestore"
)

func TestConformance(t *testing.T) {
	scheduletest.Exercise(t, func(t *testing.T) schedule.Store {
		s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "schedule", "jobs.db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestTwoInstancesOnOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	a, err := sqlitestore.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlitestore.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	scheduletest.ExerciseInstances(t, a, b)
}

func TestReopenKeepsJobs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	j, err := schedule.NewJob(schedule.JobSpec{Every: "1h", Task: "t", ActorID: "a"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlitestore.Open(ctx, path) // migrations must not re-run
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Get(ctx, j.ID)
	if err != nil || !got.NextRun.Equal(j.NextRun) {
		t.Fatalf("after reopen: %+v %v", got, err)
	}
}

func TestOpenBadPath(t *testing.T) {
	for _, p := range []string{"", "jobs.db?_pragma=x", filepath.Join(t.TempDir(), "f", "a\x00b")} {
		if _, err := sqlitestore.Open(context.Background(), p); err == nil {
			t.Errorf("Open(%q) succeeded", p)
		}
	}
}

// Two started instances on one file and one River database: each run
// fires exactly once.
func TestStartedInstancesOnOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	a, err := sqlitestore.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlitestore.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	scheduletest.ExerciseStartedInstances(t, a, b)
}
