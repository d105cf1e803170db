package scheduletest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/schedule"
)

// Exercise runs the schedule.Store conformance suite. newStore returns an
// empty store; it is called once per subtest and the suite closes it.
func Exercise(t *testing.T, newStore func(t *testing.T) schedule.Store) {
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	open := func(t *testing.T) (schedule.Store, context.Context) {
		t.Helper()
		s := newStore(t)
		t.Cleanup(func() { s.Close() })
		return s, context.Background()
	}
	job := func(t *testing.T, name string, next time.Time) schedule.Job {
		t.Helper()
		j, err := schedule.NewJob(schedule.JobSpec{Name: name, Every: "1h", Task: "water the " + name, ActorID: "telegram:1", Channel: "telegram", ChatID: "1"}, next.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	mustCreate := func(t *testing.T, s schedule.Store, j schedule.Job) {
		t.Helper()
		if err := s.Create(context.Background(), j); err != nil {
			t.Fatalf("create %s: %v", j.Name, err)
		}
	}

	t.Run("RoundTrip", func(t *testing.T) {
		s, ctx := open(t)
		j := schedule.Job{
			ID: schedule.NewID(), Name: "배추 물주기 \"quotes\" 'x'; DROP TABLE jobs;--", Kind: schedule.KindCron,
			Spec: "30 7 * * 1-5", TZ: "Europe/Berlin", Task: strings.Repeat("물", schedule.MaxTaskLen/3),
			ActorID: "telegram:42", Channel: "telegram", ChatID: "-1001234", SessionID: "s-1",
			CreatedAt: t0.Add(123 * time.Millisecond), NextRun: t0.Add(time.Hour + 456*time.Millisecond),
			LastRun: t0.Add(-time.Hour), Attempts: 2, Status: schedule.StatusActive, Source: schedule.SourceTool, LastError: "boom",
		}
		mustCreate(t, s, j)
		got, err := s.Get(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !equalJob(got, j) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, j)
		}
		if err := s.Create(ctx, j); !errors.Is(err, schedule.ErrExists) {
			t.Fatalf("duplicate id: err = %v, want ErrExists", err)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		s, ctx := open(t)
		if _, err := s.Get(ctx, "nope"); !errors.Is(err, schedule.ErrNotFound) {
			t.Errorf("Get: %v", err)
		}
		if err := s.Delete(ctx, "nope"); !errors.Is(err, schedule.ErrNotFound) {
			t.Errorf("Delete: %v", err)
		}
		j := job(t, "x", t0)
		if err := s.Update(ctx, j); !errors.Is(err, schedule.ErrNotFound) {
			t.Errorf("Update: %v", err)
		}
	})

	t.Run("ConfigNameUnique", func(t *testing.T) {
		s, ctx := open(t)
		a, b := job(t, "daily", t0), job(t, "daily", t0)
		// Non-config jobs may share a name.
		mustCreate(t, s, a)
		mustCreate(t, s, b)
		c, d := job(t, "daily", t0), job(t, "daily", t0)
		c.Source, d.Source = schedule.SourceConfig, schedule.SourceConfig
		mustCreate(t, s, c)
		if err := s.Create(ctx, d); !errors.Is(err, schedule.ErrExists) {
			t.Fatalf("second config job named daily: err = %v, want ErrExists", err)
		}
	})

	t.Run("ListFilterOrder", func(t *testing.T) {
		s, ctx := open(t)
		var ids []string
		for i, actor := range []string{"telegram:1", "telegram:2", "telegram:1"} {
			j := job(t, fmt.Sprint("j", i), t0.Add(time.Duration(3-i)*time.Minute))
			j.ActorID = actor
			if i == 2 {
				j.Source = schedule.SourceConfig
			}
			mustCreate(t, s, j)
			ids = append(ids, j.ID)
		}
		all, err := s.List(ctx, schedule.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if got := jobIDs(all); strings.Join(got, ",") != strings.Join([]string{ids[2], ids[1], ids[0]}, ",") {
			t.Errorf("List order = %v, want by next_run", got)
		}
		mine, _ := s.List(ctx, schedule.Filter{ActorID: "telegram:1"})
		if got := jobIDs(mine); len(got) != 2 || got[0] != ids[2] || got[1] != ids[0] {
			t.Errorf("List actor = %v", got)
		}
		cfg, _ := s.List(ctx, schedule.Filter{Source: schedule.SourceConfig})
		if got := jobIDs(cfg); len(got) != 1 || got[0] != ids[2] {
			t.Errorf("List source = %v", got)
		}
		named, _ := s.List(ctx, schedule.Filter{Name: "j1"})
		if got := jobIDs(named); len(got) != 1 || got[0] != ids[1] {
			t.Errorf("List name = %v", got)
		}
	})

	t.Run("UpdateDelete", func(t *testing.T) {
		s, ctx := open(t)
		j := job(t, "a", t0)
		mustCreate(t, s, j)
		j.Task, j.Spec, j.NextRun, j.Status, j.Attempts = "changed", "2h", t0.Add(time.Hour), schedule.StatusFailed, 3
		if err := s.Update(ctx, j); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Get(ctx, j.ID)
		if !equalJob(got, j) {
			t.Fatalf("after update:\n got %+v\nwant %+v", got, j)
		}
		if err := s.Delete(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, j.ID); !errors.Is(err, schedule.ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
	})

	t.Run("DeleteActor", func(t *testing.T) {
		s, ctx := open(t)
		// Actor A has jobs of every source and status, one of them leased;
		// actor B (and an actor whose ID has A's as a prefix) must survive.
		var mine, theirs []schedule.Job
		for i, src := range []schedule.Source{schedule.SourceTool, schedule.SourceCLI, schedule.SourceConfig, schedule.SourceTool} {
			j := job(t, fmt.Sprint("a", i), t0.Add(time.Duration(4-i)*time.Minute))
			j.ActorID, j.Source = "telegram:100", src
			if i == 3 {
				j.Status = schedule.StatusFailed
			}
			mustCreate(t, s, j)
			mine = append(mine, j)
		}
		for i, actor := range []string{"telegram:200", "telegram:1000", "telegram:10"} {
			j := job(t, fmt.Sprint("b", i), t0)
			j.ActorID = actor
			mustCreate(t, s, j)
			theirs = append(theirs, j)
		}
		if ok, err := s.Claim(ctx, schedule.Claim{ID: mine[0].ID, NextRun: mine[0].NextRun, Owner: "runner", Now: t0.Add(time.Hour), Until: t0.Add(2 * time.Hour)}); err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		removed, err := s.DeleteActor(ctx, "telegram:100")
		if err != nil {
			t.Fatal(err)
		}
		// Ordered by NextRun: a3, a2, a1, a0.
		want := []string{mine[3].ID, mine[2].ID, mine[1].ID, mine[0].ID}
		if got := jobIDs(removed); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("removed %v, want %v", names(removed), []string{"a3", "a2", "a1", "a0"})
		}
		for _, r := range removed {
			for _, m := range mine {
				if m.ID == r.ID && !equalJob(r, m) {
					t.Errorf("removed job not returned as stored:\n got %+v\nwant %+v", r, m)
				}
			}
		}
		if left, err := s.List(ctx, schedule.Filter{ActorID: "telegram:100"}); err != nil || len(left) != 0 {
			t.Fatalf("after DeleteActor the actor still has %v (err %v)", names(left), err)
		}
		for _, j := range mine {
			if _, err := s.Get(ctx, j.ID); !errors.Is(err, schedule.ErrNotFound) {
				t.Errorf("job %s: Get = %v, want ErrNotFound", j.Name, err)
			}
		}
		all, _ := s.List(ctx, schedule.Filter{})
		if len(all) != len(theirs) {
			t.Fatalf("other actors' jobs: %v, want %d", names(all), len(theirs))
		}
		for _, j := range theirs {
			if got, err := s.Get(ctx, j.ID); err != nil || !equalJob(got, j) {
				t.Errorf("job %s of %s changed: %+v %v", j.Name, j.ActorID, got, err)
			}
		}
		// The leased run lost its job.
		if err := s.Finish(ctx, mine[0].ID, "runner", schedule.Outcome{NextRun: t0, Status: schedule.StatusActive}); !errors.Is(err, schedule.ErrLeaseLost) {
			t.Fatalf("finish of a removed job: %v, want ErrLeaseLost", err)
		}
		// A second call, or an unknown actor, removes nothing.
		for _, a := range []string{"telegram:100", "nobody"} {
			if again, err := s.DeleteActor(ctx, a); err != nil || len(again) != 0 {
				t.Fatalf("DeleteActor(%s) = %v, %v; want none", a, names(again), err)
			}
		}
	})

	t.Run("CountDue", func(t *testing.T) {
		s, ctx := open(t)
		if n, err := s.CountDue(ctx, t0); err != nil || n != 0 {
			t.Fatalf("empty CountDue = %d, %v", n, err)
		}
		early, onTime, late, failed, leased := job(t, "early", t0.Add(-time.Minute)), job(t, "ontime", t0), job(t, "late", t0.Add(time.Second)), job(t, "failed", t0.Add(-time.Hour)), job(t, "leased", t0.Add(-time.Hour))
		failed.Status = schedule.StatusFailed
		for _, j := range []schedule.Job{early, onTime, late, failed, leased} {
			mustCreate(t, s, j)
		}
		if ok, err := s.Claim(ctx, schedule.Claim{ID: leased.ID, NextRun: leased.NextRun, Owner: "a", Now: t0, Until: t0.Add(10 * time.Minute)}); err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		for _, at := range []time.Time{t0.Add(-2 * time.Hour), t0.Add(-time.Minute), t0, t0.Add(time.Second), t0.Add(10 * time.Minute)} {
			due, err := s.Due(ctx, at, 100)
			if err != nil {
				t.Fatal(err)
			}
			n, err := s.CountDue(ctx, at)
			if err != nil || n != len(due) {
				t.Errorf("CountDue(%v) = %d, %v; Due lists %v", at.Sub(t0), n, err, names(due))
			}
		}
		if n, _ := s.CountDue(ctx, t0); n != 2 {
			t.Errorf("CountDue(t0) = %d, want 2 (early, ontime; not late, failed or leased)", n)
		}
	})

	t.Run("DueAndNextWake", func(t *testing.T) {
		s, ctx := open(t)
		if _, ok, err := s.NextWake(ctx); err != nil || ok {
			t.Fatalf("empty NextWake ok=%v err=%v", ok, err)
		}
		early, onTime, late, failed := job(t, "early", t0.Add(-time.Minute)), job(t, "ontime", t0), job(t, "late", t0.Add(time.Second)), job(t, "failed", t0.Add(-time.Hour))
		failed.Status = schedule.StatusFailed
		for _, j := range []schedule.Job{late, onTime, early, failed} {
			mustCreate(t, s, j)
		}
		due, err := s.Due(ctx, t0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if got := jobIDs(due); len(got) != 2 || got[0] != early.ID || got[1] != onTime.ID {
			t.Fatalf("Due = %v, want [early ontime]", names(due))
		}
		if due, _ := s.Due(ctx, t0, 1); len(due) != 1 || due[0].ID != early.ID {
			t.Fatalf("Due limit 1 = %v", names(due))
		}
		w, ok, err := s.NextWake(ctx)
		if err != nil || !ok || !w.Equal(early.NextRun) {
			t.Fatalf("NextWake = %v %v %v, want %v", w, ok, err, early.NextRun)
		}
		// A leased job is not due, and wakes at its lease expiry.
		if ok, err := s.Claim(ctx, schedule.Claim{ID: early.ID, NextRun: early.NextRun, Owner: "a", Now: t0, Until: t0.Add(10 * time.Minute)}); err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		if due, _ := s.Due(ctx, t0, 10); len(due) != 1 || due[0].ID != onTime.ID {
			t.Fatalf("Due with early leased = %v", names(due))
		}
		if w, _, _ := s.NextWake(ctx); !w.Equal(onTime.NextRun) {
			t.Fatalf("NextWake = %v, want %v", w, onTime.NextRun)
		}
		if due, _ := s.Due(ctx, t0.Add(10*time.Minute), 10); len(due) != 3 {
			t.Fatalf("Due after lease expiry = %v, want early, ontime, late", names(due))
		}
	})

	t.Run("ClaimFinish", func(t *testing.T) {
		s, ctx := open(t)
		j := job(t, "a", t0)
		mustCreate(t, s, j)
		claim := schedule.Claim{ID: j.ID, NextRun: j.NextRun, Owner: "a", Now: t0, Until: t0.Add(time.Minute)}
		if ok, err := s.Claim(ctx, claim); err != nil || !ok {
			t.Fatalf("first claim: %v %v", ok, err)
		}
		other := claim
		other.Owner = "b"
		if ok, _ := s.Claim(ctx, other); ok {
			t.Fatal("second claim of a leased run won")
		}
		stale := other
		stale.NextRun = j.NextRun.Add(-time.Hour)
		stale.Now = t0.Add(2 * time.Minute)
		if ok, _ := s.Claim(ctx, stale); ok {
			t.Fatal("claim with a stale next_run won")
		}
		if err := s.Finish(ctx, j.ID, "b", schedule.Outcome{NextRun: t0.Add(time.Hour), Status: schedule.StatusActive}); !errors.Is(err, schedule.ErrLeaseLost) {
			t.Fatalf("finish by non-owner: %v, want ErrLeaseLost", err)
		}
		o := schedule.Outcome{NextRun: t0.Add(time.Hour), LastRun: t0.Add(5 * time.Second), Attempts: 1, Status: schedule.StatusActive, LastError: "e"}
		if err := s.Finish(ctx, j.ID, "a", o); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Get(ctx, j.ID)
		if !got.NextRun.Equal(o.NextRun) || !got.LastRun.Equal(o.LastRun) || got.Attempts != 1 || got.LastError != "e" {
			t.Fatalf("after finish: %+v", got)
		}
		if err := s.Finish(ctx, j.ID, "a", o); !errors.Is(err, schedule.ErrLeaseLost) {
			t.Fatalf("second finish: %v, want ErrLeaseLost", err)
		}
		// The old slot can't be claimed; the new one can, at once (lease freed).
		if ok, _ := s.Claim(ctx, claim); ok {
			t.Fatal("claimed a finished slot")
		}
		next := schedule.Claim{ID: j.ID, NextRun: o.NextRun, Owner: "b", Now: t0.Add(10 * time.Second), Until: t0.Add(time.Hour)}
		if ok, err := s.Claim(ctx, next); err != nil || !ok {
			t.Fatalf("claim next slot: %v %v", ok, err)
		}
		if err := s.Finish(ctx, j.ID, "b", schedule.Outcome{Delete: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, j.ID); !errors.Is(err, schedule.ErrNotFound) {
			t.Fatalf("after delete outcome: %v", err)
		}
		if ok, _ := s.Claim(ctx, next); ok {
			t.Fatal("claimed a deleted job")
		}
	})

	t.Run("ExpiredLeaseReclaimed", func(t *testing.T) {
		s, ctx := open(t)
		j := job(t, "a", t0)
		mustCreate(t, s, j)
		if ok, _ := s.Claim(ctx, schedule.Claim{ID: j.ID, NextRun: j.NextRun, Owner: "dead", Now: t0, Until: t0.Add(time.Minute)}); !ok {
			t.Fatal("claim")
		}
		if ok, _ := s.Claim(ctx, schedule.Claim{ID: j.ID, NextRun: j.NextRun, Owner: "b", Now: t0.Add(59 * time.Second), Until: t0.Add(time.Hour)}); ok {
			t.Fatal("claimed before lease expiry")
		}
		if ok, _ := s.Claim(ctx, schedule.Claim{ID: j.ID, NextRun: j.NextRun, Owner: "b", Now: t0.Add(time.Minute), Until: t0.Add(time.Hour)}); !ok {
			t.Fatal("could not claim after lease expiry")
		}
		if err := s.Finish(ctx, j.ID, "dead", schedule.Outcome{NextRun: t0, Status: schedule.StatusActive}); !errors.Is(err, schedule.ErrLeaseLost) {
			t.Fatalf("finish by the expired owner: %v, want ErrLeaseLost", err)
		}
	})

	t.Run("Paused", func(t *testing.T) {
		s, ctx := open(t)
		p, a := job(t, "paused", t0.Add(-time.Minute)), job(t, "active", t0.Add(time.Minute))
		p.Status = schedule.StatusPaused
		mustCreate(t, s, p)
		mustCreate(t, s, a)
		if got, err := s.Get(ctx, p.ID); err != nil || got.Status != schedule.StatusPaused {
			t.Fatalf("Get paused = %+v, %v", got, err)
		}
		if due, err := s.Due(ctx, t0, 10); err != nil || len(due) != 0 {
			t.Fatalf("Due = %v, %v; a paused job is never due", names(due), err)
		}
		if n, err := s.CountDue(ctx, t0); err != nil || n != 0 {
			t.Fatalf("CountDue = %d, %v; want 0", n, err)
		}
		if w, ok, err := s.NextWake(ctx); err != nil || !ok || !w.Equal(a.NextRun) {
			t.Fatalf("NextWake = %v %v %v, want the active job's %v", w, ok, err, a.NextRun)
		}
		if ok, err := s.Claim(ctx, schedule.Claim{ID: p.ID, NextRun: p.NextRun, Owner: "a", Now: t0, Until: t0.Add(time.Minute)}); err != nil || ok {
			t.Fatalf("claim of a paused job: %v %v", ok, err)
		}
		// Paused while its run is in flight: Finish keeps it paused.
		if ok, err := s.Claim(ctx, schedule.Claim{ID: a.ID, NextRun: a.NextRun, Owner: "a", Now: t0.Add(time.Minute), Until: t0.Add(time.Hour)}); err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		a.Status = schedule.StatusPaused
		if err := s.Update(ctx, a); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, a.ID, "a", schedule.Outcome{NextRun: t0.Add(2 * time.Hour), LastRun: t0.Add(2 * time.Minute), Status: schedule.StatusActive}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Get(ctx, a.ID); got.Status != schedule.StatusPaused || !got.LastRun.Equal(t0.Add(2*time.Minute)) {
			t.Fatalf("after finish of a job paused mid-run: %+v, want paused with the run recorded", got)
		}
		if _, ok, err := s.NextWake(ctx); err != nil || ok {
			t.Fatalf("NextWake with only paused jobs: ok=%v err=%v", ok, err)
		}
		// Resumed (status active again) it is due.
		p.Status = schedule.StatusActive
		if err := s.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		if due, _ := s.Due(ctx, t0, 10); len(due) != 1 || due[0].ID != p.ID {
			t.Fatalf("Due after resume = %v", names(due))
		}
	})

	t.Run("RunHistory", func(t *testing.T) {
		s, ctx := open(t)
		j, other := job(t, "a", t0), job(t, "b", t0)
		other.ActorID = "telegram:2"
		mustCreate(t, s, j)
		mustCreate(t, s, other)
		if runs, err := s.Runs(ctx, j.ID); err != nil || len(runs) != 0 {
			t.Fatalf("Runs of a job never run = %v, %v", runs, err)
		}
		if runs, err := s.Runs(ctx, "nope"); err != nil || len(runs) != 0 {
			t.Fatalf("Runs of an unknown job = %v, %v", runs, err)
		}
		finish := func(t *testing.T, j schedule.Job, i int, r *schedule.Run) {
			t.Helper()
			now := t0.Add(time.Duration(i) * time.Minute)
			cur, err := s.Get(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := s.Claim(ctx, schedule.Claim{ID: j.ID, NextRun: cur.NextRun, Owner: "a", Now: now, Until: now.Add(time.Minute)}); err != nil || !ok {
				t.Fatalf("claim %d: %v %v", i, ok, err)
			}
			if err := s.Finish(ctx, j.ID, "a", schedule.Outcome{NextRun: now.Add(time.Second), LastRun: now, Status: schedule.StatusActive, Run: r}); err != nil {
				t.Fatalf("finish %d: %v", i, err)
			}
		}
		n := schedule.MaxRuns + 5
		for i := range n {
			now := t0.Add(time.Duration(i) * time.Minute)
			r := &schedule.Run{JobID: j.ID, Started: now, Finished: now.Add(1500 * time.Millisecond), Result: schedule.RunOK, Detail: fmt.Sprint("배추 ", i)}
			if i%2 == 1 {
				r.Result, r.Detail = schedule.RunError, fmt.Sprint("boom ", i)
			}
			finish(t, j, i, r)
		}
		finish(t, j, n, nil) // an interrupted run records nothing
		finish(t, other, 0, &schedule.Run{JobID: other.ID, Started: t0, Finished: t0, Result: schedule.RunOK})
		runs, err := s.Runs(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != schedule.MaxRuns {
			t.Fatalf("%d runs kept, want %d", len(runs), schedule.MaxRuns)
		}
		for k, r := range runs {
			i := n - 1 - k // newest first
			now := t0.Add(time.Duration(i) * time.Minute)
			want := schedule.Run{JobID: j.ID, Started: now, Finished: now.Add(1500 * time.Millisecond), Result: schedule.RunOK, Detail: fmt.Sprint("배추 ", i)}
			if i%2 == 1 {
				want.Result, want.Detail = schedule.RunError, fmt.Sprint("boom ", i)
			}
			if r.JobID != want.JobID || !r.Started.Equal(want.Started) || !r.Finished.Equal(want.Finished) || r.Result != want.Result || r.Detail != want.Detail {
				t.Fatalf("runs[%d] = %+v, want %+v", k, r, want)
			}
		}
		// Runs go with their job: Delete, a deleting Finish, DeleteActor.
		if err := s.Delete(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		if runs, err := s.Runs(ctx, j.ID); err != nil || len(runs) != 0 {
			t.Fatalf("Runs after Delete = %d, %v", len(runs), err)
		}
		mustCreate(t, s, j) // same ID again: no history carried over
		if runs, _ := s.Runs(ctx, j.ID); len(runs) != 0 {
			t.Fatalf("a re-created job inherited %d runs", len(runs))
		}
		finish(t, j, 0, &schedule.Run{JobID: j.ID, Started: t0, Finished: t0, Result: schedule.RunOK})
		if ok, err := s.Claim(ctx, schedule.Claim{ID: j.ID, NextRun: t0.Add(time.Second), Owner: "a", Now: t0.Add(time.Minute), Until: t0.Add(time.Hour)}); err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		if err := s.Finish(ctx, j.ID, "a", schedule.Outcome{Delete: true}); err != nil {
			t.Fatal(err)
		}
		mustCreate(t, s, j)
		if runs, _ := s.Runs(ctx, j.ID); len(runs) != 0 {
			t.Fatalf("runs survived a deleting Finish: %d", len(runs))
		}
		if runs, _ := s.Runs(ctx, other.ID); len(runs) != 1 {
			t.Fatalf("other job's runs = %d, want 1", len(runs))
		}
		if _, err := s.DeleteActor(ctx, other.ActorID); err != nil {
			t.Fatal(err)
		}
		mustCreate(t, s, other)
		if runs, _ := s.Runs(ctx, other.ID); len(runs) != 0 {
			t.Fatalf("runs survived DeleteActor: %d", len(runs))
		}
	})

	// A fired one-shot is done: never due again, listed after the
	// scheduled jobs, and its runs stay (SPEC §7.2; `tendril cron history`).
	t.Run("OneShotDoneKeepsHistory", func(t *testing.T) {
		s, ctx := open(t)
		at := func(t *testing.T, name string, slot time.Time) schedule.Job {
			t.Helper()
			j, err := schedule.NewJob(schedule.JobSpec{Name: name, At: slot.Format(time.RFC3339Nano), Task: "remind me: " + name, ActorID: "telegram:1", Channel: "telegram", ChatID: "1", Source: schedule.SourceTool}, slot.Add(-time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			return j
		}
		once, later := at(t, "figs", t0), job(t, "later", t0.Add(time.Hour))
		mustCreate(t, s, once)
		mustCreate(t, s, later)
		fired := t0.Add(2 * time.Second)
		if ok, err := s.Claim(ctx, schedule.Claim{ID: once.ID, NextRun: once.NextRun, Owner: "a", Now: t0, Until: t0.Add(time.Minute)}); err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		run := schedule.Run{JobID: once.ID, Started: t0, Finished: fired, Result: schedule.RunOK, Detail: "Time to water the figs!"}
		if err := s.Finish(ctx, once.ID, "a", schedule.Outcome{NextRun: once.NextRun, LastRun: fired, Status: schedule.StatusDone, Run: &run}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, once.ID)
		if err != nil {
			t.Fatalf("a fired one-shot is gone: %v", err)
		}
		want := once
		want.Status, want.LastRun = schedule.StatusDone, fired
		if !equalJob(got, want) {
			t.Fatalf("after its run:\n got %+v\nwant %+v", got, want)
		}
		runs, err := s.Runs(ctx, once.ID)
		if err != nil || len(runs) != 1 {
			t.Fatalf("Runs = %+v, %v; want the one run", runs, err)
		}
		if r := runs[0]; r.JobID != once.ID || !r.Started.Equal(run.Started) || !r.Finished.Equal(run.Finished) || r.Result != run.Result || r.Detail != run.Detail {
			t.Fatalf("run = %+v, want %+v", r, run)
		}
		// Never due, never claimable, never a wake-up.
		for _, now := range []time.Time{t0, t0.Add(time.Hour), t0.Add(1000 * time.Hour)} {
			due, err := s.Due(ctx, now, 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range due {
				if d.ID == once.ID {
					t.Fatalf("Due(%v) lists the done one-shot", now)
				}
			}
			if n, err := s.CountDue(ctx, now); err != nil || n != len(due) {
				t.Fatalf("CountDue(%v) = %d, %v; Due lists %v", now, n, err, names(due))
			}
		}
		if w, ok, err := s.NextWake(ctx); err != nil || !ok || !w.Equal(later.NextRun) {
			t.Fatalf("NextWake = %v %v %v, want only the scheduled job's %v", w, ok, err, later.NextRun)
		}
		if ok, err := s.Claim(ctx, schedule.Claim{ID: once.ID, NextRun: once.NextRun, Owner: "b", Now: t0.Add(time.Hour), Until: t0.Add(2 * time.Hour)}); err != nil || ok {
			t.Fatalf("claim of a done one-shot: %v %v", ok, err)
		}
		// Listed, after the scheduled jobs though its slot is earlier; and
		// found by name and by actor.
		all, err := s.List(ctx, schedule.Filter{})
		if err != nil || strings.Join(jobIDs(all), ",") != later.ID+","+once.ID {
			t.Fatalf("List = %v, %v; want [later figs]", names(all), err)
		}
		if named, err := s.List(ctx, schedule.Filter{Name: "figs", ActorID: "telegram:1"}); err != nil || len(named) != 1 || named[0].Status != schedule.StatusDone {
			t.Fatalf("List by name = %+v, %v", named, err)
		}
		// Paused while its run was in flight: the run fired, so it is done.
		mid := at(t, "mid", t0.Add(time.Minute))
		mustCreate(t, s, mid)
		if ok, err := s.Claim(ctx, schedule.Claim{ID: mid.ID, NextRun: mid.NextRun, Owner: "a", Now: t0.Add(time.Minute), Until: t0.Add(time.Hour)}); err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		paused := mid
		paused.Status = schedule.StatusPaused
		if err := s.Update(ctx, paused); err != nil {
			t.Fatal(err)
		}
		midRun := schedule.Run{JobID: mid.ID, Started: t0.Add(time.Minute), Finished: t0.Add(2 * time.Minute), Result: schedule.RunOK, Detail: schedule.NothingDue}
		if err := s.Finish(ctx, mid.ID, "a", schedule.Outcome{NextRun: mid.NextRun, LastRun: midRun.Finished, Status: schedule.StatusDone, Run: &midRun}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, mid.ID); err != nil || got.Status != schedule.StatusDone {
			t.Fatalf("one-shot paused mid-run: %+v, %v; want done", got, err)
		}
		if runs, err := s.Runs(ctx, mid.ID); err != nil || len(runs) != 1 {
			t.Fatalf("Runs of the one-shot paused mid-run = %d, %v", len(runs), err)
		}
		// Made active again (Scheduler.RunNow) it is due and claimable.
		again := got // the first one-shot, done
		again.Status, again.NextRun = schedule.StatusActive, t0.Add(3*time.Hour)
		if err := s.Update(ctx, again); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.Claim(ctx, schedule.Claim{ID: once.ID, NextRun: again.NextRun, Owner: "a", Now: again.NextRun, Until: again.NextRun.Add(time.Minute)}); err != nil || !ok {
			t.Fatalf("claim after run-now: %v %v", ok, err)
		}
		// Removing the job removes its history.
		if err := s.Delete(ctx, once.ID); err != nil {
			t.Fatal(err)
		}
		if runs, err := s.Runs(ctx, once.ID); err != nil || len(runs) != 0 {
			t.Fatalf("Runs after Delete = %d, %v", len(runs), err)
		}
	})

	// History stays bounded: each actor keeps its newest MaxDone done
	// jobs, each with its runs; older done jobs go with their runs, and
	// nothing else is touched.
	t.Run("DoneRetention", func(t *testing.T) {
		s, ctx := open(t)
		fire := func(t *testing.T, actor string, i int) schedule.Job {
			t.Helper()
			slot := t0.Add(time.Duration(i) * time.Minute)
			j, err := schedule.NewJob(schedule.JobSpec{Name: fmt.Sprint("once ", i), At: slot.Format(time.RFC3339), Task: "t", ActorID: actor}, slot.Add(-time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			mustCreate(t, s, j)
			if ok, err := s.Claim(ctx, schedule.Claim{ID: j.ID, NextRun: j.NextRun, Owner: "a", Now: slot, Until: slot.Add(time.Minute)}); err != nil || !ok {
				t.Fatalf("claim %d: %v %v", i, ok, err)
			}
			r := schedule.Run{JobID: j.ID, Started: slot, Finished: slot.Add(time.Second), Result: schedule.RunOK, Detail: fmt.Sprint("fired ", i)}
			if i%3 == 0 {
				r.Result, r.Detail = schedule.RunError, fmt.Sprint("delivery failed ", i)
			}
			if err := s.Finish(ctx, j.ID, "a", schedule.Outcome{NextRun: j.NextRun, LastRun: r.Finished, Status: schedule.StatusDone, Run: &r}); err != nil {
				t.Fatalf("finish %d: %v", i, err)
			}
			return j
		}
		// Actor A's jobs that are not done must survive the trim.
		keep := []schedule.Job{job(t, "hourly", t0), job(t, "failed", t0), job(t, "paused", t0)}
		keep[1].Status, keep[2].Status = schedule.StatusFailed, schedule.StatusPaused
		for _, j := range keep {
			mustCreate(t, s, j)
		}
		other := fire(t, "telegram:2", 0)
		const extra = 3
		var mine []schedule.Job
		for i := range schedule.MaxDone + extra {
			mine = append(mine, fire(t, "telegram:1", i+1))
		}
		for k, j := range mine {
			runs, err := s.Runs(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			_, gerr := s.Get(ctx, j.ID)
			if k < extra {
				if !errors.Is(gerr, schedule.ErrNotFound) || len(runs) != 0 {
					t.Errorf("old done job %d: Get %v, %d runs; want trimmed with its runs", k, gerr, len(runs))
				}
				continue
			}
			want := fmt.Sprint("fired ", k+1)
			if (k+1)%3 == 0 {
				want = fmt.Sprint("delivery failed ", k+1)
			}
			if gerr != nil || len(runs) != 1 || runs[0].Detail != want {
				t.Errorf("done job %d: Get %v, runs %+v; want kept with its run %q", k, gerr, runs, want)
			}
		}
		mineNow, err := s.List(ctx, schedule.Filter{ActorID: "telegram:1"})
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, j := range mineNow {
			if j.Status == schedule.StatusDone {
				done++
			}
		}
		if done != schedule.MaxDone || len(mineNow) != schedule.MaxDone+len(keep) {
			t.Fatalf("actor keeps %d done of %d jobs, want %d done and %d others", done, len(mineNow), schedule.MaxDone, len(keep))
		}
		for _, j := range keep {
			if got, err := s.Get(ctx, j.ID); err != nil || !equalJob(got, j) {
				t.Errorf("job %s changed by the trim: %+v %v", j.Name, got, err)
			}
		}
		if runs, err := s.Runs(ctx, other.ID); err != nil || len(runs) != 1 {
			t.Fatalf("another actor's done job: %d runs, %v; want kept", len(runs), err)
		}
	})

	// The same through the Scheduler: a reminder fires once, is then done
	// and never runs again, and History shows each attempt with its
	// outcome, time, name and actor, a failed delivery included.
	t.Run("FiredOneShotInHistory", func(t *testing.T) {
		st, ctx := open(t)
		clock := NewClock(t0)
		var mu sync.Mutex
		var sent []string
		failNext := true
		deliver := schedule.DelivererFunc(func(ctx context.Context, j schedule.Job, text string) error {
			mu.Lock()
			defer mu.Unlock()
			if failNext {
				failNext = false
				return errors.New("telegram: 502 bad gateway")
			}
			sent = append(sent, text)
			return nil
		})
		runner := schedule.RunnerFunc(func(ctx context.Context, j schedule.Job) (string, error) {
			return "Reminder: " + j.Task, nil
		})
		s := schedule.New(st, runner, schedule.Options{Clock: clock, Deliverer: deliver, InstanceID: "a"})
		t.Cleanup(func() { s.Close() })
		j, err := s.Add(ctx, schedule.JobSpec{Name: "figs", At: "in 2h", Task: "water the figs", ActorID: "telegram:1", Channel: "telegram", ChatID: "1", Source: schedule.SourceTool})
		if err != nil {
			t.Fatal(err)
		}
		clock.Set(j.NextRun)
		if n, err := s.RunDue(ctx); err != nil || n != 1 {
			t.Fatalf("RunDue at the slot = %d, %v", n, err)
		}
		cur, err := s.Get(ctx, j.ID)
		if err != nil || cur.Status != schedule.StatusActive || cur.Attempts != 1 {
			t.Fatalf("after a failed delivery: %+v, %v; want active with a retry", cur, err)
		}
		clock.Set(cur.NextRun)
		if n, err := s.RunDue(ctx); err != nil || n != 1 {
			t.Fatalf("RunDue at the retry = %d, %v", n, err)
		}
		done, err := s.Get(ctx, j.ID)
		if err != nil || done.Status != schedule.StatusDone || !done.LastRun.Equal(normMS(cur.NextRun)) || done.LastError != "" {
			t.Fatalf("after the delivery: %+v, %v; want done", done, err)
		}
		clock.Advance(30 * 24 * time.Hour)
		if n, err := s.RunDue(ctx); err != nil || n != 0 {
			t.Fatalf("a done one-shot ran again: %d, %v", n, err)
		}
		mu.Lock()
		if len(sent) != 1 || sent[0] != "Reminder: water the figs" {
			t.Errorf("delivered %q, want the reminder once", sent)
		}
		mu.Unlock()
		h, err := s.History(ctx, j.ID)
		if err != nil || len(h) != 2 {
			t.Fatalf("History = %+v, %v; want the failed and the delivered run", h, err)
		}
		if r := h[0]; r.JobID != j.ID || r.Name != "figs" || r.ActorID != "telegram:1" || r.Result != schedule.RunOK ||
			r.Detail != "Reminder: water the figs" || !r.Started.Equal(normMS(cur.NextRun)) {
			t.Errorf("newest run = %+v, want ok at the retry with the delivered text, name and actor", r)
		}
		if r := h[1]; r.JobID != j.ID || r.Name != "figs" || r.ActorID != "telegram:1" || r.Result != schedule.RunError ||
			!strings.Contains(r.Detail, "502 bad gateway") || !r.Started.Equal(j.NextRun) {
			t.Errorf("first run = %+v, want the delivery error at the slot, with name and actor", r)
		}
		if list, err := s.List(ctx, schedule.Filter{ActorID: "telegram:1", Name: "figs"}); err != nil || len(list) != 1 || list[0].Status != schedule.StatusDone {
			t.Fatalf("List by name = %+v, %v; want the done job", list, err)
		}
	})

	t.Run("ConcurrentClaims", func(t *testing.T) {
		s, ctx := open(t)
		const jobs, claimers = 10, 8
		var js []schedule.Job
		for i := 0; i < jobs; i++ {
			j := job(t, fmt.Sprint("c", i), t0)
			mustCreate(t, s, j)
			js = append(js, j)
		}
		wins := make([]atomic.Int32, jobs)
		var wg sync.WaitGroup
		errc := make(chan error, jobs*claimers)
		for c := 0; c < claimers; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i, j := range js {
					ok, err := s.Claim(ctx, schedule.Claim{ID: j.ID, NextRun: j.NextRun, Owner: fmt.Sprint("o", c), Now: t0, Until: t0.Add(time.Minute)})
					if err != nil {
						errc <- err
						return
					}
					if ok {
						wins[i].Add(1)
					}
				}
			}()
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatal(err)
		}
		for i := range wins {
			if n := wins[i].Load(); n != 1 {
				t.Errorf("job %d claimed %d times, want 1", i, n)
			}
		}
	})
}

// normMS is a time as stores keep it: UTC, millisecond precision.
func normMS(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

func equalJob(a, b schedule.Job) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Kind == b.Kind && a.Spec == b.Spec && a.TZ == b.TZ &&
		a.Task == b.Task && a.ActorID == b.ActorID && a.Channel == b.Channel && a.ChatID == b.ChatID &&
		a.SessionID == b.SessionID && a.CreatedAt.Equal(b.CreatedAt) && a.NextRun.Equal(b.NextRun) &&
		a.LastRun.Equal(b.LastRun) && a.Attempts == b.Attempts && a.Status == b.Status && a.Source == b.Source &&
		a.LastError == b.LastError
}

func jobIDs(js []schedule.Job) []string {
	var out []string
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

func names(js []schedule.Job) []string {
	var out []string
	for _, j := range js {
		out = append(out, j.Name)
	}
	return out
}
