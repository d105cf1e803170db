package pipeline

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/tendrilai/tendril/internal/memory"
)

// benchCandRecs returns n records of varied, realistic lengths (a topic
// each), as a consolidation listing holds them.
func benchCandRecs(n int) []memory.Record {
	texts := []string{
		"the user grows basil and thyme on the south-facing balcony",
		"Caroline went to the LGBTQ support group on 7 May 2023 and felt welcome",
		"the user prefers organic fertiliser and never uses chemical ones",
		"Melanie signed up for a pottery class and painted a lake at sunrise",
		"the user's sister lives in Busan and visits every summer",
	}
	out := make([]memory.Record, n)
	for i := range out {
		out[i] = memory.Record{ID: "r" + strconv.Itoa(i), Content: texts[i%len(texts)] + " " + strconv.Itoa(i),
			Strategy: memory.StrategySemantic, Status: memory.StatusActive,
			Metadata: map[string]any{"topic": "t" + strconv.Itoa(i%40)}}
	}
	return out
}

// BenchmarkCandIndex compares what one extraction job pays for its
// namespace's candidate index: building it from the listing (a miss of
// candCache) against reusing a kept one (a hit: the listing compared
// position by position and copied in).
func BenchmarkCandIndex(b *testing.B) {
	for _, n := range []int{100, 300, 1000, 3000} {
		recs := benchCandRecs(n)
		b.Run(fmt.Sprintf("build/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				newCandIndex(recs)
			}
		})
		b.Run(fmt.Sprintf("reuse/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var c candCache
			c.keep("k", newCandIndex(recs))
			for range b.N {
				c.keep("k", c.take("k", recs))
			}
		})
	}
}
