package telegram

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/agent"
)

// rowsOf counts the rows the store keeps of a Telegram user, table by
// table, with queries independent of ForgetActor's.
func rowsOf(t *testing.T, st *Store, id int64) map[string]int {
	t.Helper()
	actor := "telegram:" + strconv.FormatInt(id, 10)
	out := map[string]int{}
	for table, q := range map[string]struct {
		q    string
		args []any
	}{
		"pairing":           {`SELECT count(*) FROM telegram_pairing WHERE chat_id = ? OR user_id = ?`, []any{id, id}},
		"allowed":           {`SELECT count(*) FROM telegram_allowed WHERE chat_id = ?`, []any{id}},
		"sessions":          {`SELECT count(*) FROM telegram_sessions WHERE key = CAST(? AS TEXT) OR key LIKE '%:' || CAST(? AS TEXT)`, []any{strconv.FormatInt(id, 10), strconv.FormatInt(id, 10)}},
		"approval_messages": {`SELECT count(*) FROM telegram_approval_messages WHERE actor_id = ?`, []any{actor}},
		"forget_requests":   {`SELECT count(*) FROM telegram_forget_requests WHERE actor_id = ?`, []any{actor}},
	} {
		var n int
		if err := st.db.QueryRowContext(context.Background(), q.q, q.args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		out[table] = n
	}
	return out
}

func (h *harness) stored(id int64) bool {
	h.t.Helper()
	st, _, err := h.ch.store.updateState(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return st != ""
}

// TestForgetActor seeds, through the webhook and the workers, everything
// the store keeps of a person — updates in their private chat and in a
// group (messages and a button press), a pending pairing request or an
// approved pairing, session slots from /new in both chats, approval
// prompts in both chats and a pending /forget confirmation — for actors
// that are forgotten and actors that are kept. ForgetActor must remove
// every row of the forgotten ones, count them, and leave every row of the
// others. Afterwards a forgotten paired actor must pair again, while a
// chat on the config allow-list is still served.
func TestForgetActor(t *testing.T) {
	const (
		group = -100555
		a     = 80001 // paired, forgotten
		b     = 80002 // paired, kept
		p     = 80003 // pairing pending, forgotten
		q     = 80004 // pairing pending, kept
		c     = 70001 // on the config allow-list, forgotten
	)
	h := newHarness(t, func(o *Options) {
		o.AllowedChatIDs = []int64{group, c}
		o.GroupReplyAll = true
		o.MaxPendingPairings = 10
	})
	h.inv.reply = func(req agent.Request) (*agent.Result, error) {
		if strings.HasPrefix(req.Message, "save a note") {
			chat := req.Metadata["telegram_chat_id"]
			return &agent.Result{Text: "May I?", PendingApproval: &agent.PendingApproval{
				RequestID: fmt.Sprintf("req-%s-%v", strings.TrimPrefix(req.ActorID, "telegram:"), chat), ToolName: "notes.add", Args: `{}`,
			}}, agent.ErrApprovalPending
		}
		return &agent.Result{Text: "echo: " + req.Message}, nil
	}
	h.start()
	ctx := context.Background()

	updates := map[int64][]int64{} // actor → update ids
	next := int64(1000)
	post := func(actor int64, body string) {
		t.Helper()
		h.post(body)
		h.waitDone(next)
		updates[actor] = append(updates[actor], next)
		next++
	}
	text := func(actor, chat int64, s string) { post(actor, textUpdate(next, chat, actor, s)) }

	// p and q ask to pair and stay pending; a and b pair and are approved.
	for _, u := range []int64{a, b, p, q} {
		text(u, u, "hi")
	}
	for _, u := range []int64{a, b} {
		code := codeRe.FindStringSubmatch(h.srv.Messages(u)[0].Text)[1]
		if _, err := h.ch.store.ApprovePairing(ctx, code, h.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	// a, b and c use their private chat and the group.
	for _, u := range []int64{a, b, c} {
		text(u, u, "/new")
		text(u, u, "save a note please")
		text(u, u, "/forget")
		text(u, group, "/new")
		text(u, group, "save a note for the group")
		text(u, group, "hello group")
	}
	// a presses b's approval button in the group (refused, but stored), and
	// an update of a kind the channel ignores names a as its sender.
	var bPrompt int
	for _, m := range h.srv.Messages(group) {
		for _, btn := range m.Buttons() {
			if btn.CallbackData == fmt.Sprintf("approve:req-%d-%d", b, group) {
				bPrompt = m.MessageID
			}
		}
	}
	if bPrompt == 0 {
		t.Fatal("no approval prompt for b in the group")
	}
	cb := callbackUpdate(next, a, group, bPrompt, fmt.Sprintf("approve:req-%d-%d", b, group))
	post(a, cb)
	reaction, _ := json.Marshal(map[string]any{"update_id": next, "message_reaction": map[string]any{
		"chat": map[string]any{"id": group, "type": "supergroup"}, "message_id": 1, "date": 1,
		"user": map[string]any{"id": a, "is_bot": false, "first_name": "A"}, "old_reaction": []any{}, "new_reaction": []any{},
	}})
	h.post(string(reaction)) // stored as ignored at once
	updates[a] = append(updates[a], next)
	next++

	before := map[int64]map[string]int{}
	for _, u := range []int64{a, b, p, q, c} {
		before[u] = rowsOf(t, h.ch.store, u)
		for _, id := range updates[u] {
			if !h.stored(id) {
				t.Fatalf("update %d of %d not stored", id, u)
			}
		}
	}
	for _, u := range []int64{a, b} {
		want := map[string]int{"pairing": 0, "allowed": 1, "sessions": 2, "approval_messages": 2, "forget_requests": 1}
		if fmt.Sprint(before[u]) != fmt.Sprint(want) {
			t.Fatalf("seeded rows of %d: %v, want %v", u, before[u], want)
		}
	}
	for _, u := range []int64{p, q} {
		if before[u]["pairing"] != 1 {
			t.Fatalf("seeded rows of %d: %v, want a pending pairing", u, before[u])
		}
	}

	for _, u := range []int64{a, p, c} {
		n, err := h.ch.store.ForgetActor(ctx, "telegram:"+strconv.FormatInt(u, 10))
		if err != nil {
			t.Fatal(err)
		}
		want := len(updates[u])
		for _, k := range before[u] {
			want += k
		}
		if n != want {
			t.Errorf("ForgetActor(%d) removed %d rows, want %d (%d updates + %v)", u, n, want, len(updates[u]), before[u])
		}
		for table, k := range rowsOf(t, h.ch.store, u) {
			if k != 0 {
				t.Errorf("after ForgetActor(%d): %d rows left in %s", u, k, table)
			}
		}
		for _, id := range updates[u] {
			if h.stored(id) {
				t.Errorf("after ForgetActor(%d): update %d still stored", u, id)
			}
		}
	}
	for _, u := range []int64{b, q} {
		if got := rowsOf(t, h.ch.store, u); fmt.Sprint(got) != fmt.Sprint(before[u]) {
			t.Errorf("rows of kept actor %d changed: %v, was %v", u, got, before[u])
		}
		for _, id := range updates[u] {
			if !h.stored(id) {
				t.Errorf("update %d of kept actor %d was removed", id, u)
			}
		}
	}
	if n, err := h.ch.store.ForgetActor(ctx, "telegram:"+strconv.FormatInt(a, 10)); err != nil || n != 0 {
		t.Errorf("second ForgetActor = %d, %v; want 0", n, err)
	}

	// a was let in by pairing: after forgetting, a must pair again.
	served := len(h.inv.Requests())
	text(a, a, "are you there?")
	if msgs := h.srv.Messages(a); codeRe.FindStringSubmatch(msgs[len(msgs)-1].Text) == nil {
		t.Errorf("forgotten paired actor got %q, want a pairing code", msgs[len(msgs)-1].Text)
	}
	if len(h.inv.Requests()) != served {
		t.Error("forgotten paired actor reached the agent without pairing again")
	}
	// b is still paired and c is still on the config allow-list.
	text(b, b, "still me")
	text(c, c, "still me too")
	reqs := h.inv.Requests()
	if len(reqs) != served+2 || reqs[served].ActorID != "telegram:80002" || reqs[served+1].ActorID != "telegram:70001" {
		t.Fatalf("after forgetting, requests %+v", reqs[served:])
	}
	// b's sessions are intact: /new's session carries on.
	if reqs[served].SessionID == "" || !strings.HasPrefix(reqs[served].SessionID, "tg-80002-") {
		t.Errorf("b's session after forgetting a: %q", reqs[served].SessionID)
	}
	if reqs[served+1].SessionID != "" {
		t.Errorf("c's session slot survived: %q", reqs[served+1].SessionID)
	}

	if _, err := h.ch.store.ForgetActor(ctx, ""); err == nil {
		t.Error("ForgetActor(\"\") succeeded")
	}
}

// A channel (a negative chat actor) or a group posting as itself loses
// only what it sent: other people's rows in that chat stay.
func TestForgetChatActorKeepsOthers(t *testing.T) {
	const group = -100777
	h := newHarness(t, func(o *Options) { o.AllowedChatIDs = []int64{group}; o.GroupReplyAll = true })
	h.start()
	ctx := context.Background()
	anon, _ := json.Marshal(map[string]any{"update_id": 1, "message": map[string]any{
		"message_id": 1, "date": 1, "chat": map[string]any{"id": group, "type": "supergroup"},
		"sender_chat": map[string]any{"id": group, "type": "supergroup", "title": "G"}, "text": "/new",
	}})
	h.post(string(anon))
	h.post(textUpdate(2, group, 80001, "/new"))
	h.waitDone(1, 2)
	n, err := h.ch.store.ForgetActor(ctx, fmt.Sprintf("telegram:%d", group))
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 { // update 1 and session slot "<group>:<group>"
		t.Errorf("removed %d rows, want 2", n)
	}
	if h.stored(1) || !h.stored(2) {
		t.Errorf("stored after forgetting the group actor: 1=%v 2=%v; want only 2", h.stored(1), h.stored(2))
	}
	if got := rowsOf(t, h.ch.store, 80001); got["sessions"] != 1 {
		t.Errorf("the member's session slot was removed: %v", got)
	}
}

// Pending counts updates waiting to be processed, not processed or ignored
// ones.
func TestPending(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	h.post(textUpdate(1, 70001, 70001, "one"))
	h.post(textUpdate(2, 70001, 70001, "two"))
	h.post(`{"update_id":3,"poll":{"id":"p"}}`) // unsupported kind: stored as ignored
	if n, err := h.ch.store.Pending(ctx); err != nil || n != 2 {
		t.Fatalf("Pending before start = %d, %v; want 2", n, err)
	}
	if all, _ := h.ch.store.countUpdates(ctx); all != 3 {
		t.Fatalf("stored %d updates, want 3", all)
	}
	h.start()
	h.waitDone(1, 2)
	if n, err := h.ch.store.Pending(ctx); err != nil || n != 0 {
		t.Fatalf("Pending after processing = %d, %v; want 0", n, err)
	}
}
