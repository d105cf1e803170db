package pipeline

import (
	"testing"

	"github.com/tendrilai/tendril/internal/memory"
)

// ReconcileTurn writes a lost turn's events once, without counting the
// turn, and writes nothing for a session of a forgotten actor that no turn
// was counted in since the forget; on every store kind and both job
// databases.
func TestReconcileTurn(t *testing.T) {
	forStores(t, func(t *testing.T, f *fixture) {
		pending := func(session string) int {
			t.Helper()
			var n int
			if err := f.p.q.db().queryRow(ctx, `SELECT pending_turns FROM memory_pipeline_sessions WHERE actor_id = 'u1' AND session_id = ?`, session).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		lost := []memory.Event{{ID: "n-user", Role: "user", Text: "my dog is called Rex"}, {ID: "n-reply", Role: "assistant", Text: "Rex, noted."}}
		f.turn("u1", "s1", "I live in Seattle")
		before := pending("s1")
		for range 2 { // the second finds them stored
			if err := f.p.ReconcileTurn(ctx, "main", "u1", "s1", lost); err != nil {
				t.Fatal(err)
			}
		}
		evs, err := f.store.Events(ctx, "u1", "s1")
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]int{}
		for _, e := range evs {
			ids[e.ID]++
		}
		if len(evs) != 4 || ids["n-user"] != 1 || ids["n-reply"] != 1 {
			t.Fatalf("events after reconciling twice: %v", ids)
		}
		if got := pending("s1"); got != before {
			t.Fatalf("pending turns %d after reconciling, want %d (not counted)", got, before)
		}

		// Forgotten: the session's last turn is from before the forget.
		if err := f.p.Forget(ctx, "u1"); err != nil {
			t.Fatal(err)
		}
		if err := f.p.ReconcileTurn(ctx, "main", "u1", "s1", lost); err != nil {
			t.Fatal(err)
		}
		if evs, _ := f.store.Events(ctx, "u1", ""); len(evs) != 0 {
			t.Fatalf("a forgotten turn came back: %d events", len(evs))
		}
		// A turn counted after the forget is reconciled again.
		f.turn("u1", "s1", "hello again")
		again := []memory.Event{{ID: "n-user-2", Role: "user", Text: "I moved to Portland"}, {ID: "n-reply-2", Role: "assistant", Text: "Noted."}}
		if err := f.p.ReconcileTurn(ctx, "main", "u1", "s1", again); err != nil {
			t.Fatal(err)
		}
		if evs, _ := f.store.Events(ctx, "u1", "s1"); len(evs) != 4 {
			t.Fatalf("after the forget and a counted turn: %d events, want 4", len(evs))
		}
	})
}
