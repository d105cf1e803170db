package pgstate_test

import (
	"context"
	"log"

	"github.com/tendrilai/tendril/internal/pg"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/state/pgstate"
)

// One pool per process, shared with the other stores; the engine on top
// is the same as with files.
func Example() {
	ctx := context.Background()
	pool, err := pg.Open(ctx, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", pg.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	st, err := pgstate.New(ctx, pool, pgstate.Options{AsyncCommit: true}) // applies Migrations()
	if err != nil {
		log.Fatal(err)
	}
	e, err := state.New(st, state.Options{HistoryLimit: 32})
	if err != nil {
		log.Fatal(err)
	}
	ev, err := e.Observe(ctx, "telegram:12345", 1, "thank you, that worked!")
	if err != nil {
		log.Fatal(err)
	}
	log.Println(ev.Stimulus.Category, ev.Level)
}
