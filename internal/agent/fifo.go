package agent

import (
	"context"
	"sync"
)

// keyedFIFO serialises work per key in arrival order: the second turn on a
// session waits for the first, and waiters are served first come, first
// served (sync.Mutex does not promise FIFO order). Different keys run in
// parallel. Idle keys are removed, so the map holds only active sessions.
type keyedFIFO struct {
	mu     sync.Mutex
	queues map[string]*fifoQueue
}

type fifoQueue struct {
	held    bool
	waiters []chan struct{}
}

func newKeyedFIFO() *keyedFIFO { return &keyedFIFO{queues: map[string]*fifoQueue{}} }

// Lock blocks until key is free and it is this caller's turn. It returns
// ctx.Err() if ctx ends first, without holding the lock.
func (k *keyedFIFO) Lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	q := k.queues[key]
	if q == nil {
		q = &fifoQueue{}
		k.queues[key] = q
	}
	if !q.held {
		q.held = true
		k.mu.Unlock()
		return func() { k.unlock(key) }, nil
	}
	ch := make(chan struct{})
	q.waiters = append(q.waiters, ch)
	k.mu.Unlock()
	select {
	case <-ch:
		return func() { k.unlock(key) }, nil
	case <-ctx.Done():
		k.mu.Lock()
		for i, w := range q.waiters {
			if w == ch {
				q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
				k.mu.Unlock()
				return nil, ctx.Err()
			}
		}
		k.mu.Unlock()
		// The lock was handed to us while we were giving up: pass it on.
		k.unlock(key)
		return nil, ctx.Err()
	}
}

func (k *keyedFIFO) unlock(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	q := k.queues[key]
	if len(q.waiters) == 0 {
		delete(k.queues, key)
		return
	}
	next := q.waiters[0]
	q.waiters = q.waiters[1:]
	close(next) // ownership passes directly; held stays true
}
