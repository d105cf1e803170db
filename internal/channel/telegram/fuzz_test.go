package telegram

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// FuzzWebhook feeds arbitrary bodies to the webhook and processes whatever
// it accepts, synchronously: nothing may panic, every answer is one of the
// documented statuses, and an accepted update reaches a final state.
func FuzzWebhook(f *testing.F) {
	ids, bodies, _ := sampleUpdates(f)
	for _, id := range ids {
		f.Add(bodies[id])
	}
	f.Add(`{"update_id": 1, "message": {"chat": {"id": 70001, "type": "private"}, "text": "/approve", "entities": [{"type": "mention", "offset": -5, "length": 99999}]}}`)
	f.Add(`{"update_id": 2, "callback_query": {"id": "x", "from": {"id": 1}, "data": "forget:yes:"}}`)
	f.Add(`{"update_id": 3, "message": {"chat": {"id": 70001, "type": "private"}, "from": {"id": 70001}, "photo": [{"file_id": "nope"}], "reply_to_message": {"chat": {"id": 1}}}}`)
	h := newHarness(f, func(o *Options) { o.AllowedChatIDs = []int64{70001, -1001234567890} })
	h.clock.auto = true
	f.Fuzz(func(t *testing.T, body string) {
		rec := h.postWith(body, testSecret)
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d for %q", rec.Code, body)
		}
		if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "duplicate") {
			return
		}
		ctx := context.Background()
		rows, err := h.ch.store.pendingChats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, chat := range rows {
			for {
				u, err := h.ch.store.nextPending(ctx, chat)
				if err != nil {
					t.Fatal(err)
				}
				if u == nil {
					break
				}
				h.ch.processBatch(ctx, []storedUpdate{*u})
				if st, _, _ := h.ch.store.updateState(ctx, u.UpdateID); st == statePending {
					t.Fatalf("update %d still pending after processing", u.UpdateID)
				}
			}
		}
	})
}
