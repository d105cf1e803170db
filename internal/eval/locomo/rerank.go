package locomo

import (
	"fmt"
	"io"
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
// as context) ranked with p, and returns every question's (categories
// 1–4) best depth first-stage candidates with their features.
func RerankData(convs []Conversation, p search.Params, depth int) []RerankQuestion {
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

// CrossValidateRerank trains on all conversations but one and scores the
// one left out, for each conversation in turn, over qs (RerankData).
func CrossValidateRerank(qs []RerankQuestion, depth, passes int, minGain float64) *RerankCV {
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
	cv := &RerankCV{Depth: depth}
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
		w := TrainRerank(train, passes, minGain)
		tr := RerankResults(test, w)
		all = append(all, tr...)
		cv.Folds = append(cv.Folds, RerankFold{HeldOut: held, Weights: w, Train: Objective(RerankResults(train, w)),
			Test: Objective(tr), Before: Objective(RerankResults(test, FirstStage()))})
	}
	cv.CrossValidated = rep(all)
	cv.InSampleWeights = TrainRerank(qs, passes, minGain)
	cv.InSample = rep(RerankResults(qs, cv.InSampleWeights))
	cv.FirstStage = rep(RerankResults(qs, FirstStage()))
	return cv
}

// WriteText prints the first stage, cross-validated and in-sample
// figures, the weights per fold and the per-category tables.
func (cv *RerankCV) WriteText(w io.Writer) {
	fmt.Fprintf(w, "learned re-ranker over the first stage's top %d, leave-one-conversation-out\n", cv.Depth)
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
