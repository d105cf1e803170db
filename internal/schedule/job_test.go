package schedule_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/schedule"
)

func TestNewJobRejectsBadSpecs(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	ok := schedule.JobSpec{Task: "t", ActorID: "telegram:1"}
	with := func(f func(*schedule.JobSpec)) schedule.JobSpec { s := ok; f(&s); return s }
	tests := []struct {
		name string
		spec schedule.JobSpec
		msg  string
	}{
		{"nothing", ok, "exactly one of"},
		{"two kinds", with(func(s *schedule.JobSpec) { s.Every, s.Cron = "1h", "* * * * *" }), "exactly one of"},
		{"bad cron", with(func(s *schedule.JobSpec) { s.Cron = "61 * * * *" }), "cron"},
		{"six fields", with(func(s *schedule.JobSpec) { s.Cron = "0 0 8 * * *" }), "5 fields"},
		{"garbage cron", with(func(s *schedule.JobSpec) { s.Cron = "every morning" }), "cron"},
		{"inline tz", with(func(s *schedule.JobSpec) { s.Cron = "CRON_TZ=Europe/Berlin 0 8 * * *" }), "tz"},
		{"@every as cron", with(func(s *schedule.JobSpec) { s.Cron = "@every 1h" }), "every job"},
		{"bad tz", with(func(s *schedule.JobSpec) { s.Cron, s.TZ = "0 8 * * *", "Mars/Olympus" }), "unknown time zone"},
		{"tz path trick", with(func(s *schedule.JobSpec) { s.Cron, s.TZ = "0 8 * * *", "../../../etc/passwd" }), "unknown time zone"},
		{"tz Local", with(func(s *schedule.JobSpec) { s.Cron, s.TZ = "0 8 * * *", "Local" }), "ambiguous"},
		{"past at", with(func(s *schedule.JobSpec) { s.At = "2026-05-31T12:00:00Z" }), "not in the future"},
		{"at now", with(func(s *schedule.JobSpec) { s.At = "2026-06-01T12:00:00Z" }), "not in the future"},
		{"bad at", with(func(s *schedule.JobSpec) { s.At = "tomorrow-ish" }), "RFC 3339"},
		{"bad relative", with(func(s *schedule.JobSpec) { s.At = "in 3 fortnights" }), "unknown unit"},
		{"negative relative", with(func(s *schedule.JobSpec) { s.At = "in -2h" }), "at"},
		{"bad every", with(func(s *schedule.JobSpec) { s.Every = "often" }), "duration"},
		{"every overflow", with(func(s *schedule.JobSpec) { s.Every = "99999w" }), "duration"},
		{"every overflow sum", with(func(s *schedule.JobSpec) { s.Every = "5000w5000w" }), "duration"},
		{"relative overflow", with(func(s *schedule.JobSpec) { s.At = "in 1000000 weeks" }), "100 years"},
		{"every too short", with(func(s *schedule.JobSpec) { s.Every = "10s" }), "minimum"},
		{"every with tz", with(func(s *schedule.JobSpec) { s.Every, s.TZ = "1h", "Europe/Berlin" }), "tz"},
		{"kind mismatch", with(func(s *schedule.JobSpec) { s.Every, s.Kind = "1h", schedule.KindCron }), "does not match"},
		{"no task", with(func(s *schedule.JobSpec) { s.Every, s.Task = "1h", " " }), "task is empty"},
		{"huge task", with(func(s *schedule.JobSpec) { s.Every, s.Task = "1h", strings.Repeat("x", schedule.MaxTaskLen+1) }), "limit"},
		{"no actor", with(func(s *schedule.JobSpec) { s.Every, s.ActorID = "1h", "" }), "actor_id"},
		{"control chars", with(func(s *schedule.JobSpec) { s.Every, s.ChatID = "1h", "1\n2" }), "control"},
		{"NUL in task", with(func(s *schedule.JobSpec) { s.Every, s.Task = "1h", "water\x00the tomatoes" }), "NUL"},
		{"bad UTF-8 in task", with(func(s *schedule.JobSpec) { s.Every, s.Task = "1h", "water \xff" }), "UTF-8"},
		{"bad UTF-8 in name", with(func(s *schedule.JobSpec) { s.Every, s.Name = "1h", "n\xc3" }), "UTF-8"},
		{"bad UTF-8 in actor", with(func(s *schedule.JobSpec) { s.Every, s.ActorID = "1h", "api:\xfe" }), "UTF-8"},
		{"bad source", with(func(s *schedule.JobSpec) { s.Every, s.Source = "1h", "browser" }), "source"},
		{"relative at in config", with(func(s *schedule.JobSpec) { s.At, s.Source = "in 1h", schedule.SourceConfig }), "absolute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := schedule.NewJob(tt.spec, now)
			if !errors.Is(err, schedule.ErrBadSpec) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want ErrBadSpec mentioning %q", err, tt.msg)
			}
		})
	}
}

func TestNewJobFirstRun(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		spec schedule.JobSpec
		kind schedule.Kind
		next time.Time
	}{
		{schedule.JobSpec{At: "in 2h"}, schedule.KindAt, now.Add(2 * time.Hour)},
		{schedule.JobSpec{At: "in 1 hour 30 minutes"}, schedule.KindAt, now.Add(90 * time.Minute)},
		{schedule.JobSpec{At: "in 3 days"}, schedule.KindAt, now.Add(72 * time.Hour)},
		{schedule.JobSpec{At: "In 45m"}, schedule.KindAt, now.Add(45 * time.Minute)},
		{schedule.JobSpec{At: "2026-06-02T09:00:00+09:00"}, schedule.KindAt, time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC)},
		{schedule.JobSpec{At: "2026-06-02T09:00", TZ: "Asia/Seoul"}, schedule.KindAt, time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC)},
		{schedule.JobSpec{At: "2026-06-02 09:00"}, schedule.KindAt, time.Date(2026, 6, 2, 9, 0, 0, 0, time.UTC)},
		{schedule.JobSpec{Every: "30d"}, schedule.KindEvery, now.Add(30 * 24 * time.Hour)},
		{schedule.JobSpec{Every: "1d12h"}, schedule.KindEvery, now.Add(36 * time.Hour)},
		{schedule.JobSpec{Every: "90m"}, schedule.KindEvery, now.Add(90 * time.Minute)},
		{schedule.JobSpec{Cron: "0 8 * * *", TZ: "Europe/Berlin"}, schedule.KindCron, time.Date(2026, 6, 2, 6, 0, 0, 0, time.UTC)},
		{schedule.JobSpec{Cron: "@daily"}, schedule.KindCron, time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC)},
		{schedule.JobSpec{Cron: "*/15 * * * 1-5"}, schedule.KindCron, now.Add(15 * time.Minute)},
	}
	for _, tt := range tests {
		spec := tt.spec
		spec.Task, spec.ActorID = "t", "telegram:1"
		j, err := schedule.NewJob(spec, now)
		if err != nil {
			t.Errorf("%+v: %v", tt.spec, err)
			continue
		}
		if j.Kind != tt.kind || !j.NextRun.Equal(tt.next) || j.Status != schedule.StatusActive || j.Source != schedule.SourceCLI || len(j.ID) != 26 {
			t.Errorf("%+v: kind %s next %v status %s source %s id %q; want %s %v", tt.spec, j.Kind, j.NextRun, j.Status, j.Source, j.ID, tt.kind, tt.next)
		}
	}
}

func TestStripNothingDue(t *testing.T) {
	tests := []struct {
		in, text   string
		suppressed bool
	}{
		{"NOTHING_DUE", "", true},
		{"**NOTHING_DUE**", "", true},
		{"\"NOTHING_DUE\"\n", "", true},
		{"   ", "", true},
		{"Water the roses.", "Water the roses.", false},
		{"NOTHING_DUE — but check the frost cover", "— but check the frost cover", false},
		{"nothing_due", "nothing_due", false}, // the sentinel is case-sensitive
	}
	for _, tt := range tests {
		text, sup := schedule.StripNothingDue(tt.in)
		if text != tt.text || sup != tt.suppressed {
			t.Errorf("StripNothingDue(%q) = %q, %v; want %q, %v", tt.in, text, sup, tt.text, tt.suppressed)
		}
	}
}

func FuzzNewJob(f *testing.F) {
	for _, s := range []string{"0 8 * * *", "in 2h", "30d", "2026-06-02T09:00:00Z", "@weekly", "*/0 * * * *", "in 1e300h", "9999999999d"} {
		f.Add(s, "Europe/Berlin")
	}
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v, tz string) {
		for _, spec := range []schedule.JobSpec{{At: v, TZ: tz}, {Every: v}, {Cron: v, TZ: tz}} {
			spec.Task, spec.ActorID = "t", "a"
			j, err := schedule.NewJob(spec, now)
			if err != nil {
				if !errors.Is(err, schedule.ErrBadSpec) {
					t.Fatalf("%+v: error %v does not wrap ErrBadSpec", spec, err)
				}
				continue
			}
			if !j.NextRun.After(now) {
				t.Fatalf("%+v: next run %v not after now", spec, j.NextRun)
			}
		}
	})
}

func TestSyncConfigJobs(t *testing.T) {
	start := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, start)
	ctx := context.Background()
	base := func(name string) schedule.JobSpec {
		return schedule.JobSpec{Name: name, Task: "check " + name, ActorID: "telegram:7", Channel: "telegram", ChatID: "7"}
	}
	morning := base("morning")
	morning.Cron, morning.TZ = "0 8 * * *", "Europe/Berlin"
	weekly := base("weekly")
	weekly.Every = "7d"
	past := base("past")
	past.At = "2026-01-01T00:00:00Z"
	if err := e.s.SyncConfigJobs(ctx, []schedule.JobSpec{morning, weekly, past}); err != nil {
		t.Fatal(err)
	}
	list := func() map[string]schedule.Job {
		js, err := e.s.List(ctx, schedule.Filter{Source: schedule.SourceConfig})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]schedule.Job{}
		for _, j := range js {
			m[j.Name] = j
		}
		return m
	}
	first := list()
	if len(first) != 2 || first["morning"].ID == "" || first["weekly"].ID == "" {
		t.Fatalf("after first sync: %v (past at must be skipped)", first)
	}

	// Restart a day later, config unchanged: nothing moves, the missed
	// morning run is still due once.
	e.clock.Advance(25 * time.Hour)
	if err := e.s.SyncConfigJobs(ctx, []schedule.JobSpec{morning, weekly, past}); err != nil {
		t.Fatal(err)
	}
	second := list()
	if second["morning"].ID != first["morning"].ID || !second["morning"].NextRun.Equal(first["morning"].NextRun) {
		t.Fatalf("unchanged job moved: %+v → %+v", first["morning"], second["morning"])
	}

	// Change one, drop one, add an invalid one and a duplicate.
	morning.Cron = "0 7 * * *"
	bad := base("bad")
	bad.Cron = "nope"
	dup := weekly
	err := e.s.SyncConfigJobs(ctx, []schedule.JobSpec{morning, bad, weekly, dup})
	if !errors.Is(err, schedule.ErrBadSpec) || !strings.Contains(err.Error(), "bad") || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("err = %v, want the bad cron and the duplicate reported", err)
	}
	third := list()
	if len(third) != 2 || third["morning"].Spec != "0 7 * * *" || third["morning"].ID != first["morning"].ID {
		t.Fatalf("after change: %+v", third)
	}
	if !third["morning"].NextRun.After(e.clock.Now()) {
		t.Fatalf("changed job not rescheduled from now: %v", third["morning"].NextRun)
	}
	if err := e.s.SyncConfigJobs(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("after empty sync: %v", got)
	}
}

// Sunday may be written 7 in the day-of-week field, as Vixie cron and
// crontab(5) allow: each such expression fires when its 0–6 spelling does,
// over three weeks of starting points; 8 and a range starting at 7 are
// still refused.
func TestCronSundayAsSeven(t *testing.T) {
	start := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for seven, zero := range map[string]string{
		"0 8 * * 7":     "0 8 * * 0",
		"0 8 * * 5-7":   "0 8 * * 5,6,0",
		"0 8 * * 1-7/2": "0 8 * * 1,3,5,0",
		"30 9 * * 7,3":  "30 9 * * 0,3",
		"0 8 * * 0-7":   "0 8 * * *",
	} {
		for h := 0; h < 21*24; h += 7 {
			now := start.Add(time.Duration(h) * time.Hour)
			spec := schedule.JobSpec{Task: "t", ActorID: "telegram:1", TZ: "Asia/Seoul"}
			spec.Cron = seven
			a, err := schedule.NewJob(spec, now)
			if err != nil {
				t.Fatalf("%q: %v", seven, err)
			}
			spec.Cron = zero
			b, err := schedule.NewJob(spec, now)
			if err != nil {
				t.Fatal(err)
			}
			if !a.NextRun.Equal(b.NextRun) {
				t.Fatalf("%q after %v: next %v, %q: %v", seven, now, a.NextRun, zero, b.NextRun)
			}
		}
	}
	for _, bad := range []string{"0 8 * * 8", "0 8 * * 7-5", "0 8 * * 1-8"} {
		if _, err := schedule.NewJob(schedule.JobSpec{Task: "t", ActorID: "telegram:1", Cron: bad}, start); !errors.Is(err, schedule.ErrBadSpec) {
			t.Errorf("%q: %v, want ErrBadSpec", bad, err)
		}
	}
}
