package locomo

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/tendrilai/tendril/internal/memory/search"
)

// synthQuestions are questions whose evidence has a higher text feature
// than the other candidates, while the first-stage score is noise.
func synthQuestions(convs, perConv, cands int) []RerankQuestion {
	rng := rand.New(rand.NewSource(7))
	var qs []RerankQuestion
	for c := 0; c < convs; c++ {
		for i := 0; i < perConv; i++ {
			q := RerankQuestion{Conversation: fmt.Sprintf("conv-%d", c), Category: 4}
			ev := rng.Intn(cands)
			for k := 0; k < cands; k++ {
				id := fmt.Sprintf("D%d:%d", i, k)
				var f [search.NumFeatures]float64
				f[search.FeatScore] = rng.Float64()
				f[search.FeatText] = rng.Float64() * 0.5
				if k == ev {
					f[search.FeatText] += 0.6
					q.Evidence = append(q.Evidence, id)
				}
				q.IDs = append(q.IDs, id)
				q.Feats = append(q.Feats, f)
			}
			qs = append(qs, q)
		}
	}
	return qs
}

func TestTrainPairsGains(t *testing.T) {
	qs := synthQuestions(3, 40, 30)
	if first := Objective(RerankResults(qs, FirstStage())); first > 0.5 {
		t.Fatalf("first stage already %v", first)
	}
	for _, g := range []string{"", "ndcg", "top10"} {
		w := trainPairs(qs, PairOptions{NegDepth: 30, L2: 0.001, Iters: 300, Gain: g}, nil)
		if w[search.FeatText] <= 1 {
			t.Errorf("gain %q: text weight %v", g, w[search.FeatText])
		}
		if s := Objective(RerankResults(qs, w)); s < 0.95 {
			t.Errorf("gain %q: objective %v", g, s)
		}
	}
}

func TestNestedPairsChoosesOnTraining(t *testing.T) {
	qs := synthQuestions(3, 40, 30)
	cfgs := []PairConfig{
		{PairOptions{NegDepth: 30, L2: 0.001, Iters: 100}, FeatureSet{"text"}},
		{PairOptions{NegDepth: 30, L2: 0.001, Iters: 100, Gain: "ndcg"}, nil},
	}
	var got []PairConfig
	w := NestedPairs(cfgs, func(c PairConfig) { got = append(got, c) })(qs)
	if len(got) != 1 || got[0].Gain != "ndcg" || w[search.FeatText] <= 0 {
		t.Errorf("chose %v, weights %v", got, w)
	}
}
