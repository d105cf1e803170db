package sqlitestore

import (
	"testing"

	"github.com/tendrilai/tendril/internal/memory/search"
)

// TestScoreCold: the cold rows are ranked by BM25 over the warm index's
// analysis: a row holding the rarer word outranks one holding only the
// common one, more occurrences score higher (saturating), a shorter row
// beats a longer one with the same matches, stems match ("watering" for
// "watered"), the rarer word weighs more (idf), Korean words match through their bigrams, and a row the
// analysis finds no query word in is dropped.
func TestScoreCold(t *testing.T) {
	an := search.DefaultParams().Analyzer
	k1 := search.DefaultParams().K1
	ids := []string{"common", "rare", "twice", "long", "stem", "none", "ko"}
	texts := []string{
		"(2024-01-01) user: my garden is big",
		"(2024-01-01) user: my persimmon tree",
		"(2024-01-01) user: persimmon persimmon jam",
		"(2024-01-01) user: persimmon and then many other words about nothing in particular at all today",
		"(2024-01-01) user: I was watering the garden",
		"(2024-01-01) user: nothing to see",
		"(2024-01-01) user: 저는 유기농 비료만 사용해요",
	}
	rows := scoreCold(an, k1, []string{"persimmon", "garden", "watered", "비료만"}, ids, texts, 1000)
	rank := map[string]int{}
	score := map[string]float64{}
	for i, r := range rows {
		rank[r.id], score[r.id] = i, r.score
	}
	if _, ok := rank["none"]; ok {
		t.Fatalf("a row without a query word was kept: %+v", rows)
	}
	for _, id := range []string{"common", "rare", "twice", "long", "stem", "ko"} {
		if _, ok := rank[id]; !ok {
			t.Fatalf("%s not scored: %+v", id, rows)
		}
	}
	if !(score["twice"] > score["rare"] && score["rare"] > score["long"]) {
		t.Errorf("tf and length: twice %.3f, rare %.3f, long %.3f", score["twice"], score["rare"], score["long"])
	}
	if score["twice"] >= 2*score["rare"] {
		t.Errorf("tf does not saturate: twice %.3f, rare %.3f", score["twice"], score["rare"])
	}
	// idf: with the same tf and length, the word in fewer rows scores more
	idf := scoreCold(an, k1, []string{"alpha", "beta"}, []string{"a", "b1", "b2", "b3"},
		[]string{"alpha one", "beta one", "beta two", "beta six"}, 4)
	if len(idf) != 4 || idf[0].id != "a" || idf[0].score <= idf[1].score {
		t.Errorf("idf: %+v, want the alpha row first", idf)
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].score > rows[i-1].score {
			t.Fatalf("not best first: %+v", rows)
		}
	}
	if got := scoreCold(an, k1, []string{"persimmon"}, nil, nil, 10); got != nil {
		t.Fatalf("no rows: %+v", got)
	}
}
