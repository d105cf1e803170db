package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/channel/telegram/telegramtest"
	"github.com/tendrilai/tendril/internal/model/modeltest"
)

type locomoTurn struct {
	Speaker string `json:"speaker"`
	DiaID   string `json:"dia_id"`
	Text    string `json:"text"`
}

type locomoConv struct {
	SampleID     string                     `json:"sample_id"`
	Conversation map[string]json.RawMessage `json:"conversation"`
	QA           []struct {
		Question string   `json:"question"`
		Evidence []string `json:"evidence"`
		Category int      `json:"category"`
	} `json:"qa"`
}

var sessionKeyRE = regexp.MustCompile(`^session_(\d+)$`)

// locomoSessions returns the sessions of a conversation in order, with their
// parsed dates.
func locomoSessions(t *testing.T, c locomoConv) (nums []int, turns map[int][]locomoTurn, dates map[int]time.Time) {
	turns, dates = map[int][]locomoTurn{}, map[int]time.Time{}
	for k, raw := range c.Conversation {
		m := sessionKeyRE.FindStringSubmatch(k)
		if m == nil {
			continue
		}
		var ts []locomoTurn
		if json.Unmarshal(raw, &ts) != nil {
			continue // date keys for sessions that do not exist
		}
		n, _ := strconv.Atoi(m[1])
		var ds string
		json.Unmarshal(c.Conversation[k+"_date_time"], &ds)
		d, err := time.Parse("3:04 pm on 2 January, 2006", ds)
		if err != nil {
			t.Fatalf("%s date %q: %v", k, ds, err)
		}
		nums, turns[n], dates[n] = append(nums, n), ts, d
	}
	sort.Ints(nums)
	return nums, turns, dates
}

func memoryBlock(system string) string {
	i := strings.Index(system, "What you remember")
	if i < 0 {
		return ""
	}
	b := system[i:]
	if j := strings.Index(b[1:], "\n## "); j >= 0 {
		b = b[:j+1]
	}
	return b
}

// TestE2ETelegramLocomoReplay starts the real binary with the fake model
// and the fake Bot API, replays a LoCoMo conversation as Telegram updates
// (each speaker a private chat, session dates from the data on the update
// dates), then asks the conversation's questions in each chat and checks the
// prompts the model received: what a speaker said reaches that speaker's
// memory block, and nothing of the other speaker ever does. CI replays the
// first two sessions; TENDRIL_E2E_FULL=1 replays the whole conversation.
func TestE2ETelegramLocomoReplay(t *testing.T) {
	data, err := readLocomo()
	if err != nil {
		t.Skipf("LoCoMo data not found (set TENDRIL_LOCOMO, or place shared/data next to the repository): %v", err)
	}
	var convs []locomoConv
	if err := json.Unmarshal(data, &convs); err != nil {
		t.Fatal(err)
	}
	conv := convs[0]
	nums, turns, dates := locomoSessions(t, conv)
	if os.Getenv("TENDRIL_E2E_FULL") == "" {
		nums = nums[:2]
	}
	var speakerA, speakerB string
	json.Unmarshal(conv.Conversation["speaker_a"], &speakerA)
	json.Unmarshal(conv.Conversation["speaker_b"], &speakerB)
	chatOf := map[string]int64{speakerA: 5001, speakerB: 5002}

	bot := telegramtest.New(t)
	fake := modeltest.NewOpenAI(t)
	const secret = "replay-secret"
	env := append(openAIEnv(fake),
		"TELEGRAM_BOT_TOKEN="+telegramtest.Token, "TELEGRAM_WEBHOOK_SECRET="+secret, "TELEGRAM_API_URL="+bot.URL,
		"TELEGRAM_ALLOWED_CHAT_IDS=5001,5002")
	p := startServe(t, testHome(t), env...)
	hook := p.URL + "/telegram/webhook"

	byID := map[string]locomoTurn{}
	sent := map[int64]int{}
	updateID := int64(900000)
	post := func(chat int64, name, text string, at time.Time) {
		t.Helper()
		updateID++
		st, err := telegramtest.PostUpdate(context.Background(), hook, secret, telegramtest.TextUpdate(updateID, chat, chat, name, text, at))
		if err != nil || st != 200 {
			t.Fatalf("webhook: %d %v", st, err)
		}
		sent[chat]++
	}
	for _, n := range nums {
		for _, tr := range turns[n] {
			byID[tr.DiaID] = tr
			post(chatOf[tr.Speaker], tr.Speaker, tr.Text, dates[n])
		}
		// One reply per update, in order, before the next session (a day
		// or more later in the data).
		for chat, n := range sent {
			bot.WaitMessages(t, chat, n)
		}
	}

	asked, found := 0, 0
	for _, q := range conv.QA {
		if q.Category == 5 || len(q.Evidence) == 0 {
			continue
		}
		speaker, ok := "", true
		for _, e := range q.Evidence {
			tr, in := byID[e]
			if !in || (speaker != "" && tr.Speaker != speaker) {
				ok = false
				break
			}
			speaker = tr.Speaker
		}
		if !ok {
			continue
		}
		chat := chatOf[speaker]
		before := len(fake.Requests())
		post(chat, speaker, q.Question, dates[nums[len(nums)-1]].Add(24*time.Hour))
		bot.WaitMessages(t, chat, sent[chat])
		var block string
		for _, s := range fake.Requests()[before:] {
			if s.LastUserText() == q.Question {
				block = memoryBlock(s.System)
			}
		}
		asked++
		for _, e := range q.Evidence {
			if frag := fragment(byID[e].Text); frag != "" && strings.Contains(block, frag) {
				found++
				break
			}
		}
		// Nothing the other speaker said may appear.
		for id, tr := range byID {
			if tr.Speaker != speaker {
				if frag := fragment(tr.Text); len(frag) >= 30 && strings.Contains(block, frag) {
					t.Fatalf("%s's memory block holds %s (%s's turn %s):\n%s", speaker, frag, tr.Speaker, id, block)
				}
			}
		}
	}
	if asked < 5 {
		t.Fatalf("only %d answerable questions", asked)
	}
	t.Logf("%d questions; evidence said earlier by the asker was in the memory block for %d (%.0f%%)", asked, found, 100*float64(found)/float64(asked))
	if found*2 < asked {
		t.Fatalf("evidence reached the memory block for only %d of %d questions", found, asked)
	}
	for _, m := range bot.AllMessages() {
		if strings.Contains(m.Text, "NOTHING_DUE") {
			t.Fatalf("sentinel reached the user: %q", m.Text)
		}
	}
	fmt.Fprintln(os.Stderr) // keep go test -v output readable
}

// readLocomo finds the LoCoMo development file: $TENDRIL_LOCOMO, then
// shared/data beside the repository, then the workspace's copy.
func readLocomo() ([]byte, error) {
	paths := []string{os.Getenv("TENDRIL_LOCOMO"),
		filepath.Join("..", "..", "..", "shared", "data", "locomo", "locomo-dev.json"),
		"/work/shared/data/locomo/locomo-dev.json"}
	var err error
	for _, p := range paths {
		if p == "" {
			continue
		}
		var b []byte
		if b, err = os.ReadFile(p); err == nil {
			return b, nil
		}
	}
	return nil, err
}

// fragment is a distinctive prefix of a turn's text (up to 40 bytes on a
// word boundary), or "" for very short turns.
func fragment(s string) string {
	s = strings.TrimSpace(s)
	if len(s) < 20 {
		return ""
	}
	if len(s) > 40 {
		s = s[:40]
		if i := strings.LastIndexByte(s, ' '); i > 20 {
			s = s[:i]
		}
	}
	return s
}
