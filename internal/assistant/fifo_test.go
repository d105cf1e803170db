package assistant

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Waiters on one key get it in arrival order; a cancelled waiter leaves
// the queue without blocking the others.
func TestFIFOKeepsArrivalOrder(t *testing.T) {
	var f fifo
	ctx := context.Background()
	first, err := f.lock(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	cctx, cancel := context.WithCancel(ctx)
	for i := range 6 {
		wg.Add(1)
		c := ctx
		if i == 2 {
			c = cctx
		}
		go func() {
			defer wg.Done()
			unlock, err := f.lock(c, "s")
			if err != nil {
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			unlock()
		}()
		// Enqueue in a known order.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			f.mu.Lock()
			n := len(f.q["s"])
			f.mu.Unlock()
			if n == i+2 {
				break
			}
		}
	}
	cancel()
	time.Sleep(10 * time.Millisecond)
	first()
	wg.Wait()
	want := []int{0, 1, 3, 4, 5}
	if len(order) != len(want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
}
