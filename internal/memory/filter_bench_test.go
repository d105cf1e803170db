package memory

import (
	"fmt"
	randv1 "math/rand"
	"math/rand/v2"
	"strings"
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

// BenchmarkFilterHitsTurn filters hits shaped like a long-running actor's
// turn in the soak (cmd/tendril-soak): 30 explicit records and 70
// distinct conversational events of Zipf-distributed words, so few are
// dropped early. "pairwise" is the filter before word hashes
// (commonWords: strings merged), measured beside it; "assemble50" is
// the turn's call (Assemble, top-k 50: no dropped list, stops at 50 kept).
func BenchmarkFilterHitsTurn(b *testing.B) {
	// Zipf-distributed words over a 5,000-word vocabulary, like the
	// content words of conversation (a few frequent, most rare).
	words := make([]string, 5000)
	for i := range words {
		words[i] = fmt.Sprintf("w%04dx", i)
	}
	words[0], words[1], words[2] = "caroline", "melanie", "painting"
	zipf := randv1.NewZipf(randv1.New(randv1.NewSource(7)), 1.1, 1, uint64(len(words)-1))
	rng := rand.New(rand.NewPCG(7, 7))
	var hits []Hit
	for i := range 100 {
		var w []string
		for range 8 + rng.IntN(10) {
			w = append(w, words[zipf.Uint64()])
		}
		st := StrategyEpisodic
		content := fmt.Sprintf("(2023-05-%02d) Caroline: %s %d", 1+i%28, strings.Join(w, " "), i)
		if i < 30 {
			st = []Strategy{StrategyUserPreference, StrategyProcedural}[i%2]
			content = "User " + strings.Join(w[:5], " ")
		}
		hits = append(hits, Hit{Record: Record{ID: fmt.Sprint("r", i), Strategy: st, Content: content}})
	}
	for _, v := range []struct {
		name string
		f    func([]Hit) ([]Hit, []Dropped)
	}{{"hashed", FilterHits}, {"pairwise", filterPairwise}, {"assemble50", func(h []Hit) ([]Hit, []Dropped) {
		return Assemble(h, 50), nil
	}}} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v.f(hits)
			}
		})
	}
}

// BenchmarkRenderLine renders a turn's 50 hits as block lines (their
// white space already folded, as stored records are), with foldSpace and
// with the strings.Fields and Join it replaced, in one run.
func BenchmarkRenderLine(b *testing.B) {
	var hits []Hit
	for i := range 50 {
		hits = append(hits, Hit{Record: Record{ID: fmt.Sprint("r", i), Strategy: StrategyEpisodic,
			Content: fmt.Sprintf("(2023-05-%02d) Caroline: I went to a LGBTQ support group yesterday and it was so powerful, note %d", 1+i%28, i)}})
	}
	for _, v := range []struct {
		name string
		fold func(string) string
	}{{"foldSpace", foldSpace}, {"fields", func(s string) string { return strings.Join(strings.Fields(s), " ") }}} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, h := range hits {
					_ = "- [Inferred] " + v.fold(h.Record.Content) + "\n"
				}
			}
		})
	}
}
