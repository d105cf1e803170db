package pgstate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/pg"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/state/pgstate"
	"github.com/tendrilai/tendril/internal/testenv"
)

var benchMessages = []string{"this is useless, it failed again", "thank you, that worked!", "I'm not sure which one",
	"hello", "고마워 정말", "짜증나 또 실패", "we did it!!", "hmm, no idea"}

// BenchmarkApply measures Observe latency on PostgreSQL with the server's
// history limit (32), history full, plus the WAL the server wrote per
// Apply (server-wide: concurrent activity on the server inflates it).
// Compare BenchmarkApplyFile in internal/state.
//
//	go test -run '^$' -bench . -benchtime 2000x ./internal/state/pgstate/
func BenchmarkApply(b *testing.B) {
	for _, async := range []bool{false, true} {
		b.Run(fmt.Sprintf("async-commit=%v", async), func(b *testing.B) { benchApply(b, pgstate.Options{AsyncCommit: async}) })
	}
}

func benchApply(b *testing.B, opts pgstate.Options) {
	ctx := context.Background()
	pool, err := pg.Open(ctx, testenv.PostgresSchema(b), pg.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	st, err := pgstate.New(ctx, pool, opts)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e, err := state.New(st, state.Options{Now: func() time.Time { return now }, HistoryLimit: 32})
	if err != nil {
		b.Fatal(err)
	}
	turn := 0
	next := func() {
		turn++
		now = now.Add(time.Minute)
		if _, err := e.Observe(ctx, "telegram:12345", turn, benchMessages[turn%len(benchMessages)]); err != nil {
			b.Fatal(err)
		}
	}
	for range 64 {
		next()
	}
	wal := func() (lsn string) {
		if err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
			b.Fatal(err)
		}
		return lsn
	}
	w0 := wal()
	b.ResetTimer()
	for range b.N {
		next()
	}
	b.StopTimer()
	var walBytes float64
	if err := pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::float8`, wal(), w0).Scan(&walBytes); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(walBytes/float64(b.N), "wal-bytes/op")
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM state_changes`).Scan(&rows); err != nil {
		b.Fatal(err)
	}
	if rows > 32 {
		b.Fatalf("state_changes holds %d rows, want ≤ 32", rows)
	}
}
