package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/memorytest"
	"github.com/tendrilai/tendril/internal/memory/pgstore"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
	"github.com/tendrilai/tendril/internal/pg"
	"github.com/tendrilai/tendril/internal/testenv"
)

var (
	ctx = context.Background()

	_ memory.Admin = (*sqlitestore.Store)(nil) // both backends serve the application layer
	_ memory.Admin = (*pgstore.Store)(nil)
)

// openPool opens a pool on url, closed when the test ends.
func openPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pg.Open(ctx, url, pg.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func newStore(t testing.TB, pool *pgxpool.Pool, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	s, err := pgstore.New(ctx, pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() }) // before the pool closes: stops the embedding worker
	return s
}

func TestConformance(t *testing.T) {
	memorytest.Exercise(t, func(t *testing.T) memory.Store {
		return newStore(t, openPool(t, testenv.PostgresSchema(t)), pgstore.Options{})
	})
}

// TestShared runs the scale-out cases on two stores, each on its own pool,
// over one schema: two instances of tendril serve.
func TestShared(t *testing.T) {
	memorytest.ExerciseShared(t, func(t *testing.T) (memory.Store, memory.Store) {
		url := testenv.PostgresSchema(t)
		return newStore(t, openPool(t, url), pgstore.Options{}), newStore(t, openPool(t, url), pgstore.Options{})
	})
}

func TestUnstorableTextIsRejected(t *testing.T) {
	s := newStore(t, openPool(t, testenv.PostgresSchema(t)), pgstore.Options{})
	ns := "/main/u1/long_term/"
	for _, rec := range []memory.Record{
		{Namespace: ns, Content: "a\x00b"},
		{Namespace: ns, Content: "ok", Metadata: map[string]any{"type": "\xff"}},
		{Namespace: "/main/u\x00/long_term/", Content: "ok"},
	} {
		if _, err := s.Put(ctx, rec); !errors.Is(err, memory.ErrInvalidQuery) {
			t.Errorf("Put %+v: %v, want ErrInvalidQuery", rec, err)
		}
	}
	if err := s.AppendEvents(ctx, []memory.Event{{ActorID: "u1", Text: "x\x00"}}); !errors.Is(err, memory.ErrInvalidQuery) {
		t.Errorf("AppendEvents with NUL: %v, want ErrInvalidQuery", err)
	}
	if err := s.MarkRejected(ctx, "u\x00", "x"); !errors.Is(err, memory.ErrInvalidQuery) {
		t.Errorf("MarkRejected for a NUL actor: %v, want ErrInvalidQuery", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	if _, err := pgstore.New(ctx, nil, pgstore.Options{}); err == nil {
		t.Fatal("New with a nil pool succeeded")
	}
	pool := openPool(t, testenv.PostgresSchema(t))
	_, err := pgstore.New(ctx, pool, pgstore.Options{IndexedKeys: []memory.IndexedKey{{Name: "createdAt"}}})
	if !errors.Is(err, memory.ErrInvalidFilter) {
		t.Fatalf("reserved indexed key: %v, want ErrInvalidFilter", err)
	}
	// A second store on the same database migrates nothing and works.
	a := newStore(t, pool, pgstore.Options{})
	b := newStore(t, pool, pgstore.Options{})
	if _, err := a.Put(ctx, memory.Record{Namespace: "/main/u1/long_term/", Content: "basil"}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Search(ctx, memory.Query{NamespacePath: "/main/u1/", Text: "basil"}); err != nil || len(got) != 1 {
		t.Fatalf("second store: %v, %v", got, err)
	}
	_, pending, err := pg.Status(ctx, pool, pgstore.Migrations())
	if err != nil || len(pending) != 0 {
		t.Fatalf("pending migrations %v, %v", pending, err)
	}
}
