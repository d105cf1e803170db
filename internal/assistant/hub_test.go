package assistant

import (
	"errors"
	"testing"
)

// The hub holds at most max listeners: one more is refused with
// ErrTooManyListeners (and no channel), and a listener that leaves makes
// room again; deliveries still reach the listeners it holds.
func TestHubBoundsListeners(t *testing.T) {
	h := newHub()
	h.max = 2
	started := 0
	start := func() { started++ }
	a, stopA, err := h.subscribe("api:a", start)
	if err != nil {
		t.Fatal(err)
	}
	_, stopB, err := h.subscribe("", start)
	if err != nil {
		t.Fatal(err)
	}
	ch, stop, err := h.subscribe("api:c", start)
	if !errors.Is(err, ErrTooManyListeners) || ch != nil || stop != nil {
		t.Fatalf("third listener: %v %v, want ErrTooManyListeners and no channel", ch, err)
	}
	if started != 2 {
		t.Fatalf("started %d times, want 2 (not for the refused one)", started)
	}
	h.publish(Delivery{ActorID: "api:a", Text: "hi"})
	if d := <-a; d.Text != "hi" {
		t.Fatalf("delivery %v", d)
	}
	stopB()
	_, stopC, err := h.subscribe("api:c", start)
	if err != nil {
		t.Fatalf("after one left: %v", err)
	}
	stopA()
	stopC()
	if len(h.subs) != 0 {
		t.Fatalf("%d listeners left", len(h.subs))
	}
}
