package locomo

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
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
	IDs          []string // LoCoMo turn IDs of the candidates, first-stage order (then the second round's)
	Feats        [][search.NumFeatures]float64
}

// RerankData indexes each conversation's turns as the stores do (events
// level: memindex.EventDoc with the previous and next turn of the session
// as context) ranked with p's first stage (p.Rerank is ignored), and
// returns every question's (categories 1–4) best depth first-stage
// candidates, then those p.Rerank's second round adds (p.Rerank.Round2),
// with their features: what the re-ranker ranks in the stores
// (search.Index.RerankCandidates).
func RerankData(convs []Conversation, p search.Params, depth int) []RerankQuestion {
	rp := search.RerankParams{Depth: depth, Round2: p.Rerank.Round2}
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
			res, fs := ix.RerankCandidates(q.Question, sc, rp)
			rq := RerankQuestion{Conversation: c.SampleID, Category: q.Category, Evidence: q.Evidence, Feats: fs}
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
		train, test := splitHeldOut(qs, held)
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
	fmt.Fprintf(w, "%-22s", "4 decimals, overall")
	for _, r := range []*Report{cv.FirstStage, cv.CrossValidated, cv.InSample} {
		fmt.Fprintf(w, "   %.4f / %.4f", r.Overall.Recall[10], r.Overall.All[10])
	}
	fmt.Fprintf(w, "\n%-22s", "4 decimals, 1 multi-hop")
	for _, r := range []*Report{cv.FirstStage, cv.CrossValidated, cv.InSample} {
		fmt.Fprintf(w, "   %.4f / %.4f", r.Categories[1].Recall[10], r.Categories[1].All[10])
	}
	fmt.Fprintln(w)
	writeOtherKs(w, cv.CrossValidated.Ks, slices.Values([]*Report{cv.FirstStage, cv.CrossValidated, cv.InSample}))
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
	return trainPairs(qs, PairOptions{NegDepth: negDepth, L2: l2, Iters: iters}, drop)
}

// PairOptions configures the pairwise trainer (trainPairs).
type PairOptions struct {
	NegDepth int     // negatives: the non-evidence candidates among the first stage's best NegDepth
	L2       float64 // l2 penalty on every weight but the score's
	Iters    int     // full-batch gradient steps (step size 1)
	// Gain, when not empty, weights each pair by how much swapping its
	// two candidates in the current ranking changes a gain of the rank
	// (LambdaRank): "ndcg" 1/log2(2+rank), "top10" a logistic step at
	// rank 10 (1/(1+exp((rank-9.5)/2))); a question's pair weights are
	// divided by their sum, so each question still counts once. Empty: every
	// pair counts the same.
	Gain string
}

func (o PairOptions) String() string {
	s := fmt.Sprintf("l2 %g", o.L2)
	if o.Gain != "" {
		s += " gain " + o.Gain
	}
	return s
}

// trainPairs fits the pairwise logistic loss of TrainPairwise with o's
// options, the weights of the features drop marks held at 0. The loss
// of a pair depends on the difference of the two candidates' scores
// only, so each step scores every candidate once and sums the pairs'
// derivatives per candidate.
func trainPairs(qs []RerankQuestion, o PairOptions, drop *[search.NumFeatures]bool) search.RerankWeights {
	type tq struct {
		x        [][search.NumFeatures]float64
		pos, neg []int32
	}
	var data []tq
	for _, q := range qs {
		ev := map[string]bool{}
		for _, e := range q.Evidence {
			ev[e] = true
		}
		t := tq{x: q.Feats}
		for i, id := range q.IDs {
			if ev[id] {
				t.pos = append(t.pos, int32(i))
			} else if i < o.NegDepth {
				t.neg = append(t.neg, int32(i))
			}
		}
		if len(t.pos) > 0 && len(t.neg) > 0 {
			data = append(data, t)
		}
	}
	gain := func(r int) float64 { return 0 }
	switch o.Gain {
	case "":
	case "ndcg":
		gain = func(r int) float64 { return 1 / math.Log2(2+float64(r)) }
	case "top10":
		gain = func(r int) float64 { return 1 / (1 + math.Exp((float64(r)-9.5)/2)) }
	default:
		panic("locomo: no gain " + o.Gain)
	}
	w := FirstStage()
	const lr = 1.0
	var s, coef, lam, gk []float64
	var order []int
	for it := 0; it < o.Iters; it++ {
		var g [search.NumFeatures]float64
		for _, t := range data {
			n := len(t.x)
			s, coef = append(s[:0], make([]float64, n)...), append(coef[:0], make([]float64, n)...)
			for k := range t.x {
				v := 0.0
				for f, x := range t.x[k] {
					v += w[f] * x
				}
				s[k] = v
			}
			np := len(t.pos) * len(t.neg)
			inv := 1 / float64(np) / float64(len(data))
			if o.Gain != "" {
				order = order[:0]
				for k := range n {
					order = append(order, k)
				}
				slices.SortStableFunc(order, func(a, b int) int {
					switch {
					case s[a] > s[b]:
						return -1
					case s[a] < s[b]:
						return 1
					}
					return 0
				})
				gk = append(gk[:0], make([]float64, n)...) // the gain of each candidate's rank
				for r, k := range order {
					gk[k] = gain(r)
				}
				lam = lam[:0]
				sum := 0.0
				for _, i := range t.pos {
					for _, j := range t.neg {
						l := math.Abs(gk[i] - gk[j])
						lam = append(lam, l)
						sum += l
					}
				}
				if sum == 0 {
					continue
				}
				inv = 1 / sum / float64(len(data))
			}
			p := 0
			for _, i := range t.pos {
				for _, j := range t.neg {
					c := -inv / (1 + math.Exp(s[i]-s[j])) // d/ds log(1+e^-s) = -1/(1+e^s)
					if o.Gain != "" {
						c *= lam[p]
					}
					p++
					coef[i] += c
					coef[j] -= c
				}
			}
			for k, c := range coef {
				if c == 0 {
					continue
				}
				for f, x := range t.x[k] {
					g[f] += c * x
				}
			}
		}
		for f := range w {
			if drop != nil && drop[f] {
				continue
			}
			if f != search.FeatScore {
				g[f] += 2 * o.L2 * w[f]
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

// PairConfig is one choice of NestedPairs: trainer options and the
// features left out.
type PairConfig struct {
	PairOptions
	Drop FeatureSet
}

func (c PairConfig) String() string { return fmt.Sprintf("%v without %v", c.PairOptions, c.Drop) }

// NestedPairs is a Trainer that chooses among configs by
// leave-one-conversation-out cross-validation inside the training
// questions (the highest mean held-out Objective; ties go to the earlier
// config), then trains on all of them with the choice. chosen, if not
// nil, receives each call's choice.
func NestedPairs(configs []PairConfig, chosen func(PairConfig)) Trainer {
	return func(train []RerankQuestion) search.RerankWeights {
		var convs []string
		for _, q := range train {
			if !slices.Contains(convs, q.Conversation) {
				convs = append(convs, q.Conversation)
			}
		}
		// each config's inner held-out objective, two configs at a time
		// (the result does not depend on the order)
		scores := make([]float64, len(configs))
		var wg sync.WaitGroup
		sem := make(chan struct{}, min(2, runtime.GOMAXPROCS(0)))
		for ci, c := range configs {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				drop := c.Drop.drop()
				var held []QuestionResult
				for _, cv := range convs {
					tr, te := splitHeldOut(train, cv)
					held = append(held, RerankResults(te, trainPairs(tr, c.PairOptions, drop))...)
				}
				scores[ci] = Objective(held)
			}()
		}
		wg.Wait()
		bi, best := 0, -1.0
		for ci, s := range scores {
			if s > best+1e-12 {
				bi, best = ci, s
			}
		}
		if chosen != nil {
			chosen(configs[bi])
		}
		return trainPairs(train, configs[bi].PairOptions, configs[bi].Drop.drop())
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

// splitHeldOut splits questions into those of every conversation but held
// (train) and those of held (test), in their order.
func splitHeldOut(qs []RerankQuestion, held string) (train, test []RerankQuestion) {
	for _, q := range qs {
		if q.Conversation == held {
			test = append(test, q)
		} else {
			train = append(train, q)
		}
	}
	return train, test
}
