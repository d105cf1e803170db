package sqlitestore

import (
	"context"
	"sync"
	"time"
)

// embedWorker embeds new documents in the background: writes name the
// actor, the worker embeds what has no vector yet. One goroutine per
// store, stopped and awaited by Close.
type embedWorker struct {
	mu      sync.Mutex
	pending map[string]bool
	wake    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
}

func (s *Store) startEmbedWorker() {
	ctx, cancel := context.WithCancel(context.Background())
	w := &embedWorker{pending: map[string]bool{}, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	s.emb = w
	go s.embedLoop(w)
}

func (s *Store) stopEmbedWorker() {
	if s.emb == nil {
		return
	}
	s.emb.cancel()
	<-s.emb.done
}

// scheduleEmbed queues actor for background embedding; it never blocks.
func (s *Store) scheduleEmbed(actor string) {
	w := s.emb
	if w == nil {
		return
	}
	w.mu.Lock()
	w.pending[actor] = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// WaitEmbedded blocks until no actor waits for background embedding or
// ctx ends (tests, evaluation, `memory rebuild`).
func (s *Store) WaitEmbedded(ctx context.Context) error {
	for {
		if s.emb == nil {
			return nil
		}
		s.emb.mu.Lock()
		n := len(s.emb.pending)
		s.emb.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (s *Store) embedLoop(w *embedWorker) {
	defer close(w.done)
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.wake:
		}
		for {
			w.mu.Lock()
			var actor string
			for a := range w.pending {
				actor = a
				break
			}
			w.mu.Unlock()
			if actor == "" || w.ctx.Err() != nil {
				break
			}
			s.embedActor(w.ctx, actor)
			w.mu.Lock()
			delete(w.pending, actor)
			w.mu.Unlock()
		}
	}
}

func (s *Store) embedActor(ctx context.Context, actor string) {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed || !s.known(ctx, actor) {
		return
	}
	a, release, err := s.acquire(ctx, actor)
	if err != nil {
		return
	}
	defer release()
	a.wmu.Lock()
	defer a.wmu.Unlock()
	s.embedMissing(ctx, a)
}

// queryEmbedContext is the context of a query's embedding call: at most
// Options.QueryEmbedTimeout (1s) and at most half the time left before
// ctx's deadline.
func (s *Store) queryEmbedContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := s.opts.QueryEmbedTimeout
	if d <= 0 {
		d = time.Second
	}
	if dl, ok := ctx.Deadline(); ok {
		if half := time.Until(dl) / 2; half < d {
			d = half
		}
	}
	return context.WithTimeout(ctx, d)
}
