package search

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Rerank features, in the order of Features' vectors.
const (
	FeatScore         = iota // first-stage score / the best first-stage score of the list
	FeatRank                 // -log2(2 + rank), rank from 0
	FeatText                 // BM25 of the text field alone (k1, b of the field), / the list's best
	FeatContext              // BM25 of the context field alone, / the list's best
	FeatSpeaker              // 1 if the query names the document's speaker
	FeatDate                 // BM25 of the date field alone, / the list's best
	FeatSession              // BM25 of the document's session (turns as term frequency), / the best session
	FeatCoverText            // share of the query's distinct terms in the text
	FeatCoverAll             // share of the query's distinct terms in text or context
	FeatTimeCue              // 1 if the query asks "when" and the text mentions a time
	FeatLength               // log(1 + text length in terms)
	FeatSessBest             // best first-stage score of another candidate of the same session / the list's best
	FeatSessRank             // -log2(2 + rank of the document's session by session BM25 among the candidates' sessions)
	FeatSeed                 // overlap of the text with the top 3 candidates' text terms outside the query (multi-hop), / the list's best
	FeatEntity               // share of the query's entity words (EntityWords, speakers left out) in text or context
	FeatAggSessBest          // FeatSessBest for an aggregate question (IsAggregateQuestion), else 0
	FeatAggSession           // FeatSession for an aggregate question, else 0
	FeatNeighbour            // best first-stage score of the previous or next live turn of the session by Doc.Key, when a candidate, / the list's best
	FeatAggNeighbour         // FeatNeighbour for an aggregate question, else 0
	FeatListSessBest         // FeatSessBest for a list question (IsListQuestion, wider than IsAggregateQuestion), else 0
	FeatListSession          // FeatSession for a list question, else 0
	FeatListNeighbour        // FeatNeighbour for a list question, else 0
	FeatRound2               // the second round's score (RerankParams.Round2) / its best, 0 when not among its results
	FeatFromRound2           // 1 if the candidate came from the second round alone (not among the first stage's)
	NumFeatures
)

// FeatureNames names the rerank features (FeatScore …).
var FeatureNames = [NumFeatures]string{"score", "rank", "text", "context", "speaker", "date", "session", "cover_text", "cover_all", "time_cue", "length", "sess_best", "sess_rank", "seed", "entity", "agg_sess_best", "agg_session", "neighbour", "agg_neighbour", "list_sess_best", "list_session", "list_neighbour", "round2", "from_round2"}

// Features returns one vector of NumFeatures features per result of res
// (a first-stage ranking of query over scope sc, best first), for a
// learned re-ranker: per-field BM25 parts, the session-level BM25 of
// the document's Doc.Group (each session one document, term frequency
// the number of its turns in scope holding the term in their text), the
// first-stage score and rank, speaker and time cue matches, query-term
// coverage and text length; and what lies beyond the candidate among
// the candidates: the best score of another candidate of its session and
// of its neighbours (the previous and next live turn of the session in
// Doc.Key order, the same for an incrementally updated index as for a
// fresh one), its session's rank by
// session BM25, the overlap of its text with the top 3 candidates' terms
// outside the query (a second hop, each term weighted by its rarity among
// the candidates), the share of the query's entity words it holds, and
// for aggregate questions the session features again. Scores are divided
// by the best of the list, so the features of one query are comparable
// with another's. Nil when res is empty or sc does not cover the index.
func (ix *Index) Features(query string, sc *Scope, res []Result) [][NumFeatures]float64 {
	return ix.features(query, sc, res, nil, len(res))
}

// features is Features with the second round's features: r2 holds the
// second round's scores by document (nil: no second round), and
// res[nfirst:] came from the second round alone.
func (ix *Index) features(query string, sc *Scope, res []Result, r2 map[int]float64, nfirst int) [][NumFeatures]float64 {
	if len(res) == 0 || sc == nil || len(sc.allow) != len(ix.lens) {
		return nil
	}
	st := sc.stats()
	qs := ix.queryTerms(nil, query, st, sc.allow)
	spk := ix.namedSpeakers(query)
	when := IsWhenQuestion(query)
	out := getFeatures(len(res))
	// session documents: turns in scope per session, and per query term
	// the turns of each session holding it in their text; scored for the
	// candidates' sessions only
	sessScore := map[int32]float64{}
	if ng := len(ix.groupIDs); ng > 0 {
		sessLen := make([]int32, ng)
		nsess, total := 0, 0
		for d, ok := range sc.allow {
			if g := ix.group[d]; ok && g >= 0 {
				if sessLen[g] == 0 {
					nsess++
				}
				sessLen[g]++
				total++
			}
		}
		candPos := make([]int32, ng) // session → 1 + its place among the candidates' sessions, 0 none
		var cands []int32
		for _, r := range res {
			if g := ix.group[r.Doc]; g >= 0 && candPos[g] == 0 {
				cands = append(cands, g)
				candPos[g] = int32(len(cands))
			}
		}
		if nsess > 0 && len(cands) > 0 {
			avg := float64(total) / float64(nsess)
			const k1, b = 1.2, 0.75
			seen := make([]int32, ng) // session → 1 + the last query term found in it
			tf := make([]int, len(cands))
			for qi, q := range qs {
				clear(tf)
				df := 0
				data, doc := ix.post.lists[q.id], int32(-1)
				var tfs [NumFields]uint16
				for i := 0; i < len(data); {
					var mask uint8
					doc, mask, i = entry(data, i, doc, &tfs)
					if mask&(1<<FieldText) == 0 || !sc.allow[doc] {
						continue
					}
					g := ix.group[doc]
					if g < 0 {
						continue
					}
					if seen[g] != int32(qi+1) {
						seen[g] = int32(qi + 1)
						df++
					}
					if p := candPos[g]; p > 0 {
						tf[p-1]++
					}
				}
				if df == 0 {
					continue
				}
				w := idf(nsess, df)
				for p, n := range tf {
					if n == 0 {
						continue
					}
					g, f := cands[p], float64(n)
					sessScore[g] += q.weight * w * f * (k1 + 1) / (f + k1*(1-b+b*float64(sessLen[g])/avg))
				}
			}
		}
	}
	var field [NumFields][]float64
	fieldBuf := make([]float64, int(NumFields)*len(res))
	for f := range field {
		field[f] = fieldBuf[int(f)*len(res) : int(f+1)*len(res)]
	}
	for i, r := range res {
		d := int32(r.Doc)
		v := &out[i]
		v[FeatScore] = r.Score
		v[FeatRank] = -math.Log2(2 + float64(i))
		inText, inAll := 0, 0
		mask0 := uint8(0)
		for _, q := range qs {
			mask, tfs := ix.post.find(q.id, d)
			mask0 |= mask
			if mask&(1<<FieldText) != 0 {
				inText++
			}
			if mask&(1<<FieldText|1<<FieldContext) != 0 {
				inAll++
			}
			for f := Field(0); f < NumFields; f++ {
				if mask&(1<<f) == 0 || tfs[f] == 0 {
					continue
				}
				fp := ix.p.Fields[f]
				bb := fp.B
				norm := 1 - bb + bb*float64(ix.lens[d][f])/st.avg[f]
				t := float64(tfs[f]) / norm
				field[f][i] += q.weight * q.idf * t / (ix.p.K1 + t)
			}
		}
		if len(qs) > 0 {
			v[FeatCoverText] = float64(inText) / float64(len(qs))
			v[FeatCoverAll] = float64(inAll) / float64(len(qs))
		}
		if len(spk) > 0 && ix.speaker[d] >= 0 && spk[ix.speaker[d]] {
			v[FeatSpeaker] = 1
		}
		if when && ix.hasTime[d] {
			v[FeatTimeCue] = 1
		}
		v[FeatLength] = math.Log1p(float64(ix.lens[d][FieldText]))
		if g := ix.group[d]; g >= 0 {
			v[FeatSession] = sessScore[g]
		}
	}
	ix.contextFeatures(query, qs, res, sessScore, out)
	norm := func(feat int, vals func(i int) float64) {
		best := 0.0
		for i := range out {
			best = max(best, vals(i))
		}
		for i := range out {
			if best > 0 {
				out[i][feat] = vals(i) / best
			} else {
				out[i][feat] = 0
			}
		}
	}
	norm(FeatScore, func(i int) float64 { return res[i].Score })
	norm(FeatText, func(i int) float64 { return field[FieldText][i] })
	norm(FeatContext, func(i int) float64 { return field[FieldContext][i] })
	norm(FeatDate, func(i int) float64 { return field[FieldDate][i] })
	sess := make([]float64, len(out))
	for i := range out {
		sess[i] = out[i][FeatSession]
	}
	norm(FeatSession, func(i int) float64 { return sess[i] })
	seed := make([]float64, len(out))
	for i := range out {
		seed[i] = out[i][FeatSeed]
	}
	norm(FeatSeed, func(i int) float64 { return seed[i] })
	if IsAggregateQuestion(query) {
		for i := range out {
			out[i][FeatAggSessBest] = out[i][FeatSessBest]
			out[i][FeatAggSession] = out[i][FeatSession]
			out[i][FeatAggNeighbour] = out[i][FeatNeighbour]
		}
	}
	if IsListQuestion(query) {
		for i := range out {
			out[i][FeatListSessBest] = out[i][FeatSessBest]
			out[i][FeatListSession] = out[i][FeatSession]
			out[i][FeatListNeighbour] = out[i][FeatNeighbour]
		}
	}
	if len(r2) > 0 {
		best := 0.0
		for _, s := range r2 {
			best = max(best, s)
		}
		for i, r := range res {
			if best > 0 {
				out[i][FeatRound2] = r2[r.Doc] / best
			}
			if i >= nfirst {
				out[i][FeatFromRound2] = 1
			}
		}
	}
	return out
}

// Round2Params configures the re-ranker's second retrieval round, a
// candidate source of its own for multi-hop questions: the query's terms
// plus the distinctive text terms of the first stage's best Seeds turns
// (those at most MaxCandDF of the first stage's candidates hold, the
// rarest among them first, at most Terms) are ranked by BM25F over the
// same scope; its best Depth turns not among the first stage's
// candidates join them (score 0, after them), and every candidate gets
// its second-round score (FeatRound2) and whether it came from the
// second round alone (FeatFromRound2). Only for list questions
// (IsListQuestion) unless All. Depth 0 turns it off, as in
// DefaultParams: on LoCoMo's development split no setting tried raised
// the cross-validated figures (docs/bench/memory.md, issue 16 round 7).
type Round2Params struct {
	Depth     int
	Seeds     int // default 3
	Terms     int // default 10
	MaxCandDF int // default 2
	All       bool
	NoQuery   bool    // the seeds' terms alone, without the query's
	NoExtra   bool    // score the first stage's candidates only (FeatRound2), add none
	Weight    float64 // each seed term's weight in the query (default 1; the query's own terms weigh 1)
	TextSeeds bool    // seeds are the best turns holding a query word other than a speaker's name in their text
}

func (p Round2Params) on(query string) bool {
	return p.Depth > 0 && (p.All || IsListQuestion(query))
}

// round2 runs the second round of p for query over sc seeded by the
// first stage's turns evs (best first): the turns it brings that evs
// lacks (best first, Score 0) and its scores by document.
func (ix *Index) round2(query string, sc *Scope, evs []Result, p Round2Params) (extra []Result, r2 map[int]float64) {
	if !p.on(query) || len(evs) == 0 {
		return nil, nil
	}
	seeds, nterms, maxDF := p.Seeds, p.Terms, p.MaxCandDF
	if seeds <= 0 {
		seeds = 3
	}
	if nterms <= 0 {
		nterms = 10
	}
	if maxDF <= 0 {
		maxDF = 2
	}
	qs := ix.parseQuery(query)
	skip := make(map[int32]bool, len(qs)+32) // the query's terms, then the terms picked
	for _, q := range qs {
		skip[q.id] = true
	}
	df := map[int32]int{} // term → candidates holding it in their text
	var buf []int32
	for _, r := range evs {
		buf = ix.fwd.terms(int32(r.Doc), buf[:0])
		for _, t := range buf {
			df[t]++
		}
	}
	type pick struct {
		id       int32
		df, seed int
	}
	var picks []pick
	for i, ns := 0, 0; ns < seeds && i < len(evs); i++ {
		if p.TextSeeds && !slices.ContainsFunc(qs, func(q qterm) bool {
			mask, _ := ix.post.find(q.id, int32(evs[i].Doc))
			return mask&(1<<FieldText) != 0 && ix.spkTerms[q.text] == nil
		}) {
			continue
		}
		ns++
		buf = ix.fwd.terms(int32(evs[i].Doc), buf[:0])
		for _, t := range buf {
			if skip[t] || df[t] > maxDF {
				continue
			}
			skip[t] = true
			picks = append(picks, pick{t, df[t], i})
		}
	}
	if len(picks) == 0 {
		return nil, nil
	}
	slices.SortFunc(picks, func(a, b pick) int {
		if a.df != b.df {
			return a.df - b.df
		}
		if a.seed != b.seed {
			return a.seed - b.seed
		}
		return strings.Compare(ix.termStr[a.id], ix.termStr[b.id]) // independent of insertion order
	})
	picks = picks[:min(nterms, len(picks))]
	wt := p.Weight
	if wt <= 0 {
		wt = 1
	}
	parse := func() []qterm {
		var out []qterm
		if !p.NoQuery {
			out = ix.parseQuery(query)
		}
		for _, pk := range picks {
			out = append(out, qterm{id: pk.id, text: ix.termStr[pk.id], weight: wt})
		}
		return out
	}
	res, _ := ix.searchTermsLazy(query, parse, sc, p.Depth)
	if len(res) == 0 {
		return nil, nil
	}
	in := make(map[int]bool, len(evs))
	for _, r := range evs {
		in[r.Doc] = true
	}
	r2 = make(map[int]float64, len(res))
	for _, r := range res {
		r2[r.Doc] = r.Score
		if !in[r.Doc] && ix.group[r.Doc] >= 0 && !p.NoExtra {
			extra = append(extra, Result{Doc: r.Doc})
		}
	}
	return extra, r2
}

// rerankCands is what the re-ranker ranks for one query: the first
// stage's best (res, why explaining them lazily), the turns among them
// (evs[:nfirst], at places slots of res) then the second round's turns
// (evs[nfirst:]), and their features.
type rerankCands struct {
	res    []Result
	why    func(int) string
	evs    []Result
	slots  []int
	nfirst int
	fs     [][NumFeatures]float64
}

// rerankCandidates ranks the first stage's best n for query over sc,
// runs the second round of p and makes the candidates' features.
func (ix *Index) rerankCandidates(query string, sc *Scope, n int, p Round2Params) rerankCands {
	var c rerankCands
	if ix.p.Conv.reranks() && ix.conv != nil {
		c.res = ix.searchConv(query, sc, n)
	} else {
		c.res, c.why = ix.searchScopeLazy(query, sc, n)
	}
	for i, r := range c.res {
		if ix.group[r.Doc] >= 0 {
			c.evs = append(c.evs, r)
			c.slots = append(c.slots, i)
		}
	}
	c.nfirst = len(c.evs)
	extra, r2 := ix.round2(query, sc, c.evs, p)
	c.evs = append(c.evs, extra...)
	c.fs = ix.features(query, sc, c.evs, r2, c.nfirst)
	return c
}

// RerankCandidates is what the re-ranker of p ranks for query over sc
// (the stores' SearchScope with p as Params.Rerank and k ≤ p.Depth):
// the turns among the first stage's best p.Depth (default 100), in its
// order, then those the second round (p.Round2) adds, with their
// Features. The index's own Params.Rerank is not used.
func (ix *Index) RerankCandidates(query string, sc *Scope, p RerankParams) ([]Result, [][NumFeatures]float64) {
	depth := p.Depth
	if depth <= 0 {
		depth = 100
	}
	c := ix.rerankCandidates(query, sc, depth, p.Round2)
	return c.evs, c.fs
}

// contextFeatures sets the features of res that look beyond the
// candidate itself (FeatSessBest, FeatNeighbour, FeatSessRank, FeatSeed
// before its normalisation, FeatEntity) in out; sessScore is the session
// BM25 per session id.
func (ix *Index) contextFeatures(query string, qs []qterm, res []Result, sessScore map[int32]float64, out [][NumFeatures]float64) {
	best := 0.0
	for _, r := range res {
		best = max(best, r.Score)
	}
	if best > 0 && len(ix.groupIDs) > 0 {
		at := make(map[int32]int, len(res)) // document → its place in res
		for i, r := range res {
			at[int32(r.Doc)] = i
		}
		for i, r := range res {
			d := int32(r.Doc)
			p := ix.groupPos(d)
			if p < 0 {
				continue
			}
			l := ix.groupDocs[ix.group[d]]
			for _, q := range [2]int{p - 1, p + 1} {
				if q >= 0 && q < len(l) {
					if j, ok := at[l[q]]; ok {
						out[i][FeatNeighbour] = max(out[i][FeatNeighbour], res[j].Score/best)
					}
				}
			}
		}
		top2 := map[int32][2]float64{} // per session, its two best scores / best
		for _, r := range res {
			g := ix.group[r.Doc]
			if g < 0 {
				continue
			}
			s, b := r.Score/best, top2[g]
			if s > b[0] {
				b[1], b[0] = b[0], s
			} else if s > b[1] {
				b[1] = s
			}
			top2[g] = b
		}
		type gs struct {
			g int32
			s float64
		}
		var order []gs
		seen := map[int32]bool{}
		for i, r := range res {
			d := int32(r.Doc)
			g := ix.group[d]
			if g < 0 {
				continue
			}
			s, b := r.Score/best, top2[g]
			if s >= b[0] {
				out[i][FeatSessBest] = b[1]
			} else {
				out[i][FeatSessBest] = b[0]
			}
			if !seen[g] {
				seen[g] = true
				order = append(order, gs{g, sessScore[g]})
			}
		}
		slices.SortStableFunc(order, func(a, b gs) int {
			switch {
			case a.s > b.s:
				return -1
			case a.s < b.s:
				return 1
			}
			return 0
		})
		rank := make(map[int32]int, len(order))
		for i, o := range order {
			rank[o.g] = i
		}
		for i, r := range res {
			if g := ix.group[r.Doc]; g >= 0 {
				out[i][FeatSessRank] = -math.Log2(2 + float64(rank[g]))
			}
		}
	}
	// multi-hop seeds: the text terms of the top 3 outside the query,
	// each weighted log(1 + candidates / (1 + candidates holding it))
	inQuery := make(map[int32]bool, len(qs))
	for _, q := range qs {
		inQuery[q.id] = true
	}
	terms := make([][]int32, len(res))
	var flat []int32 // every candidate's terms, terms[i] a part of it
	for i, r := range res {
		start := len(flat)
		flat = ix.fwd.terms(int32(r.Doc), flat)
		terms[i] = flat[start:len(flat):len(flat)]
	}
	nseed := min(3, len(res))
	seeds := map[int32]int{} // term → seeds holding it
	for i := 0; i < nseed; i++ {
		for _, t := range terms[i] {
			if !inQuery[t] {
				seeds[t]++
			}
		}
	}
	if len(seeds) > 0 {
		df := make(map[int32]int, len(seeds)) // seed term → candidates holding it (only seeds' are read)
		for i := range res {
			for _, t := range terms[i] {
				if _, ok := seeds[t]; ok {
					df[t]++
				}
			}
		}
		n := float64(len(res))
		for i := range res {
			s := 0.0
			for _, t := range terms[i] {
				c := seeds[t]
				if i < nseed {
					c-- // its own terms are not evidence of a second hop
				}
				if c > 0 {
					s += math.Log(1 + n/float64(1+df[t]))
				}
			}
			out[i][FeatSeed] = s
		}
	}
	// entity words of the query that are not speakers' names
	var ents []int32
	for _, e := range EntityWords(query) {
		for _, t := range ix.p.Analyzer.Terms(e) {
			if id, ok := ix.terms[t]; ok && ix.spkTerms[t] == nil && !slices.Contains(ents, id) {
				ents = append(ents, id)
			}
			break
		}
	}
	if len(ents) > 0 {
		for i, r := range res {
			c := 0
			for _, id := range ents {
				if mask, _ := ix.post.find(id, int32(r.Doc)); mask&(1<<FieldText|1<<FieldContext) != 0 {
					c++
				}
			}
			out[i][FeatEntity] = float64(c) / float64(len(ents))
		}
	}
}

// RerankWeights is a linear re-ranker: a candidate scores the dot
// product of its Features with Weights.
type RerankWeights [NumFeatures]float64

// RerankParams configures the learned re-ranker of SearchScope: the best
// Depth documents of the first stage (BM25F and Params.Conv; default 100)
// are re-ordered by Weights · Features. Zero Weights turn it off.
type RerankParams struct {
	Weights RerankWeights
	Depth   int
	// Round2 adds a second retrieval round's turns to the candidates
	// (multi-hop questions); the zero value turns it off.
	Round2 Round2Params
}

func (r RerankParams) on() bool { return r.Weights != RerankWeights{} }

// LearnedRerank is the re-ranker of DefaultParams, trained on LoCoMo's
// five development conversations (events level, DefaultParams' first
// stage, top 100): pairwise logistic regression, every non-evidence
// candidate a negative; l2, the pair weighting (every pair alike, or
// LambdaRank-style by the change of 1/log2(2 + rank)) and the feature
// set chosen by nested leave-one-conversation-out (internal/eval/locomo
// ShippedRerank; docs/bench/memory.md, issue 16 round 6). These weights
// are trained on all five; the cross-validated figures are of weights
// trained without each held-out conversation.
func LearnedRerank() RerankParams {
	return RerankParams{Depth: 100, Weights: learnedWeights}
}

// learnedWeights are ShippedRerank's weights on all five conversations
// (the inner leave-one-out chose l2 0.001, the LambdaRank-style pair
// weights, and left entity, sess_rank and the agg_* features out: the
// list_* features take their place), rounded to 4 decimals, in
// FeatureNames order.
var learnedWeights = RerankWeights{1, 0.0775, 0.0862, -0.1405, 0.9278, 0.4843, 0.4419, 0.1472, 0.2756, 0.4364, 0.2252, 0.6002, 0, 0.1232, 0, 0, 0, 0.689, 0, -0.2243, -0.3676, -0.2959}

// rerankScope is SearchScope with Params.Rerank, applied to events
// only: the first stage's best Depth (at least k) are ranked; the turns
// among them (documents with a Doc.Group, a session) are re-ordered by
// the re-ranker among themselves and take the turns' places in that
// list, so that records (no Doc.Group) keep their places and their
// first-stage ranking; the list is cut to k. A re-ranked turn's Score is
// the first-stage score of the place it takes (the list stays in
// descending score on the first stage's scale, comparable with other
// searches'); its explanation gives the re-ranker's score and parts. An
// index without sessions is not re-ranked (and pays nothing for it).
// With explain false no explanation is built (every Explain empty).
func (ix *Index) rerankScope(query string, sc *Scope, k int, explain bool) []Result {
	if len(ix.groupIDs) == 0 {
		res := ix.searchConv(query, sc, k)
		if !explain {
			for i := range res {
				res[i].Explain = ""
			}
		}
		return res
	}
	depth := ix.p.Rerank.Depth
	if depth <= 0 {
		depth = 100
	}
	rc := ix.rerankCandidates(query, sc, max(k, depth), ix.p.Rerank.Round2)
	res, why, evs, fs, nfirst := rc.res, rc.why, rc.evs, rc.fs, rc.nfirst
	if !explain {
		why = func(int) string { return "" }
	}
	explainOf := func(i int) string {
		if why != nil {
			return why(i)
		}
		return res[i].Explain
	}
	slots := rc.slots
	for j := range evs[nfirst:] { // the second round's turns: places after the first stage's
		slots = append(slots, len(res)+j)
	}
	if fs == nil {
		if len(res) > k {
			res = res[:k]
		}
		if why != nil {
			for i := range res {
				res[i].Explain = why(i)
			}
		}
		return res
	}
	w := ix.p.Rerank.Weights
	// the candidates in re-ranked order, as indexes into evs (a
	// candidate's features are 24 floats: sorting them would move 23 KB)
	scores := make([]float64, len(evs))
	order := make([]int32, len(evs))
	for i := range evs {
		s := 0.0
		for j, x := range fs[i] {
			s += w[j] * x
		}
		scores[i], order[i] = s, int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		switch {
		case scores[a] > scores[b]:
			return -1
		case scores[a] < scores[b]:
			return 1
		}
		return 0
	})
	out := make([]Result, min(k, len(res)+len(evs)-nfirst))
	for i := range out {
		if i >= len(res) { // a second-round turn's place, filled below
			continue
		}
		if why != nil && ix.group[res[i].Doc] < 0 { // a record's place (turns' are filled below)
			out[i] = Result{Doc: res[i].Doc, Score: res[i].Score, Explain: why(i)}
		} else {
			out[i] = res[i]
		}
	}
	slotScore := func(slot int) float64 { // places past the first stage's take its last score
		if slot < len(res) {
			return res[slot].Score
		}
		return res[len(res)-1].Score
	}
	var origin map[int]int
	for j, slot := range slots {
		if slot >= k {
			break
		}
		e := order[j]
		doc := evs[e].Doc
		if !explain {
			out[slot] = Result{Doc: doc, Score: slotScore(slot)}
			continue
		}
		if origin == nil {
			origin = make(map[int]int, len(res)) // document → its first-stage place
			for i, r := range res {
				origin[r.Doc] = i
			}
		}
		b := make([]byte, 0, 200)
		b = append(b, "rerank "...)
		b = strconv.AppendFloat(b, scores[e], 'f', 4, 64)
		b = append(b, " = ["...)
		first := true
		for j, v := range fs[e] {
			if w[j] == 0 || v == 0 {
				continue
			}
			if !first {
				b = append(b, " + "...)
			}
			first = false
			b = append(b, FeatureNames[j]...)
			b = append(b, ' ')
			b = strconv.AppendFloat(b, w[j], 'g', 3, 64)
			b = append(b, "×"...)
			b = strconv.AppendFloat(b, v, 'f', 3, 64)
		}
		if o, ok := origin[doc]; ok {
			b = append(b, "] of first stage "...)
			b = append(b, explainOf(o)...)
		} else {
			b = append(b, "] of the second round"...)
		}
		out[slot] = Result{Doc: doc, Score: slotScore(slot), Explain: string(b)}
	}
	putFeatures(fs)
	return out
}

// featurePool recycles rerankScope's feature rows (24 floats per
// candidate, 100 candidates per query: 19 KB a search). Rows handed to
// callers outside (Features, RerankCandidates) are simply not returned.
var featurePool sync.Pool // of *[][NumFeatures]float64

// getFeatures returns n zeroed feature rows.
func getFeatures(n int) [][NumFeatures]float64 {
	if p, ok := featurePool.Get().(*[][NumFeatures]float64); ok && cap(*p) >= n {
		out := (*p)[:n]
		clear(out)
		return out
	}
	return make([][NumFeatures]float64, n)
}

// putFeatures returns rows from getFeatures that nothing refers to any more.
func putFeatures(fs [][NumFeatures]float64) {
	if cap(fs) == 0 || cap(fs) > 4096 {
		return
	}
	featurePool.Put(&fs)
}
