package reminders_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/schedule/reminders"
	"github.com/tendrilai/tendril/internal/schedule/scheduletest"
	"github.com/tendrilai/tendril/internal/schedule/sqlitestore"
	"github.com/tendrilai/tendril/internal/tool"
)

var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func setup(t *testing.T) (*reminders.Tool, *schedule.Scheduler) {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := schedule.New(st, nil, schedule.Options{Clock: scheduletest.NewClock(now)})
	return reminders.New(s, reminders.Options{MaxPerActor: 3}), s
}

func call(actor, args string) tool.Call {
	return tool.Call{AgentID: "main", ActorID: actor, SessionID: "sess-" + actor, Channel: "telegram", Args: json.RawMessage(args)}
}

func run(t *testing.T, tl *reminders.Tool, c tool.Call) map[string]json.RawMessage {
	t.Helper()
	out, err := tl.Run(context.Background(), c)
	if err != nil {
		t.Fatalf("Run(%s): %v", c.Args, err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("output %q is not a JSON object: %v", out, err)
	}
	return m
}

func TestToolContract(t *testing.T) {
	tl, _ := setup(t)
	if tl.Name() != "reminders" || tl.Class() != tool.ClassWrite || tl.Description() == "" {
		t.Fatalf("name %q class %q", tl.Name(), tl.Class())
	}
	var s struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(tl.Schema(), &s); err != nil || s.Type != "object" {
		t.Fatalf("schema: %v %q", err, s.Type)
	}
	for _, p := range []string{"action", "text", "at", "every", "cron", "tz", "id"} {
		if _, ok := s.Properties[p]; !ok {
			t.Errorf("schema lacks %q", p)
		}
	}
}

func TestCreateListCancel(t *testing.T) {
	tl, s := setup(t)
	ctx := context.Background()
	var created reminders.Reminder
	m := run(t, tl, call("telegram:123", `{"action":"create","text":"water the tomatoes","cron":"0 8 * * *","tz":"Europe/Berlin"}`))
	if err := json.Unmarshal(m["created"], &created); err != nil {
		t.Fatal(err)
	}
	if created.Kind != "cron" || created.NextRun != "2026-06-02T08:00:00+02:00" || created.Text != "water the tomatoes" {
		t.Fatalf("created %+v", created)
	}
	j, err := s.Get(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.ActorID != "telegram:123" || j.Channel != "telegram" || j.ChatID != "123" || j.SessionID != "sess-telegram:123" || j.Source != schedule.SourceTool {
		t.Fatalf("stored job %+v", j)
	}
	run(t, tl, call("telegram:123", `{"action":"create","text":"call mum","at":"in 2h"}`))

	var list struct {
		Reminders []reminders.Reminder `json:"reminders"`
		Count     int                  `json:"count"`
	}
	m = run(t, tl, call("telegram:123", `{"action":"list"}`))
	json.Unmarshal(m["reminders"], &list.Reminders)
	if len(list.Reminders) != 2 || list.Reminders[0].Text != "call mum" || list.Reminders[0].NextRun != "2026-06-01T14:00:00Z" {
		t.Fatalf("list %+v", list.Reminders)
	}

	m = run(t, tl, call("telegram:123", `{"action":"cancel","id":"`+created.ID+`"}`))
	if _, ok := m["cancelled"]; !ok {
		t.Fatalf("cancel output %v", m)
	}
	if _, err := s.Get(ctx, created.ID); err == nil {
		t.Fatal("cancelled job still stored")
	}
	if _, err := tl.Run(ctx, call("telegram:123", `{"action":"cancel","id":"`+created.ID+`"}`)); err == nil {
		t.Fatal("second cancel succeeded")
	}
}

func TestActorsAreIsolated(t *testing.T) {
	tl, s := setup(t)
	ctx := context.Background()
	var a reminders.Reminder
	json.Unmarshal(run(t, tl, call("telegram:1", `{"action":"create","text":"secret plan","every":"1d"}`))["created"], &a)

	// Bob sees none of Alice's reminders and can't cancel them; the error
	// is the same as for an id that does not exist.
	m := run(t, tl, call("telegram:2", `{"action":"list"}`))
	if string(m["count"]) != "0" || strings.Contains(string(m["reminders"]), "secret") {
		t.Fatalf("bob's list leaks: %v", m)
	}
	_, errForeign := tl.Run(ctx, call("telegram:2", `{"action":"cancel","id":"`+a.ID+`"}`))
	_, errMissing := tl.Run(ctx, call("telegram:2", `{"action":"cancel","id":"01JXXXXXXXXXXXXXXXXXXXXXXX"}`))
	if errForeign == nil || errMissing == nil {
		t.Fatal("cross-actor or missing cancel succeeded")
	}
	if strings.ReplaceAll(errForeign.Error(), a.ID, "ID") != strings.ReplaceAll(errMissing.Error(), "01JXXXXXXXXXXXXXXXXXXXXXXX", "ID") {
		t.Errorf("foreign and missing ids are distinguishable:\n%v\n%v", errForeign, errMissing)
	}
	if _, err := s.Get(ctx, a.ID); err != nil {
		t.Fatalf("alice's job gone after bob's cancel: %v", err)
	}
	// Bob can't forge the actor through the arguments either.
	if _, err := tl.Run(ctx, call("telegram:2", `{"action":"list","actor_id":"telegram:1"}`)); err == nil {
		t.Fatal("unknown argument actor_id accepted")
	}
}

func TestConfigJobsCannotBeCancelled(t *testing.T) {
	tl, s := setup(t)
	ctx := context.Background()
	if err := s.SyncConfigJobs(ctx, []schedule.JobSpec{{Name: "digest", Cron: "0 8 * * *", Task: "daily digest", ActorID: "telegram:1", Channel: "telegram", ChatID: "1"}}); err != nil {
		t.Fatal(err)
	}
	js, _ := s.List(ctx, schedule.Filter{ActorID: "telegram:1"})
	_, err := tl.Run(ctx, call("telegram:1", `{"action":"cancel","id":"`+js[0].ID+`"}`))
	if err == nil || !strings.Contains(err.Error(), "tendril.json") {
		t.Fatalf("cancel config job: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	tests := []struct {
		name, actor, args, want string
	}{
		{"bad cron", "telegram:1", `{"action":"create","text":"x","cron":"0 25 * * *"}`, "cron"},
		{"bad tz", "telegram:1", `{"action":"create","text":"x","cron":"0 8 * * *","tz":"Europe/Atlantis"}`, "unknown time zone"},
		{"past at", "telegram:1", `{"action":"create","text":"x","at":"2020-01-01T00:00:00Z"}`, "not in the future"},
		{"bad at", "telegram:1", `{"action":"create","text":"x","at":"next tuesday"}`, "RFC 3339"},
		{"no schedule", "telegram:1", `{"action":"create","text":"x"}`, "exactly one of"},
		{"two schedules", "telegram:1", `{"action":"create","text":"x","at":"in 1h","every":"1d"}`, "exactly one of"},
		{"no text", "telegram:1", `{"action":"create","at":"in 1h"}`, "needs text"},
		{"unknown action", "telegram:1", `{"action":"snooze"}`, "unknown action"},
		{"missing action", "telegram:1", `{}`, "action is required"},
		{"malformed json", "telegram:1", `{"action":`, "bad arguments"},
		{"empty args", "telegram:1", ``, "arguments missing"},
		{"wrong type", "telegram:1", `{"action":"create","text":5}`, "bad arguments"},
		{"cancel without id", "telegram:1", `{"action":"cancel"}`, "needs id"},
		{"no actor", "", `{"action":"list"}`, "no actor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl, _ := setup(t)
			_, err := tl.Run(context.Background(), call(tt.actor, tt.args))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want mention of %q", err, tt.want)
			}
		})
	}
}

func TestPerActorLimit(t *testing.T) {
	tl, _ := setup(t)
	for i := 0; i < 3; i++ {
		run(t, tl, call("telegram:1", `{"action":"create","text":"x","every":"1h"}`))
	}
	if _, err := tl.Run(context.Background(), call("telegram:1", `{"action":"create","text":"x","every":"1h"}`)); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("4th reminder: %v", err)
	}
	run(t, tl, call("telegram:2", `{"action":"create","text":"x","every":"1h"}`)) // others unaffected
}

// A reminder that fired is listed as done with when it ran, and does not
// count toward the per-actor limit (the store bounds done ones).
func TestFiredReminderListedAsDone(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := scheduletest.NewClock(now)
	runner := schedule.RunnerFunc(func(context.Context, schedule.Job) (string, error) { return "Call mum now.", nil })
	s := schedule.New(st, runner, schedule.Options{Clock: clock})
	t.Cleanup(func() { s.Close() })
	tl := reminders.New(s, reminders.Options{MaxPerActor: 1})
	var created reminders.Reminder
	json.Unmarshal(run(t, tl, call("telegram:1", `{"action":"create","text":"call mum","at":"in 1h"}`))["created"], &created)
	clock.Set(now.Add(time.Hour))
	if n, err := s.RunDue(ctx); err != nil || n != 1 {
		t.Fatalf("RunDue = %d, %v", n, err)
	}
	var list []reminders.Reminder
	json.Unmarshal(run(t, tl, call("telegram:1", `{"action":"list"}`))["reminders"], &list)
	if len(list) != 1 || list[0].ID != created.ID || list[0].Status != "done" || list[0].LastRun != "2026-06-01T13:00:00Z" {
		t.Fatalf("list after it fired = %+v, want it done with its last run", list)
	}
	run(t, tl, call("telegram:1", `{"action":"create","text":"call dad","at":"in 1h"}`))
	if _, err := tl.Run(ctx, call("telegram:1", `{"action":"create","text":"x","every":"1h"}`)); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("second live reminder over a limit of 1: %v", err)
	}
}

func TestChatOf(t *testing.T) {
	tests := []struct{ channel, actor, wantChannel, wantChat string }{
		{"telegram", "telegram:123", "telegram", "123"},
		{"", "telegram:-100200", "telegram", "-100200"},
		{"web", "telegram:123", "web", ""},
		{"api", "alice", "api", ""},
	}
	for _, tt := range tests {
		ch, chat := reminders.ChatOf(tool.Call{Channel: tt.channel, ActorID: tt.actor})
		if ch != tt.wantChannel || chat != tt.wantChat {
			t.Errorf("ChatOf(%q, %q) = %q, %q; want %q, %q", tt.channel, tt.actor, ch, chat, tt.wantChannel, tt.wantChat)
		}
	}
}
