package locomo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/tendrilai/tendril/internal/memory/search"
)

// Candidate is one ranking configuration cross-validation may choose.
type Candidate struct {
	Name   string
	Params search.Params
}

// Candidates is the grid cross-validation chooses from (48 candidates):
// Tendril's defaults with every technique for long conversational logs
// (search.ConvParams) off, then each on or off at one principled setting,
// so that the grid stays small and selection noise low: session documents
// fused into turn scores (λ 0.1), a multi-hop second round seeded by the
// top 3 turns' entity words (weight 0.3), a query word-pair proximity
// bonus (1), session diversity (0.8, for every question or for aggregate
// questions only) and relative dates indexed as date words. (Issue 16's
// first grid, 72 candidates over the session prior, feedback, addressee
// and speaker boosts, is in the git history: none of it generalised.)
func Candidates() []Candidate {
	return grid([][]mod{
		{{"", nil}, {"+sess.1", func(p *search.Params) { p.Conv.SessionWeight = 0.1 }}},
		{{"", nil}, {"+mh3.3", func(p *search.Params) { p.Conv.MultiHopSeeds, p.Conv.MultiHopWeight = 3, 0.3 }}},
		{{"", nil}, {"+prox1", func(p *search.Params) { p.Conv.Proximity = 1 }}},
		{{"", nil},
			{"+div.8", func(p *search.Params) { p.Conv.Diversity = 0.8 }},
			{"+aggdiv.8", func(p *search.Params) { p.Conv.Diversity, p.Conv.DiversityAggregate = 0.8, true }}},
		{{"", nil}, {"+rel", func(p *search.Params) { p.Conv.RelTime = true }}},
	})
}

// RecordsCandidates is Candidates without the techniques that need
// sessions (records have no Doc.Group, so those candidates tie): the
// multi-hop round, proximity and relative dates on or off (8 candidates).
func RecordsCandidates() []Candidate {
	return grid([][]mod{
		{{"", nil}, {"+mh3.3", func(p *search.Params) { p.Conv.MultiHopSeeds, p.Conv.MultiHopWeight = 3, 0.3 }}},
		{{"", nil}, {"+prox1", func(p *search.Params) { p.Conv.Proximity = 1 }}},
		{{"", nil}, {"+rel", func(p *search.Params) { p.Conv.RelTime = true }}},
	})
}

type mod struct {
	name string
	f    func(*search.Params)
}

// grid is every combination of one option per row, applied to
// search.DefaultParams with its Conv techniques off; the candidate with
// none is "conv-off".
func grid(opts [][]mod) []Candidate {
	var out []Candidate
	var rec func(i int, name string, p search.Params)
	rec = func(i int, name string, p search.Params) {
		if i == len(opts) {
			if name == "" {
				name = "conv-off"
			}
			out = append(out, Candidate{Name: name, Params: p})
			return
		}
		for _, m := range opts[i] {
			q := p
			if m.f != nil {
				m.f(&q)
			}
			rec(i+1, name+m.name, q)
		}
	}
	base := search.DefaultParams()
	base.Conv = search.ConvParams{}
	base.Rerank = search.RerankParams{} // the grid is of first stages
	rec(0, "", base)
	return out
}

// CVOptions configures CrossValidate.
type CVOptions struct {
	// Folds is the number of folds; conversation i goes to fold i mod
	// Folds. Folds equal to the number of conversations (or ≤ 0) is
	// leave-one-conversation-out.
	Folds int
	// Level, Ks, Extract and Dir are as in Options.
	Level   string
	Ks      []int
	Extract func(dir string) ExtractFunc
	Dir     string
	// Candidates to choose from (default Candidates(), RecordsCandidates()
	// at LevelRecords).
	Candidates []Candidate
	// Progress is called after each candidate run (done, total).
	Progress func(done, total int)
}

// FoldChoice is the candidate chosen on the training conversations of one
// fold and scored on its held-out conversations.
type FoldChoice struct {
	HeldOut   []string
	Candidate string
	// TrainScore is the objective on the training questions.
	TrainScore float64
	// TestScore and DefaultTestScore are the objective on the held-out
	// questions of the chosen candidate and of Tendril's defaults.
	TestScore, DefaultTestScore float64
}

// CVReport is the result of CrossValidate.
type CVReport struct {
	Folds int
	// CrossValidated combines every fold's held-out questions, each ranked
	// by the candidate chosen without it.
	CrossValidated *Report
	// InSample is the candidate best on all conversations, scored on
	// them (the optimistic figure).
	InSample *Report
	// InSampleChoice names it; Choices are the per-fold choices.
	InSampleChoice string
	Choices        []FoldChoice
	// Default is Tendril's shipped ranking (search.DefaultParams) on all
	// conversations, Baseline the plain BM25 reference, in the same run.
	Default  *Report
	Baseline *Report
	// Grid is every candidate's in-sample report, by name.
	Grid map[string]*Report
	// Rerank is set at LevelEvents when search.DefaultParams has a
	// learned re-ranker: the shipped first stage (DefaultParams without
	// it) re-ranked by weights trained without each held-out
	// conversation (ShippedRerank, as search.LearnedRerank was trained).
	// CrossValidated and InSample are then its figures (the shipped
	// pipeline, its trained part cross-validated) and GridCrossValidated
	// the first-stage grid's.
	Rerank             *RerankCV
	GridCrossValidated *Report
}

// RerankL2s are the l2 penalties the shipped trainer chooses from.
var RerankL2s = []float64{0.001, 0.003}

// RerankFeatureSets are the feature sets the shipped trainer chooses
// from: the session features repeated for aggregate questions (agg_*,
// search.IsAggregateQuestion) or for the wider list questions (list_*,
// search.IsListQuestion), each with and without the query's entity
// words and the session rank.
var RerankFeatureSets = []FeatureSet{
	{"list_sess_best", "list_session", "list_neighbour"},
	{"entity", "sess_rank", "list_sess_best", "list_session", "list_neighbour"},
	{"agg_sess_best", "agg_session", "agg_neighbour"},
	{"entity", "sess_rank", "agg_sess_best", "agg_session", "agg_neighbour"},
}

// RerankGains are the pair weightings the shipped trainer chooses from
// (PairOptions.Gain): every pair alike, and LambdaRank-style by the
// change of 1/log2(2 + rank) when the pair's two candidates swap places.
var RerankGains = []string{"", "ndcg"}

// RerankConfigs are the choices of the shipped trainer at depth: every
// feature set of sets × gain of gains × l2 of RerankL2s, in that order
// (a tie goes to the earlier), each the pairwise logistic loss over
// every non-evidence candidate (the first stage's depth and the second
// round's) as a negative, 300 steps.
func RerankConfigs(depth int, sets []FeatureSet, gains []string) []PairConfig {
	var out []PairConfig
	for _, set := range sets {
		for _, g := range gains {
			for _, l2 := range RerankL2s {
				out = append(out, PairConfig{PairOptions{NegDepth: math.MaxInt, L2: l2, Iters: 300, Gain: g}, set})
			}
		}
	}
	return out
}

// ShippedRerank cross-validates the re-ranker of search.DefaultParams
// over qs (RerankData of DefaultParams' first stage, its depth): the
// trainer of search.LearnedRerank, choosing among
// RerankConfigs(depth, RerankFeatureSets, RerankGains) by nested
// leave-one-conversation-out (NestedPairs) inside each fold's training
// conversations. chosen, if not nil, receives each call's choice (the
// folds', then all conversations').
func ShippedRerank(qs []RerankQuestion, depth int, chosen func(PairConfig)) *RerankCV {
	cfgs := RerankConfigs(depth, RerankFeatureSets, RerankGains)
	return CrossValidateRerank(qs, depth, fmt.Sprintf("pairwise logistic, negatives in the top %d; l2, pair gain and feature set (%d choices) chosen by nested leave-one-conversation-out", depth, len(cfgs)),
		NestedPairs(cfgs, chosen))
}

// Objective is what cross-validation maximises: the mean of recall@10 and
// all@10 over the questions (categories 1–4).
func Objective(qs []QuestionResult) float64 {
	if len(qs) == 0 {
		return 0
	}
	a := newAcc()
	for _, q := range qs {
		a.add(q.Ranked, q.Evidence, []int{10})
	}
	m := a.metrics([]int{10})
	return (m.Recall[10] + m.All[10]) / 2
}

// CrossValidate tunes the ranking by k-fold cross-validation over
// conversations (leave-one-conversation-out by default): every candidate
// runs once over all conversations; for each fold the candidate with the
// best Objective on the other folds' questions ranks the fold's own. It
// also runs Tendril's defaults and the plain BM25 baseline on the same
// data, so that every figure of the report comes from one run.
//
// Errors: fewer than two conversations or folds; Run's errors.
func CrossValidate(ctx context.Context, convs []Conversation, opts CVOptions) (*CVReport, error) {
	if len(convs) < 2 {
		return nil, errors.New("locomo: cross-validation needs at least two conversations")
	}
	if len(opts.Ks) > 0 && !slices.Contains(opts.Ks, 10) {
		opts.Ks = append(slices.Clone(opts.Ks), 10) // the objective is read at 10
	}
	k := opts.Folds
	if k <= 0 || k > len(convs) {
		k = len(convs)
	}
	if k < 2 {
		return nil, errors.New("locomo: cross-validation needs at least two folds")
	}
	cands := opts.Candidates
	if len(cands) == 0 {
		cands = Candidates()
		if opts.Level == LevelRecords {
			cands = RecordsCandidates()
		}
	}
	dir, cleanup, err := scratchDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	total := len(cands) + 2
	done := 0
	run := func(name, baseline string, p *search.Params) (*Report, error) {
		d := filepath.Join(dir, fmt.Sprintf("run%d", done))
		o := Options{Level: opts.Level, Ks: opts.Ks, Baseline: baseline, Ranking: p, Dir: d}
		if o.Level == LevelRecords {
			if opts.Extract != nil {
				o.Extract = opts.Extract(d)
			} else {
				o.Extract = PipelineExtract(d)
			}
		}
		if err := mkdir(d); err != nil {
			return nil, err
		}
		r, err := Run(ctx, convs, o)
		done++
		if opts.Progress != nil {
			opts.Progress(done, total)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return r, nil
	}
	cv := &CVReport{Folds: k, Grid: map[string]*Report{}}
	if cv.Baseline, err = run("bm25", "bm25", nil); err != nil {
		return nil, err
	}
	if cv.Default, err = run("default", "", nil); err != nil {
		return nil, err
	}
	for _, c := range cands {
		p := c.Params
		r, err := run(c.Name, "", &p)
		if err != nil {
			return nil, err
		}
		cv.Grid[c.Name] = r
	}
	fold := map[string]int{}
	for i, c := range convs {
		fold[c.SampleID] = i % k
	}
	split := func(r *Report, f int) (train, test []QuestionResult) {
		for _, q := range r.PerQuestion {
			if fold[q.Conversation] == f {
				test = append(test, q)
			} else {
				train = append(train, q)
			}
		}
		return
	}
	best := func(f int) (string, float64) { // f < 0: all questions
		bestName, bestScore := "", -1.0
		for _, c := range cands {
			qs := cv.Grid[c.Name].PerQuestion
			if f >= 0 {
				qs, _ = split(cv.Grid[c.Name], f)
			}
			if s := Objective(qs); s > bestScore+1e-12 {
				bestName, bestScore = c.Name, s
			}
		}
		return bestName, bestScore
	}
	any := cv.Default
	cvRep := &Report{Level: any.Level, Ks: any.Ks, Turns: any.Turns, Skipped: any.Skipped, IngestTPS: any.IngestTPS, LatencyMS: any.LatencyMS}
	for f := 0; f < k; f++ {
		name, score := best(f)
		_, test := split(cv.Grid[name], f)
		cvRep.PerQuestion = append(cvRep.PerQuestion, test...)
		var held []string
		for _, c := range convs {
			if fold[c.SampleID] == f {
				held = append(held, c.SampleID)
			}
		}
		_, dtest := split(cv.Default, f)
		cv.Choices = append(cv.Choices, FoldChoice{HeldOut: held, Candidate: name, TrainScore: score, TestScore: Objective(test), DefaultTestScore: Objective(dtest)})
	}
	cvRep.summarize()
	cv.CrossValidated = cvRep
	cv.InSampleChoice, _ = best(-1)
	cv.InSample = cv.Grid[cv.InSampleChoice]
	if rp := search.DefaultParams().Rerank; opts.Level != LevelRecords && rp.Weights != (search.RerankWeights{}) && len(opts.Candidates) == 0 {
		depth := rp.Depth
		if depth <= 0 {
			depth = 100
		}
		if k != len(convs) {
			return nil, errors.New("locomo: the re-ranker is cross-validated leave-one-conversation-out: --folds must be the number of conversations")
		}
		cv.Rerank = ShippedRerank(RerankData(convs, search.DefaultParams(), depth), depth, nil)
		cv.GridCrossValidated = cv.CrossValidated
		with := func(r *Report) *Report {
			x := &Report{Level: any.Level, Ks: any.Ks, Turns: any.Turns, Skipped: any.Skipped, IngestTPS: any.IngestTPS, LatencyMS: any.LatencyMS, PerQuestion: r.PerQuestion}
			x.summarize()
			return x
		}
		cv.CrossValidated, cv.InSample = with(cv.Rerank.CrossValidated), with(cv.Rerank.InSample)
		cv.InSampleChoice = "default first stage + re-ranker trained on all conversations"
	}
	return cv, nil
}

// WriteText prints the cross-validated, in-sample, default and BM25
// figures side by side (overall and per category), the per-fold choices,
// and the ten best candidates in sample.
func (cv *CVReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "LoCoMo retrieval, level %s, %d-fold cross-validation over conversations (%d questions, categories 1–4)\n\n",
		cv.CrossValidated.Level, cv.Folds, cv.CrossValidated.Questions)
	cols := []struct {
		name string
		r    *Report
	}{{"plain BM25", cv.Baseline}, {"default", cv.Default}, {"cross-validated", cv.CrossValidated}, {"in-sample best", cv.InSample}}
	fmt.Fprintf(w, "%-22s", "recall@10 / all@10")
	for _, c := range cols {
		fmt.Fprintf(w, " %17s", c.name)
	}
	fmt.Fprintln(w)
	line := func(label string, get func(*Report) (Metrics, bool)) {
		fmt.Fprintf(w, "%-22s", label)
		for _, c := range cols {
			m, ok := get(c.r)
			if !ok {
				fmt.Fprintf(w, " %17s", "—")
				continue
			}
			fmt.Fprintf(w, "     %.3f / %.3f", m.Recall[10], m.All[10])
		}
		fmt.Fprintln(w)
	}
	line("overall (1–4)", func(r *Report) (Metrics, bool) { return r.Overall, true })
	for c := 1; c <= 4; c++ {
		c := c
		line(fmt.Sprintf("%d %s", c, catNames[c]), func(r *Report) (Metrics, bool) {
			if m := r.Categories[c]; m != nil {
				return *m, true
			}
			return Metrics{}, false
		})
	}
	if len(cols) > 0 {
		writeOtherKs(w, cols[0].r.Ks, func(yield func(*Report) bool) {
			for _, c := range cols {
				if !yield(c.r) {
					return
				}
			}
		})
	}
	if m, c1 := cv.CrossValidated.Overall, cv.CrossValidated.Categories[1]; c1 != nil {
		fmt.Fprintf(w, "\ncross-validated, four decimals: recall@10 %.4f, all@10 %.4f, multi-hop all@10 %.4f\n", m.Recall[10], m.All[10], c1.All[10])
	}
	fmt.Fprintln(w, "\nchoices per fold (trained on the other folds):")
	for _, f := range cv.Choices {
		fmt.Fprintf(w, "  held out %v: %s (train objective %.4f; held-out objective %.4f, default %.4f)\n", f.HeldOut, f.Candidate, f.TrainScore, f.TestScore, f.DefaultTestScore)
	}
	fmt.Fprintf(w, "in-sample best: %s\n", cv.InSampleChoice)
	if cv.Rerank != nil {
		g := cv.GridCrossValidated.Overall
		fmt.Fprintf(w, "\nthe cross-validated and in-sample columns are the shipped pipeline: the default first stage re-ranked (events) by %s,\n"+
			"weights trained without the held-out conversation (first-stage grid alone, cross-validated: %.3f / %.3f, multi-hop all@10 %.3f)\n",
			cv.Rerank.Name, g.Recall[10], g.All[10], cv.GridCrossValidated.Categories[1].All[10])
		for _, f := range cv.Rerank.Folds {
			fmt.Fprintf(w, "  held out %s: weights %v  train %.4f  held-out %.4f (first stage %.4f)\n", f.HeldOut, fmtW(f.Weights), f.Train, f.Test, f.Before)
		}
		fmt.Fprintf(w, "  all conversations: %v\n", fmtW(cv.Rerank.InSampleWeights))
	}
	type row struct {
		name string
		s    float64
	}
	var rows []row
	for n, r := range cv.Grid {
		rows = append(rows, row{n, Objective(r.PerQuestion)})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].s != rows[j].s {
			return rows[i].s > rows[j].s
		}
		return rows[i].name < rows[j].name
	})
	fmt.Fprintln(w, "\ncandidates in sample, best first (objective = mean of recall@10 and all@10):")
	for _, r := range rows {
		m := cv.Grid[r.name].Overall
		fmt.Fprintf(w, "  %-30s %.4f  recall@10 %.3f all@10 %.3f  cat1 all@10 %.3f\n", r.name, r.s, m.Recall[10], m.All[10], cv.Grid[r.name].Categories[1].All[10])
	}
	fmt.Fprintln(w, "\nper-category tables:")
	for _, c := range cols {
		fmt.Fprintf(w, "\n[%s]\n", c.name)
		c.r.writeTable(w)
	}
}

// JSON is {"folds", "cross_validated", "in_sample", "in_sample_choice",
// "choices", "default", "baseline_bm25"}, each report in Report.JSON's
// shape, and with a default re-ranker (CVReport.Rerank) also
// "grid_cross_validated" (a report) and "rerank" ({"trainer", "depth",
// "folds": [{"held_out", "weights", "train_objective", "test_objective",
// "first_stage_test_objective"}], "all_weights"}).
func (cv *CVReport) JSON() any {
	var ch []map[string]any
	for _, f := range cv.Choices {
		ch = append(ch, map[string]any{"held_out": f.HeldOut, "candidate": f.Candidate, "train_objective": round(f.TrainScore),
			"test_objective": round(f.TestScore), "default_test_objective": round(f.DefaultTestScore)})
	}
	out := map[string]any{"folds": cv.Folds, "cross_validated": cv.CrossValidated.JSON(), "in_sample": cv.InSample.JSON(),
		"in_sample_choice": cv.InSampleChoice, "choices": ch, "default": cv.Default.JSON(), "baseline_bm25": cv.Baseline.JSON()}
	if cv.Rerank != nil {
		var fs []map[string]any
		for _, f := range cv.Rerank.Folds {
			fs = append(fs, map[string]any{"held_out": f.HeldOut, "weights": f.Weights[:], "train_objective": round(f.Train),
				"test_objective": round(f.Test), "first_stage_test_objective": round(f.Before)})
		}
		out["grid_cross_validated"] = cv.GridCrossValidated.JSON()
		out["rerank"] = map[string]any{"trainer": cv.Rerank.Name, "depth": cv.Rerank.Depth, "folds": fs, "all_weights": cv.Rerank.InSampleWeights[:]}
	}
	return out
}

func mkdir(d string) error { return os.MkdirAll(d, 0o755) }

// writeOtherKs prints overall recall at each measured k but 10 (shown
// above it), one column per report: the row names the ks it holds, so
// that a --k without 5, 20 or 50 prints no figure it never measured.
func writeOtherKs(w io.Writer, ks []int, reports iter.Seq[*Report]) {
	var other []int
	for _, k := range ks {
		if k != 10 {
			other = append(other, k)
		}
	}
	if len(other) == 0 {
		return
	}
	label := make([]string, len(other))
	for i, k := range other {
		label[i] = fmt.Sprintf("@%d", k)
	}
	fmt.Fprintf(w, "%-22s", "recall"+strings.Join(label, " / "))
	for r := range reports {
		vals := make([]string, len(other))
		for i, k := range other {
			vals[i] = fmt.Sprintf("%.3f", r.Overall.Recall[k])
		}
		fmt.Fprintf(w, " %5s", strings.Join(vals, "/"))
	}
	fmt.Fprintln(w)
}
