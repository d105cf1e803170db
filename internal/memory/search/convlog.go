package search

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ConvParams configures model-free techniques for long conversational
// logs, applied on top of BM25F. The zero value turns them all off (and
// then SearchScope is exactly the BM25F ranking).
type ConvParams struct {
	// SessionWeight λ (0–1) fuses a session-level BM25 into turn scores:
	// each session (Doc.Group) is one document whose term frequency is the
	// number of its turns holding the term in their text and whose length
	// is its number of turns (k1 1.2, b 0.75, idf over sessions). A
	// candidate turn scores (1-λ)·turn/best turn + λ·session/best session.
	// Unlike Params.GroupWeight, the session score does not come from the
	// turns' own scores: a session matching several query words in
	// different turns beats one turn that matches them all. 0 disables it.
	SessionWeight float64
	// MultiHopSeeds is how many of the first round's top documents seed a
	// second round whose query is their entity words (capitalised words
	// not opening a sentence, speakers' names and the query's own words
	// left out); 0 disables it. The two rounds are fused by
	// score-normalised interpolation: first/best first +
	// MultiHopWeight·second/best second.
	MultiHopSeeds  int
	MultiHopWeight float64
	// Proximity multiplies a candidate's score by (1 + Proximity × the
	// share of the query's adjacent term pairs that are adjacent in the
	// document's text, after stop-word removal); 0 disables it.
	Proximity float64
	// RelTime appends the dates of relative time expressions in an
	// utterance's text ("yesterday", "last Tuesday", "two weeks ago"),
	// resolved against its Doc.Date ("2 January 2006 Monday"), to its date
	// field as words ("7 May 2023", "week of 1 May 2023"), unless the text
	// already writes that date out (records carry the dates extraction
	// resolved). Only documents with a Doc.Speaker are utterances: a
	// record's date is when it was written, not when its words were said.
	RelTime bool
	// Diversity (0–1) re-ranks greedily so that the n-th document of a
	// session (Doc.Group) counts Diversity^(n-1) of its score: evidence of
	// one question spread over several sessions (multi-hop) is not crowded
	// out by one session's turns. 0 disables it.
	Diversity float64
	// DiversityAggregate applies Diversity to aggregate questions only
	// (IsAggregateQuestion: "What activities has…", "How many times…").
	DiversityAggregate bool
	// Depth is how many first-round documents the fusion re-ranks
	// (default 100).
	Depth int
}

// reranks reports whether SearchScope fuses anything after BM25F.
func (c ConvParams) reranks() bool {
	return c.SessionWeight > 0 || (c.MultiHopSeeds > 0 && c.MultiHopWeight > 0) || c.Proximity > 0 || c.Diversity > 0
}

func (c ConvParams) depth() int {
	if c.Depth > 0 {
		return c.Depth
	}
	return 100
}

// convState is what the ConvParams techniques keep per document, built by
// Add (only the parts an enabled technique needs).
type convState struct {
	group    []int32 // per doc: session id, -1 none
	groupIDs map[string]int32
	// session documents: per term, per session, turns holding it
	sessTF   map[string]map[int32]int32
	sessLen  []int32    // per session: live turns
	docTerms [][]string // per doc: its distinct text terms (for Remove)
	entities [][]string // per doc: entity words (multi-hop seeds)
	bigrams  [][]uint64 // per doc: sorted adjacent text term pairs
	speakers map[string]bool
	dead     []bool
}

func (cs *convState) clone() *convState {
	if cs == nil {
		return nil
	}
	c := &convState{
		group: clip(cs.group), sessLen: slices.Clone(cs.sessLen), docTerms: clip(cs.docTerms),
		entities: clip(cs.entities), bigrams: clip(cs.bigrams), dead: slices.Clone(cs.dead),
		groupIDs: make(map[string]int32, len(cs.groupIDs)), sessTF: make(map[string]map[int32]int32, len(cs.sessTF)),
		speakers: make(map[string]bool, len(cs.speakers)),
	}
	for k, v := range cs.groupIDs {
		c.groupIDs[k] = v
	}
	for t, m := range cs.sessTF {
		c.sessTF[t] = make(map[int32]int32, len(m))
		for g, n := range m {
			c.sessTF[t][g] = n
		}
	}
	for k := range cs.speakers {
		c.speakers[k] = true
	}
	return c
}

// convDoc returns d as Add indexes it: with RelTime, its resolved
// relative dates appended to the date field.
func (p Params) convDoc(d Doc) Doc {
	if !p.Conv.RelTime || d.Date == "" || d.Speaker == "" || !HasTimeExpression(d.Text) {
		return d
	}
	ref, err := time.Parse("2 January 2006 Monday", d.Date)
	if err != nil {
		return d
	}
	var words []string
	for _, r := range ResolveRelative(d.Text, ref) {
		if w := r.Words(); !strings.Contains(d.Text, w) && !slices.Contains(words, w) {
			words = append(words, w) // a date the text already writes out (a record's "(7 May 2023)") is not added again
		}
	}
	if len(words) > 0 {
		d.Date += " " + strings.Join(words, " ")
	}
	return d
}

// convAdd records document doc (d as convDoc returned it) for the
// techniques p enables.
func (ix *Index) convAdd(d Doc, doc int) {
	cp := ix.p.Conv
	if !cp.reranks() {
		return
	}
	cs := ix.conv
	if cs == nil {
		cs = &convState{groupIDs: map[string]int32{}, sessTF: map[string]map[int32]int32{}, speakers: map[string]bool{}}
		ix.conv = cs
	}
	for len(cs.group) < doc { // documents added before (cannot happen: p is fixed)
		cs.group, cs.docTerms, cs.entities, cs.bigrams, cs.dead = append(cs.group, -1), append(cs.docTerms, nil), append(cs.entities, nil), append(cs.bigrams, nil), append(cs.dead, false)
	}
	g := int32(-1)
	var terms []string
	if (cp.SessionWeight > 0 || cp.Diversity > 0) && d.Group != "" {
		id, ok := cs.groupIDs[d.Group]
		if !ok {
			id = int32(len(cs.groupIDs))
			cs.groupIDs[d.Group] = id
			cs.sessLen = append(cs.sessLen, 0)
		}
		g = id
		cs.sessLen[g]++
		if cp.SessionWeight > 0 {
			for _, t := range ix.p.Analyzer.Terms(d.Text) {
				if !slices.Contains(terms, t) {
					terms = append(terms, t)
				}
			}
		}
		for _, t := range terms {
			m := cs.sessTF[t]
			if m == nil {
				m = map[int32]int32{}
				cs.sessTF[t] = m
			}
			m[g]++
		}
	}
	var ents []string
	if cp.MultiHopSeeds > 0 {
		ents = EntityWords(d.Text)
		if s := strings.TrimSpace(strings.ToLower(d.Speaker)); s != "" {
			for _, w := range Tokenize(s) {
				cs.speakers[w] = true
			}
		}
	}
	var bg []uint64
	if cp.Proximity > 0 {
		bg = bigramSet(ix.p.Analyzer.Terms(d.Text))
	}
	cs.group = append(cs.group, g)
	cs.docTerms = append(cs.docTerms, terms)
	cs.entities = append(cs.entities, ents)
	cs.bigrams = append(cs.bigrams, bg)
	cs.dead = append(cs.dead, false)
}

// convRemove takes doc out of the session documents.
func (ix *Index) convRemove(doc int) {
	cs := ix.conv
	if cs == nil || doc >= len(cs.group) || cs.dead[doc] {
		return
	}
	cs.dead[doc] = true
	g := cs.group[doc]
	if g < 0 {
		return
	}
	cs.sessLen[g]--
	for _, t := range cs.docTerms[doc] {
		if m := cs.sessTF[t]; m != nil {
			if m[g]--; m[g] <= 0 {
				delete(m, g)
			}
		}
	}
	cs.docTerms[doc] = nil
}

// EntityWords returns the capitalised words of text that do not open a
// sentence (names, places, titles: "Sweden", "Oliver", "LGBTQ"), lowercase,
// each once in order, stop words left out.
func EntityWords(text string) []string {
	var out []string
	start := true // at the start of a sentence
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			if r == '.' || r == '!' || r == '?' || r == '\n' || r == ':' || r == '"' || r == '“' {
				start = true
			}
			i += size
			continue
		}
		j := i
		for j < len(text) {
			r2, s2 := utf8.DecodeRuneInString(text[j:])
			if !unicode.IsLetter(r2) && !unicode.IsDigit(r2) && r2 != '\'' && r2 != '’' {
				break
			}
			j += s2
		}
		word := text[i:j]
		if unicode.IsUpper(r) && !start && word != "I" && !strings.HasPrefix(word, "I'") && !strings.HasPrefix(word, "I’") {
			for _, t := range Tokenize(word) {
				if len(t) > 1 && !IsStopWord(t) && !slices.Contains(out, t) {
					out = append(out, t)
				}
				break // the possessive's base only
			}
		}
		start = false
		i = j
	}
	return out
}

func bigramKey(a, b string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(a))
	h.Write([]byte{0})
	h.Write([]byte(b))
	return h.Sum64()
}

// bigramSet is the sorted distinct adjacent pairs of terms.
func bigramSet(terms []string) []uint64 {
	var out []uint64
	for i := 1; i < len(terms); i++ {
		out = append(out, bigramKey(terms[i-1], terms[i]))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// SearchScope is Search over a precomputed Scope: BM25F (searchScope), then,
// when Params.Conv enables them, the proximity bonus, the session-document
// fusion and the multi-hop round over the best Conv.Depth documents, then,
// when Params.Rerank is set, the learned re-ranker (rerank.go) over the
// best Rerank.Depth of those.
func (ix *Index) SearchScope(query string, sc *Scope, k int) []Result {
	if ix.p.Rerank.on() && k > 0 {
		return ix.rerankScope(query, sc, k, true)
	}
	return ix.searchConv(query, sc, k)
}

// SearchScopeQuiet is SearchScope without explanations: the same
// results in the same order with the same scores, every Explain empty.
// With the re-ranker (the default) the explanations are not built at all
// (about a tenth of a search's CPU at 20,000 turns); otherwise they are
// built and dropped.
func (ix *Index) SearchScopeQuiet(query string, sc *Scope, k int) []Result {
	if ix.p.Rerank.on() && k > 0 {
		return ix.rerankScope(query, sc, k, false)
	}
	res := ix.searchConv(query, sc, k)
	for i := range res {
		res[i].Explain = ""
	}
	return res
}

// searchConv is SearchScope before the learned re-ranker.
func (ix *Index) searchConv(query string, sc *Scope, k int) []Result {
	cp := ix.p.Conv
	if !cp.reranks() || ix.conv == nil || k <= 0 {
		return ix.searchScope(query, sc, k)
	}
	res := ix.searchScope(query, sc, max(k, cp.depth()))
	if len(res) == 0 {
		return res
	}
	type cand struct {
		r     Result
		score float64
		why   []string
	}
	cands := make([]cand, len(res))
	for i, r := range res {
		cands[i] = cand{r: r, score: r.Score}
	}
	qterms := ix.convQueryTerms(query)
	if cp.Proximity > 0 {
		if qb := bigramSet(qterms); len(qb) > 0 {
			for i := range cands {
				n := 0
				for _, b := range qb {
					if _, ok := slices.BinarySearch(ix.conv.bigrams[cands[i].r.Doc], b); ok {
						n++
					}
				}
				if n > 0 {
					m := 1 + cp.Proximity*float64(n)/float64(len(qb))
					cands[i].score *= m
					cands[i].why = append(cands[i].why, fmt.Sprintf("× %.3g (%d of %d query word pairs adjacent)", m, n, len(qb)))
				}
			}
		}
	}
	if cp.SessionWeight > 0 {
		sess := ix.conv.sessionScores(qterms)
		bestT, bestS := 0.0, 0.0
		for _, c := range cands {
			bestT = max(bestT, c.score)
			if g := ix.conv.group[c.r.Doc]; g >= 0 {
				bestS = max(bestS, sess[g])
			}
		}
		if bestT > 0 {
			lam := cp.SessionWeight
			for i := range cands {
				s := 0.0
				if g := ix.conv.group[cands[i].r.Doc]; g >= 0 && bestS > 0 {
					s = sess[g] / bestS
				}
				cands[i].score = (1-lam)*cands[i].score/bestT + lam*s
				cands[i].why = append(cands[i].why, fmt.Sprintf("fused with session BM25 %.3f of best (λ %.2g)", s, lam))
			}
		}
	}
	sortCands := func() {
		slices.SortStableFunc(cands, func(a, b cand) int {
			if better(scored{int32(a.r.Doc), a.score, ix.Key(a.r.Doc)}, scored{int32(b.r.Doc), b.score, ix.Key(b.r.Doc)}) {
				return -1
			}
			return 1
		})
	}
	sortCands()
	if cp.MultiHopSeeds > 0 && cp.MultiHopWeight > 0 {
		var words []string
		for i := 0; i < len(cands) && i < cp.MultiHopSeeds; i++ {
			for _, w := range ix.conv.entities[cands[i].r.Doc] {
				if ix.conv.speakers[w] || slices.Contains(words, w) {
					continue
				}
				skip := false
				for _, t := range ix.p.Analyzer.Terms(w) {
					if slices.Contains(qterms, t) {
						skip = true
					}
				}
				if !skip {
					words = append(words, w)
				}
			}
		}
		if len(words) > 0 {
			second := ix.searchScope(strings.Join(words, " "), sc, max(k, cp.depth()))
			if len(second) > 0 && second[0].Score > 0 && cands[0].score > 0 {
				best1, best2 := cands[0].score, second[0].Score
				at := map[int]int{}
				for i := range cands {
					cands[i].score /= best1
					at[cands[i].r.Doc] = i
				}
				for _, r := range second {
					add := cp.MultiHopWeight * r.Score / best2
					why := fmt.Sprintf("+ %.3f second round (%s)", add, strings.Join(words, " "))
					if i, ok := at[r.Doc]; ok {
						cands[i].score += add
						cands[i].why = append(cands[i].why, why)
						continue
					}
					cands = append(cands, cand{r: r, score: add, why: []string{why}})
				}
				sortCands()
			}
		}
	}
	if cp.Diversity > 0 && cp.Diversity < 1 && (!cp.DiversityAggregate || IsAggregateQuestion(query)) {
		// greedy: the best adjusted score next, where a document's score
		// counts Diversity^(documents of its session already taken)
		taken := map[int32]int{}
		done := make([]bool, len(cands))
		var out []cand
		for len(out) < k && len(out) < len(cands) {
			bi, bs := -1, 0.0
			for i, c := range cands {
				if done[i] {
					continue
				}
				s := c.score
				if g := ix.conv.group[c.r.Doc]; g >= 0 {
					s *= math.Pow(cp.Diversity, float64(taken[g]))
				}
				if bi < 0 || s > bs { // cands are in rank order: ties keep it
					bi, bs = i, s
				}
			}
			done[bi] = true
			c := cands[bi]
			if g := ix.conv.group[c.r.Doc]; g >= 0 {
				if n := taken[g]; n > 0 {
					c.why = append(c.why, fmt.Sprintf("× %.3g (turn %d of its session in the ranking)", math.Pow(cp.Diversity, float64(n)), n+1))
				}
				taken[g]++
			}
			c.score = bs
			out = append(out, c)
		}
		cands = out
	}
	if len(cands) > k {
		cands = cands[:k]
	}
	out := make([]Result, len(cands))
	for i, c := range cands {
		ex := c.r.Explain
		if len(c.why) > 0 {
			ex = fmt.Sprintf("%.4f = [%s] %s", c.score, ex, strings.Join(c.why, ", "))
		}
		out[i] = Result{Doc: c.r.Doc, Score: c.score, Explain: ex}
	}
	return out
}

// convQueryTerms is the analysed query (question words dropped with
// Params.QuestionWords).
func (ix *Index) convQueryTerms(query string) []string {
	var out []string
	for _, t := range ix.p.Analyzer.Terms(query) {
		if ix.p.QuestionWords && questionWords[t] {
			continue
		}
		out = append(out, t)
	}
	return out
}

// sessionScores is the BM25 score of each session document for the
// query terms (each distinct term once), by session id.
func (cs *convState) sessionScores(qterms []string) []float64 {
	out := make([]float64, len(cs.sessLen))
	n, total := 0, 0
	for _, l := range cs.sessLen {
		if l > 0 {
			n++
			total += int(l)
		}
	}
	if n == 0 {
		return out
	}
	avg := float64(total) / float64(n)
	const k1, b = 1.2, 0.75
	var seen []string
	for _, t := range qterms {
		if slices.Contains(seen, t) {
			continue
		}
		seen = append(seen, t)
		m := cs.sessTF[t]
		if len(m) == 0 {
			continue
		}
		w := math.Log(1 + (float64(n)-float64(len(m))+0.5)/(float64(len(m))+0.5))
		for g, tf := range m {
			f := float64(tf)
			out[g] += w * f * (k1 + 1) / (f + k1*(1-b+b*float64(cs.sessLen[g])/avg))
		}
	}
	return out
}
