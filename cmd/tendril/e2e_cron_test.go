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
