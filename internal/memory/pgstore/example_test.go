package pgstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/pgstore"
	"github.com/tendrilai/tendril/internal/pg"
)

// The process opens one pool (TENDRIL_DATABASE_URL) and shares it; the
// store migrates its own tables and never closes the pool.
func Example() {
	ctx := context.Background()
	pool, err := pg.Open(ctx, os.Getenv("TENDRIL_DATABASE_URL"), pg.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	st, err := pgstore.New(ctx, pool, pgstore.Options{AgentID: "main"})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	var admin memory.Admin = st // what sqlitestore.Store also is
	hits, err := admin.Search(ctx, memory.Query{NamespacePath: "/main/u1/", Text: "fig tree"})
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range hits {
		fmt.Println(h.Record.Content, h.Explain)
	}
}
