package memory

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkFilterHits filters a turn's 50 hits (the default top-k) drawn
// from conversational text, as every turn does before rendering the
// memory block. The same hits recur turn after turn, as they do for an
// actor asking about one topic.
func BenchmarkFilterHits(b *testing.B) {
	texts := []string{
		"I only use organic fertiliser on my roses and tomatoes",
		"We went hiking in the mountains last weekend with the kids",
		"My sister Melanie is painting a sunset over the lake",
		"The fig tree in the raised bed has yellow leaves again",
		"I'm planning a trip to Seoul in May with my partner",
	}
	var hits []Hit
	for i := range 50 {
		hits = append(hits, Hit{Record: Record{ID: fmt.Sprint("r", i), Strategy: StrategySemantic,
			Content:   fmt.Sprintf("%s (note %d)", texts[i%len(texts)], i),
			UpdatedAt: time.Unix(int64(i), 0)}})
	}
	b.ReportAllocs()
	for b.Loop() {
		FilterHits(hits)
	}
}
