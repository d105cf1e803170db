package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/channel/telegram/telegramtest"
	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// A job added with the CLI while the server runs is picked up, runs as an
// agent turn with invocation_type=cron and the "tasks due:" retrieval
// query, and its reply is delivered to the job's Telegram chat.
func TestE2ECronDeliversToTelegram(t *testing.T) {
	bot := telegramtest.New(t)
	fake := modeltest.NewOpenAI(t)
	p := startServe(t, testHome(t), append(openAIEnv(fake),
		"TELEGRAM_BOT_TOKEN="+telegramtest.Token, "TELEGRAM_WEBHOOK_SECRET=cron-secret", "TELEGRAM_API_URL="+bot.URL,
		"TELEGRAM_ALLOWED_CHAT_IDS=7101")...)
	fake.Push(modeltest.Reply{Text: "Time to water the figs!"})
	out, stderr, code := runCLI(t, p.Home, nil, "cron", "add", "--name", "figs", "--at", "in 1h",
		"--task", "remind Dana to water the figs", "--actor", "telegram:7101", "--json")
	if code != 0 {
		t.Fatalf("cron add: exit %d %s", code, stderr)
	}
	var job struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &job); err != nil || job.ID == "" {
		t.Fatalf("cron add --json: %q", out)
	}
	// "cron run" makes it due now and wakes the server's scheduler (no poll).
	if _, stderr, code := runCLI(t, p.Home, nil, "cron", "run", "figs"); code != 0 {
		t.Fatalf("cron run: exit %d %s", code, stderr)
	}
	bot.WaitFor(t, 20*time.Second, "the reminder in chat 7101", func() bool {
		for _, m := range bot.Messages(7101) {
			if strings.Contains(m.Text, "Time to water the figs!") {
				return true
			}
		}
		return false
	})
	var cronReq *modeltest.Seen
	for _, s := range fake.Requests() {
		if strings.Contains(s.LastUserText(), "water the figs") {
			s := s
			cronReq = &s
		}
	}
	if cronReq == nil {
		t.Fatal("the model never saw the task")
	}
	// A fired one-shot is done: listed last with no next run, never due
	// again, and its run stays in `cron history` (by id or name) with the
	// outcome, the times, what was delivered, the job's name and actor.
	var listed []struct {
		ID      string    `json:"id"`
		Status  string    `json:"status"`
		LastRun time.Time `json:"last_run"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, stderr, code := runCLI(t, p.Home, nil, "cron", "list", "--json")
		if code != 0 {
			t.Fatalf("cron list: exit %d %s", code, stderr)
		}
		if err := json.Unmarshal([]byte(out), &listed); err != nil {
			t.Fatalf("cron list --json: %q: %v", out, err)
		}
		if len(listed) == 1 && listed[0].Status == "done" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the one-shot is not listed as done:\n%s", out)
		}
	}
	if listed[0].ID != job.ID || listed[0].LastRun.IsZero() {
		t.Fatalf("listed %+v, want job %s done with its last run", listed[0], job.ID)
	}
	if out, _, _ := runCLI(t, p.Home, nil, "cron", "list"); !strings.Contains(out, "done") || !strings.Contains(out, "figs") {
		t.Fatalf("cron list table: %q", out)
	}
	for _, ref := range []string{job.ID, "figs"} {
		out, stderr, code := runCLI(t, p.Home, nil, "cron", "history", ref, "--json")
		if code != 0 {
			t.Fatalf("cron history %s: exit %d %s", ref, code, stderr)
		}
		var runs []struct {
			JobID    string    `json:"job_id"`
			Name     string    `json:"name"`
			ActorID  string    `json:"actor_id"`
			Started  time.Time `json:"started"`
			Finished time.Time `json:"finished"`
			Outcome  string    `json:"outcome"`
			Detail   string    `json:"detail"`
		}
		if err := json.Unmarshal([]byte(out), &runs); err != nil {
			t.Fatalf("cron history %s --json: %q: %v", ref, out, err)
		}
		if len(runs) != 1 {
			t.Fatalf("history of the fired one-shot = %+v, want its run", runs)
		}
		r := runs[0]
		if r.JobID != job.ID || r.Name != "figs" || r.ActorID != "telegram:7101" || r.Outcome != "ok" ||
			r.Detail != "Time to water the figs!" || r.Started.IsZero() || r.Finished.Before(r.Started) {
			t.Fatalf("history of the fired one-shot = %+v", r)
		}
	}
	out, stderr, code = runCLI(t, p.Home, nil, "cron", "history", "figs")
	if code != 0 || !strings.Contains(out, `"figs" of telegram:7101`) || !strings.Contains(out, "OUTCOME") || !strings.Contains(out, "Time to water the figs!") {
		t.Fatalf("cron history table: exit %d %q %s", code, out, stderr)
	}
}

// `cron pause` stops a job, `cron resume` schedules it again from now,
// and `cron history` shows its runs with what was delivered.
func TestE2ECronPauseResumeHistory(t *testing.T) {
	bot := telegramtest.New(t)
	fake := modeltest.NewOpenAI(t)
	p := startServe(t, testHome(t), append(openAIEnv(fake),
		"TELEGRAM_BOT_TOKEN="+telegramtest.Token, "TELEGRAM_WEBHOOK_SECRET=cron-secret", "TELEGRAM_API_URL="+bot.URL,
		"TELEGRAM_ALLOWED_CHAT_IDS=7102")...)
	fake.Push(modeltest.Reply{Text: "Basil needs water."})
	if _, stderr, code := runCLI(t, p.Home, nil, "cron", "add", "--name", "basil", "--every", "24h",
		"--task", "check the basil", "--actor", "telegram:7102"); code != 0 {
		t.Fatalf("cron add: exit %d %s", code, stderr)
	}
	if out, _, _ := runCLI(t, p.Home, nil, "cron", "history", "basil"); !strings.Contains(out, "no runs yet") {
		t.Fatalf("history before a run: %q", out)
	}
	if _, stderr, code := runCLI(t, p.Home, nil, "cron", "run", "basil"); code != 0 {
		t.Fatalf("cron run: exit %d %s", code, stderr)
	}
	bot.WaitFor(t, 20*time.Second, "the run's reply in chat 7102", func() bool {
		for _, m := range bot.Messages(7102) {
			if strings.Contains(m.Text, "Basil needs water.") {
				return true
			}
		}
		return false
	})
	var runs []struct {
		Outcome string `json:"outcome"`
		Detail  string `json:"detail"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, stderr, code := runCLI(t, p.Home, nil, "cron", "history", "basil", "--json")
		if code != 0 {
			t.Fatalf("cron history: exit %d %s", code, stderr)
		}
		if err := json.Unmarshal([]byte(out), &runs); err != nil {
			t.Fatalf("cron history --json: %q: %v", out, err)
		}
		if len(runs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run was never recorded in the history")
		}
	}
	if len(runs) != 1 || runs[0].Outcome != "ok" || runs[0].Detail != "Basil needs water." {
		t.Fatalf("history = %+v, want one ok run with the delivered text", runs)
	}
	if out, _, _ := runCLI(t, p.Home, nil, "cron", "history", "basil"); !strings.Contains(out, "OUTCOME") || !strings.Contains(out, "Basil needs water.") {
		t.Fatalf("cron history table: %q", out)
	}
	status := func() string {
		t.Helper()
		out, stderr, code := runCLI(t, p.Home, nil, "cron", "list", "--json")
		if code != 0 {
			t.Fatalf("cron list: exit %d %s", code, stderr)
		}
		var jobs []struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal([]byte(out), &jobs); err != nil || len(jobs) != 1 {
			t.Fatalf("cron list --json: %q %v", out, err)
		}
		return jobs[0].Status
	}
	if out, stderr, code := runCLI(t, p.Home, nil, "cron", "pause", "basil"); code != 0 || !strings.Contains(out, "paused") {
		t.Fatalf("cron pause: exit %d %q %s", code, out, stderr)
	}
	if s := status(); s != "paused" {
		t.Fatalf("status after pause = %q", s)
	}
	if out, stderr, code := runCLI(t, p.Home, nil, "cron", "resume", "basil"); code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("cron resume: exit %d %q %s", code, out, stderr)
	}
	if s := status(); s != "active" {
		t.Fatalf("status after resume = %q", s)
	}
	if _, stderr, code := runCLI(t, p.Home, nil, "cron", "pause", "nope"); code == 0 {
		t.Fatalf("cron pause of an unknown job succeeded: %s", stderr)
	}
}

// A pause drops a run that was due (here `cron run` with no server to run
// it), and says so instead of losing it silently; pausing a job that is
// not due says nothing more.
func TestCronPauseSaysItDropsTheDueRun(t *testing.T) {
	home := t.TempDir()
	if _, stderr, code := runCLI(t, home, nil, "cron", "add", "--name", "t2", "--every", "1h", "--task", "task two", "--actor", "api:bob"); code != 0 {
		t.Fatalf("cron add: %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, home, nil, "cron", "pause", "t2"); code != 0 || strings.Contains(stderr, "dropped") {
		t.Fatalf("pause of a job not due: %d %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, home, nil, "cron", "run", "t2"); code != 0 {
		t.Fatalf("cron run: %d %s", code, stderr)
	}
	_, stderr, code := runCLI(t, home, nil, "cron", "pause", "t2")
	if code != 0 || !strings.Contains(stderr, "is dropped by the pause") || !strings.Contains(stderr, "tendril cron run ") {
		t.Fatalf("pause of a job with a run due: %d %q, want a note that the run is dropped", code, stderr)
	}
}
