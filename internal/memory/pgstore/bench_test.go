package pgstore_test

import (
	"fmt"
	"math/rand"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/pgstore"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
	"github.com/tendrilai/tendril/internal/testenv"
)

// benchRecords is n records of one actor (u1) with metadata, long-term and
// episodic namespaces.
func benchRecords(n int) []memory.Record {
	rng := rand.New(rand.NewSource(1))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	out := make([]memory.Record, n)
	for i := range out {
		ns := "/main/u1/long_term/"
		if i%4 == 0 {
			ns = fmt.Sprintf("/main/u1/episodic/s%d/", i%50)
		}
		out[i] = memory.Record{ID: fmt.Sprintf("b-%06d", i), Namespace: ns, Content: sentence(rng, 6+rng.Intn(14)),
			Metadata:  map[string]any{"type": []string{"note", "fact"}[i%2], "plants": []string{words[rng.Intn(10)]}},
			CreatedAt: base.Add(time.Duration(i) * time.Minute)}
	}
	return out
}

var benchQueries = []memory.Query{
	{NamespacePath: "/main/u1/", Text: "organic fertiliser for the fig tree"},
	{NamespacePath: "/main/u1/", Text: "When did Caroline water the basil?"},
	{NamespacePath: "/main/u1/", Text: "토마토 비료"},
	{NamespacePath: "/main/u1/", Text: "compost drainage", Filters: []memory.Filter{{Key: "type", Op: memory.OpEquals, Value: "note"}}},
}

func load(b *testing.B, s memory.Admin, recs []memory.Record) {
	b.Helper()
	for i := 0; i < len(recs); i += 1000 {
		if _, err := s.PutBatch(ctx, recs[i:min(i+1000, len(recs))]); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Prepare(ctx, "u1"); err != nil {
		b.Fatal(err)
	}
}

// report adds p50 and p99 of the per-search latencies (ms).
func report(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

func benchSearch(b *testing.B, s memory.Store, before func(i int)) {
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if before != nil {
			b.StopTimer()
			before(i)
			b.StartTimer()
		}
		t0 := time.Now()
		hits, err := s.Search(ctx, benchQueries[i%len(benchQueries)])
		lat = append(lat, time.Since(t0))
		if err != nil || len(hits) == 0 {
			b.Fatalf("search: %d hits, %v", len(hits), err)
		}
	}
	b.StopTimer()
	report(b, lat)
}

// BenchmarkRetrieval measures one actor's ranked search (topK 50) at 10k
// records (and 100k with TENDRIL_BENCH_100K=1) on SQLite and PostgreSQL
// side by side. "pg" is a warm cache (each search pays the version check);
// "pg-remote-write" has another instance write one event before every
// search, so each search also catches up.
func BenchmarkRetrieval(b *testing.B) {
	sizes := []int{10_000}
	if os.Getenv("TENDRIL_BENCH_100K") == "1" {
		sizes = append(sizes, 100_000)
	}
	for _, n := range sizes {
		recs := benchRecords(n)
		b.Run(fmt.Sprintf("sqlite/n=%d", n), func(b *testing.B) {
			s := openSQLite(b, sqliteOpts())
			load(b, s, recs)
			benchSearch(b, s, nil)
		})
		url := testenv.PostgresSchema(b)
		a := newStore(b, openPool(b, url), pgstore.Options{EventExpiryDays: -1})
		load(b, a, recs)
		b.Run(fmt.Sprintf("pg/n=%d", n), func(b *testing.B) {
			benchSearch(b, a, nil)
		})
		b.Run(fmt.Sprintf("pg-remote-write/n=%d", n), func(b *testing.B) {
			w := newStore(b, openPool(b, url), pgstore.Options{EventExpiryDays: -1})
			benchSearch(b, a, func(i int) {
				if err := w.AppendEvents(ctx, []memory.Event{{ActorID: "u1", SessionID: "bench", Text: "the fig tree " + words[i%len(words)]}}); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(fmt.Sprintf("pg-cold-load/n=%d", n), func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			pool := openPool(b, url)
			for i := 0; i < b.N; i++ {
				c := newStore(b, pool, pgstore.Options{EventExpiryDays: -1}) // an empty cache
				t0 := time.Now()
				if _, err := c.Search(ctx, benchQueries[0]); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			report(b, lat)
		})
	}
}

func sqliteOpts() sqlitestore.Options { return sqlitestore.Options{EventExpiryDays: -1} }
