package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/channel/telegram/telegramtest"
)

func TestNewRefusesWithoutSecretOrToken(t *testing.T) {
	inv := &fakeInvoker{}
	tests := []struct {
		name string
		opts Options
		want error
	}{
		{"no secret", Options{BotToken: "1:x", Dir: t.TempDir()}, ErrNoSecret},
		{"no token", Options{WebhookSecret: "s", Dir: t.TempDir()}, ErrNoToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.opts, Deps{Invoker: inv}); !errors.Is(err, tt.want) {
				t.Fatalf("New error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestWebhookRejectsWrongSecret(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	body := textUpdate(1, 70001, 70001, "hello")
	for _, secret := range []string{"", "wrong", testSecret + "x", strings.ToUpper(testSecret), testSecret[:len(testSecret)-1]} {
		rec := h.postWith(body, secret)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("secret %q: status %d, want 401", secret, rec.Code)
		}
	}
	// A malformed body with a wrong secret is still 401: nothing is parsed.
	if rec := h.postWith("{not json", "wrong"); rec.Code != http.StatusUnauthorized {
		t.Errorf("malformed body, wrong secret: status %d, want 401", rec.Code)
	}
	n, err := h.ch.store.countUpdates(context.Background())
	if err != nil || n != 0 {
		t.Fatalf("stored %d updates (err %v) after unauthorised posts, want 0", n, err)
	}
	if len(h.inv.Requests()) != 0 {
		t.Fatal("unauthorised update reached the agent")
	}
}

func TestWebhookBadInput(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	big := `{"update_id": 9, "message": {"text": "` + strings.Repeat("a", MaxWebhookBody) + `"}}`
	tests := []struct {
		name   string
		method string
		body   string
		status int
		want   string
	}{
		{"oversize", http.MethodPost, big, http.StatusRequestEntityTooLarge, "exceeds 1048576 bytes"},
		{"malformed json", http.MethodPost, `{"update_id": 5, "message": `, http.StatusBadRequest, "not valid JSON"},
		{"not an object", http.MethodPost, `[1,2]`, http.StatusBadRequest, "not valid JSON"},
		{"no update_id", http.MethodPost, `{"message": {"text": "x"}}`, http.StatusBadRequest, "no update_id"},
		{"wrong shape", http.MethodPost, `{"update_id": 6, "message": "text"}`, http.StatusBadRequest, "Update shape"},
		{"get", http.MethodGet, ``, http.StatusMethodNotAllowed, "use POST"},
		{"unknown kind", http.MethodPost, `{"update_id": 7, "poll": {"id": "1", "question": "q"}}`, http.StatusOK, "unsupported update kind poll"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, WebhookPath, strings.NewReader(tt.body))
			req.Header.Set(SecretHeader, testSecret)
			rec := httptest.NewRecorder()
			h.ch.Handler().ServeHTTP(rec, req)
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) {
				t.Fatalf("status %d body %s; want %d containing %q", rec.Code, rec.Body, tt.status, tt.want)
			}
		})
	}
	st, note, _ := h.ch.store.updateState(context.Background(), 7)
	if st != stateIgnored || !strings.Contains(note, "poll") {
		t.Errorf("unknown kind recorded as %q %q, want ignored", st, note)
	}
	for _, id := range []int64{5, 6, 9} {
		if st, _, _ := h.ch.store.updateState(context.Background(), id); st != "" {
			t.Errorf("rejected update %d was stored (%s)", id, st)
		}
	}
}

func TestDuplicateUpdateGetsOneReply(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	body := textUpdate(100, 70001, 70001, "water the figs?")
	h.post(body)
	h.waitDone(100)
	rec := h.post(body) // Telegram redelivers after a timeout
	var reply webhookReply
	_ = json.Unmarshal(rec.Body.Bytes(), &reply)
	if !reply.Duplicate {
		t.Errorf("second delivery not reported as duplicate: %s", rec.Body)
	}
	// Re-open the store: de-duplication is persistent.
	h.ch.Close()
	h.ch = h.open(nil)
	h.start()
	h.post(body)
	h.post(textUpdate(101, 70001, 70001, "marker"))
	h.waitDone(101)
	if n := len(h.inv.Requests()); n != 2 {
		t.Fatalf("agent invoked %d times, want 2 (one per distinct update)", n)
	}
	msgs := h.srv.Messages(70001)
	if len(msgs) != 2 || msgs[0].Text != "echo: water the figs?" {
		t.Fatalf("messages = %+v, want one reply per distinct update", msgs)
	}
}

func TestOutOfOrderUpdatesProcessedInOrder(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.AllowedChatIDs = []int64{70001, 70002} })
	// Accepted before the workers run, in a shuffled order, across two chats.
	for _, id := range []int64{205, 201, 204, 202, 203} {
		h.post(textUpdate(id, 70001, 70001, "m"+itoa(id)))
	}
	h.post(textUpdate(301, 70002, 70002, "other chat"))
	h.start()
	h.waitDone(201, 202, 203, 204, 205, 301)
	var got []string
	for _, r := range h.inv.Requests() {
		if r.ActorID == "telegram:70001" {
			got = append(got, r.Message)
		}
	}
	want := []string{"m201", "m202", "m203", "m204", "m205"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("chat processed %v, want %v", got, want)
	}
}

func TestOneChatAtATimeInOrderWhileBusy(t *testing.T) {
	h := newHarness(t, nil)
	h.inv.gate = make(chan struct{})
	h.start()
	h.post(textUpdate(401, 70001, 70001, "first"))
	h.srv.WaitFor(t, 10e9, "first turn started", func() bool { return len(h.inv.Requests()) == 1 })
	// While the first turn runs, later updates arrive out of order.
	h.post(textUpdate(404, 70001, 70001, "fourth"))
	h.post(textUpdate(402, 70001, 70001, "second"))
	h.post(textUpdate(403, 70001, 70001, "third"))
	if n := len(h.inv.Requests()); n != 1 {
		t.Fatalf("%d turns in flight for one chat, want 1", n)
	}
	for range 4 {
		h.inv.gate <- struct{}{}
	}
	h.waitDone(401, 402, 403, 404)
	var got []string
	for _, r := range h.inv.Requests() {
		got = append(got, r.Message)
	}
	if strings.Join(got, ",") != "first,second,third,fourth" {
		t.Fatalf("order %v", got)
	}
}

// TestCrashAfterAckIsAnswered: an update acknowledged with 200 but never
// processed (the process died right after the 200) is answered after the
// store is reopened and the channel started again.
func TestCrashAfterAckIsAnswered(t *testing.T) {
	h := newHarness(t, nil)
	h.post(textUpdate(500, 70001, 70001, "remind me at 7"))
	// "Crash": the channel never ran; drop it without processing.
	h.ch.store.Close()
	h.ch = h.open(nil)
	h.start()
	h.waitDone(500)
	msgs := h.srv.WaitMessages(t, 70001, 1)
	if msgs[0].Text != "echo: remind me at 7" {
		t.Fatalf("reply %q", msgs[0].Text)
	}
}

func TestStopMidTurnLeavesUpdatePending(t *testing.T) {
	h := newHarness(t, nil)
	h.inv.gate = make(chan struct{}) // never released: the turn hangs
	h.start()
	h.post(textUpdate(510, 70001, 70001, "slow"))
	h.srv.WaitFor(t, 10e9, "turn started", func() bool { return len(h.inv.Requests()) == 1 })
	if err := h.ch.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := h.ch.store.updateState(context.Background(), 510); st != statePending {
		t.Fatalf("state after stop mid-turn = %q, want pending", st)
	}
	h.ch.Close()
	h.inv.gate = nil
	h.ch = h.open(nil)
	h.start()
	h.waitDone(510)
	if msgs := h.srv.Messages(70001); len(msgs) != 1 || msgs[0].Text != "echo: slow" {
		t.Fatalf("messages after restart = %+v", msgs)
	}
}

func TestDedupTTL(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	h.post(textUpdate(600, 70001, 70001, "once"))
	h.waitDone(600)
	now := h.clock.Now()
	if err := h.ch.store.purge(context.Background(), now.Add(-DefaultDedupTTL), now); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := h.ch.store.updateState(context.Background(), 600); st == "" {
		t.Fatal("update forgotten before its 24 h TTL")
	}
	later := now.Add(25 * 60 * 60e9)
	if err := h.ch.store.purge(context.Background(), later.Add(-DefaultDedupTTL), later); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := h.ch.store.updateState(context.Background(), 600); st != "" {
		t.Fatalf("update still remembered after 25 h (%s)", st)
	}
}

func itoa(i int64) string { b, _ := json.Marshal(i); return string(b) }

var _ = telegramtest.BotID

func TestRestartAfterStop(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	h.post(textUpdate(800, 70001, 70001, "before"))
	h.waitDone(800)
	if err := h.ch.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.post(textUpdate(801, 70001, 70001, "while stopped"))
	h.start()
	h.post(textUpdate(802, 70001, 70001, "after"))
	h.waitDone(801, 802)
	if n := len(h.srv.Messages(70001)); n != 3 {
		t.Fatalf("%d replies, want 3", n)
	}
}

func TestStoreIsDurable(t *testing.T) {
	st, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var mode string
	var sync int
	if err := st.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q (%v), want wal", mode, err)
	}
	if err := st.db.QueryRow(`PRAGMA synchronous`).Scan(&sync); err != nil || sync != 2 {
		t.Fatalf("synchronous = %d (%v), want 2 (FULL): every commit is fsynced before the 200", sync, err)
	}
}
