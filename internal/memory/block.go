package memory

import (
	"cmp"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/tendrilai/tendril/internal/session"
)

// The memory block of the system prompt (SPEC §4.6 steps 4–5 and
// "Budget") is built here and only here: Assemble orders and filters the
// hits, RenderBlock / RenderBlockWith render them, FitBlock fits any
// renderer's output into a token budget. The agent calls these; nothing
// else renders memory for the model.
//
// Filtering (FilterHits, applied by Assemble and again, idempotently, by
// RenderBlock) walks the hits explicit first, in rank order, and drops:
//
//   - DropEcho: records the assistant wrote. An episodic event whose role
//     (metadata "role", else the "(date) assistant:" speaker of its
//     content) is "assistant" is always dropped, not only when it restates
//     a user line: the block says what is remembered about the user, the
//     assistant's replies restate what it was told or guessed, and feeding
//     its own guesses back as memory would make them self-confirming. What
//     the assistant committed to (reminders, notes) lives in its own
//     stores and tools.
//   - DropContentless: lines with no content word after the "(date)
//     speaker:" prefix, e.g. "ok", "thanks!", "hi", "ㅇㅋ", "감사합니다"
//     (see contentWords for what a content word is).
//   - DropDuplicate: a record whose normalised text (ContentHash of the
//     text without the event prefix) equals a kept record's, or whose
//     content words overlap a kept record's with Jaccard ≥ 0.8; the
//     higher-ranked one (explicit first, then retrieval order) stays.
//   - DropConflict: an inferred record that SameTopic says conflicts with
//     a kept explicit record.
//
// The budget is a prefix: records are rendered in that order and the
// lowest-ranked are cut first, so explicit records are the last to go.

// Drop reasons reported by FilterHits.
const (
	DropEcho        = "echo"
	DropContentless = "contentless"
	DropDuplicate   = "duplicate"
	DropConflict    = "conflict"
)

// Dropped is a hit FilterHits left out, with the reason (one of the Drop*
// constants) and, for duplicates and conflicts, the ID of the kept record
// that caused it.
type Dropped struct {
	Hit    Hit    `json:"hit"`
	Reason string `json:"reason"`
	By     string `json:"by,omitempty"`
}

// nearDuplicateJaccard is the content-word overlap at or above which two
// records are near-duplicates.
const nearDuplicateJaccard = 0.8

// FilterHits orders hits explicit first (each group keeping its relative order)
// and drops echoes, contentless lines, duplicates and inferred records that
// conflict with an explicit one (see the package comment above). It is
// idempotent: FilterHits of its own output drops nothing.
func FilterHits(hits []Hit) (kept []Hit, dropped []Dropped) {
	return filterHits(hits, 0, true)
}

// filterHits is FilterHits that stops once limit hits are kept (≤ 0: no
// limit) and lists the dropped hits only when wantDropped. Whether a hit
// is kept depends only on the hits kept before it, so the kept hits are
// exactly the first limit of FilterHits' (Assemble needs no more).
//
// Each hit is compared only with the kept records that can match it,
// found through indexes instead of a scan of every kept record (up to
// 150 hits × 50 kept per turn):
//
//   - Near-duplicates by prefix filtering (Chaudhuri, Ganti and Kaushik,
//     "A primitive operator for similarity joins in data cleaning",
//     ICDE 2006; Bayardo, Ma and Srikant, "Scaling up all pairs
//     similarity search", WWW 2007): two word sets with Jaccard ≥ t share
//     a word among the first n − ⌈t·n⌉ + 1 words of each (n its size)
//     under one total order of words, here (hash, word) as in
//     analysis.hs. Kept records are indexed by the hashes of their
//     prefix words; a longer prefix (⌊4n/5⌋ for ⌈0.8n⌉) only adds
//     candidates, and every candidate is checked by nearDuplicateAn.
//   - Exact duplicates by content hash.
//
// Conflicts are still a scan of the explicit kept records: each
// comparison is mostly the words' signature test (commonWords), and an
// index of their words cost more than it saved on conversational text
// (BenchmarkFilterHitsTurn), where a few frequent words are in most
// records.
//
// Candidates are checked in kept order, so the record named in "by" is
// the first that matches, as in a scan.
func filterHits(hits []Hit, limit int, wantDropped bool) (kept []Hit, dropped []Dropped) {
	fs := filterStatePool.Get().(*filterState)
	defer fs.release()
	for i := range hits {
		if hits[i].Record.Explicit() {
			fs.order = append(fs.order, int32(i))
		}
	}
	for i := range hits {
		if !hits[i].Record.Explicit() {
			fs.order = append(fs.order, int32(i))
		}
	}
	drop := func(h *Hit, reason, by string) {
		if wantDropped {
			dropped = append(dropped, Dropped{Hit: *h, Reason: reason, By: by})
		}
	}
	for _, hi := range fs.order {
		if limit > 0 && len(fs.kept) >= limit {
			break
		}
		h := &hits[hi]
		if IsAssistantRecord(h.Record) {
			drop(h, DropEcho, "")
			continue
		}
		an := analyse(h.Record)
		if len(an.words) == 0 {
			drop(h, DropContentless, "")
			continue
		}
		by := ""
		if h.Record.ID != "" && fs.ids[h.Record.ID] {
			by = h.Record.ID
		}
		if by == "" {
			if i := fs.duplicateOf(&an); i >= 0 {
				by = nameOf(hits[fs.kept[i]])
			}
		}
		if by != "" {
			drop(h, DropDuplicate, by)
			continue
		}
		if !h.Record.Explicit() && fs.nExp > 0 {
			it, _ := h.Record.Metadata["topic"].(string)
			if i := fs.conflictOf(hits, strings.TrimSpace(it), &an); i >= 0 {
				drop(h, DropConflict, nameOf(hits[fs.kept[i]]))
				continue
			}
		}
		fs.keep(hi, h, an)
	}
	if len(fs.kept) > 0 {
		kept = make([]Hit, len(fs.kept))
		for i, hi := range fs.kept {
			kept[i] = hits[hi]
		}
	}
	return kept, dropped
}

// filterState is filterHits' working state, pooled: its maps and slices
// are cleared, not freed, between calls.
type filterState struct {
	order []int32    // hit indexes, explicit first
	kept  []int32    // hit indexes of the kept records
	info  []analysis // per kept record
	nExp  int        // kept[:nExp] are explicit
	topic []topicKey // per explicit kept record, its metadata topic
	ids   map[string]bool
	// byHash maps a content hash to the first kept record with it.
	byHash map[string]int32
	// prefix lists, per hash of a word in a kept record's prefix (see
	// filterHits), those records.
	prefix postingMap
	cand   []int32
}

// postingMap maps a word hash to a list of kept-record positions, the
// lists chained through one slice (newest first) so that clearing it
// keeps its storage.
type postingMap struct {
	head  map[uint64]int32 // hash → 1 + index in links of its newest entry
	links []postingLink
}

type postingLink struct{ pos, next int32 } // next: 1 + index, 0 = end

func (m *postingMap) add(h uint64, pos int32) {
	if m.head == nil {
		m.head = map[uint64]int32{}
	}
	n := m.head[h]
	if n > 0 && m.links[n-1].pos == pos {
		return // a word hash twice in one record
	}
	m.links = append(m.links, postingLink{pos: pos, next: n})
	m.head[h] = int32(len(m.links))
}

// appendTo appends the positions listed under h to buf.
func (m *postingMap) appendTo(buf []int32, h uint64) []int32 {
	for n := m.head[h]; n > 0; n = m.links[n-1].next {
		buf = append(buf, m.links[n-1].pos)
	}
	return buf
}

func (m *postingMap) reset() {
	clear(m.head)
	m.links = m.links[:0]
}

var filterStatePool = sync.Pool{New: func() any {
	return &filterState{ids: map[string]bool{}, byHash: map[string]int32{}}
}}

func (fs *filterState) release() {
	if cap(fs.order) > 4096 || cap(fs.prefix.links) > 1<<14 {
		return // an outsized call: let the collector have it
	}
	fs.order, fs.kept, fs.cand = fs.order[:0], fs.kept[:0], fs.cand[:0]
	clear(fs.info)
	clear(fs.topic)
	fs.info, fs.topic, fs.nExp = fs.info[:0], fs.topic[:0], 0
	clear(fs.ids)
	clear(fs.byHash)
	fs.prefix.reset()
	filterStatePool.Put(fs)
}

// prefixLen is how many of n words (in analysis.hs order) are indexed
// for the near-duplicate search: n − ⌊4n/5⌋ + 1, at most n.
func prefixLen(n int) int {
	return min(n, n-4*n/5+1)
}

// duplicateOf returns the position (in fs.kept) of the first kept record
// an duplicates (same content hash or nearDuplicateAn), or -1.
func (fs *filterState) duplicateOf(an *analysis) int {
	fs.cand = fs.cand[:0]
	if i, ok := fs.byHash[an.hash]; ok {
		fs.cand = append(fs.cand, i)
	}
	for _, h := range an.hw[:prefixLen(len(an.hw))] {
		fs.cand = fs.prefix.appendTo(fs.cand, h)
	}
	if len(fs.cand) == 0 {
		return -1
	}
	slices.Sort(fs.cand)
	prev := int32(-1)
	for _, i := range fs.cand {
		if i == prev {
			continue
		}
		prev = i
		if fs.info[i].hash == an.hash || nearDuplicateAn(&fs.info[i], an) {
			return int(i)
		}
	}
	return -1
}

// conflictOf returns the position of the first explicit kept record an
// inferred record (metadata topic it, trimmed; analysis an) conflicts
// with (sameTopicAn), or -1.
func (fs *filterState) conflictOf(hits []Hit, it string, an *analysis) int {
	for i := range fs.nExp {
		if sameTopicAn(fs.topic[i], it, hits[fs.kept[i]].Record.Strategy, &fs.info[i], an) {
			return i
		}
	}
	return -1
}

// keep adds hit hi (h) with analysis an to the kept records and their
// indexes.
func (fs *filterState) keep(hi int32, h *Hit, an analysis) {
	pos := int32(len(fs.kept))
	fs.kept = append(fs.kept, hi)
	fs.info = append(fs.info, an)
	if _, ok := fs.byHash[an.hash]; !ok {
		fs.byHash[an.hash] = pos
	}
	for _, w := range an.hw[:prefixLen(len(an.hw))] {
		fs.prefix.add(w, pos)
	}
	if h.Record.Explicit() {
		fs.nExp = len(fs.kept) // explicit hits come first
		et, _ := h.Record.Metadata["topic"].(string)
		fs.topic = append(fs.topic, topicKey{set: et != "", trimmed: strings.TrimSpace(et)})
	}
	if h.Record.ID != "" {
		fs.ids[h.Record.ID] = true
	}
}

// topicKey is a record's metadata "topic": whether it is a non-empty
// string, and that string trimmed (SameTopic's rule 1).
type topicKey struct {
	set     bool
	trimmed string
}

// nearDuplicateAn is nearDuplicate(a.words, b.words), counting the shared
// words by their hashes (commonWords).
func nearDuplicateAn(a, b *analysis) bool {
	small, big := len(a.words), len(b.words)
	if small > big {
		small, big = big, small
	}
	if small == 0 || float64(small)/float64(big) < nearDuplicateJaccard {
		return false
	}
	common := commonWords(a, b)
	return float64(common)/float64(len(a.words)+len(b.words)-common) >= nearDuplicateJaccard
}

// commonWords is intersection(a.words, b.words), merging the words'
// 64-bit hashes instead of the strings: the filter compares every hit
// with every kept record (up to 100 × 100 per turn), and string
// comparison was most of a turn's filtering. Equal hashes are confirmed
// by the strings; on a collision (equal hashes, different words) it
// counts with the strings instead, so the count is always exact.
func commonWords(a, b *analysis) int {
	if a.sig[0]&b.sig[0] == 0 && a.sig[1]&b.sig[1] == 0 {
		return 0 // no bit in common, so no word (a word sets the same bit in both)
	}
	n, i, j := 0, 0, 0
	for i < len(a.hw) && j < len(b.hw) {
		switch {
		case a.hw[i] == b.hw[j]:
			if a.hs[i] != b.hs[j] {
				return intersection(a.words, b.words)
			}
			n++
			i++
			j++
		case a.hw[i] < b.hw[j]:
			i++
		default:
			j++
		}
	}
	return n
}

func nameOf(h Hit) string {
	if h.Record.ID == "" {
		return "(unnamed)"
	}
	return h.Record.ID
}

// analysis is what the filter needs of a record, computed once.
type analysis struct {
	hash  string   // ContentHash of the body
	words []string // distinct content words (stems) of the body, sorted
	// verbOnly holds the words (stems) that came only from preference
	// verbs, sorted; the other words are nouns (isNoun). Usually empty,
	// where a set of the nouns was a map per cached analysis.
	verbOnly []string
	first    string // the first content word of the body
	// hw holds the FNV-1a hashes of words, sorted, and hs the words in
	// that order (commonWords).
	hw []uint64
	hs []string
	// sig has bit (hash mod 128) set for each word's hash.
	sig [2]uint64
}

// analyses caches analyse's result per record body: the same records are
// retrieved turn after turn, and stemming and hashing them again was most
// of FilterHits' cost. Keyed by an FNV-1a hash of strategy, kind and
// content (the inputs of analyse), it holds at most analysisCacheSize
// entries and starts over when full, so memory stays bounded.
var analyses = struct {
	sync.Mutex
	m map[uint64]analysis
}{m: map[uint64]analysis{}}

const analysisCacheSize = 4096

// analysisSeed seeds the cache's keys (maphash, per process).
var analysisSeed = maphash.MakeSeed()

func analyse(r Record) analysis {
	// strategy, 0, kind, 0, content, hashed with the runtime's hash (a
	// turn hashes 150 contents; FNV-1a byte by byte was a third of this)
	var h maphash.Hash
	h.SetSeed(analysisSeed)
	h.WriteString(string(r.Strategy))
	h.WriteByte(0)
	if k, _ := r.Metadata["kind"].(string); k != "" {
		h.WriteString(k)
	}
	h.WriteByte(0)
	h.WriteString(r.Content)
	key := h.Sum64()
	analyses.Lock()
	an, ok := analyses.m[key]
	analyses.Unlock()
	if ok {
		return an
	}
	an = analyseBody(r)
	analyses.Lock()
	if len(analyses.m) >= analysisCacheSize {
		analyses.m = map[uint64]analysis{}
	}
	analyses.m[key] = an
	analyses.Unlock()
	return an
}

// analyseBody computes a record's analysis; the maps it returns are
// shared through the cache and must not be changed.
func analyseBody(r Record) analysis {
	body := bodyText(r)
	an := analysis{hash: ContentHash(body)}
	seen := map[string]bool{}
	nouns := map[string]bool{}
	for _, w := range words(body) {
		st := stem(w)
		if st == "" {
			continue
		}
		if !seen[st] {
			seen[st] = true
			an.words = append(an.words, st)
			if an.first == "" {
				an.first = st
			}
		}
		if !preferenceVerbs[w] {
			nouns[st] = true
		}
	}
	slices.Sort(an.words)
	for _, w := range an.words {
		if !nouns[w] {
			an.verbOnly = append(an.verbOnly, w)
		}
	}
	an.hs = slices.Clone(an.words)
	hashes := make(map[string]uint64, len(an.hs))
	for _, w := range an.hs {
		hashes[w] = wordHash(w)
	}
	slices.SortFunc(an.hs, func(a, b string) int {
		if c := cmp.Compare(hashes[a], hashes[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	an.hw = make([]uint64, len(an.hs))
	for i, w := range an.hs {
		h := hashes[w]
		an.hw[i] = h
		an.sig[h>>6&1] |= 1 << (h & 63)
	}
	return an
}

// wordHash is the 64-bit FNV-1a hash of w.
func wordHash(w string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(w); i++ {
		h ^= uint64(w[i])
		h *= 1099511628211
	}
	return h
}

// The "(YYYY-MM-DD) speaker: " prefix of episodic event records (see
// sqlitestore's eventRecord) is the regular expression
//
//	^\((\d{4}-\d{2}-\d{2})\) ([^:\n]{1,64}):(?:\s+|$)
//
// matched by splitEventPrefix.

// bodyText is what a record says: its content without the "(date)
// speaker:" prefix of an episodic event.
func bodyText(r Record) string {
	c := strings.TrimSpace(r.Content)
	if r.Strategy == StrategyEpisodic || r.Metadata["kind"] == "event" {
		if _, body, ok := splitEventPrefix(c); ok {
			return c[body:]
		}
	}
	return c
}

// IsAssistantRecord reports whether the assistant wrote the record: an
// event whose metadata "role" is "assistant", or, when it has no role, an
// episodic record whose content starts "(date) assistant: ".
func IsAssistantRecord(r Record) bool {
	if role, ok := r.Metadata["role"].(string); ok && role != "" {
		return strings.EqualFold(role, "assistant")
	}
	if r.Strategy != StrategyEpisodic && r.Metadata["kind"] != "event" {
		return false
	}
	c := strings.TrimSpace(r.Content)
	speaker, _, ok := splitEventPrefix(c)
	return ok && strings.EqualFold(strings.TrimSpace(speaker), "assistant")
}

// splitEventPrefix matches eventPrefix at the start of c without the
// regexp engine (every hit of every turn is checked): it returns the
// speaker and the offset of the body after the prefix. The two agree on
// every input (TestSplitEventPrefixMatchesRegexp).
func splitEventPrefix(c string) (speaker string, body int, ok bool) {
	const date = "(dddd-dd-dd) "
	if len(c) < len(date)+2 {
		return "", 0, false
	}
	for i := 0; i < len(date); i++ {
		switch ch := c[i]; date[i] {
		case 'd':
			if ch < '0' || ch > '9' {
				return "", 0, false
			}
		default:
			if ch != date[i] {
				return "", 0, false
			}
		}
	}
	i, n := len(date), 0
	for i < len(c) && c[i] != ':' {
		if c[i] == '\n' || n == 64 {
			return "", 0, false
		}
		_, w := utf8.DecodeRuneInString(c[i:])
		i += w
		n++
	}
	if n == 0 || i == len(c) {
		return "", 0, false
	}
	speaker, i = c[len(date):i], i+1
	if i == len(c) {
		return speaker, i, true
	}
	j := i
	for j < len(c) && (c[j] == ' ' || c[j] == '\t' || c[j] == '\n' || c[j] == '\f' || c[j] == '\r') {
		j++
	}
	if j == i {
		return "", 0, false
	}
	return speaker, j, true
}

// IsContentless reports whether text has no content word: "ok", "thanks",
// "hi", "ㅇㅋ", "감사합니다" and the like.
func IsContentless(text string) bool { return len(contentWords(text)) == 0 }

func jaccard(a, b []string) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	common := intersection(a, b)
	return float64(common) / float64(len(a)+len(b)-common)
}

// nearDuplicate reports jaccard(a, b) >= nearDuplicateJaccard. The Jaccard
// index of two sets is at most min/max of their sizes, so pairs whose sizes
// differ too much are decided without comparing words (exact: division is
// monotone in floating point too).
func nearDuplicate(a, b []string) bool {
	small, big := len(a), len(b)
	if small > big {
		small, big = big, small
	}
	if small == 0 || float64(small)/float64(big) < nearDuplicateJaccard {
		return false
	}
	return jaccard(a, b) >= nearDuplicateJaccard
}

// intersection counts the words two sorted sets share (a merge, no maps).
func intersection(a, b []string) int { return CountCommon(a, b) }

// CountCommon counts the strings two sorted, duplicate-free slices share,
// by one merge without allocating.
func CountCommon(a, b []string) int {
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			n++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return n
}

// functionWords are never content words: English function words and
// common verbs of preference (they say how, not what).
var functionWords = set("the and for with that this these those you your yours are was were have has had " +
	"but from they them their there then than its our ours user assistant prefers prefer preferred likes like " +
	"uses use used using only always never what which who whom whose how when where why should would could " +
	"can will shall may might must not about into onto over under also just very some any all been being " +
	"does did done doing get gets got getting really she her hers him his himself herself myself yourself " +
	"wants want need needs here each every much many more most such other own same too out off")

// fillerWords carry no content on their own: acknowledgements, greetings,
// thanks, in English and Korean. A line made only of these (and function
// words) is contentless.
var fillerWords = set("ok okay okey kk thanks thank thx ty hi hello hey hiya yo yes yeah yep yup no nope nah " +
	"sure cool great nice good fine alright bye goodbye lol haha hmm hm please pls welcome morning night " +
	"noted awesome perfect wow oh ah cheers np gotcha right indeed absolutely " +
	"ㅇㅋ ㅋㅋ ㅎㅎ 감사 감사합니다 감사해요 고마워 고마워요 고맙습니다 안녕 안녕하세요 네 넵 넹 응 예 아니 아니요 " +
	"좋아 좋아요 알겠어 알겠어요 알겠습니다 오케이 그래 그래요")

// koreanPronouns are not content words after particle stripping.
var koreanPronouns = set("나 내 저 제 너 네 우리 저희 그 이 그것 이것")

// koreanParticles are stripped from the end of a Hangul word (longest
// first) so "비료는" and "비료만" both give "비료".
var koreanParticles = []string{"에서는", "으로는", "에게서", "에서", "에게", "으로", "까지", "부터", "처럼", "보다", "한테",
	"은", "는", "이", "가", "을", "를", "만", "도", "의", "에", "로", "와", "과", "랑"}

func set(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// contentWords returns the content words of s, each as its stem:
// lowercased NFKC words split at anything that is not a letter or digit;
// Latin-script words need 3+ letters, are not function or filler words and
// are cut to their first 5 letters ("fertiliser", "fertilizers" →
// "ferti"); Hangul words lose one trailing particle ("비료는" → "비료") and
// must not be a filler or a pronoun; words of only Hangul jamo ("ㅇㅋ")
// are fillers; any word with a digit is content.
func contentWords(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range words(s) {
		if st := stem(w); st != "" {
			out[st] = true
		}
	}
	return out
}

func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(norm.NFKC.String(s)), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.Is(unicode.Hangul, r)
	})
}

func stem(w string) string {
	if fillerWords[w] {
		return ""
	}
	hasDigit, syllables, jamo := false, 0, 0
	for _, r := range w {
		switch {
		case unicode.IsDigit(r):
			hasDigit = true
		case r >= 0xAC00 && r <= 0xD7A3:
			syllables++
		case unicode.Is(unicode.Hangul, r):
			jamo++
		}
	}
	switch {
	case hasDigit:
		return w
	case syllables > 0:
		for _, p := range koreanParticles {
			if rest, ok := strings.CutSuffix(w, p); ok && rest != "" {
				w = rest
				break
			}
		}
		if fillerWords[w] || koreanPronouns[w] {
			return ""
		}
		return w
	case jamo > 0:
		return "" // ㅇㅋ, ㅋㅋ: jamo-only chat shorthand
	}
	r := []rune(w)
	if len(r) < 3 || functionWords[w] {
		return ""
	}
	if len(r) > 5 {
		w = string(r[:5])
	}
	return w
}

// preferenceVerbs are dropped from an explicit preference's words when
// finding what it is about ("I only use organic fertiliser" is about
// organic fertiliser).
var preferenceVerbs = set("love loves hate hates dislike dislikes enjoy enjoys call favourite favorite avoid avoids " +
	"rather keep 좋아해 좋아해요 싫어해 싫어해요 사용 사용해 써요 써 불러 불러줘 불러주세요")

// claimMaxWords bounds the inferred records the subject rule applies to: a
// record of more content words is an exchange or a summary that may
// mention the explicit record's subject among other things, not a claim
// about it.
const claimMaxWords = 12

// SameTopic is the conflict rule of assembly: whether the inferred record
// speaks about the same topic as the explicit one, which then takes
// precedence. It is true when any of these holds:
//
//  1. both carry the same non-empty metadata "topic" string (case-folded);
//  2. at least half of the inferred record's content words (see
//     contentWords; "fertiliser" and "fertilizers" alike by their 5-letter
//     stem) occur in the explicit one: a restatement or a variant of it
//     ("uses chemical fertiliser" against "I only use organic
//     fertiliser");
//  3. the explicit record is a USER_PREFERENCE, the inferred record is a
//     short claim (at most 12 content words) and its subject — its first
//     content word, after any "(date) speaker:" prefix — is one of the
//     preference's content words other than preference verbs: "my
//     fertiliser is a synthetic NPK blend" is about fertiliser, which "I
//     only use organic fertiliser" settles.
//
// Differing topic keys do not prevent 2 and 3: extractors assign keys
// inconsistently ("fertiliser" vs "garden-inputs"), and the explicit
// statement is what the user said.
//
// Limits: this is word overlap, not understanding. Rule 3 reads the first
// content word as the subject, which is right for the short declarative
// claims extractors write, and misses a claim whose subject comes late
// ("Synthetic NPK is what goes on the fertiliser schedule") unless rule 2
// catches it; it also drops a compatible claim about the same subject
// ("roses get black spot" next to "I love roses"), which is the price of
// explicit precedence. PROCEDURAL records (how to answer) only use rules 1
// and 2: an instruction like "keep answers short about aphids" does not
// settle facts about aphids. Korean is matched on particle-stripped words,
// without morphology; synonyms ("plant food") are not matched.
func SameTopic(explicit, inferred Record) bool {
	e, i := analyse(explicit), analyse(inferred)
	return sameTopic(explicit, inferred, &e, &i)
}

func sameTopic(explicit, inferred Record, e, i *analysis) bool {
	et, _ := explicit.Metadata["topic"].(string)
	if et != "" {
		it, _ := inferred.Metadata["topic"].(string)
		if strings.EqualFold(strings.TrimSpace(et), strings.TrimSpace(it)) {
			return true
		}
	}
	return sameWords(explicit.Strategy, e, i, intersection(i.words, e.words))
}

// sameTopicAn is sameTopic with the explicit record's topic given (et),
// the inferred record's trimmed topic it, and shared words counted by
// hash (commonWords).
func sameTopicAn(et topicKey, it string, explicit Strategy, e, i *analysis) bool {
	if et.set && strings.EqualFold(et.trimmed, it) {
		return true
	}
	if len(i.words) == 0 {
		return false
	}
	return sameWords(explicit, e, i, commonWords(i, e))
}

// sameWords is sameTopic's rules 2 and 3, given the count of shared
// content words.
func sameWords(explicit Strategy, e, i *analysis, common int) bool {
	if len(i.words) == 0 {
		return false
	}
	if float64(common) >= 0.5*float64(len(i.words)) {
		return true
	}
	return explicit == StrategyUserPreference && len(i.words) <= claimMaxWords && e.isNoun(i.first)
}

// isNoun reports whether w is one of a's words that is not only a
// preference verb.
func (a *analysis) isNoun(w string) bool {
	if _, ok := slices.BinarySearch(a.words, w); !ok {
		return false
	}
	_, verb := slices.BinarySearch(a.verbOnly, w)
	return !verb
}

// BlockHeader starts the memory block.
const BlockHeader = "What you remember about this user:\n"

// maxLineRunes caps one rendered record.
const maxLineRunes = 500

// BlockOptions bound RenderBlockWith.
type BlockOptions struct {
	// MaxTokens is the block's budget, estimated with session.EstimateText
	// (the project's one token estimate); ≤ 0 means no budget.
	MaxTokens int
	// Limit caps the records rendered; ≤ 0 means no cap (retrieval has
	// already capped the hits at its topK).
	Limit int
	// Filtered says the hits are FilterHits' (or Assemble's) output
	// already, as Retrieval.Recall returns them: they are fitted and
	// rendered as given, without filtering them again (FilterHits is
	// idempotent, so the block is the same; Block.Dropped is then empty).
	Filtered bool
}

// Block is a rendered memory block.
type Block struct {
	// Text is the block, "" when no record is rendered.
	Text string
	// Hits are the records in Text, in order.
	Hits []Hit
	// Tokens is session.EstimateText(Text).
	Tokens int
	// Dropped are the hits FilterHits left out; records cut by the budget or
	// the limit are counted in Cut, not listed here.
	Dropped []Dropped
	Cut     int
}

// RenderBlockWith filters hits (FilterHits), caps them at opts.Limit, and renders
// the longest prefix whose estimate fits opts.MaxTokens:
//
//	What you remember about this user:
//	- [Explicit] I only use organic fertiliser
//	- [Inferred] Has a fig tree
//
// Each record is one line (whitespace folded, at most 500 runes).
func RenderBlockWith(hits []Hit, opts BlockOptions) Block {
	kept, dropped := hits, []Dropped(nil)
	if !opts.Filtered {
		kept, dropped = FilterHits(hits)
	}
	cut := 0
	if opts.Limit > 0 && len(kept) > opts.Limit {
		cut = len(kept) - opts.Limit
		kept = kept[:opts.Limit]
	}
	// Each record's line is rendered once; FitBlock's prefixes join them.
	lines := make([]string, len(kept))
	size := len(BlockHeader)
	for i, h := range kept {
		lines[i] = renderLine(h)
		size += len(lines[i])
	}
	fit, text := FitBlock(kept, opts.MaxTokens, func(h []Hit) string {
		if len(h) == 0 {
			return ""
		}
		var b strings.Builder
		b.Grow(size)
		b.WriteString(BlockHeader)
		for _, l := range lines[:len(h)] {
			b.WriteString(l)
		}
		return b.String()
	})
	return Block{Text: text, Hits: fit, Tokens: session.EstimateText(text), Dropped: dropped, Cut: cut + len(kept) - len(fit)}
}

// FitBlock returns the longest prefix of hits whose rendering by render is
// estimated (session.EstimateText) at no more than maxTokens, and that
// rendering; maxTokens ≤ 0 means no budget. The hits must already be in
// rank order (Assemble's): the lowest-ranked are cut first. render must
// grow with its input (true of any line-per-record renderer). It returns no
// hits and "" when not even one record fits.
func FitBlock(hits []Hit, maxTokens int, render func([]Hit) string) ([]Hit, string) {
	if len(hits) == 0 {
		return nil, ""
	}
	full := render(hits)
	if maxTokens <= 0 || session.EstimateText(full) <= maxTokens {
		return hits, full
	}
	// Binary search for the longest fitting prefix: lo fits, hi does not.
	lo, hi := 0, len(hits)
	loText := ""
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if txt := render(hits[:mid]); session.EstimateText(txt) <= maxTokens {
			lo, loText = mid, txt
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return nil, ""
	}
	return hits[:lo], loText
}

// renderLine is one record's line of the block: "- [Explicit] text\n" or
// "- [Inferred] text\n", whitespace folded, at most maxLineRunes runes.
func renderLine(h Hit) string {
	tag := "[Inferred]"
	if h.Record.Explicit() {
		tag = "[Explicit]"
	}
	text := foldSpace(h.Record.Content)
	if utf8.RuneCountInString(text) > maxLineRunes {
		r := []rune(text)
		text = string(r[:maxLineRunes]) + "…"
	}
	return "- " + tag + " " + text + "\n"
}

// foldSpace is strings.Join(strings.Fields(s), " "): runs of Unicode white
// space become one space, none at either end. Most records are folded
// already, and are returned as they are without splitting them (every hit
// of every turn is rendered); TestFoldSpaceMatchesFields checks the two
// agree.
func foldSpace(s string) string {
	prevSpace := true // a space at the start is not folded
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			sp := c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
			if sp && (prevSpace || c != ' ') {
				return strings.Join(strings.Fields(s), " ")
			}
			prevSpace = sp
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) {
			return strings.Join(strings.Fields(s), " ")
		}
		prevSpace = false
		i += w
	}
	if prevSpace && s != "" {
		return strings.Join(strings.Fields(s), " ") // ends in a space
	}
	return s
}
