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
	// A one-shot job deletes itself after success.
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, _, _ := runCLI(t, p.Home, nil, "cron", "list", "--json")
		if !strings.Contains(list, job.ID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("one-shot job still listed:\n%s", list)
		}
		time.Sleep(200 * time.Millisecond)
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
