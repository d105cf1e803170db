package locomo

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/memory/search"
)

// TestRerankDev cross-validates the learned re-rankers on the dev split
// when LOCOMO_DATA and LOCOMO_RERANK are set.
func TestRerankDev(t *testing.T) {
	path := os.Getenv("LOCOMO_DATA")
	if path == "" || os.Getenv("LOCOMO_RERANK") == "" {
		t.Skip("set LOCOMO_DATA and LOCOMO_RERANK=1 to cross-validate the learned re-ranker on the dev split")
	}
	convs, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	depth := 100
	if d, err := strconv.Atoi(os.Getenv("LOCOMO_RERANK_DEPTH")); err == nil && d > 0 {
		depth = d
	}
	qs := RerankData(convs, search.DefaultParams(), depth)
	if drop := os.Getenv("LOCOMO_RERANK_DROP"); drop != "" {
		dropFeatures(qs, strings.Split(drop, ","))
		fmt.Printf("features dropped (zero): %s\n", drop)
	}
	if os.Getenv("LOCOMO_RERANK") == "all" {
		CrossValidateRerank(qs, depth, "coordinate ascent on the objective, min gain 0.0005", func(tr []RerankQuestion) search.RerankWeights {
			return TrainRerank(tr, 6, 0.0005)
		}).WriteText(os.Stdout)
		for _, l2 := range []float64{0.001, 0.01, 0.1} {
			l2 := l2
			CrossValidateRerank(qs, depth, fmt.Sprintf("pairwise logistic, negatives in the top 30, l2 %g", l2), func(tr []RerankQuestion) search.RerankWeights {
				return TrainPairwise(tr, 30, l2, 300)
			}).WriteText(os.Stdout)
		}
	}
	neg := 100
	if d, err := strconv.Atoi(os.Getenv("LOCOMO_RERANK_NEG")); err == nil && d > 0 {
		neg = d
	}
	var choices []string
	cv := ShippedRerank(qs, depth, func(c PairConfig) { choices = append(choices, c.String()) })
	if neg != depth {
		cv = CrossValidateRerank(qs, depth, fmt.Sprintf("pairwise logistic, negatives in the top %d, l2 chosen by nested leave-one-conversation-out", neg),
			NestedPairwise(neg, 300, RerankL2s, func(l2 float64) { choices = append(choices, fmt.Sprint(l2)) }))
	}
	cv.WriteText(os.Stdout)
	fmt.Printf("chosen per fold (last: all five): %v\n", choices)
	bm, err := Run(context.Background(), convs, Options{Baseline: "bm25"})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("\n[plain BM25, same run] objective %.4f\n", Objective(bm.PerQuestion))
	bm.writeTable(os.Stdout)
}

// TestRerankStoreDev runs the stores' path (sqlitestore) with
// search.LearnedRerank on the dev split beside the default, at the level
// LOCOMO_RERANK_STORE names (events or records).
func TestRerankStoreDev(t *testing.T) {
	path, level := os.Getenv("LOCOMO_DATA"), os.Getenv("LOCOMO_RERANK_STORE")
	if path == "" || level == "" {
		t.Skip("set LOCOMO_DATA and LOCOMO_RERANK_STORE (events or records) to run the learned re-ranker through the store")
	}
	convs, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, on := range []bool{false, true} {
		p := search.DefaultParams()
		if on {
			p.Rerank = search.LearnedRerank()
		}
		o := Options{Level: level, Ranking: &p}
		if level == LevelRecords {
			d := t.TempDir()
			o.Extract = PipelineExtract(d)
		}
		r, err := Run(context.Background(), convs, o)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("rerank %v, level %s: objective %.4f\n", on, level, Objective(r.PerQuestion))
		r.WriteText(os.Stdout)
	}
}

// dropFeatures zeroes the named features (search.FeatureNames) of qs.
func dropFeatures(qs []RerankQuestion, names []string) {
	for _, n := range names {
		f := slices.Index(search.FeatureNames[:], strings.TrimSpace(n))
		if f < 0 {
			continue
		}
		for i := range qs {
			for j := range qs[i].Feats {
				qs[i].Feats[j][f] = 0
			}
		}
	}
}
