package pgledger_test

import (
	"context"
	"log/slog"
	"os"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/approval/pgledger"
	"github.com/tendrilai/tendril/internal/pg"
)

// How a server wires the gate on PostgreSQL: one pool for the process,
// the gate over it, OnDecision, then Watch on a goroutine the server owns,
// cancelled before the gate is closed. (Not run: it needs a database.)
func ExampleOpenGate() {
	ctx := context.Background()
	pool, err := pg.Open(ctx, os.Getenv("TENDRIL_DATABASE_URL"), pg.Options{})
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	gate, err := pgledger.OpenGate(ctx, pool, approval.Options{By: "serve"})
	if err != nil {
		panic(err)
	}
	defer gate.Close()
	gate.OnDecision(func(r approval.Request, approved bool) {
		// Fires on every instance for every decision: resume through a
		// job unique per request ID, so one instance resumes it.
		slog.Info("decided", "request", r.ID, "approved", approved)
	})

	watchCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		gate.Watch(watchCtx, approval.WatchOptions{
			Tick:    func(ctx context.Context) { /* close expired paused turns */ },
			OnError: func(err error) { slog.Warn("approval watch", "err", err) },
		})
	}()
	// ... serve ...
	stop()
	<-done
}
