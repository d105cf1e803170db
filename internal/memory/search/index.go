package search

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Field is one scored field of a document.
type Field int

// The fields of a Doc, in BM25F order.
const (
	FieldText    Field = iota // the turn or record text
	FieldContext              // neighbouring turns of the same session
	FieldSpeaker              // who said it
	FieldDate                 // when it was said, as words ("8 May 2023")
	NumFields
)

var fieldNames = [NumFields]string{"text", "context", "speaker", "date"}

func (f Field) String() string { return fieldNames[f] }

// Doc is one retrievable unit.
type Doc struct {
	Text    string
	Context string
	Speaker string
	Date    string
	// Group names the document's session (or other unit); with
	// Params.GroupWeight a document gains that fraction of the best score
	// of another document in its group.
	Group string
	// Key orders documents of equal score (ascending, compared as bytes;
	// document number breaks remaining ties). Stores that update documents
	// in place give each a stable key so that ties rank the same however
	// the index was built (incrementally or from scratch).
	Key string
}

// FieldParams weighs one field in BM25F: Weight multiplies its
// length-normalised term frequency, B is its length normalisation.
type FieldParams struct {
	Weight float64
	B      float64
}

// Params configures ranking.
type Params struct {
	Analyzer Analyzer
	// K1 is the BM25 term-frequency saturation.
	K1     float64
	Fields [NumFields]FieldParams
	// SpeakerBoost multiplies by (1+SpeakerBoost) the score of documents
	// whose speaker the query names ("What did Caroline research?").
	SpeakerBoost float64
	// TimeBoost multiplies by (1+TimeBoost) the score of documents that
	// mention a time, for "when" questions.
	TimeBoost float64
	// PRFDocs and PRFTerms configure pseudo-relevance feedback: the top
	// PRFDocs documents contribute their PRFTerms best terms (by tf·idf) to a
	// second pass, each weighted PRFWeight. PRFDocs 0 disables it.
	PRFDocs   int
	PRFTerms  int
	PRFWeight float64
	// GroupWeight adds GroupWeight × (best score of another document of the
	// same Doc.Group); 0 disables it.
	GroupWeight float64
	// GroupTopN, when above 1, makes the group prior GroupWeight × the sum
	// of the GroupTopN best scores of other documents of the group
	// (session-level evidence: a session that matches in several turns
	// lifts all of them).
	GroupTopN int
	// AddresseeBoost multiplies by (1+AddresseeBoost) the score of a
	// document in the second person ("you", "your") said by someone else
	// in a group (session) where a speaker the query names also speaks:
	// "your kids" said to Melanie is about Melanie's kids.
	AddresseeBoost float64
	// Nicknames lets a capitalised query word of three or more letters,
	// not opening a sentence, that begins a speaker's name name that
	// speaker ("Mel" → Melanie; NicknameWords). Roles ("user",
	// "assistant") are not names: they are named only by their own word.
	Nicknames bool
	// PRFMinDocs is how many of the top PRFDocs documents must hold an
	// expansion term (default 2; 1 makes feedback a second round seeded by
	// each top document's own distinctive terms).
	PRFMinDocs int
	// QuestionWords drops words that phrase a question rather than its
	// content ("kind", "likely", "think", "would", "many", …) from queries.
	QuestionWords bool
	// Conv holds the techniques for long conversational logs (convlog.go);
	// the zero value turns them off.
	Conv ConvParams
	// Rerank is a learned linear re-ranker over the best Rerank.Depth
	// documents (rerank.go); the zero value turns it off.
	Rerank RerankParams
}

// DefaultParams is Tendril's ranking: BM25F over text, neighbouring turns,
// speaker and date with Snowball stemming, speaker awareness, time cues
// and relative dates resolved into the date field (ConvParams.RelTime);
// then the learned re-ranker (LearnedRerank) re-orders the turns
// (documents with a Doc.Group) among the best 100, records keeping their
// places.
func DefaultParams() Params {
	return Params{
		Analyzer: Analyzer{Stem: true},
		K1:       1.2,
		Fields: [NumFields]FieldParams{
			FieldText:    {Weight: 1, B: 0.75},
			FieldContext: {Weight: 0.5, B: 0.75},
			FieldSpeaker: {Weight: 0.5, B: 0},
			FieldDate:    {Weight: 0.5, B: 0},
		},
		SpeakerBoost: 0.4,
		Nicknames:    true,
		TimeBoost:    0.3,
		GroupWeight:  0.1,
		// chosen by leave-one-conversation-out cross-validation on LoCoMo
		// (docs/bench/memory.md, issue 16 round 3)
		Conv: ConvParams{RelTime: true},
		// turns only; records keep the ranking above (issue 16 round 5)
		Rerank: LearnedRerank(),
	}
}

// PlainBM25 is the reference baseline: BM25 (k1 1.2, b 0.75) over the text
// field alone, lowercase alphanumeric tokens, English stop words removed, no
// stemming.
func PlainBM25() Params {
	return Params{
		Analyzer: Analyzer{},
		K1:       1.2,
		Fields:   [NumFields]FieldParams{FieldText: {Weight: 1, B: 0.75}},
	}
}

// Index is an inverted index: documents are appended (Add) and retired
// (Remove, a tombstone: the document stops counting in every statistic and
// result but its postings stay until the index is rebuilt). Add, Remove and
// Scope.Set must not run concurrently with anything; Search may run
// concurrently with Search.
type Index struct {
	p        Params
	terms    map[string]int32
	termStr  []string
	post     postings // per term, its documents and term frequencies by field
	lens     [][NumFields]uint32
	speaker  []int32 // speaker id per doc, -1 none
	spkTerms map[string][]int32
	spkIDs   map[string]int32
	hasTime  []bool
	group    []int32
	groupIDs map[string]int32
	// groupDocs holds per group its live documents in key order (then
	// document number): the same lists however the index was built
	// (incrementally or from scratch), for the re-ranker's neighbours
	groupDocs [][]int32
	// groupOwn[g] says groupDocs[g]'s array is this index's alone (not
	// shared with a Clone), so an insert or delete inside it may shift in
	// place; a shared one is copied once, then owned.
	groupOwn []bool
	fwd      termLists // text-field terms per doc (for PRF)
	keys     []string  // Doc.Key per doc (tie order)
	second   []bool    // text in the second person (AddresseeBoost)
	groupSpk map[int32][]int32
	dead     []bool // removed documents
	ndead    int
	// termBytes estimates the heap of the term dictionary (TermBytes).
	termBytes int64
	pool      sync.Pool
	conv      *convState          // Params.Conv's per-document state (convlog.go), nil when off
	addRow    []int32             // Add's scratch: term id → row of addRows, -1 none
	addRows   [][NumFields]uint16 // Add's scratch: per term of the document, tf by field
	addIDs    []int32             // Add's scratch: the document's terms
}

// NewIndex returns an empty index ranking with p.
func NewIndex(p Params) *Index {
	return &Index{p: p, terms: map[string]int32{}, spkTerms: map[string][]int32{}, spkIDs: map[string]int32{}, groupIDs: map[string]int32{}, groupSpk: map[int32][]int32{}}
}

// Clone returns an independent copy of the index: later Add or Remove on
// either leaves the other unchanged. Postings are shared until appended
// to (their capacity is clipped, so an append copies), which makes a clone
// far cheaper than indexing the documents again.
func (ix *Index) Clone() *Index {
	c := &Index{p: ix.p, ndead: ix.ndead, termBytes: ix.termBytes}
	c.terms = make(map[string]int32, len(ix.terms))
	for k, v := range ix.terms {
		c.terms[k] = v
	}
	c.spkTerms = make(map[string][]int32, len(ix.spkTerms))
	for k, v := range ix.spkTerms {
		c.spkTerms[k] = clip(v)
	}
	c.spkIDs = make(map[string]int32, len(ix.spkIDs))
	for k, v := range ix.spkIDs {
		c.spkIDs[k] = v
	}
	c.groupIDs = make(map[string]int32, len(ix.groupIDs))
	for k, v := range ix.groupIDs {
		c.groupIDs[k] = v
	}
	c.groupSpk = make(map[int32][]int32, len(ix.groupSpk))
	for k, v := range ix.groupSpk {
		c.groupSpk[k] = clip(v)
	}
	c.second = clip(ix.second)
	c.termStr = clip(ix.termStr)
	c.post = ix.post.clone()
	c.lens = clip(ix.lens)
	c.speaker = clip(ix.speaker)
	c.hasTime = clip(ix.hasTime)
	c.group = clip(ix.group)
	c.groupDocs = make([][]int32, len(ix.groupDocs))
	for g, l := range ix.groupDocs {
		c.groupDocs[g] = clip(l) // appended past its length, or copied before a change inside (groupInsert, groupDelete)
	}
	// both now share every list's array; searches never read groupOwn
	c.groupOwn = make([]bool, len(ix.groupDocs))
	clear(ix.groupOwn)
	c.fwd = ix.fwd.clone()
	c.keys = clip(ix.keys)
	c.dead = append([]bool(nil), ix.dead...) // Remove writes in place
	c.conv = ix.conv.clone()
	return c
}

// clip returns s with its capacity cut to its length, so that appending
// to it never writes into memory another slice shares.
func clip[T any](s []T) []T { return s[:len(s):len(s)] }

// Params returns the ranking parameters.
func (ix *Index) Params() Params { return ix.p }

// Len is the number of documents ever added, removed ones included
// (document numbers run 0 … Len()-1).
func (ix *Index) Len() int { return len(ix.lens) }

// Key returns the Doc.Key of doc.
func (ix *Index) Key(doc int) string { return ix.keys[doc] }

// Dead is the number of removed documents.
func (ix *Index) Dead() int { return ix.ndead }

// Live reports whether doc was added and not removed.
func (ix *Index) Live(doc int) bool { return doc >= 0 && doc < len(ix.lens) && !ix.dead[doc] }

// Remove retires doc: it no longer matches, ranks or counts in corpus
// statistics (scopes made by NewScope before the removal must drop it with
// Scope.Set(doc, false)). Removing an unknown or removed doc is a no-op.
func (ix *Index) Remove(doc int) {
	if !ix.Live(doc) {
		return
	}
	ix.dead[doc] = true
	ix.ndead++
	ix.groupDelete(int32(doc))
	ix.convRemove(doc)
}

// groupPos is the place of doc in its group's list (ix.groupDocs), -1
// when it is not there.
func (ix *Index) groupPos(doc int32) int {
	g := ix.group[doc]
	if g < 0 {
		return -1
	}
	l, key := ix.groupDocs[g], ix.keys[doc]
	i := sort.Search(len(l), func(i int) bool { return ix.keys[l[i]] >= key })
	for ; i < len(l) && ix.keys[l[i]] == key; i++ {
		if l[i] == doc {
			return i
		}
	}
	return -1
}

// groupInsert puts doc, the newest document, in its group's list after
// every document of a key not above its own. A list shared with a clone
// is only appended to past its length (the clone's view ends there) or
// copied first (ownList), so that clones can share it.
func (ix *Index) groupInsert(doc int32) {
	g := ix.group[doc]
	if g < 0 {
		return
	}
	for int(g) >= len(ix.groupDocs) {
		ix.groupDocs = append(ix.groupDocs, nil)
		ix.groupOwn = append(ix.groupOwn, false)
	}
	l, key := ix.groupDocs[g], ix.keys[doc]
	i := sort.Search(len(l), func(i int) bool { return ix.keys[l[i]] > key })
	if i == len(l) {
		ix.groupDocs[g] = append(l, doc)
		return
	}
	l = append(ix.ownList(g, 1), 0)
	copy(l[i+1:], l[i:])
	l[i] = doc
	ix.groupDocs[g] = l
}

// groupDelete takes doc out of its group's list (in place once the list
// is owned, see groupInsert).
func (ix *Index) groupDelete(doc int32) {
	i := ix.groupPos(doc)
	if i < 0 {
		return
	}
	g := ix.group[doc]
	l := ix.ownList(g, 0)
	copy(l[i:], l[i+1:])
	ix.groupDocs[g] = l[:len(l)-1]
}

// ownList returns group g's list, copied (with room for extra more and
// some growth) unless this index owns its array already, and marks it
// owned. Without it a change inside a long session's list copied the
// whole list on every write (a turn re-indexes its neighbours).
func (ix *Index) ownList(g int32, extra int) []int32 {
	l := ix.groupDocs[g]
	if ix.groupOwn[g] {
		return l
	}
	n := make([]int32, len(l), len(l)+extra+len(l)/8+4)
	copy(n, l)
	ix.groupDocs[g] = n
	ix.groupOwn[g] = true
	return n
}

func (ix *Index) termID(t string) int32 {
	id, ok := ix.terms[t]
	if !ok {
		id = int32(len(ix.termStr))
		ix.terms[t] = id
		ix.termStr = append(ix.termStr, t)
		ix.post.newTerm()
		ix.termBytes += int64(len(t)) + termOverhead
	}
	return id
}

// termOverhead is the heap one distinct term holds besides its text, in
// bytes: its entries in the dictionary map, the term list and the
// per-term posting arrays, at the slack their growth leaves on average
// (measured: 240,000 distinct random words grew the index by about 123
// bytes each, TestEstimateCountsUniqueTerms in sqlitestore).
const termOverhead = 120

// TermBytes estimates the heap held by the index's term dictionary, in
// bytes: every distinct term ever added (a removed document's terms stay
// until the index is rebuilt). Conversation adds few new terms per
// document; text of words never seen before (logs, identifiers, a hostile
// client) adds one per word, which the per-document estimate of the
// postings does not see.
func (ix *Index) TermBytes() int64 { return ix.termBytes }

// Add appends d and returns its document number (0, 1, …).
func (ix *Index) Add(d Doc) int { return ix.add(d, nil) }

// Analyzed is a document whose text and context are already analysed by
// the index's analyzer (Params().Analyzer.Terms), so that a build can
// analyse each turn's text once and share its terms between the turn's
// own document and its neighbours' context fields.
type Analyzed struct {
	Doc
	// TextTerms is Analyzer.Terms(Doc.Text).
	TextTerms []string
	// ContextTerms holds Analyzer.Terms of each part of Doc.Context, in
	// order, where Doc.Context is the parts joined by newlines (the terms
	// of such a join are the parts' terms end to end: a newline or space
	// always ends a token, TestTermsOfJoin).
	ContextTerms [][]string
}

// AddAnalyzed appends a.Doc as Add does, taking its text and context terms
// from a instead of analysing them: the same document number, statistics
// and scores as Add(a.Doc) when the terms are the analyzer's. The slices
// are only read.
func (ix *Index) AddAnalyzed(a Analyzed) int { return ix.add(a.Doc, &a) }

// add appends d; with pre non-nil its text and context terms come from
// pre.
func (ix *Index) add(d Doc, pre *Analyzed) int {
	var hasTime bool
	if ix.p.TimeBoost > 0 || ix.p.Conv.RelTime {
		hasTime = HasTimeExpression(d.Text)
	}
	if hasTime {
		// convDoc returns d unchanged when d.Text has no time expression
		d = ix.p.convDoc(d)
	}
	doc := int32(len(ix.lens))
	var lens [NumFields]uint32
	texts := [NumFields]string{d.Text, d.Context, d.Speaker, d.Date}
	if ix.addRow == nil {
		ix.addRow = make([]int32, 0, len(ix.termStr))
	}
	ids, rows := ix.addIDs[:0], ix.addRows[:0]
	count := func(f Field, terms []string) {
		lens[f] += uint32(len(terms))
		for _, t := range terms {
			id := ix.termID(t)
			for int(id) >= len(ix.addRow) {
				ix.addRow = append(ix.addRow, -1)
			}
			r := ix.addRow[id]
			if r < 0 {
				r = int32(len(rows))
				ix.addRow[id] = r
				ids = append(ids, id)
				rows = append(rows, [NumFields]uint16{})
			}
			if rows[r][f] < math.MaxUint16 {
				rows[r][f]++
			}
		}
	}
	for f := Field(0); f < NumFields; f++ {
		if texts[f] == "" || (ix.p.Fields[f].Weight == 0 && f != FieldSpeaker) {
			continue
		}
		switch {
		case pre != nil && f == FieldText:
			count(f, pre.TextTerms)
		case pre != nil && f == FieldContext:
			for _, part := range pre.ContextTerms {
				count(f, part)
			}
		default:
			count(f, ix.p.Analyzer.Terms(texts[f]))
		}
	}
	for _, id := range ids {
		ix.addRow[id] = -1
	}
	var text []int32
	for i, id := range ids {
		var mask uint8
		for f := range NumFields {
			if rows[i][f] > 0 {
				mask |= 1 << f
			}
		}
		ix.post.add(id, doc, mask, &rows[i])
		if mask&(1<<FieldText) != 0 {
			text = append(text, id)
		}
	}
	slices.Sort(text)
	ix.fwd.add(text)
	ix.addIDs, ix.addRows = ids, rows
	ix.lens = append(ix.lens, lens)
	ix.keys = append(ix.keys, d.Key)
	ix.dead = append(ix.dead, false)
	ix.hasTime = append(ix.hasTime, ix.p.TimeBoost > 0 && hasTime)
	spk := int32(-1)
	if name := strings.TrimSpace(strings.ToLower(d.Speaker)); name != "" && ix.p.SpeakerBoost > 0 {
		id, ok := ix.spkIDs[name]
		if !ok {
			id = int32(len(ix.spkIDs))
			ix.spkIDs[name] = id
			for _, t := range ix.p.Analyzer.Terms(name) {
				ix.spkTerms[t] = append(ix.spkTerms[t], id)
			}
		}
		spk = id
	}
	ix.speaker = append(ix.speaker, spk)
	g := int32(-1)
	if d.Group != "" {
		id, ok := ix.groupIDs[d.Group]
		if !ok {
			id = int32(len(ix.groupIDs))
			ix.groupIDs[d.Group] = id
		}
		g = id
	}
	ix.group = append(ix.group, g)
	ix.groupInsert(doc)
	ix.second = append(ix.second, ix.p.AddresseeBoost > 0 && secondPerson(d.Text))
	if g >= 0 && spk >= 0 && !slices.Contains(ix.groupSpk[g], spk) {
		ix.groupSpk[g] = append(ix.groupSpk[g], spk)
	}
	ix.convAdd(d, int(doc))
	return int(doc)
}

// Result is one ranked document.
type Result struct {
	Doc     int
	Score   float64
	Explain string
}

// scratch is one search's working memory, reused through Index.pool:
// dense per-document arrays (zero between searches) and per-query tables.
type scratch struct {
	prior   []float64 // group prior added to score, for explanations
	score   []float64
	touched []int32 // documents with a score
	hits    []hit   // one query term's allowed documents
	ids     []int32 // term ids (feedback)
	// per query: norm[f][l] = 1-B+B·l/avg and wn[f][l] = Weight/norm[f][l]
	// of field f for field length l < normTab
	norm, wn [NumFields][]float64
	avg      [NumFields]float64
	normOK   bool // the tables hold avg's norms
	// per group (groupPrior): the best two scores, valid when gen matches
	best  []best2
	bestN [][]float64
	named []bool // per group: a speaker the query names speaks in it
	gen   int32
}

// normTab is how many field lengths the per-query norm tables cover.
const normTab = 256

type best2 struct {
	gen    int32
	d1     int32
	s1, s2 float64
}

func (ix *Index) scratch() *scratch {
	n := len(ix.lens)
	s, _ := ix.pool.Get().(*scratch)
	if s == nil || len(s.score) < n {
		n += n/8 + 64 // headroom: the index grows by a few documents per write
		s = &scratch{prior: make([]float64, n), score: make([]float64, n)}
	}
	if g := len(ix.groupIDs); len(s.best) < g {
		s.best = make([]best2, g+g/8+16)
		s.bestN = make([][]float64, len(s.best))
		s.gen = 0
	}
	if s.gen > 1<<30 { // group entries compare with gen: restart before it wraps
		clear(s.best)
		s.gen = 0
	}
	return s
}

// normTables fills sc's per-query norm tables for the statistics st.
func (ix *Index) normTables(sc *scratch, st stats) {
	if sc.normOK && sc.avg == st.avg {
		return
	}
	sc.avg, sc.normOK = st.avg, true
	for f := range NumFields {
		fp := ix.p.Fields[f]
		if fp.Weight == 0 {
			continue
		}
		if sc.norm[f] == nil {
			sc.norm[f], sc.wn[f] = make([]float64, normTab), make([]float64, normTab)
		}
		for l := range normTab {
			norm := 1 - fp.B + fp.B*float64(l)/st.avg[f]
			sc.norm[f][l] = norm
			sc.wn[f][l] = fp.Weight * float64(1) / norm
		}
	}
}

type qterm struct {
	id     int32
	text   string
	weight float64
	idf    float64
}

type stats struct {
	n   int
	avg [NumFields]float64
}

// Scope is a set of allowed documents with its corpus statistics (N and
// total field lengths) kept up to date, so that it can be reused across
// queries with the same filters. After Add, extend it with Set(doc, …) for
// the new document (a scope shorter than Len() matches nothing); after
// Remove, Set(doc, false).
type Scope struct {
	allow []bool
	n     int
	sum   [NumFields]uint64
}

// NewScope returns the scope of the live documents allowed by allow (nil =
// all; otherwise len(allow) must be Len()). The scope owns allow from then
// on: change it only through Set.
func (ix *Index) NewScope(allow []bool) *Scope {
	if allow == nil {
		allow = make([]bool, len(ix.lens))
		for i := range allow {
			allow[i] = true
		}
	}
	if len(allow) != len(ix.lens) {
		return &Scope{allow: make([]bool, len(ix.lens))}
	}
	sc := &Scope{allow: allow}
	for d, l := range ix.lens {
		if !allow[d] {
			continue
		}
		if ix.dead[d] {
			allow[d] = false
			continue
		}
		sc.n++
		for f := range l {
			sc.sum[f] += uint64(l[f])
		}
	}
	return sc
}

// Set allows (ok) or disallows doc in the scope, growing it to cover
// documents added since it was made and updating its statistics. Removed
// documents are never allowed.
func (sc *Scope) Set(ix *Index, doc int, ok bool) {
	if doc < 0 || doc >= len(ix.lens) {
		return
	}
	for len(sc.allow) < len(ix.lens) {
		sc.allow = append(sc.allow, false)
	}
	ok = ok && !ix.dead[doc]
	if sc.allow[doc] == ok {
		return
	}
	sc.allow[doc] = ok
	l := ix.lens[doc]
	if ok {
		sc.n++
		for f := range l {
			sc.sum[f] += uint64(l[f])
		}
		return
	}
	sc.n--
	for f := range l {
		sc.sum[f] -= uint64(l[f])
	}
}

// Allowed reports whether doc is in the scope.
func (sc *Scope) Allowed(doc int) bool { return doc >= 0 && doc < len(sc.allow) && sc.allow[doc] }

// N is the number of documents in the scope.
func (sc *Scope) N() int { return sc.n }

func (sc *Scope) stats() stats {
	st := stats{n: sc.n}
	for f := range sc.sum {
		if st.n > 0 && sc.sum[f] > 0 {
			st.avg[f] = float64(sc.sum[f]) / float64(st.n)
		} else {
			st.avg[f] = 1
		}
	}
	return st
}

// Search ranks the documents allowed by allow (nil = all; otherwise
// len(allow) must be Len()) for query and returns the best k, best first,
// ties broken by document number. Corpus statistics (N, df, average field
// lengths) come from the allowed documents only, so a filter or an actor
// scope applies before ranking.
func (ix *Index) Search(query string, allow []bool, k int) []Result {
	if allow != nil && len(allow) != len(ix.lens) {
		return nil
	}
	if allow != nil {
		allow = append([]bool(nil), allow...)
	}
	return ix.SearchScope(query, ix.NewScope(allow), k)
}

// searchScope is the BM25F ranking of SearchScope (convlog.go), before
// the Params.Conv techniques.
func (ix *Index) searchScope(query string, sc0 *Scope, k int) []Result {
	res, why := ix.searchScopeLazy(query, sc0, k)
	for i := range res {
		res[i].Explain = why(i)
	}
	return res
}

// searchScopeLazy is searchScope without the explanations: why(i) makes
// result i's (the re-ranker explains only the results it keeps).
func (ix *Index) searchScopeLazy(query string, sc0 *Scope, k int) (res []Result, why func(i int) string) {
	return ix.searchTermsLazy(query, func() []qterm { return ix.parseQuery(query) }, sc0, k)
}

// searchTermsLazy is searchScopeLazy for the query terms parse returns
// (query itself gives the speakers it names and whether it asks "when").
func (ix *Index) searchTermsLazy(query string, parse func() []qterm, sc0 *Scope, k int) (res []Result, why func(i int) string) {
	n := len(ix.lens)
	if n == 0 || k <= 0 || sc0 == nil || len(sc0.allow) != n {
		return nil, nil
	}
	allow, st := sc0.allow, sc0.stats()
	if st.n == 0 {
		return nil, nil
	}
	qs := parse()
	if len(qs) == 0 {
		return nil, nil
	}
	sc := ix.scratch()
	defer ix.pool.Put(sc)
	qs, touched := ix.accumulate(sc, qs, st, allow, sc.touched[:0])
	defer func() { sc.touched = touched[:0] }()
	if len(qs) == 0 {
		return nil, nil
	}

	spk := ix.namedSpeakers(query)
	when := ix.p.TimeBoost > 0 && IsWhenQuestion(query)
	boostWhy := func(d int32) (float64, []string) {
		m := 1.0
		var why []string
		if len(spk) > 0 && ix.speaker[d] >= 0 && spk[ix.speaker[d]] {
			m *= 1 + ix.p.SpeakerBoost
			why = append(why, fmt.Sprintf("speaker named in query ×%.3g", 1+ix.p.SpeakerBoost))
		}
		if len(spk) > 0 && ix.second[d] && ix.group[d] >= 0 && (ix.speaker[d] < 0 || !spk[ix.speaker[d]]) {
			for _, o := range ix.groupSpk[ix.group[d]] {
				if spk[o] {
					m *= 1 + ix.p.AddresseeBoost
					why = append(why, fmt.Sprintf("said to a speaker named in query ×%.3g", 1+ix.p.AddresseeBoost))
					break
				}
			}
		}
		if when && ix.hasTime[d] {
			m *= 1 + ix.p.TimeBoost
			why = append(why, fmt.Sprintf("time cue for a when-question ×%.3g", 1+ix.p.TimeBoost))
		}
		return m, why
	}
	bs := ix.newBoosts(sc, spk, when)
	if ix.p.GroupWeight > 0 {
		touched = ix.groupPrior(sc, touched)
	}
	top := ix.topK(sc, touched, k, bs)

	if ix.p.PRFDocs > 0 && len(top) > 0 {
		extra := ix.feedback(sc, top, qs, st, allow)
		if len(extra) > 0 {
			for _, d := range touched {
				sc.score[d] = 0
			}
			all := append(append([]qterm(nil), qs...), extra...)
			for _, d := range touched {
				sc.prior[d] = 0
			}
			qs, touched = ix.accumulate(sc, all, st, allow, touched[:0])
			if ix.p.GroupWeight > 0 {
				touched = ix.groupPrior(sc, touched)
			}
			top = ix.topK(sc, touched, k, bs)
		}
	}
	out := make([]Result, len(top))
	prior := make([]float64, len(top))
	for i, r := range top {
		out[i] = Result{Doc: int(r.doc), Score: r.score}
		prior[i] = sc.prior[r.doc]
	}
	for _, d := range touched {
		sc.score[d] = 0
		sc.prior[d] = 0
	}
	return out, func(i int) string { return ix.explain(int32(out[i].Doc), qs, st, boostWhy, out[i].Score, prior[i]) }
}

// queryTerms is the terms of query that allowed documents hold, each once
// with its weight (occurrences) and idf, in order of first occurrence.
func (ix *Index) queryTerms(_ *scratch, query string, st stats, allow []bool) []qterm {
	qs := ix.parseQuery(query)
	out := qs[:0]
	for _, q := range qs {
		if df := ix.df(q.id, allow); df > 0 {
			q.idf = idf(st.n, df)
			out = append(out, q)
		}
	}
	return out
}

// parseQuery is the indexed terms of query, each once with its weight
// (occurrences) in order of first occurrence; accumulate sets their idf and
// drops those no allowed document holds.
func (ix *Index) parseQuery(query string) []qterm {
	var qs []qterm
	for _, t := range ix.p.Analyzer.Terms(query) {
		if ix.p.QuestionWords && questionWords[t] {
			continue
		}
		if i := slices.IndexFunc(qs, func(q qterm) bool { return q.text == t }); i >= 0 {
			qs[i].weight++
			continue
		}
		id, ok := ix.terms[t]
		if !ok {
			continue
		}
		qs = append(qs, qterm{id: id, text: t, weight: 1})
	}
	return qs
}

func idf(n, df int) float64 {
	return math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
}

// weighted is the mask of fields with a weight (the only ones scored).
func (ix *Index) weighted() uint8 {
	var m uint8
	for f := range NumFields {
		if ix.p.Fields[f].Weight > 0 {
			m |= 1 << f
		}
	}
	return m
}

// DocFreq is the number of live documents holding the analysed term t (a
// stem, as Analyzer.Terms returns it) in any scored field; 0 for a term
// the index has never seen. It costs one pass over the term's postings.
// (Retired documents are left out, so it compares with Len() - Dead().)
// It repeats df's loop rather than sharing it through a callback: df runs
// for every query term of every search.
func (ix *Index) DocFreq(t string) int {
	id, ok := ix.terms[t]
	if !ok {
		return 0
	}
	wm := ix.weighted()
	data, doc, c := ix.post.lists[id], int32(-1), 0
	var tf [NumFields]uint16
	for i := 0; i < len(data); {
		var mask uint8
		doc, mask, i = entry(data, i, doc, &tf)
		if mask&wm != 0 && !ix.dead[doc] {
			c++
		}
	}
	return c
}

// df counts allowed documents holding term id in any scored field.
func (ix *Index) df(id int32, allow []bool) int {
	wm := ix.weighted()
	data, doc, c := ix.post.lists[id], int32(-1), 0
	var tf [NumFields]uint16
	for i := 0; i < len(data); {
		var mask uint8
		doc, mask, i = entry(data, i, doc, &tf)
		if mask&wm != 0 && allow[doc] {
			c++
		}
	}
	return c
}

type scored struct {
	doc   int32
	score float64
	key   string
}

func better(a, b scored) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	if c := strings.Compare(a.key, b.key); c != 0 {
		return c < 0
	}
	return a.doc < b.doc
}

// boosts is one query's score multipliers (Params.SpeakerBoost,
// AddresseeBoost, TimeBoost).
type boosts struct {
	spk   []bool // by speaker id: named in the query (nil: none named)
	named []bool // by group: a named speaker speaks in it (AddresseeBoost)
	when  bool
	max   float64 // the largest multiplier any document gets
}

func (ix *Index) newBoosts(sc *scratch, spk map[int32]bool, when bool) *boosts {
	b := &boosts{when: when, max: 1}
	if len(spk) > 0 {
		b.spk = make([]bool, len(ix.spkIDs))
		for id := range spk {
			b.spk[id] = true
		}
		b.max *= max(1, 1+ix.p.SpeakerBoost)
		if ix.p.AddresseeBoost > 0 {
			b.named = sc.named[:0]
			for range ix.groupIDs {
				b.named = append(b.named, false)
			}
			for g, ss := range ix.groupSpk {
				for _, o := range ss {
					if spk[o] {
						b.named[g] = true
					}
				}
			}
			sc.named = b.named
			b.max *= max(1, 1+ix.p.AddresseeBoost)
		}
	}
	if when {
		b.max *= max(1, 1+ix.p.TimeBoost)
	}
	return b
}

// mult is doc d's multiplier, the product (in this order) of boostWhy's.
func (ix *Index) mult(b *boosts, d int32) float64 {
	m := 1.0
	if b.spk != nil {
		s := ix.speaker[d]
		named := s >= 0 && b.spk[s]
		if named {
			m *= 1 + ix.p.SpeakerBoost
		}
		if b.named != nil && ix.second[d] && ix.group[d] >= 0 && !named && b.named[ix.group[d]] {
			m *= 1 + ix.p.AddresseeBoost
		}
	}
	if b.when && ix.hasTime[d] {
		m *= 1 + ix.p.TimeBoost
	}
	return m
}

// topK returns the k best touched documents by score × multiplier, best
// first (a heap whose root is the worst kept; a document whose score ×
// the largest multiplier is below the root's is skipped unboosted: the
// multipliers are products of factors, and a product of some of the
// factors, rounded, never exceeds the product of all that are ≥ 1).
func (ix *Index) topK(sc *scratch, touched []int32, k int, bs *boosts) []scored {
	h := make([]scored, 0, min(k, len(touched))) // k may be far above the documents
	worse := func(i, j int) bool { return better(h[j], h[i]) }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			if r := l + 1; r < len(h) && worse(r, l) {
				l = r
			}
			if !worse(l, i) {
				return
			}
			h[i], h[l] = h[l], h[i]
			i = l
		}
	}
	for _, d := range touched {
		raw := sc.score[d]
		if len(h) == k && raw*bs.max < h[0].score {
			continue
		}
		s := scored{d, raw * ix.mult(bs, d), ix.keys[d]}
		if len(h) < k {
			h = append(h, s)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if !worse(i, p) {
					break
				}
				h[i], h[p] = h[p], h[i]
				i = p
			}
		} else if better(s, h[0]) {
			h[0] = s
			down(0)
		}
	}
	slices.SortFunc(h, func(a, b scored) int {
		if better(a, b) {
			return -1
		}
		return 1
	})
	return h
}

// feedback picks expansion terms from the top documents (RM-style: tf·idf
// in the text field), excluding the query's own terms.
func (ix *Index) feedback(sc *scratch, top []scored, qs []qterm, st stats, allow []bool) []qterm {
	have := map[int32]bool{}
	for _, q := range qs {
		have[q.id] = true
	}
	weight := map[int32]float64{}
	for i, r := range top {
		if i >= ix.p.PRFDocs {
			break
		}
		sc.ids = ix.fwd.terms(r.doc, sc.ids[:0])
		for _, id := range sc.ids {
			if !have[id] {
				weight[id]++
			}
		}
	}
	type cand struct {
		id  int32
		w   float64
		idf float64
	}
	var cs []cand
	minDocs := float64(ix.p.PRFMinDocs)
	if minDocs <= 0 {
		minDocs = 2
	}
	for id, c := range weight {
		if c < minDocs {
			continue
		}
		df := ix.df(id, allow)
		if df == 0 {
			continue
		}
		v := idf(st.n, df)
		cs = append(cs, cand{id, c * v, v})
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].w != cs[j].w {
			return cs[i].w > cs[j].w
		}
		return ix.termStr[cs[i].id] < ix.termStr[cs[j].id] // independent of insertion order
	})
	var out []qterm
	for i := 0; i < len(cs) && i < ix.p.PRFTerms; i++ {
		out = append(out, qterm{id: cs[i].id, text: ix.termStr[cs[i].id], weight: ix.p.PRFWeight, idf: cs[i].idf})
	}
	return out
}

// groupPrior adds GroupWeight × the best score of another document of the
// same group to each touched document.
func (ix *Index) groupPrior(sc *scratch, touched []int32) []int32 {
	if len(ix.groupIDs) == 0 { // no document has a group (records)
		return touched
	}
	if ix.p.GroupTopN > 1 {
		return ix.groupPriorN(sc, touched, ix.p.GroupTopN)
	}
	sc.gen++
	b := sc.best
	for _, d := range touched {
		g := ix.group[d]
		if g < 0 {
			continue
		}
		x := &b[g]
		if x.gen != sc.gen {
			*x = best2{gen: sc.gen, d1: -1}
		}
		s := sc.score[d]
		if s > x.s1 {
			x.s2, x.s1, x.d1 = x.s1, s, d
		} else if s > x.s2 {
			x.s2 = s
		}
	}
	for _, d := range touched {
		g := ix.group[d]
		if g < 0 {
			continue
		}
		x := &b[g]
		other := x.s1
		if x.d1 == d {
			other = x.s2
		}
		sc.prior[d] = ix.p.GroupWeight * other
		sc.score[d] += sc.prior[d]
	}
	return touched
}

// groupPriorN adds GroupWeight × the sum of the n best scores of other
// documents of the same group to each touched document.
func (ix *Index) groupPriorN(sc *scratch, touched []int32, n int) []int32 {
	// per group, the n+1 best scores, descending (sc.best[g].gen marks
	// sc.bestN[g] current)
	sc.gen++
	best := sc.bestN
	for _, d := range touched {
		g := ix.group[d]
		if g < 0 {
			continue
		}
		if sc.best[g].gen != sc.gen {
			sc.best[g].gen = sc.gen
			best[g] = best[g][:0]
		}
		b, s := best[g], sc.score[d]
		i := sort.Search(len(b), func(i int) bool { return b[i] < s })
		if i <= n {
			b = slices.Insert(b, i, s)
			if len(b) > n+1 {
				b = b[:n+1]
			}
			best[g] = b
		}
	}
	for _, d := range touched {
		g := ix.group[d]
		if g < 0 {
			continue
		}
		b, s := best[g], sc.score[d]
		sum, skipped := 0.0, false
		for i, x := range b {
			if !skipped && x == s {
				skipped = true
				continue
			}
			if i-btoi(skipped) >= n {
				break
			}
			sum += x
		}
		sc.prior[d] = ix.p.GroupWeight * sum
	}
	for _, d := range touched {
		sc.score[d] += sc.prior[d]
	}
	return touched
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// secondPerson reports whether text addresses someone ("you", "your").
func secondPerson(text string) bool {
	for _, t := range Tokenize(text) {
		switch t {
		case "you", "your", "yours", "yourself", "u", "ya":
			return true
		}
	}
	return false
}

// questionWords phrase a question rather than name its content (stemmed
// and unstemmed forms; Snowball's stop list already drops what, when, did…).
var questionWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`kind kinds type types sort likely would might could think thing things something
		many much often ever also one ones name names specific particular way ways happen happened`) {
		m[w] = true
		m[stem(w)] = true
	}
	return m
}()

// tf returns the term frequency of id in field f of doc.
func (ix *Index) tf(f Field, id, doc int32) int {
	mask, tf := ix.post.find(id, doc)
	if mask&(1<<f) == 0 {
		return 0
	}
	return int(tf[f])
}

func (ix *Index) explain(doc int32, qs []qterm, st stats, boostWhy func(int32) (float64, []string), total, prior float64) string {
	mult, why := boostWhy(doc)
	b := make([]byte, 0, 256)
	b = strconv.AppendFloat(b, total, 'f', 4, 64)
	if mult != 1 || prior != 0 {
		b = append(b, " = ("...)
	} else {
		b = append(b, " = "...)
	}
	b = append(b, "bm25f(k1="...)
	b = strconv.AppendFloat(b, ix.p.K1, 'g', 2, 64)
	b = append(b, ")["...)
	first := true
	var parts []byte
	for _, q := range qs {
		t := 0.0
		parts = parts[:0]
		mask, tfs := ix.post.find(q.id, doc)
		for f := Field(0); f < NumFields; f++ {
			fp := ix.p.Fields[f]
			if fp.Weight == 0 || mask&(1<<f) == 0 {
				continue
			}
			tf := int(tfs[f])
			if tf == 0 {
				continue
			}
			norm := 1 - fp.B + fp.B*float64(ix.lens[doc][f])/st.avg[f]
			t += fp.Weight * float64(tf) / norm
			if len(parts) > 0 {
				parts = append(parts, ", "...)
			}
			parts = append(parts, fieldNames[f]...)
			parts = append(parts, " tf="...)
			parts = strconv.AppendInt(parts, int64(tf), 10)
			parts = append(parts, " w="...)
			parts = strconv.AppendFloat(parts, fp.Weight, 'g', 2, 64)
		}
		if t == 0 {
			continue
		}
		if !first {
			b = append(b, " + "...)
		}
		first = false
		c := q.weight * q.idf * t / (ix.p.K1 + t)
		b = strconv.AppendQuote(b, q.text)
		b = append(b, ' ')
		b = strconv.AppendFloat(b, c, 'f', 3, 64)
		b = append(b, " (idf "...)
		b = strconv.AppendFloat(b, q.idf, 'f', 2, 64)
		b = append(b, ", "...)
		b = append(b, parts...)
		if q.weight != 1 {
			b = append(b, ", query weight "...)
			b = strconv.AppendFloat(b, q.weight, 'g', 2, 64)
		}
		b = append(b, ')')
	}
	b = append(b, ']')
	if prior != 0 {
		b = append(b, " + session prior "...)
		b = strconv.AppendFloat(b, prior, 'f', 3, 64)
		b = append(b, " ("...)
		b = strconv.AppendFloat(b, ix.p.GroupWeight, 'g', 2, 64)
		b = append(b, " × best other turn of the session)"...)
	}
	if mult != 1 || prior != 0 {
		b = append(b, ')')
	}
	if mult != 1 {
		b = append(b, " × "...)
		b = strconv.AppendFloat(b, mult, 'g', 3, 64)
		b = append(b, " ("...)
		b = append(b, strings.Join(why, ", ")...)
		b = append(b, ')')
	}
	b = append(b, "; N="...)
	b = strconv.AppendInt(b, int64(st.n), 10)
	return string(b)
}

// roleNames are the speaker terms of turns without a speaker's name (the
// event's role: memindex.SpeakerOf) and their stems. They are not names: a
// query names a role only by the role's own word (roleWords), and no
// nickname names one.
var roleNames = map[string]bool{"user": true, "assistant": true, "assist": true, "system": true, "tool": true}

// roleWords are the query words that name a role, by the role's term.
var roleWords = map[string][]string{
	"user": {"user", "users"}, "assistant": {"assistant", "assistants"}, "assist": {"assistant", "assistants"},
	"system": {"system", "systems"}, "tool": {"tool", "tools"},
}

// namesRole reports whether query holds one of the words that name the
// role whose term is t ("assistance" shares the term "assist" with
// "assistant" but does not name the assistant).
func namesRole(query, t string) bool {
	for _, w := range strings.FieldsFunc(strings.ToLower(query), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if slices.Contains(roleWords[t], w) {
			return true
		}
	}
	return false
}

// NicknameWords returns the words of query that may be a speaker's
// nickname (Params.Nicknames), lowercased: three or more ASCII letters,
// written with a capital, and not the first word of a sentence ("How long
// have Mel and her husband…" gives "mel"; "who bought a car" and "Car
// insurance?" give nothing).
func NicknameWords(query string) []string {
	var out []string
	start := true // the next word begins a sentence
	for i := 0; i < len(query); {
		r, n := utf8.DecodeRuneInString(query[i:])
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			if r == '.' || r == '!' || r == '?' || r == '\n' {
				start = true
			}
			i += n
			continue
		}
		j := i
		for j < len(query) {
			r2, n2 := utf8.DecodeRuneInString(query[j:])
			if !unicode.IsLetter(r2) && !unicode.IsDigit(r2) {
				break
			}
			j += n2
		}
		w := query[i:j]
		if !start && len(w) >= 3 && w[0] >= 'A' && w[0] <= 'Z' && isASCIILetters(w) {
			out = append(out, strings.ToLower(w))
		}
		start = false
		i = j
	}
	return out
}

func isASCIILetters(w string) bool {
	for i := 0; i < len(w); i++ {
		if c := w[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// namedSpeakers returns the speakers the query names: by a word of their
// name (a role only by its own word, namesRole), or, with Nicknames, by a
// NicknameWords word that begins a term of their name and names nobody
// exactly.
func (ix *Index) namedSpeakers(query string) map[int32]bool {
	if ix.p.SpeakerBoost == 0 || len(ix.spkTerms) == 0 {
		return nil
	}
	var out map[int32]bool
	add := func(ids []int32) {
		for _, id := range ids {
			if out == nil {
				out = map[int32]bool{}
			}
			out[id] = true
		}
	}
	for _, t := range ix.p.Analyzer.Terms(query) {
		if roleNames[t] && !namesRole(query, t) {
			continue
		}
		add(ix.spkTerms[t])
	}
	if !ix.p.Nicknames {
		return out
	}
	for _, w := range NicknameWords(query) {
		exact := false
		for _, t := range ix.p.Analyzer.Terms(w) {
			exact = exact || len(ix.spkTerms[t]) > 0
		}
		if exact {
			continue
		}
		for name, nids := range ix.spkTerms {
			if len(name) > len(w) && strings.HasPrefix(name, w) && !roleNames[name] {
				add(nids)
			}
		}
	}
	return out
}
