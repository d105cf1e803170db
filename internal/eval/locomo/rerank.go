package locomo

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/memindex"
	"github.com/tendrilai/tendril/internal/memory/search"
)

// RerankQuestion is one question's first-stage candidates with their
// re-ranker features (search.Index.Features), the input of a learned
// re-ranker.
type RerankQuestion struct {
	Conversation string
	Category     int
	Evidence     []string
	IDs          []string // LoCoMo turn IDs of the candidates, first-stage order
	Feats        [][search.NumFeatures]float64
}

// RerankData indexes each conversation's turns as the stores do (events
// level: memindex.EventDoc with the previous and next turn of the session
// as context) ranked with p's first stage (p.Rerank is ignored), and
// returns every question's (categories 1–4) best depth first-stage
// candidates with their features.
func RerankData(convs []Conversation, p search.Params, depth int) []RerankQuestion {
	p.Rerank = search.RerankParams{}
	var out []RerankQuestion
	for _, c := range convs {
		ix := search.NewIndex(p)
		var ids []string
		for _, s := range c.Sessions {
			for i, t := range s.Turns {
				md := map[string]any{"speaker": t.Speaker, "diaId": t.DiaID}
				if t.BlipCaption != "" {
					md["caption"] = t.BlipCaption
				}
				e := memory.Event{ID: c.SampleID + ":" + t.DiaID, ActorID: c.SampleID, SessionID: s.Key, Role: "user",
					Text: t.Text, Timestamp: s.Date.Add(time.Duration(i) * time.Second), Metadata: md}
				var ctx []string
				if i > 0 {
					ctx = append(ctx, s.Turns[i-1].Text)
				}
				if i+1 < len(s.Turns) {
					ctx = append(ctx, s.Turns[i+1].Text)
				}
				ix.Add(memindex.EventDoc(e, false, ctx))
				ids = append(ids, t.DiaID)
			}
		}
		sc := ix.NewScope(nil)
		for _, q := range c.QA {
			if q.Category < 1 || q.Category > 4 {
				continue
			}
			res := ix.SearchScope(q.Question, sc, depth)
			rq := RerankQuestion{Conversation: c.SampleID, Category: q.Category, Evidence: q.Evidence, Feats: ix.Features(q.Question, sc, res)}
			for _, r := range res {
				rq.IDs = append(rq.IDs, ids[r.Doc])
			}
			out = append(out, rq)
		}
	}
	return out
}

// ranked is q's candidates ordered by w · features (ties keep the
// first-stage order).
func (q *RerankQuestion) ranked(w search.RerankWeights) []string {
	type c struct {
		i int
		s float64
	}
	cs := make([]c, len(q.IDs))
	for i := range q.IDs {
		s := 0.0
		for j, x := range q.Feats[i] {
			s += w[j] * x
		}
		cs[i] = c{i, s}
	}
	slices.SortStableFunc(cs, func(a, b c) int {
		switch {
		case a.s > b.s:
			return -1
		case a.s < b.s:
			return 1
		}
		return 0
	})
	out := make([]string, len(cs))
	for i, x := range cs {
		out[i] = q.IDs[x.i]
	}
	return out
}

// RerankResults ranks qs with w.
func RerankResults(qs []RerankQuestion, w search.RerankWeights) []QuestionResult {
	out := make([]QuestionResult, len(qs))
	for i := range qs {
		out[i] = QuestionResult{Conversation: qs[i].Conversation, Category: qs[i].Category, Evidence: qs[i].Evidence, Ranked: qs[i].ranked(w)}
	}
	return out
}

// FirstStage is the weights that keep the first-stage order (score 1).
func FirstStage() search.RerankWeights {
	var w search.RerankWeights
	w[search.FeatScore] = 1
	return w
}

// TrainRerank fits linear re-ranker weights on qs by coordinate ascent
// on Objective (the mean of recall@10 and all@10) directly: starting
// from the first stage (score weight 1, the others 0), each pass tries
// every other weight at a few steps up and down and keeps a move only
// when it raises the objective by at least minGain (the regularisation:
// with 600 questions one question more with all its evidence is worth
// 0.0008); the score weight stays 1 (the scale is free). At most passes
// passes.
func TrainRerank(qs []RerankQuestion, passes int, minGain float64) search.RerankWeights {
	w := FirstStage()
	best := Objective(RerankResults(qs, w))
	steps := []float64{-0.4, -0.2, -0.1, -0.05, 0.05, 0.1, 0.2, 0.4}
	for pass := 0; pass < passes; pass++ {
		moved := false
		for j := range w {
			if j == search.FeatScore {
				continue
			}
			bj, bs := w[j], best
			for _, d := range steps {
				v := w
				v[j] += d
				if v[j] < -1 || v[j] > 1 {
					continue
				}
				if s := Objective(RerankResults(qs, v)); s > bs+1e-12 {
					bj, bs = v[j], s
				}
			}
			if bs >= best+minGain {
				w[j], best = bj, bs
				moved = true
			}
		}
		if !moved {
			break
		}
	}
	return w
}

// RerankCV is leave-one-conversation-out cross-validation of the learned
// re-ranker.
type RerankCV struct {
	Depth int
	Name  string // the trainer
	// CrossValidated ranks each conversation with weights trained on the
	// others; InSample with weights trained on all; FirstStage is the
	// first-stage ranking (Tendril's default over the same index).
	CrossValidated, InSample, FirstStage *Report
	InSampleWeights                      search.RerankWeights
	Folds                                []RerankFold
}

// RerankFold is one held-out conversation.
type RerankFold struct {
	HeldOut             string
	Weights             search.RerankWeights
	Train, Test, Before float64 // objective on training, held-out (re-ranked) and held-out first stage
}

// Trainer fits re-ranker weights on training questions.
type Trainer func(train []RerankQuestion) search.RerankWeights

// CrossValidateRerank trains on all conversations but one and scores the
// one left out, for each conversation in turn, over qs (RerankData, depth
// candidates per question).
func CrossValidateRerank(qs []RerankQuestion, depth int, name string, fit Trainer) *RerankCV {
	var convs []string
	for _, q := range qs {
		if !slices.Contains(convs, q.Conversation) {
			convs = append(convs, q.Conversation)
		}
	}
	rep := func(r []QuestionResult) *Report {
		x := &Report{Level: LevelEvents, Ks: []int{5, 10, 20, 50}, PerQuestion: r}
		x.summarize()
		return x
	}
	cv := &RerankCV{Depth: depth, Name: name}
	var all []QuestionResult
	for _, held := range convs {
		var train, test []RerankQuestion
		for _, q := range qs {
			if q.Conversation == held {
				test = append(test, q)
			} else {
				train = append(train, q)
			}
		}
		w := fit(train)
		tr := RerankResults(test, w)
		all = append(all, tr...)
		cv.Folds = append(cv.Folds, RerankFold{HeldOut: held, Weights: w, Train: Objective(RerankResults(train, w)),
			Test: Objective(tr), Before: Objective(RerankResults(test, FirstStage()))})
	}
	cv.CrossValidated = rep(all)
	cv.InSampleWeights = fit(qs)
	cv.InSample = rep(RerankResults(qs, cv.InSampleWeights))
	cv.FirstStage = rep(RerankResults(qs, FirstStage()))
	return cv
}

// WriteText prints the first stage, cross-validated and in-sample
// figures, the weights per fold and the per-category tables.
func (cv *RerankCV) WriteText(w io.Writer) {
	fmt.Fprintf(w, "learned re-ranker (%s) over the first stage's top %d, leave-one-conversation-out\n", cv.Name, cv.Depth)
	fmt.Fprintf(w, "%-22s %17s %17s %17s\n", "recall@10 / all@10", "first stage", "cross-validated", "in-sample")
	line := func(label string, get func(*Report) *Metrics) {
		fmt.Fprintf(w, "%-22s", label)
		for _, r := range []*Report{cv.FirstStage, cv.CrossValidated, cv.InSample} {
			m := get(r)
			fmt.Fprintf(w, "     %.3f / %.3f", m.Recall[10], m.All[10])
		}
		fmt.Fprintln(w)
	}
	line("overall (1–4)", func(r *Report) *Metrics { return &r.Overall })
	for c := 1; c <= 4; c++ {
		line(fmt.Sprintf("%d %s", c, catNames[c]), func(r *Report) *Metrics { return r.Categories[c] })
	}
	fmt.Fprintf(w, "%-22s", "recall@5 / @20 / @50")
	for _, r := range []*Report{cv.FirstStage, cv.CrossValidated, cv.InSample} {
		fmt.Fprintf(w, " %5.3f/%.3f/%.3f", r.Overall.Recall[5], r.Overall.Recall[20], r.Overall.Recall[50])
	}
	fmt.Fprintln(w)
	names := strings.Join(search.FeatureNames[:], " ")
	fmt.Fprintf(w, "\nweights (%s):\n", names)
	for _, f := range cv.Folds {
		fmt.Fprintf(w, "  held out %s: %v  train %.4f  held-out %.4f (first stage %.4f)\n", f.HeldOut, fmtW(f.Weights), f.Train, f.Test, f.Before)
	}
	fmt.Fprintf(w, "  all five: %v\n", fmtW(cv.InSampleWeights))
	fmt.Fprintf(w, "  all five, full precision: %#v\n", cv.InSampleWeights)
	win, loss := pairedWins(cv.FirstStage.PerQuestion, cv.CrossValidated.PerQuestion)
	fmt.Fprintf(w, "questions better / worse cross-validated than the first stage (recall@10 + all@10): %d / %d\n", win, loss)
	for _, c := range []struct {
		n string
		r *Report
	}{{"first stage", cv.FirstStage}, {"cross-validated", cv.CrossValidated}, {"in-sample", cv.InSample}} {
		fmt.Fprintf(w, "\n[%s]\n", c.n)
		c.r.writeTable(w)
	}
}

func fmtW(w search.RerankWeights) string {
	var b strings.Builder
	for i, x := range w {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.2f", x)
	}
	return b.String()
}

// TrainPairwise fits linear re-ranker weights on qs by pairwise logistic
// regression (RankNet with a linear scorer): for every question, every
// pair of an evidence candidate and a non-evidence candidate among the
// first stage's best negDepth, loss log(1 + exp(-(w·x⁺ − w·x⁻))),
// averaged per question so that each question counts once, plus
// l2·|w|² (the first-stage score weight is not penalised). Full-batch
// gradient descent, iters steps. The weights are scaled so that the
// score weight is 1 when it is positive.
func TrainPairwise(qs []RerankQuestion, negDepth int, l2 float64, iters int) search.RerankWeights {
	return trainPairwise(qs, negDepth, l2, iters, nil)
}

// FeatureSet is a set of re-ranker features: the names of those left out
// (their weights held at 0).
type FeatureSet []string

func (fs FeatureSet) drop() *[search.NumFeatures]bool {
	if len(fs) == 0 {
		return nil
	}
	var d [search.NumFeatures]bool
	for _, n := range fs {
		f := slices.Index(search.FeatureNames[:], n)
		if f < 0 {
			panic("locomo: no re-ranker feature " + n)
		}
		d[f] = true
	}
	return &d
}

// trainPairwise is TrainPairwise with the weights of the features drop
// marks held at 0.
func trainPairwise(qs []RerankQuestion, negDepth int, l2 float64, iters int, drop *[search.NumFeatures]bool) search.RerankWeights {
	type pair struct{ d [search.NumFeatures]float64 }
	var groups [][]pair
	for _, q := range qs {
		ev := map[string]bool{}
		for _, e := range q.Evidence {
			ev[e] = true
		}
		var ps []pair
		for i, id := range q.IDs {
			if !ev[id] {
				continue
			}
			for j, id2 := range q.IDs {
				if j >= negDepth || ev[id2] {
					continue
				}
				var p pair
				for f := range p.d {
					p.d[f] = q.Feats[i][f] - q.Feats[j][f]
				}
				ps = append(ps, p)
			}
		}
		if len(ps) > 0 {
			groups = append(groups, ps)
		}
	}
	w := FirstStage()
	lr := 1.0
	for it := 0; it < iters; it++ {
		var g [search.NumFeatures]float64
		for _, ps := range groups {
			inv := 1 / float64(len(ps)) / float64(len(groups))
			for _, p := range ps {
				s := 0.0
				for f, x := range p.d {
					s += w[f] * x
				}
				c := -inv / (1 + math.Exp(s)) // d/ds log(1+e^-s) = -1/(1+e^s)
				for f, x := range p.d {
					g[f] += c * x
				}
			}
		}
		for f := range w {
			if drop != nil && drop[f] {
				continue
			}
			if f != search.FeatScore {
				g[f] += 2 * l2 * w[f]
			}
			w[f] -= lr * g[f]
		}
	}
	if s := w[search.FeatScore]; s > 0 {
		for f := range w {
			w[f] /= s
		}
	}
	return w
}

// NestedPairwise is a Trainer that chooses TrainPairwise's l2 among l2s
// by leave-one-conversation-out cross-validation inside the training
// questions (the highest mean held-out Objective; ties go to the larger
// l2), then trains on all of them with it. chosen, if not nil, receives
// the l2 of each call.
func NestedPairwise(negDepth, iters int, l2s []float64, chosen func(l2 float64)) Trainer {
	fit := NestedPairwiseSets(negDepth, iters, l2s, []FeatureSet{nil}, nil)
	if chosen == nil {
		return fit
	}
	return NestedPairwiseSets(negDepth, iters, l2s, []FeatureSet{nil}, func(l2 float64, _ FeatureSet) { chosen(l2) })
}

// NestedPairwiseSets is NestedPairwise choosing the feature set among
// sets as well as l2 (every pair of the two), by the same inner
// leave-one-conversation-out (ties go to the earlier set, then the
// larger l2), so that neither is chosen on a held-out conversation.
// chosen, if not nil, receives each call's choice.
func NestedPairwiseSets(negDepth, iters int, l2s []float64, sets []FeatureSet, chosen func(l2 float64, set FeatureSet)) Trainer {
	return func(train []RerankQuestion) search.RerankWeights {
		var convs []string
		for _, q := range train {
			if !slices.Contains(convs, q.Conversation) {
				convs = append(convs, q.Conversation)
			}
		}
		bestL2, bestSet, best := l2s[0], 0, -1.0
		for si, set := range sets {
			drop := set.drop()
			for _, l2 := range l2s {
				var held []QuestionResult
				for _, c := range convs {
					var tr, te []RerankQuestion
					for _, q := range train {
						if q.Conversation == c {
							te = append(te, q)
						} else {
							tr = append(tr, q)
						}
					}
					held = append(held, RerankResults(te, trainPairwise(tr, negDepth, l2, iters, drop))...)
				}
				if s := Objective(held); s > best+1e-12 || (s >= best-1e-12 && si == bestSet && l2 > bestL2) {
					bestL2, bestSet, best = l2, si, s
				}
			}
		}
		if chosen != nil {
			chosen(bestL2, sets[bestSet])
		}
		return trainPairwise(train, negDepth, bestL2, iters, sets[bestSet].drop())
	}
}

// pairedWins counts the questions whose recall@10 + all@10 is higher
// (win) or lower (loss) in b than in a (the same questions, any order).
func pairedWins(a, b []QuestionResult) (win, loss int) {
	key := func(q QuestionResult) string {
		return q.Conversation + "|" + strings.Join(q.Evidence, ",") + "|" + fmt.Sprint(q.Category)
	}
	score := func(q QuestionResult) float64 {
		x := newAcc()
		x.add(q.Ranked, q.Evidence, []int{10})
		return x.recall[10] + x.all[10]
	}
	as := map[string][]float64{}
	for _, q := range a {
		as[key(q)] = append(as[key(q)], score(q))
	}
	for _, q := range b {
		k := key(q)
		if len(as[k]) == 0 {
			continue
		}
		d := score(q) - as[k][0]
		as[k] = as[k][1:]
		switch {
		case d > 1e-12:
			win++
		case d < -1e-12:
			loss++
		}
	}
	return
}
