package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/channel/telegram/telegramtest"
)

var codeRe = regexp.MustCompile(`<code>([A-Z0-9]{8})</code>`)

func TestPairing(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.AllowedChatIDs = nil })
	h.start()
	h.post(textUpdate(1, 80001, 80001, "hi there"))
	h.waitDone(1)
	msgs := h.srv.WaitMessages(t, 80001, 1)
	m := codeRe.FindStringSubmatch(msgs[0].Text)
	if m == nil {
		t.Fatalf("no pairing code in %q", msgs[0].Text)
	}
	code := m[1]
	if strings.ContainsAny(code, "0O1I") {
		t.Fatalf("code %q uses an ambiguous character", code)
	}
	if len(h.inv.Requests()) != 0 {
		t.Fatal("unknown sender reached the agent")
	}
	// Asking again repeats the same code instead of using up a slot.
	h.post(textUpdate(2, 80001, 80001, "hello?"))
	h.waitDone(2)
	if got := codeRe.FindStringSubmatch(h.srv.Messages(80001)[1].Text); got == nil || got[1] != code {
		t.Fatalf("second request got %v, want the same code %s", got, code)
	}
	// Two more senders fill the three pending slots; the fourth is refused.
	for i, chat := range []int64{80002, 80003, 80004} {
		h.post(textUpdate(int64(10+i), chat, chat, "hi"))
		h.waitDone(int64(10 + i))
	}
	if txt := h.srv.Messages(80004)[0].Text; !strings.Contains(txt, "too many pairing requests") {
		t.Fatalf("fourth pending sender got %q", txt)
	}
	list, err := h.ch.store.ListPairings(context.Background(), h.clock.Now())
	if err != nil || len(list) != 3 {
		t.Fatalf("ListPairings = %d, %v; want 3", len(list), err)
	}
	// The owner approves (lower case works); the sender is now served.
	if _, err := h.ch.store.ApprovePairing(context.Background(), strings.ToLower(code), h.clock.Now()); err != nil {
		t.Fatalf("ApprovePairing: %v", err)
	}
	if _, err := h.ch.store.ApprovePairing(context.Background(), code, h.clock.Now()); !errors.Is(err, ErrPairingNotFound) {
		t.Fatalf("second approval: %v, want ErrPairingNotFound", err)
	}
	h.post(textUpdate(3, 80001, 80001, "now?"))
	h.waitDone(3)
	if reqs := h.inv.Requests(); len(reqs) != 1 || reqs[0].Message != "now?" {
		t.Fatalf("after pairing the agent got %+v", reqs)
	}
	// Codes expire after an hour.
	h.clock.Advance(61 * time.Minute)
	c2 := codeRe.FindStringSubmatch(h.srv.Messages(80002)[0].Text)[1]
	if _, err := h.ch.store.ApprovePairing(context.Background(), c2, h.clock.Now()); !errors.Is(err, ErrPairingExpired) {
		t.Fatalf("expired approval: %v, want ErrPairingExpired", err)
	}
}

func TestGroupMentions(t *testing.T) {
	const group = -100555
	tests := []struct {
		name     string
		replyAll bool
		text     string
		entities []map[string]any
		reply    bool
		want     string // message the agent gets; "" = ignored
	}{
		{"mention", false, "@tendril_test_bot what now?", []map[string]any{{"type": "mention", "offset": 0, "length": 17}}, false, "what now?"},
		{"mention after emoji", false, "🌱 @Tendril_Test_Bot hi", []map[string]any{{"type": "mention", "offset": 3, "length": 17}}, false, "🌱  hi"},
		{"other mention", false, "@someone_else hi", []map[string]any{{"type": "mention", "offset": 0, "length": 13}}, false, ""},
		{"no mention", false, "just chatting", nil, false, ""},
		{"reply to bot", false, "yes please", nil, true, "[Replying to: earlier bot text]\nyes please"},
		{"reply all", true, "just chatting", nil, false, "just chatting"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(o *Options) {
				o.AllowedChatIDs = []int64{group}
				o.GroupReplyAll = tt.replyAll
			})
			h.start()
			msg := map[string]any{
				"message_id": 5, "date": 1, "text": tt.text,
				"from": map[string]any{"id": 70001, "is_bot": false, "first_name": "Dana"},
				"chat": map[string]any{"id": group, "type": "supergroup", "title": "G"},
			}
			if tt.entities != nil {
				msg["entities"] = tt.entities
			}
			if tt.reply {
				msg["reply_to_message"] = map[string]any{"message_id": 4, "date": 1, "text": "earlier bot text",
					"from": map[string]any{"id": telegramtest.BotID, "is_bot": true, "first_name": "Tendril"},
					"chat": map[string]any{"id": group, "type": "supergroup"}}
			}
			b, _ := json.Marshal(map[string]any{"update_id": 900 + i, "message": msg})
			h.post(string(b))
			h.waitDone(int64(900 + i))
			reqs := h.inv.Requests()
			switch {
			case tt.want == "" && len(reqs) != 0:
				t.Fatalf("agent got %q, want ignored", reqs[0].Message)
			case tt.want != "" && (len(reqs) != 1 || reqs[0].Message != tt.want || reqs[0].ChatType != "group"):
				t.Fatalf("agent got %+v, want %q", reqs, tt.want)
			}
		})
	}
}

func TestRateLimitHonoursRetryAfter(t *testing.T) {
	h := newHarness(t, nil)
	h.clock.auto = true
	h.srv.RateLimit("sendMessage", 2, 7)
	if err := h.ch.Send(context.Background(), 70001, "hello **there**"); err != nil {
		t.Fatal(err)
	}
	msgs := h.srv.Messages(70001)
	if len(msgs) != 1 || msgs[0].Text != "hello <b>there</b>" {
		t.Fatalf("messages %+v", msgs)
	}
	var waited []time.Duration
	for _, w := range h.clock.Waits() {
		if w == 7*time.Second {
			waited = append(waited, w)
		}
	}
	if len(waited) != 2 {
		t.Fatalf("waits %v, want two 7s waits from retry_after", h.clock.Waits())
	}
	// Retries are bounded.
	h.srv.RateLimit("sendMessage", DefaultSendRetries+1, 1)
	if err := h.ch.Send(context.Background(), 70001, "x"); err == nil {
		t.Fatal("send succeeded after exhausting retries")
	}
}

func TestCantParseEntitiesFallsBackToPlainText(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Fail("sendMessage", 1, 400, "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0", 0)
	if err := h.ch.Send(context.Background(), 70001, "**Water** the _figs_ at `7:00` & [check](https://example.com)"); err != nil {
		t.Fatal(err)
	}
	msgs := h.srv.Messages(70001)
	if len(msgs) != 1 {
		t.Fatalf("messages %+v", msgs)
	}
	if msgs[0].ParseMode != "" || msgs[0].Text != "Water the figs at 7:00 & check (https://example.com)" {
		t.Fatalf("fallback sent %q (parse_mode %q), want plain text without Markdown, keeping the URL", msgs[0].Text, msgs[0].ParseMode)
	}
}

func TestSentinelsNeverReachUser(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	for _, s := range []string{"NOTHING_DUE", "  NOTHING_DUE\n", "`NOTHING_DUE`.", "**NO_REPLY**", ""} {
		if err := h.ch.Send(ctx, 70001, s); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(h.srv.Calls("sendMessage")); n != 0 {
		t.Fatalf("%d messages sent for sentinel-only replies", n)
	}
	if err := h.ch.Deliver(ctx, "70001", "NOTHING_DUE\n\nBut frost is forecast tonight."); err != nil {
		t.Fatal(err)
	}
	if msgs := h.srv.Messages(70001); len(msgs) != 1 || msgs[0].Text != "But frost is forecast tonight." {
		t.Fatalf("messages %+v", msgs)
	}
	if err := h.ch.Deliver(ctx, "not-a-chat", "x"); err == nil {
		t.Fatal("Deliver accepted a malformed chat id")
	}
	// And from a turn.
	h.inv.reply = func(agent.Request) (*agent.Result, error) { return &agent.Result{Text: "NOTHING_DUE"}, nil }
	h.start()
	h.post(textUpdate(1, 70001, 70001, "anything due?"))
	h.waitDone(1)
	if n := len(h.srv.Messages(70001)); n != 1 {
		t.Fatalf("sentinel turn produced a message (%d total)", n)
	}
}

func TestLongReplyIsChunkedAndValid(t *testing.T) {
	h := newHarness(t, nil)
	md := strings.Repeat("Paragraph with **bold** and `code` <tag> & more.\n\n", 400) + "```go\n" + strings.Repeat("x := 1\n", 1000) + "```"
	if err := h.ch.Send(context.Background(), 70001, md); err != nil {
		t.Fatal(err)
	}
	msgs := h.srv.Messages(70001)
	if len(msgs) < 5 {
		t.Fatalf("%d messages for a ~27000-char reply", len(msgs))
	}
	if rej := len(h.srv.Calls("sendMessage")) - len(msgs); rej != 0 {
		t.Fatalf("%d chunks rejected by the fake Bot API", rej)
	}
}

func TestApprovalButtons(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.AllowedChatIDs = []int64{70001, 70009} })
	h.inv.reply = func(req agent.Request) (*agent.Result, error) {
		return &agent.Result{Text: "I'd like to save a note.", PendingApproval: &agent.PendingApproval{
			RequestID: "req-" + req.Message, ToolName: "notes.add", Args: `{"text":"<water> & feed"}`, ExpiresAt: 1764490000,
		}}, agent.ErrApprovalPending
	}
	h.appr.res = &agent.Result{Text: "Saved the note."}
	h.start()
	h.post(textUpdate(1, 70001, 70001, "a"))
	h.waitDone(1)
	msgs := h.srv.WaitMessages(t, 70001, 2)
	prompt := msgs[1]
	btns := prompt.Buttons()
	if len(btns) != 2 || btns[0].CallbackData != "approve:req-a" || btns[1].CallbackData != "deny:req-a" {
		t.Fatalf("buttons %+v", btns)
	}
	if !strings.Contains(prompt.Text, "notes.add") || !strings.Contains(prompt.Text, "&lt;water&gt; &amp; feed") {
		t.Fatalf("prompt %q", prompt.Text)
	}
	// Foreign: another user presses the button, or a forged message id.
	h.post(callbackUpdate(2, 70009, 70001, prompt.MessageID, "approve:req-a"))
	h.post(callbackUpdate(3, 70001, 70001, prompt.MessageID+1, "approve:req-a"))
	h.post(callbackUpdate(4, 70001, 70001, prompt.MessageID, "approve:req-unknown"))
	notes := h.waitDone(2, 3, 4)
	if len(h.appr.Calls()) != 0 {
		t.Fatalf("foreign/stale buttons decided: %v (notes %v)", h.appr.Calls(), notes)
	}
	// The right person presses Approve.
	h.post(callbackUpdate(5, 70001, 70001, prompt.MessageID, "approve:req-a"))
	h.waitDone(5)
	if c := h.appr.Calls(); len(c) != 1 || c[0] != "req-a true telegram:70001" {
		t.Fatalf("approver calls %v", c)
	}
	msgs = h.srv.WaitMessages(t, 70001, 3)
	if msgs[2].Text != "Saved the note." {
		t.Fatalf("resumed reply %q", msgs[2].Text)
	}
	if edits := h.srv.Calls("editMessageReplyMarkup"); len(edits) != 1 {
		t.Fatalf("buttons not removed: %+v", edits)
	}
	// Pressing again is stale.
	h.post(callbackUpdate(6, 70001, 70001, prompt.MessageID, "approve:req-a"))
	h.waitDone(6)
	if len(h.appr.Calls()) != 1 {
		t.Fatal("decided twice")
	}
	alerts := 0
	for _, c := range h.srv.Calls("answerCallbackQuery") {
		if c.Params["show_alert"] == "true" {
			alerts++
		}
	}
	if alerts != 4 {
		t.Fatalf("%d alerts, want 4 (foreign user, forged message, unknown request, already decided)", alerts)
	}
	// Someone else cannot /approve a request shown to another user.
	h.post(textUpdate(8, 70009, 70009, "/approve req-a"))
	h.waitDone(8)
	if len(h.appr.Calls()) != 1 {
		t.Fatal("/approve by another user reached the approver")
	}
	if m := h.srv.Messages(70009); len(m) != 1 || !strings.Contains(m[0].Text, "Only the person who asked") {
		t.Fatalf("/approve by another user answered %+v", m)
	}
	// /approve <id> and /deny <id> go through the same approver.
	h.appr.err = errors.New("approval expired")
	h.post(textUpdate(7, 70001, 70001, "/deny req-z"))
	h.waitDone(7)
	if c := h.appr.Calls(); c[len(c)-1] != "req-z false telegram:70001" {
		t.Fatalf("approver calls %v", c)
	}
	last := h.srv.Messages(70001)
	if txt := last[len(last)-1].Text; !strings.Contains(txt, "not valid any more") {
		t.Fatalf("/deny with an expired request answered %q", txt)
	}
}

func TestMemoryAndForget(t *testing.T) {
	h := newHarness(t, nil)
	h.mem.facts["telegram:70001"] = []string{"Uses only organic fertiliser", "Grows <basil> & figs"}
	h.start()
	h.post(textUpdate(1, 70001, 70001, "/memory"))
	h.waitDone(1)
	msgs := h.srv.WaitMessages(t, 70001, 1)
	if !strings.Contains(msgs[0].Text, "• Uses only organic fertiliser") || !strings.Contains(msgs[0].Text, "&lt;basil&gt; &amp; figs") {
		t.Fatalf("/memory answered %q", msgs[0].Text)
	}
	h.post(textUpdate(2, 70001, 70001, "/forget"))
	h.waitDone(2)
	msgs = h.srv.WaitMessages(t, 70001, 2)
	btns := msgs[1].Buttons()
	if len(btns) != 2 || !strings.HasPrefix(btns[0].CallbackData, "forget:yes:") {
		t.Fatalf("/forget buttons %+v", btns)
	}
	if len(h.mem.forgot) != 0 {
		t.Fatal("forgot before confirmation")
	}
	// Someone else cannot confirm it.
	h.post(callbackUpdate(3, 70009, 70001, msgs[1].MessageID, btns[0].CallbackData))
	h.waitDone(3)
	if len(h.mem.forgot) != 0 {
		t.Fatal("foreign confirmation forgot memory")
	}
	// Nor use it up: the owner's own press on the same button still works.
	h.post(callbackUpdate(5, 70001, 70001, msgs[1].MessageID, btns[0].CallbackData))
	h.waitDone(5)
	if len(h.mem.forgot) != 1 || h.mem.forgot[0] != "telegram:70001" {
		t.Fatalf("forgot %v", h.mem.forgot)
	}
	if len(h.inv.Requests()) != 0 {
		t.Fatal("commands reached the agent")
	}
}

func TestMemoryCommandsPrivateOnly(t *testing.T) {
	const group = -100777
	h := newHarness(t, func(o *Options) { o.AllowedChatIDs = []int64{group}; o.GroupReplyAll = true })
	h.mem.facts["telegram:70001"] = []string{"secret fact"}
	h.start()
	h.post(textUpdate(1, group, 70001, "/memory"))
	h.post(textUpdate(2, group, 70001, "/forget"))
	h.waitDone(1, 2)
	for _, m := range h.srv.Messages(group) {
		if strings.Contains(m.Text, "secret fact") || len(m.Buttons()) > 0 {
			t.Fatalf("group got %q", m.Text)
		}
		if !strings.Contains(m.Text, "private chat") {
			t.Fatalf("group reply %q", m.Text)
		}
	}
	if n := len(h.srv.Messages(group)); n != 2 {
		t.Fatalf("%d replies", n)
	}
}

func TestPhotoOver20MB(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.AddHugeFile("HUGE", 30<<20)
	h.start()
	photo := func(id int64, sizes []map[string]any) string {
		b, _ := json.Marshal(map[string]any{"update_id": id, "message": map[string]any{
			"message_id": id, "date": 1, "photo": sizes,
			"from": map[string]any{"id": 70001, "first_name": "D"}, "chat": map[string]any{"id": 70001, "type": "private"}}})
		return string(b)
	}
	// Declared over 20 MB in the update: never fetched.
	h.post(photo(1, []map[string]any{{"file_id": "HUGE", "file_size": 25 << 20, "width": 9000, "height": 9000}}))
	// Size unknown in the update; getFile says it is too big.
	h.post(photo(2, []map[string]any{{"file_id": "HUGE", "width": 9000, "height": 9000}}))
	// Largest fits only below 20 MB: the smaller size is used.
	h.post(photo(3, []map[string]any{
		{"file_id": "AgACAgIAAxkBAAIBmedium", "file_size": 18221, "width": 320, "height": 240},
		{"file_id": "HUGE", "file_size": 25 << 20, "width": 9000, "height": 9000}}))
	notes := h.waitDone(1, 2, 3)
	for _, id := range []int64{1, 2} {
		if notes[id] != "done: photo too large" {
			t.Errorf("update %d: %q", id, notes[id])
		}
	}
	msgs := h.srv.Messages(70001)
	if len(msgs) != 3 || !strings.Contains(msgs[0].Text, "larger than 20 MB") {
		t.Fatalf("messages %+v", msgs)
	}
	reqs := h.inv.Requests()
	if len(reqs) != 1 || len(reqs[0].Images) != 1 || len(reqs[0].Images[0].Data) != 18221 {
		t.Fatalf("requests %+v", reqs)
	}
}

func TestAlbumDebounceOnInjectedClock(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	part := func(id int64, file, caption string) string {
		m := map[string]any{"message_id": id, "date": 1, "media_group_id": "G1",
			"photo": []map[string]any{{"file_id": file, "file_size": 90000, "width": 1280, "height": 960}},
			"from":  map[string]any{"id": 70001, "first_name": "D"}, "chat": map[string]any{"id": 70001, "type": "private"}}
		if caption != "" {
			m["caption"] = caption
		}
		b, _ := json.Marshal(map[string]any{"update_id": id, "message": m})
		return string(b)
	}
	h.post(part(1, "AgACAgIAAxkBAAIalbum1", ""))
	h.clock.Advance(1500 * time.Millisecond) // within the 2 s window
	h.post(part(2, "AgACAgIAAxkBAAIalbum2", "Second has the caption"))
	h.clock.Advance(1500 * time.Millisecond) // 1.5 s after the last part: still waiting
	h.post(part(3, "AgACAgIAAxkBAAIalbum3", ""))
	if n := len(h.inv.Requests()); n != 0 {
		t.Fatalf("album processed before the debounce ended (%d turns)", n)
	}
	h.clock.Advance(2 * time.Second)
	h.waitDone(1, 2, 3)
	reqs := h.inv.Requests()
	if len(reqs) != 1 || len(reqs[0].Images) != 3 || reqs[0].Message != "Second has the caption" {
		t.Fatalf("album turns %+v", reqs)
	}
}

func TestTypingRepeatsWhileWorking(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.TypingInterval = 20 * time.Millisecond })
	h.inv.gate = make(chan struct{})
	h.start()
	h.post(textUpdate(1, 70001, 70001, "think hard"))
	h.srv.WaitFor(t, 10*time.Second, "typing shown at least 3 times", func() bool {
		return len(h.srv.Calls("sendChatAction")) >= 3
	})
	h.inv.gate <- struct{}{}
	h.waitDone(1)
	n := len(h.srv.Calls("sendChatAction"))
	time.Sleep(100 * time.Millisecond)
	if m := len(h.srv.Calls("sendChatAction")); m != n {
		t.Fatalf("typing continued after the reply (%d -> %d)", n, m)
	}
}

func TestTransientFailuresRetried(t *testing.T) {
	h := newHarness(t, nil)
	h.clock.auto = true
	h.srv.Fail("sendMessage", 2, 502, "Bad Gateway", 0)
	if err := h.ch.Send(context.Background(), 70001, "after the outage"); err != nil {
		t.Fatal(err)
	}
	if msgs := h.srv.Messages(70001); len(msgs) != 1 {
		t.Fatalf("messages %+v", msgs)
	}
	if w := h.clock.Waits(); len(w) != 2 || w[0] != time.Second || w[1] != 2*time.Second {
		t.Fatalf("backoff waits %v, want [1s 2s]", w)
	}
	// A proxy's error page instead of the Bot API's JSON (HTML 502, or a
	// 200 whose body does not decode) is transient too.
	h.srv.FailPage("sendMessage", 1, 502, "<html><body>502 Bad Gateway</body></html>")
	h.srv.FailPage("sendMessage", 1, 200, "<html>captive portal</html>")
	if err := h.ch.Send(context.Background(), 70001, "after the proxy"); err != nil {
		t.Fatalf("after an HTML 502 and a 200 that is not JSON: %v", err)
	}
	if msgs := h.srv.Messages(70001); len(msgs) != 2 {
		t.Fatalf("messages %+v", msgs)
	}
	if w := h.clock.Waits(); len(w) != 4 {
		t.Fatalf("backoff waits %v, want two more", w)
	}
	// A 403 (blocked by the user) is not retried.
	h.srv.Fail("sendMessage", 1, 403, "Forbidden: bot was blocked by the user", 0)
	if err := h.ch.Send(context.Background(), 70001, "x"); err == nil || !strings.Contains(err.Error(), "blocked") {
		t.Fatalf("403: %v", err)
	}
	if w := h.clock.Waits(); len(w) != 4 {
		t.Fatalf("403 was retried: waits %v", w)
	}
}

// A Bot API outage of several minutes (ten 500s in a row) is ridden out:
// the reply arrives once it is over, the waits doubling up to a minute.
// Past Options.SendRetries the call fails (the update is then recorded
// failed, its reply kept in the session).
func TestLongOutageRetriedWithCappedBackoff(t *testing.T) {
	h := newHarness(t, nil)
	h.clock.auto = true
	h.srv.Fail("sendMessage", 10, 500, "Internal Server Error", 0)
	if err := h.ch.Send(context.Background(), 70001, "after a long outage"); err != nil {
		t.Fatal(err)
	}
	if msgs := h.srv.Messages(70001); len(msgs) != 1 {
		t.Fatalf("messages %+v", msgs)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second,
		time.Minute, time.Minute, time.Minute, time.Minute}
	if w := h.clock.Waits(); !slices.Equal(w, want) {
		t.Fatalf("backoff waits %v, want %v", w, want)
	}
	h.srv.Fail("sendMessage", DefaultSendRetries+1, 500, "Internal Server Error", 0)
	if err := h.ch.Send(context.Background(), 70001, "x"); err == nil {
		t.Fatal("a failure past SendRetries was not reported")
	}
}

// A message the turn refuses (here a NUL byte) is named in the reply,
// since sending it again cannot help; any other failure asks to try again.
func TestFailedTurnReplies(t *testing.T) {
	h := newHarness(t, nil)
	h.inv.reply = func(req agent.Request) (*agent.Result, error) {
		if strings.Contains(req.Message, "bad") {
			return nil, fmt.Errorf("%w: message contains a NUL byte or invalid UTF-8", agent.ErrInvalidRequest)
		}
		return nil, errors.New("model unreachable")
	}
	h.start()
	h.post(textUpdate(1, 70001, 70001, "bad message"))
	h.waitDone(1)
	h.post(textUpdate(2, 70001, 70001, "fine message"))
	h.waitDone(2)
	msgs := h.srv.WaitMessages(t, 70001, 2)
	if !strings.Contains(msgs[0].Text, "can't take that message (message contains a NUL byte or invalid UTF-8)") || !strings.Contains(msgs[0].Text, "won't help") {
		t.Errorf("refused message answered %q", msgs[0].Text)
	}
	if !strings.Contains(msgs[1].Text, "Please try again in a moment") {
		t.Errorf("failed turn answered %q", msgs[1].Text)
	}
}
