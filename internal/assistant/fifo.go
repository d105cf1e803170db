package assistant

import (
	"context"
	"sync"
)

// fifo serialises work per key in arrival order (a mutex does not promise
// order): messages that waited behind a paused turn run in the order they
// came.
type fifo struct {
	mu sync.Mutex
	q  map[string][]chan struct{}
}

// lock waits for key's earlier holders and returns the unlock func.
func (f *fifo) lock(ctx context.Context, key string) (func(), error) {
	return f.lockOr(ctx, key, nil)
}

// lockOr is lock that first calls waiting, when set, if the caller has
// to wait for an earlier holder.
func (f *fifo) lockOr(ctx context.Context, key string, waiting func()) (func(), error) {
	ch := make(chan struct{})
	f.mu.Lock()
	if f.q == nil {
		f.q = map[string][]chan struct{}{}
	}
	f.q[key] = append(f.q[key], ch)
	first := len(f.q[key]) == 1
	f.mu.Unlock()
	unlock := func() { f.pass(key) }
	if first {
		return unlock, nil
	}
	if waiting != nil {
		waiting()
	}
	select {
	case <-ch:
		return unlock, nil
	case <-ctx.Done():
		f.mu.Lock()
		q := f.q[key]
		for i, c := range q {
			if c == ch && i > 0 {
				f.q[key] = append(q[:i:i], q[i+1:]...)
				f.mu.Unlock()
				return nil, ctx.Err()
			}
		}
		f.mu.Unlock()
		// Became the head meanwhile: hand the turn on.
		f.pass(key)
		return nil, ctx.Err()
	}
}

// pass removes the head of key's queue and wakes the next.
func (f *fifo) pass(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.q[key][1:]
	if len(q) == 0 {
		delete(f.q, key)
		return
	}
	f.q[key] = q
	close(q[0])
}
