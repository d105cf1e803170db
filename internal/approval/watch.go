package approval

import (
	"context"
	"strconv"
	"time"
)

// WatchOptions configure Gate.Watch. Zero fields take defaults.
type WatchOptions struct {
	// Poll is the interval between Refresh calls when nothing is notified
	// (every interval, also with notifications: it counts toward the
	// periodic full verification and drives Tick); default 1 s.
	Poll time.Duration
	// Retry is how long Watch waits before listening again after the
	// listening connection failed; it polls meanwhile. Default 5 s.
	Retry time.Duration
	// Tick, when set, runs after each Poll-interval Refresh on Watch's
	// goroutine (the assistant closes expired paused turns there).
	Tick func(ctx context.Context)
	// OnError receives Refresh and listening errors (for logging); nil
	// drops them. Watch never stops on them.
	OnError func(error)
	// Listening, when set, is called each time the log starts listening
	// (tests wait for it; never called for the file backend).
	Listening func()
}

// Watch keeps the gate current until ctx ends, and returns then: it calls
// Refresh every opts.Poll and, when the gate's Log is a Notifier
// (PostgreSQL), also on every notification of another process's append,
// so a decision made elsewhere reaches OnDecision within a round trip
// instead of a poll. A notification for a seq the gate has already
// applied is skipped. If listening fails Watch keeps polling and listens
// again after opts.Retry. The file backend only polls. Run it on one
// goroutine the caller owns; it returns ctx's error.
func (g *Gate) Watch(ctx context.Context, opts WatchOptions) error {
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.Retry <= 0 {
		opts.Retry = 5 * time.Second
	}
	report := func(err error) {
		if err != nil && ctx.Err() == nil && opts.OnError != nil {
			opts.OnError(err)
		}
	}
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	if n, ok := g.log.(Notifier); ok {
		go func() {
			defer close(done)
			g.listen(ctx, n, opts, wake, report)
		}()
	} else {
		close(done)
	}
	defer func() { <-done }()
	t := time.NewTicker(opts.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
			report(g.refresh(ctx, false))
		case <-t.C:
			report(g.refresh(ctx, true))
			if opts.Tick != nil {
				opts.Tick(ctx)
			}
		}
	}
}

// listen runs n.Listen until ctx ends, re-listening after failures, and
// wakes the watch loop for every notification that may be news.
func (g *Gate) listen(ctx context.Context, n Notifier, opts WatchOptions, wake chan<- struct{}, report func(error)) {
	for {
		ready := func() {
			// Appends between the last refresh and LISTEN would be missed.
			select {
			case wake <- struct{}{}:
			default:
			}
			if opts.Listening != nil {
				opts.Listening()
			}
		}
		err := n.Listen(ctx, ready, func(payload string) {
			if seq, err := strconv.ParseInt(payload, 10, 64); err == nil && seq <= g.seenSeq() {
				return // our own append, or one already applied
			}
			select {
			case wake <- struct{}{}:
			default: // a refresh is already due; it will see this append too
			}
		})
		if ctx.Err() != nil {
			return
		}
		report(err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(opts.Retry):
		}
	}
}

// seenSeq is the seq of the last entry the gate has applied.
func (g *Gate) seenSeq() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.st == nil || g.stale {
		return 0
	}
	return g.st.seq
}
