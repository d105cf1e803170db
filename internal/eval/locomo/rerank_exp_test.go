package locomo

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/memory/search"
)

// TestRerankExp cross-validates re-ranker variants on the dev split
// (LOCOMO_DATA, LOCOMO_RERANK_EXP=1): each variant is a nested choice
// (NestedPairs) among the configurations of LOCOMO_RERANK_GAINS (comma
// separated: none, ndcg, top10), RerankL2s and the feature sets of
// LOCOMO_RERANK_SETS (semicolon separated, each a comma-separated list
// of features left out, "-" none; default RerankFeatureSets).
func TestRerankExp(t *testing.T) {
	path := os.Getenv("LOCOMO_DATA")
	if path == "" || os.Getenv("LOCOMO_RERANK_EXP") == "" {
		t.Skip("set LOCOMO_DATA and LOCOMO_RERANK_EXP=1")
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
	gains := []string{""}
	if g := os.Getenv("LOCOMO_RERANK_GAINS"); g != "" {
		gains = nil
		for _, x := range strings.Split(g, ",") {
			if x == "none" {
				x = ""
			}
			gains = append(gains, x)
		}
	}
	sets := RerankFeatureSets
	if v := os.Getenv("LOCOMO_RERANK_SETS"); v != "" {
		sets = nil
		for _, x := range strings.Split(v, ";") {
			if x == "-" {
				sets = append(sets, nil)
			} else {
				sets = append(sets, FeatureSet(strings.Split(x, ",")))
			}
		}
	}
	cfgs := RerankConfigs(depth, sets, gains)
	var choices []string
	cv := CrossValidateRerank(qs, depth, fmt.Sprintf("nested among %d configs", len(cfgs)), NestedPairs(cfgs, func(c PairConfig) { choices = append(choices, c.String()) }))
	cv.WriteText(os.Stdout)
	fmt.Printf("chosen per fold (last: all five): %v\n", choices)
}

// TestRerankDiag prints, per category, where the evidence of the
// questions lies among the first stage's candidates (LOCOMO_DATA,
// LOCOMO_RERANK_DIAG=1).
func TestRerankDiag(t *testing.T) {
	path := os.Getenv("LOCOMO_DATA")
	if path == "" || os.Getenv("LOCOMO_RERANK_DIAG") == "" {
		t.Skip("set LOCOMO_DATA and LOCOMO_RERANK_DIAG=1")
	}
	convs, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	qs := RerankData(convs, search.DefaultParams(), 300)
	for c := 1; c <= 4; c++ {
		n, all100, all300, ev, in100, in300 := 0, 0, 0, 0, 0, 0
		for _, q := range qs {
			if q.Category != c {
				continue
			}
			n++
			a100, a300 := true, true
			for _, e := range q.Evidence {
				ev++
				i := slices.Index(q.IDs, e)
				if i >= 0 && i < 100 {
					in100++
				} else {
					a100 = false
				}
				if i >= 0 {
					in300++
				} else {
					a300 = false
				}
			}
			if a100 {
				all100++
			}
			if a300 {
				all300++
			}
		}
		fmt.Printf("category %d: %d questions, all evidence in top 100 %.3f, top 300 %.3f; evidence in top 100 %.3f, top 300 %.3f\n",
			c, n, float64(all100)/float64(n), float64(all300)/float64(n), float64(in100)/float64(ev), float64(in300)/float64(ev))
	}
}
