package telegram

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
)

// TestSavedTurnResultDeliveredWithoutSecondTurn: a holder of the chat ran
// the turn of an update, saved its result and died before recording the
// reply. The worker that takes the update over sends the saved result and
// does not run the turn again.
func TestSavedTurnResultDeliveredWithoutSecondTurn(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	h.post(textUpdate(5, 70001, 70001, "hello"))
	saved, _ := json.Marshal(agent.Result{Text: "the **first** attempt's answer"})
	if err := h.ch.store.saveResult(ctx, 5, saved); err != nil {
		t.Fatal(err)
	}
	h.start()
	msgs := h.srv.WaitMessages(t, 70001, 1)
	if msgs[0].Text != "the <b>first</b> attempt's answer" {
		t.Fatalf("reply %q, want the saved result", msgs[0].Text)
	}
	if note := h.waitDone(5)[5]; !strings.Contains(note, "earlier attempt") {
		t.Fatalf("outcome %q", note)
	}
	if n := len(h.inv.Requests()); n != 0 {
		t.Fatalf("the turn ran %d times, want 0 (its result was saved)", n)
	}
	if r := rawResult(t, h.ch.store, 5); r != nil {
		t.Fatalf("result kept after the outcome was recorded: %s", r)
	}
}

// TestTurnResultSavedUntilFinished: a turn's result is saved before its
// reply is sent (so a takeover need not run it again) and cleared once the
// outcome is recorded.
func TestTurnResultSavedUntilFinished(t *testing.T) {
	h := newHarness(t, nil)
	seen := make(chan []byte, 1)
	h.srv.SetLatency(func(method string) time.Duration {
		if method == "sendMessage" {
			seen <- rawResult(t, h.ch.store, 6)
		}
		return 0
	})
	h.post(textUpdate(6, 70001, 70001, "hi"))
	h.start()
	h.srv.WaitMessages(t, 70001, 1)
	var r agent.Result
	if err := json.Unmarshal(<-seen, &r); err != nil || r.Text != "echo: hi" {
		t.Fatalf("result saved while the reply was sent = %+v, %v", r, err)
	}
	h.waitDone(6)
	if r := rawResult(t, h.ch.store, 6); r != nil {
		t.Fatalf("result kept after the outcome was recorded: %s", r)
	}
}

func rawResult(t *testing.T, st *Store, id int64) []byte {
	t.Helper()
	var r []byte
	if err := st.db.QueryRowContext(context.Background(), `SELECT result FROM telegram_updates WHERE update_id = ?`, id).Scan(&r); err != nil {
		t.Errorf("read result of %d: %v", id, err)
	}
	return r
}
