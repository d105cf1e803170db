package memindex

import (
	"sync"
	"testing"
	"time"
)

func TestEmbedRetryBacksOff(t *testing.T) {
	r := &EmbedRetry{Base: time.Millisecond, Max: 4 * time.Millisecond}
	var mu sync.Mutex
	calls := map[string]int{}
	done := make(chan string, 8)
	again := func(a string) {
		mu.Lock()
		calls[a]++
		mu.Unlock()
		done <- a
	}
	var waits []time.Duration
	for range 4 {
		waits = append(waits, r.Failed("a", again))
		<-done
	}
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
	r.Succeeded("a")
	if w := r.Failed("a", again); w != time.Millisecond {
		t.Fatalf("after success the wait is %v, want the base again", w)
	}
	<-done
	if r.Failures() != 5 || calls["a"] != 5 {
		t.Fatalf("failures %d, calls %d; want 5 and 5", r.Failures(), calls["a"])
	}
	// one pending retry per actor however many failures
	r2 := &EmbedRetry{Base: time.Hour}
	r2.Failed("b", again)
	r2.Failed("b", again)
	if r2.Retrying() != 1 {
		t.Fatalf("retrying %d, want 1", r2.Retrying())
	}
	r2.Succeeded("b") // embedded by another pass: the retry is not needed
	if r2.Retrying() != 0 {
		t.Fatal("a success left the actor's retry pending")
	}
	r2.Failed("b", again)
	r2.Stop()
	if r2.Retrying() != 0 {
		t.Fatal("Stop left a retry pending")
	}
	r2.Failed("c", again)
	if r2.Retrying() != 0 {
		t.Fatal("a failure after Stop scheduled a retry")
	}
}
