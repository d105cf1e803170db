package memindex

import (
	"sync"
	"sync/atomic"
	"time"
)

// Embedding retry defaults: the first retry of an actor whose embedding
// call failed comes after RetryBase, each further failure doubles the
// wait up to RetryMax.
const (
	RetryBase = 2 * time.Second
	RetryMax  = 5 * time.Minute
)

// EmbedRetry re-queues, with exponential back-off per actor, the actors
// whose background embedding call failed, so that an embedder outage
// leaves no document BM25F-only once the embedder answers again (before,
// such documents waited for the actor's next write or load). Both stores'
// embedding workers use it. The zero value is ready to use (RetryBase,
// RetryMax); it is safe for concurrent use.
type EmbedRetry struct {
	Base, Max time.Duration // 0: RetryBase, RetryMax

	failures atomic.Uint64 // failed passes since start

	mu      sync.Mutex
	fails   map[string]int         // consecutive failed passes per actor
	timers  map[string]*time.Timer // pending retries
	stopped bool
}

// Failed notes a failed pass of actor and calls again(actor) after the
// actor's back-off (Base × 2^(failures−1), at most Max), unless a retry
// is already pending or Stop was called. It returns the wait.
func (r *EmbedRetry) Failed(actor string, again func(actor string)) time.Duration {
	r.failures.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return 0
	}
	if r.fails == nil {
		r.fails, r.timers = map[string]int{}, map[string]*time.Timer{}
	}
	r.fails[actor]++
	base, most := r.Base, r.Max
	if base <= 0 {
		base = RetryBase
	}
	if most <= 0 {
		most = RetryMax
	}
	wait := base
	for i := 1; i < r.fails[actor] && wait < most; i++ {
		wait *= 2
	}
	wait = min(wait, most)
	if _, ok := r.timers[actor]; ok {
		return wait
	}
	r.timers[actor] = time.AfterFunc(wait, func() {
		r.mu.Lock()
		delete(r.timers, actor)
		stopped := r.stopped
		r.mu.Unlock()
		if !stopped {
			again(actor)
		}
	})
	return wait
}

// Succeeded resets actor's back-off after a pass whose calls all
// succeeded, and cancels its pending retry (a write embedded it first).
func (r *EmbedRetry) Succeeded(actor string) {
	r.mu.Lock()
	delete(r.fails, actor)
	if t, ok := r.timers[actor]; ok {
		t.Stop()
		delete(r.timers, actor)
	}
	r.mu.Unlock()
}

// Failures counts the failed passes since start (for metrics).
func (r *EmbedRetry) Failures() uint64 { return r.failures.Load() }

// Retrying counts the actors waiting for a retry.
func (r *EmbedRetry) Retrying() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.timers)
}

// Stop cancels every pending retry; later failures schedule none.
func (r *EmbedRetry) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	for a, t := range r.timers {
		t.Stop()
		delete(r.timers, a)
	}
}
