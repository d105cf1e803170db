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
