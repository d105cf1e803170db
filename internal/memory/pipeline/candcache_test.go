package pipeline

import (
	"strconv"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

func candRecs() []memory.Record {
	return []memory.Record{
		{ID: "r1", Content: "the user grows basil on the balcony", Metadata: map[string]any{"topic": "basil"}},
		{ID: "r2", Content: "the user prefers organic fertiliser", Metadata: map[string]any{"topic": "fertiliser"}},
	}
}

// TestCandCacheReusesOnlyAnUnchangedListing: a kept index is handed back
// when the listing is the same, with the listing's records (fresh fields),
// and any change of ID, content, topic or length gives a new index that
// sees the change.
func TestCandCacheReusesOnlyAnUnchangedListing(t *testing.T) {
	var c candCache
	ix := c.take("a\x00ns", candRecs())
	c.keep("a\x00ns", ix)

	same := candRecs()
	same[0].Sources = []string{"e9"} // a field the postings do not hold
	if got := c.take("a\x00ns", same); got != ix {
		t.Fatal("an unchanged listing did not reuse the kept index")
	} else if len(got.recs[0].Sources) != 1 {
		t.Fatal("a reused index kept its old copy of the records")
	}
	if got := c.take("a\x00ns", candRecs()); got == ix {
		t.Fatal("an index was handed out twice (it is taken out while in use)")
	}

	changes := map[string]func([]memory.Record) []memory.Record{
		"content": func(r []memory.Record) []memory.Record {
			r[1].Content = "the user prefers chemical fertiliser"
			return r
		},
		"topic":   func(r []memory.Record) []memory.Record { r[0].Metadata = map[string]any{"topic": "herbs"}; return r },
		"id":      func(r []memory.Record) []memory.Record { r[0].ID = "r0"; return r },
		"removed": func(r []memory.Record) []memory.Record { return r[1:] },
		"added": func(r []memory.Record) []memory.Record {
			return append(r, memory.Record{ID: "r3", Content: "the user walks the dog at dawn"})
		},
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			var c candCache
			ix := c.take("k", candRecs())
			c.keep("k", ix)
			recs := change(candRecs())
			got := c.take("k", recs)
			if got == ix {
				t.Fatal("a changed listing reused the kept index")
			}
			if len(got.recs) != len(recs) {
				t.Fatalf("new index holds %d records, listing %d", len(got.recs), len(recs))
			}
			for i := range recs {
				if got.recs[i].ID != recs[i].ID || got.recs[i].Content != recs[i].Content {
					t.Fatalf("record %d = %+v, want %+v", i, got.recs[i], recs[i])
				}
			}
		})
	}
}

// TestCandCacheDropsMostlyStaleIndexes: an index whose records were
// replaced in place more often than it holds records is not kept.
func TestCandCacheDropsMostlyStaleIndexes(t *testing.T) {
	var c candCache
	ix := c.take("k", candRecs())
	for i := 0; i < 3; i++ {
		r := ix.recs[0]
		r.Content += " again"
		ix.put(r)
	}
	c.keep("k", ix)
	if got := c.take("k", ix.recs); got == ix {
		t.Fatal("a mostly stale index was kept")
	}
}

// TestCandCacheBounded: the kept indexes never hold more than
// maxCachedCandRecords records together.
func TestCandCacheBounded(t *testing.T) {
	var c candCache
	recs := make([]memory.Record, 1000)
	for i := range recs {
		recs[i] = memory.Record{ID: "r" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676)), Content: "x"}
	}
	for n := 0; n < 50; n++ {
		key := string(rune('A' + n))
		c.keep(key, c.take(key, recs))
		if c.total > maxCachedCandRecords {
			t.Fatalf("after %d namespaces the cache holds %d records", n+1, c.total)
		}
		sum := 0
		for _, k := range c.m {
			sum += len(k.ix.recs)
		}
		if sum != c.total {
			t.Fatalf("total %d, indexes hold %d", c.total, sum)
		}
	}
}

// TestCandCacheKeepsItsWorkingSet: more namespaces extracting in turn
// than fit (50 of 1,000 records against room for 4) still get hits: the
// kept indexes stay while in use and a newcomer is not kept, so every
// round after the first reuses the same four (starting over gave none);
// once those fall idle for candIdleFor, newcomers take their room; and an
// index that alone fills the cache is kept for its namespace round after
// round.
func TestCandCacheKeepsItsWorkingSet(t *testing.T) {
	now := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	c := candCache{now: func() time.Time { return now }}
	recs := make([]memory.Record, 1000)
	for i := range recs {
		recs[i] = memory.Record{ID: "r" + strconv.Itoa(i), Content: "x" + strconv.Itoa(i)}
	}
	key := func(n int) string { return "ns" + strconv.Itoa(n) }
	for round := 0; round < 3; round++ {
		h0 := c.hits
		for n := 0; n < 50; n++ {
			c.keep(key(n), c.take(key(n), recs))
			now = now.Add(100 * time.Millisecond)
			if c.total > maxCachedCandRecords {
				t.Fatalf("the cache holds %d records", c.total)
			}
		}
		want := 0
		if round > 0 {
			want = maxCachedCandRecords / len(recs)
		}
		if got := c.hits - h0; got != want {
			t.Fatalf("round %d: %d hits, want %d", round, got, want)
		}
	}
	for n := 0; n < 4; n++ {
		if c.m[key(n)] == nil {
			t.Fatalf("%s, kept first and in use since, was dropped", key(n))
		}
	}
	now = now.Add(candIdleFor)
	c.keep(key(99), c.take(key(99), recs))
	if c.m[key(99)] == nil || c.total > maxCachedCandRecords {
		t.Fatalf("a newcomer after the kept ones fell idle: kept %v, total %d", c.m[key(99)] != nil, c.total)
	}

	var one candCache
	big := make([]memory.Record, maxCachedCandRecords)
	for i := range big {
		big[i] = memory.Record{ID: "b" + strconv.Itoa(i), Content: "y" + strconv.Itoa(i)}
	}
	for i := 0; i < 3; i++ {
		one.keep("solo", one.take("solo", big))
	}
	if one.hits != 2 {
		t.Fatalf("one namespace filling the cache: %d hits in 3 jobs, want 2", one.hits)
	}
}
