package pgledger_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/approval/approvaltest"
	"github.com/tendrilai/tendril/internal/approval/pgledger"
	"github.com/tendrilai/tendril/internal/pg"
	"github.com/tendrilai/tendril/internal/testenv"
)

// pool opens a pool of its own on url (one per instance), closed at test end.
func pool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	p, err := pg.Open(context.Background(), url, pg.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func openGate(t testing.TB, url string, opts approval.Options) *approval.Gate {
	t.Helper()
	g, err := pgledger.OpenGate(context.Background(), pool(t, url), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// tamper rewrites the row's line so it still parses but no longer matches
// its hash.
func tamper(t testing.TB, db *pgxpool.Pool, seq int64) {
	t.Helper()
	tag, err := db.Exec(context.Background(),
		`UPDATE approval_ledger SET line = replace(line, '"type":"', '"type":"x') WHERE seq = $1`, seq)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("tamper seq %d: %v (%d rows)", seq, err, tag.RowsAffected())
	}
}

func TestPostgresLedgerConformance(t *testing.T) {
	approvaltest.Exercise(t, func(t *testing.T) approvaltest.Ledger {
		url := testenv.PostgresSchema(t)
		admin := pool(t, url)
		return approvaltest.Ledger{
			Open:   func(t *testing.T, opts approval.Options) *approval.Gate { return openGate(t, url, opts) },
			Tamper: func(t *testing.T, seq int64) { tamper(t, admin, seq) },
		}
	})
}
