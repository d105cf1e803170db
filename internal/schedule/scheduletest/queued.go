package scheduletest

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/tendrilai/tendril/internal/jobs"
	"github.com/tendrilai/tendril/internal/schedule"
)

// ExerciseQueuedRuns checks, on store (a JobsOpener: River on the store's
// database), that removing or pausing a job deletes its queued River run,
// so River's table holds no scheduled row for a job that will never fire;
// that resuming queues one again; and that other jobs' runs stay queued
// throughout.
func ExerciseQueuedRuns(t *testing.T, store schedule.Store) {
	ctx := context.Background()
	opener, ok := store.(schedule.JobsOpener)
	if !ok {
		t.Fatalf("%T opens no job queue", store)
	}
	q, err := opener.OpenJobs(ctx, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	queued := func() []string {
		t.Helper()
		rows, err := q.List(ctx, river.NewJobListParams().Kinds(schedule.RunArgs{}.Kind()).
			States(rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStateRetryable).First(100))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rows {
			var a schedule.RunArgs
			if err := json.Unmarshal(r.EncodedArgs, &a); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, a.JobID)
		}
		sort.Strings(ids)
		return ids
	}
	s := schedule.New(store, nil, schedule.Options{Jobs: q, InstanceID: "manager"})
	add := func(spec schedule.JobSpec) schedule.Job {
		t.Helper()
		spec.Task = "water the tomatoes"
		if spec.ActorID == "" {
			spec.ActorID, spec.Channel, spec.ChatID = "telegram:7", "telegram", "7"
		}
		j, err := s.Add(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	want := func(what string, ids ...string) {
		t.Helper()
		sort.Strings(ids)
		if got := queued(); !slices.Equal(got, ids) {
			t.Fatalf("%s: queued runs of %v, want %v", what, got, ids)
		}
	}
	water := add(schedule.JobSpec{Name: "water", Every: "1h"})
	feed := add(schedule.JobSpec{Name: "feed", Every: "2h"})
	other := add(schedule.JobSpec{Name: "call", Every: "3h", ActorID: "telegram:8", Channel: "telegram", ChatID: "8"})
	want("after adding three jobs", water.ID, feed.ID, other.ID)

	if err := s.Remove(ctx, water.ID); err != nil {
		t.Fatal(err)
	}
	want("after removing water", feed.ID, other.ID)
	if _, err := s.Pause(ctx, feed.ID); err != nil {
		t.Fatal(err)
	}
	want("after pausing feed", other.ID)
	if _, err := s.Resume(ctx, feed.ID); err != nil {
		t.Fatal(err)
	}
	want("after resuming feed", feed.ID, other.ID)
	if _, err := s.RemoveActor(ctx, "telegram:7"); err != nil {
		t.Fatal(err)
	}
	want("after removing telegram:7's jobs", other.ID)
}
