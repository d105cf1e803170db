package pgstore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/jsonl"
	"github.com/tendrilai/tendril/internal/session/pgstore"
	"github.com/tendrilai/tendril/internal/testenv"
)

// build fills k with n nodes: a main chain of short messages with a 3-node
// side branch off every 100th main node (so a walk that leaked siblings
// would show), ending with the active leaf on the main chain. It returns
// the leaf.
func build(b testing.TB, st session.Store, k session.Key, n int) string {
	b.Helper()
	parent, made := "", 0
	for made < n {
		batch := make([]session.Node, 0, 1000)
		for len(batch) < 1000 && made < n {
			id := fmt.Sprintf("m%08d", made)
			batch = append(batch, session.Node{ID: id, ParentID: parent, Role: []string{"user", "assistant"}[made%2],
				Text: "a short chat message of about sixty characters, give or take", Timestamp: 1710000000})
			made++
			parent = id
			if made%100 == 50 && made+3 < n && len(batch) < 990 {
				side := id
				for j := 0; j < 3; j++ {
					sid := fmt.Sprintf("s%08d-%d", made, j)
					batch = append(batch, session.Node{ID: sid, ParentID: side, Role: "user", Text: "a sibling branch that must not leak", Timestamp: 1710000000})
					side = sid
					made++
				}
				// Back on the main chain before the batch ends.
				id = fmt.Sprintf("m%08d", made)
				batch = append(batch, session.Node{ID: id, ParentID: parent, Role: "assistant", Text: "back on the main chain", Timestamp: 1710000000})
				made++
				parent = id
			}
		}
		if err := st.Append(ctx, k, batch...); err != nil {
			b.Fatal(err)
		}
	}
	return parent
}

func benchTurn(i int, parent string) []session.Node {
	u := fmt.Sprintf("u%08d", i)
	return []session.Node{
		{ID: u, ParentID: parent, Role: "user", Text: strings.Repeat("how should I water the fig tree? ", 3), Timestamp: 1710000000},
		{ID: fmt.Sprintf("a%08d", i), ParentID: u, Role: "assistant", Text: strings.Repeat("Water deeply once a week and let the top soil dry. ", 10), Timestamp: 1710000001},
	}
}

// BenchmarkBackends measures PostgreSQL beside the JSONL store (FsyncAlways,
// the embedded default) in the same run, on sessions of 1,000 and 100,000
// nodes: Path of 50 nodes from the active leaf, Leaf, and appending a turn
// (two nodes, one durable commit or fsync) at the active leaf. The paired
// case interleaves, in every iteration, the two stores' appends (each with
// its Leaf read, as agent.appendNodes does) and a floor, a bare autocommit
// INSERT of the same two node documents, so the noise of a shared machine
// hits all alike; it reports pg-ns/op, jsonl-ns/op and
// pg-insert-floor-ns/op.
//
//	go test -run '^$' -bench Backends -benchtime 500x ./internal/session/pgstore/
func BenchmarkBackends(b *testing.B) {
	k := session.Key{AgentID: "main", Channel: "telegram", ID: "bench"}
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			pool := openPool(b, testenv.PostgresSchema(b))
			pgs, err := pgstore.New(ctx, pool)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `CREATE TABLE floor (id BIGSERIAL PRIMARY KEY, node JSON NOT NULL)`); err != nil {
				b.Fatal(err)
			}
			defer pgs.Close()
			js, err := jsonl.Open(b.TempDir(), jsonl.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer js.Close()
			stores := []struct {
				name string
				st   session.Store
			}{{"pg", pgs}, {"jsonl-always", js}}
			for _, s := range stores {
				build(b, s.st, k, n)
			}
			turn := 0 // node IDs stay unique across runs (-count)
			appendTurn := func(st session.Store) {
				parent, err := st.Leaf(ctx, k)
				if err != nil {
					b.Fatal(err)
				}
				if err := st.Append(ctx, k, benchTurn(turn, parent)...); err != nil {
					b.Fatal(err)
				}
			}
			for _, s := range stores {
				b.Run("op=path50/store="+s.name, func(b *testing.B) {
					leaf, _ := s.st.Leaf(ctx, k)
					for b.Loop() {
						p, err := s.st.Path(ctx, k, leaf, 50)
						if err != nil || len(p) != 50 || p[49].ID != leaf {
							b.Fatalf("%d nodes, %v", len(p), err)
						}
					}
				})
				b.Run("op=leaf/store="+s.name, func(b *testing.B) {
					for b.Loop() {
						if _, err := s.st.Leaf(ctx, k); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
			b.Run("op=append-turn-paired", func(b *testing.B) {
				var pgT, jsT, floorT time.Duration
				for b.Loop() {
					t0 := time.Now()
					appendTurn(pgs)
					t1 := time.Now()
					appendTurn(js)
					t2 := time.Now()
					// The floor: the same two node documents in one
					// autocommit INSERT into a bare table, no leaf read.
					var docs []string
					for _, nd := range benchTurn(turn, "x") {
						d, _ := session.EncodeNode(nd)
						docs = append(docs, string(d))
					}
					if _, err := pool.Exec(ctx, `INSERT INTO floor (node) SELECT unnest($1::text[])::json`, docs); err != nil {
						b.Fatal(err)
					}
					floorT += time.Since(t2)
					jsT += t2.Sub(t1)
					pgT += t1.Sub(t0)
					turn++
				}
				b.ReportMetric(float64(pgT.Nanoseconds())/float64(b.N), "pg-ns/op")
				b.ReportMetric(float64(jsT.Nanoseconds())/float64(b.N), "jsonl-ns/op")
				b.ReportMetric(float64(floorT.Nanoseconds())/float64(b.N), "pg-insert-floor-ns/op")
			})
		})
	}
}
