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
	qs := RerankData(convs, round2Env(t, search.DefaultParams()), depth)
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
	if p := round2Env(t, search.DefaultParams()); p.Rerank.Round2.Depth > 0 {
		// the candidates with the second round: the first stage's 100 and
		// what the second round adds
		r2 := RerankData(convs, p, 100)
		for c := 1; c <= 4; c++ {
			n, all, allSame, extra, flagged := 0, 0, 0, 0, 0
			for i, q := range r2 {
				if q.Category != c {
					continue
				}
				n++
				ne := 0
				for j := range q.Feats {
					if q.Feats[j][search.FeatFromRound2] == 1 {
						ne++
					}
				}
				if ne > 0 {
					flagged++
				}
				extra += ne
				has := func(ids []string) bool {
					for _, e := range q.Evidence {
						if !slices.Contains(ids, e) {
							return false
						}
					}
					return true
				}
				if has(q.IDs) {
					all++
				}
				if has(qs[i].IDs[:min(len(qs[i].IDs), len(q.IDs))]) { // the first stage alone, as many candidates
					allSame++
				}
			}
			fmt.Printf("round 2 %+v, category %d: %d questions (%d with extra candidates, %.1f extra each), all evidence among the candidates %.3f; first stage's top as many %.3f\n",
				p.Rerank.Round2, c, n, flagged, float64(extra)/float64(max(flagged, 1)), float64(all)/float64(n), float64(allSame)/float64(n))
		}
	}
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

// round2Env sets p.Rerank.Round2 from LOCOMO_R2 ("depth,seeds,terms,maxdf[,all]";
// "off" turns it off; unset leaves p's).
func round2Env(t *testing.T, p search.Params) search.Params {
	v := os.Getenv("LOCOMO_R2")
	if v == "" {
		return p
	}
	if v == "off" {
		p.Rerank.Round2 = search.Round2Params{}
		return p
	}
	var r search.Round2Params
	f := strings.Split(v, ",")
	for i, x := range f {
		if i >= 4 {
			r.All = r.All || x == "all"
			r.NoQuery = r.NoQuery || x == "noquery"
			r.NoExtra = r.NoExtra || x == "noextra"
			r.TextSeeds = r.TextSeeds || x == "textseeds"
			if w, ok := strings.CutPrefix(x, "w"); ok {
				r.Weight, _ = strconv.ParseFloat(w, 64)
			}
			continue
		}
		n, err := strconv.Atoi(x)
		if err != nil {
			t.Fatalf("LOCOMO_R2 %q: %v", v, err)
		}
		switch i {
		case 0:
			r.Depth = n
		case 1:
			r.Seeds = n
		case 2:
			r.Terms = n
		case 3:
			r.MaxCandDF = n
		}
	}
	p.Rerank.Round2 = r
	fmt.Printf("second round: %+v\n", r)
	return p
}
