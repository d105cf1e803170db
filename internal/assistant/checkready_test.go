package assistant

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// TestCheckReady: the readiness probe's check pings the database every
// time, even right after a good ping that Ready trusts for 5 s; its error
// wraps ErrNotReady and keeps pgx's error in the chain (the HTTP layers
// recognise it and keep its connection details out of responses); a
// failed probe makes the next turn's Ready ping again instead of trusting
// the earlier success; and from BeginShutdown on it says shutting down.
func TestCheckReady(t *testing.T) {
	a := openTestApp(t, modeltest.NewOpenAI(t))
	ctx := context.Background()
	if err := a.CheckReady(ctx); err != nil {
		t.Fatalf("embedded stores: %v", err)
	}

	// A database that refuses connections (the pool dials lazily).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	pool, err := pgxpool.New(ctx, "postgres://tendril@"+addr+"/gone?sslmode=disable&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	a.db = pool
	t.Cleanup(func() { a.db = nil; pool.Close() })
	a.dbCheckedAt.Store(time.Now().UnixNano()) // as if a ping just succeeded

	if err := a.Ready(ctx); err != nil {
		t.Fatalf("Ready within 5 s of a good ping: %v, want it trusted", err)
	}
	err = a.CheckReady(ctx)
	var ce *pgconn.ConnectError
	if !errors.Is(err, ErrNotReady) || !errors.As(err, &ce) || !strings.Contains(err.Error(), "database: ") {
		t.Fatalf("CheckReady with the database gone: %v, want ErrNotReady naming the database and wrapping *pgconn.ConnectError", err)
	}
	if err := a.Ready(ctx); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Ready after a failed probe: %v, want ErrNotReady", err)
	}

	a.db = nil
	a.BeginShutdown()
	if err := a.CheckReady(ctx); !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("CheckReady after BeginShutdown: %v, want ErrNotReady: shutting down", err)
	}
}
