package locomo

import (
	"fmt"
	"os"
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
	var cfgs []PairConfig
	for _, set := range sets {
		for _, g := range gains {
			for _, l2 := range RerankL2s {
				cfgs = append(cfgs, PairConfig{PairOptions{NegDepth: depth, L2: l2, Iters: 300, Gain: g}, set})
			}
		}
	}
	var choices []string
	cv := CrossValidateRerank(qs, depth, fmt.Sprintf("nested among %d configs", len(cfgs)), NestedPairs(cfgs, func(c PairConfig) { choices = append(choices, c.String()) }))
	cv.WriteText(os.Stdout)
	fmt.Printf("chosen per fold (last: all five): %v\n", choices)
}
