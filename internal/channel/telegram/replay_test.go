package telegram

import (
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/channel/telegram/telegramtest"
)

// TestReplaySamples posts every line of shared/data/telegram/updates.jsonl
// through the webhook and checks what each kind did.
func TestReplaySamples(t *testing.T) {
	const group, channel = -1001234567890, -1009876543210
	h := newHarness(t, func(o *Options) {
		o.AllowedChatIDs = []int64{70001, 70002, group, channel}
		o.BotUsername = telegramtest.BotUsername
	})
	ids, bodies, comments := sampleUpdates(t)
	for _, id := range ids {
		rec := h.post(bodies[id])
		if strings.Contains(rec.Body.String(), "duplicate") {
			t.Fatalf("%d (%s) reported duplicate", id, comments[id])
		}
	}
	h.start()
	h.clock.run(t, 500*time.Millisecond) // album debounce runs on the fake clock
	notes := h.waitDone(ids...)

	byText := map[string]agent.Request{}
	var photoReqs []agent.Request
	for _, r := range h.inv.Requests() {
		if len(r.Images) > 0 {
			photoReqs = append(photoReqs, r)
		}
		byText[r.Message] = r
	}
	expect := func(id int64, msg, actor, chatType string, images int) {
		t.Helper()
		r, ok := byText[msg]
		if !ok {
			t.Errorf("%d (%s): no turn with message %q; note %q", id, comments[id], msg, notes[id])
			return
		}
		if r.ActorID != actor || r.ChatType != chatType || len(r.Images) != images || r.Channel != "telegram" || r.InvocationType != "webhook" {
			t.Errorf("%d (%s): request actor=%s chat=%s images=%d channel=%s inv=%s", id, comments[id], r.ActorID, r.ChatType, len(r.Images), r.Channel, r.InvocationType)
		}
	}
	expect(815000001, "I only use organic fertiliser. My petunias wilt every afternoon in this heat.", "telegram:70001", "dm", 0)
	expect(815000003, "저는 유기농 비료만 써요. 베란다 화분에 바질을 키우고 있어요.", "telegram:70002", "dm", 0)
	expect(815000004, "What is wrong with these leaves?", "telegram:70001", "dm", 1)
	expect(815000005, DefaultPhotoPrompt, "telegram:70001", "dm", 1)
	expect(815000006, "North bed, three angles", "telegram:70001", "dm", 3)
	expect(815000009, "[Replying to: Shall I remind you to water the petunias at 7:00?]\nYes, do that every morning", "telegram:70001", "dm", 0)
	expect(815000010, "[Edited message] I only use organic fertiliser. My petunias wilt every afternoon in this heat wave.", "telegram:70001", "dm", 0)
	expect(815000011, "when should we prune the fig?", "telegram:70001", "group", 0)
	expect(815000014, "Frost warning tonight", "telegram:-1009876543210", "group", 0)
	expect(815000016, "🌱🌱 Bold plan: water at 7", "telegram:70001", "dm", 0)

	// The largest photo size was fetched (121503 bytes), as a JPEG.
	if r := byText["What is wrong with these leaves?"]; len(r.Images) == 1 {
		if len(r.Images[0].Data) != 121503 || r.Images[0].MediaType != "image/jpeg" {
			t.Errorf("photo: %d bytes %s, want the 121503-byte largest size as image/jpeg", len(r.Images[0].Data), r.Images[0].MediaType)
		}
	}
	// The album is one turn: its three parts share one outcome.
	if n := len(h.srv.Calls("getFile")); n != 5 {
		t.Errorf("getFile called %d times, want 5 (2 single photos + 3 album parts)", n)
	}
	for _, id := range []int64{815000007, 815000008} {
		if !strings.Contains(notes[id], "3 images") {
			t.Errorf("album part %d: %q", id, notes[id])
		}
	}
	// /new started a new session: later turns in that chat carry its id.
	if !strings.Contains(notes[815000002], "/new") {
		t.Errorf("/new note %q", notes[815000002])
	}
	if sid := byText["What is wrong with these leaves?"].SessionID; !strings.HasPrefix(sid, "tg-70001-") {
		t.Errorf("session after /new = %q", sid)
	}
	if sid := byText["I only use organic fertiliser. My petunias wilt every afternoon in this heat."].SessionID; sid != "" {
		t.Errorf("session before /new = %q, want default", sid)
	}
	// A group turn never continues the sender's private session.
	if sid := byText["when should we prune the fig?"].SessionID; sid != "tg--1001234567890-70001" {
		t.Errorf("group session = %q, want one per group and sender", sid)
	}
	// Ignored kinds.
	for id, want := range map[int64]string{
		815000012: "ignored: group message without mention",
		815000015: "ignored: no text or photo",
		815000013: "ignored: stale or foreign approval button",
	} {
		if !strings.HasPrefix(notes[id], want) {
			t.Errorf("%d (%s): note %q, want %q", id, comments[id], notes[id], want)
		}
	}
	for _, r := range h.inv.Requests() {
		if strings.Contains(r.Message, "compost") {
			t.Error("group message without mention reached the agent")
		}
	}
	// The stale approval button got an alert, and nothing was decided.
	cbs := h.srv.Calls("answerCallbackQuery")
	if len(cbs) != 1 || cbs[0].Params["show_alert"] != "true" {
		t.Errorf("answerCallbackQuery calls = %+v, want one alert", cbs)
	}
	if len(h.appr.Calls()) != 0 {
		t.Errorf("stale button reached the approver: %v", h.appr.Calls())
	}
	// Replies went out as valid HTML to the right chats, with typing first.
	if len(h.srv.Messages(group)) != 1 || len(h.srv.Messages(channel)) != 1 || len(h.srv.Messages(70002)) != 1 {
		t.Errorf("replies: group %d channel %d korean %d", len(h.srv.Messages(group)), len(h.srv.Messages(channel)), len(h.srv.Messages(70002)))
	}
	if calls := h.srv.Calls("sendChatAction"); len(calls) == 0 || calls[0].Params["action"] != "typing" {
		t.Errorf("no typing action sent: %+v", calls)
	}
	if n := len(h.inv.Requests()); n != 10 {
		t.Errorf("%d turns, want 10", n)
	}
}

func TestSliceUTF16(t *testing.T) {
	s := "🌱🌱 Bold plan: water at 7"
	if got := sliceUTF16(s, 5, 4); got != "Bold" {
		t.Fatalf("sliceUTF16 = %q, want Bold (offsets count UTF-16 units)", got)
	}
	if got := cutUTF16(s, 5, 5); got != "🌱🌱 plan: water at 7" {
		t.Fatalf("cutUTF16 = %q", got)
	}
	for _, c := range [][2]int{{-3, 2}, {100, 5}, {2, -1}, {0, 1000}} {
		_ = sliceUTF16(s, c[0], c[1]) // must not panic on hostile offsets
		_ = cutUTF16(s, c[0], c[1])
	}
}
