// Package memindex is the ranking glue the memory stores share (package
// sqlitestore and package pgstore): the search.Doc documents built from
// records and events, the conditions and cached masks a query's
// namespace, statuses, strategies and filters select, BM25F ranking fused
// with vector similarity, unranked listings, and record preparation. Both
// stores rank the same rows the same because they run this one code.
package memindex

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/markdown"
	"github.com/tendrilai/tendril/internal/memory/search"
)

// Cond is the non-text part of a query: an exact namespace or a
// whole-segment namespace path (cleaned; "" when unset), the statuses a
// record may have (none: no record passes), the strategies (none: every
// strategy) and validated metadata filters.
type Cond struct {
	Namespace, Path string
	Statuses        []memory.Status
	Strategies      []memory.Strategy
	Filters         []memory.Filter
}

// NewCond is the condition of q with the given statuses and validated
// filters (see memory.ValidateFilters).
func NewCond(q memory.Query, statuses []memory.Status, filters []memory.Filter) Cond {
	c := Cond{Statuses: statuses, Strategies: q.Strategies, Filters: filters}
	if q.Namespace != "" {
		c.Namespace = memory.CleanNamespace(q.Namespace)
	}
	if q.NamespacePath != "" {
		c.Path = memory.CleanNamespace(q.NamespacePath)
	}
	return c
}

// Admits reports whether a record's strategy and status pass (cheap, no
// namespace or metadata).
func (c Cond) Admits(st memory.Strategy, status memory.Status) bool {
	return HasStatus(c.Statuses, status) && HasStrategy(c.Strategies, st)
}

// InScope reports whether namespace ns equals c.Namespace or lies under
// c.Path.
func (c Cond) InScope(ns string) bool {
	return c.Namespace != "" && memory.NamespaceEqual(ns, c.Namespace) || c.Path != "" && memory.NamespaceUnder(ns, c.Path)
}

// Match reports whether r passes every part of c.
func (c Cond) Match(r memory.Record) bool {
	return c.Admits(r.Strategy, r.Status) && c.InScope(r.Namespace) && memory.MatchFilters(r, c.Filters)
}

// MatchEvent reports whether event e, searched in namespace ns, passes c:
// c.Match(EventRecord(e, ns)), building that record only when c has
// filters.
func (c Cond) MatchEvent(e memory.Event, ns string) bool {
	if !c.Admits(memory.StrategyEpisodic, memory.StatusActive) || !c.InScope(ns) {
		return false
	}
	return len(c.Filters) == 0 || memory.MatchFilters(EventRecord(e, ns), c.Filters)
}

// HasStatus reports whether s is in set (an empty set holds nothing).
func HasStatus(set []memory.Status, s memory.Status) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

// HasStrategy reports whether s is in set (an empty set allows every
// strategy).
func HasStrategy(set []memory.Strategy, s memory.Strategy) bool {
	if len(set) == 0 {
		return true
	}
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

// RecordKey is the sort key of a record's document: byte '0', createdAt
// as 12 big-endian bytes (Unix seconds with the sign bit flipped, then
// nanoseconds), then the ID. Compared as bytes, records sort by
// (createdAt, ID), before every event; the order is that of the
// timestamps formatted as UTC text for every year 0–9999, in 13+len(ID)
// bytes instead of 30+len(ID).
func RecordKey(r memory.Record) string { return sortKey('0', r.CreatedAt, r.ID) }

// EventKey is the sort key of an event's document: byte '1', the
// timestamp as in RecordKey, then the ID: events sort by (timestamp, ID),
// after every record.
func EventKey(e memory.Event) string { return sortKey('1', e.Timestamp, e.ID) }

func sortKey(kind byte, t time.Time, id string) string {
	var b strings.Builder
	b.Grow(13 + len(id))
	var tb [12]byte
	binary.BigEndian.PutUint64(tb[:8], uint64(t.Unix())^1<<63)
	binary.BigEndian.PutUint32(tb[8:], uint32(t.Nanosecond()))
	b.WriteByte(kind)
	b.Write(tb[:])
	b.WriteString(id)
	return b.String()
}

// DateWords is the date field of a document: "2 January 2006 Monday" (UTC).
func DateWords(t time.Time) string { return t.UTC().Format("2 January 2006 Monday") }

// PlainDate is the date prefix of a plain event document: "3:04 pm on 2
// January, 2006" (UTC).
func PlainDate(t time.Time) string { return t.UTC().Format("3:04 pm on 2 January, 2006") }

// SpeakerOf is who said event e: its metadata "speaker", else its role.
func SpeakerOf(e memory.Event) string {
	if sp, ok := e.Metadata["speaker"].(string); ok && sp != "" {
		return sp
	}
	return e.Role
}

// EventNamespace is where an event is searched: the default episodic
// namespace of its agent (metadata "agentId", else agent), actor and
// session.
func EventNamespace(agent string, e memory.Event) string {
	if a, ok := e.Metadata["agentId"].(string); ok && a != "" {
		agent = a
	}
	return memory.MustNamespace(memory.DefaultEpisodicTemplate, memory.NamespaceVars{AgentID: agent, ActorID: e.ActorID, SessionID: e.SessionID})
}

// EventRecord presents an event as an active episodic record in namespace
// ns: content "(YYYY-MM-DD) <speaker>: <text>", metadata with kind
// "event", role and sessionId (plus the event's own metadata, copied),
// createdAt = updatedAt = the timestamp, sources = [event ID].
func EventRecord(e memory.Event, ns string) memory.Record {
	md := map[string]any{}
	for k, v := range e.Metadata {
		md[k] = v
	}
	md["kind"] = "event"
	md["role"] = e.Role
	md["sessionId"] = e.SessionID
	return memory.Record{
		ID: e.ID, Namespace: ns, Strategy: memory.StrategyEpisodic,
		Content:   fmt.Sprintf("(%s) %s: %s", e.Timestamp.UTC().Format("2006-01-02"), SpeakerOf(e), e.Text),
		Metadata:  md,
		CreatedAt: e.Timestamp, UpdatedAt: e.Timestamp, Sources: []string{e.ID}, Status: memory.StatusActive,
	}
}

// RecordDoc is the document of record r: its content, creation date and
// RecordKey.
func RecordDoc(r memory.Record) search.Doc {
	return search.Doc{Text: r.Content, Date: DateWords(r.CreatedAt), Key: RecordKey(r)}
}

// EventDoc is the document of event e: its text (and image caption,
// metadata "caption"), the given neighbouring turns' texts as context
// (joined by newlines), its speaker, date, session as group and EventKey.
// With plain, it is one text "(<PlainDate>) <speaker>: <text>" and the
// context is not used.
func EventDoc(e memory.Event, plain bool, context []string) search.Doc {
	text := e.Text
	if c, ok := e.Metadata["caption"].(string); ok && c != "" {
		text += " " + c
	}
	if plain {
		return search.Doc{Text: fmt.Sprintf("(%s) %s: %s", PlainDate(e.Timestamp), SpeakerOf(e), text), Key: EventKey(e)}
	}
	return search.Doc{Text: text, Context: strings.Join(context, "\n"), Speaker: SpeakerOf(e), Date: DateWords(e.Timestamp), Group: e.SessionID, Key: EventKey(e)}
}

// EventTerms is EventDoc(e, false, context) with its text and context
// analysed by an (for search.Index.AddAnalyzed): text is an.Terms(e.Text)
// and contextTerms[i] is an.Terms(context[i]), terms the caller keeps so
// that a build analyses each turn's text once, for its own document and
// as its neighbours' context. An image caption is analysed here. The
// slices are only read.
func EventTerms(e memory.Event, context []string, an search.Analyzer, text []string, contextTerms [][]string) search.Analyzed {
	d := EventDoc(e, false, context)
	if c, ok := e.Metadata["caption"].(string); ok && c != "" {
		// d.Text is e.Text + " " + c: a space ends a token, so its terms
		// are the two texts' terms end to end (search.TestTermsOfJoin)
		text = slices.Concat(text, an.Terms(c))
	}
	return search.Analyzed{Doc: d, TextTerms: text, ContextTerms: contextTerms}
}

// Mask is the set of documents a condition allows, with its corpus
// statistics.
type Mask struct {
	Cond  Cond
	Scope *search.Scope
}

// Masks caches up to 16 masks of one index by condition (the cache is
// emptied when full). Get is safe for concurrent use; Added and Removed
// need the caller to exclude Get (they change the index too). The zero
// value is an empty cache.
type Masks struct {
	mu sync.RWMutex
	m  map[string]*Mask
}

// Docs is how a store presents the documents of an index to masks and
// ranking, so that it need not hold a full hit record per document:
// document i's hit record (made only for the hits returned) and whether
// it passes a condition (the same answer as c.Match(Record(i))).
type Docs interface {
	Record(doc int) memory.Record
	Match(doc int, c Cond) bool
}

// Records presents documents whose hit records are held in full.
type Records []memory.Record

// Record returns r[doc].
func (r Records) Record(doc int) memory.Record { return r[doc] }

// Match is c.Match(r[doc]).
func (r Records) Match(doc int, c Cond) bool { return c.Match(r[doc]) }

// Get returns the cached mask of c over ix, whose document i has hit
// record docs[i], computing it on a miss.
func (ms *Masks) Get(ix *search.Index, docs []memory.Record, c Cond) *Mask {
	return ms.GetDocs(ix, Records(docs), c)
}

// GetDocs is Get over documents presented by docs (one per document of
// ix).
func (ms *Masks) GetDocs(ix *search.Index, docs Docs, c Cond) *Mask {
	key, err := json.Marshal([]any{c.Namespace, c.Path, c.Statuses, c.Strategies, c.Filters})
	if err == nil {
		ms.mu.RLock()
		m, ok := ms.m[string(key)]
		ms.mu.RUnlock()
		if ok {
			return m
		}
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if err == nil {
		if m, ok := ms.m[string(key)]; ok {
			return m
		}
	}
	allow := make([]bool, ix.Len())
	for i := range allow {
		allow[i] = ix.Live(i) && docs.Match(i, c)
	}
	m := &Mask{Cond: c, Scope: ix.NewScope(allow)}
	if err == nil {
		if ms.m == nil || len(ms.m) >= 16 {
			ms.m = map[string]*Mask{}
		}
		ms.m[string(key)] = m
	}
	return m
}

// Added places the new document doc of ix, with hit record rec, in every
// cached mask.
func (ms *Masks) Added(ix *search.Index, doc int, rec memory.Record) {
	for _, m := range ms.m {
		m.Scope.Set(ix, doc, m.Cond.Match(rec))
	}
}

// AddedDoc is Added for document doc as docs presents it.
func (ms *Masks) AddedDoc(ix *search.Index, doc int, docs Docs) {
	for _, m := range ms.m {
		m.Scope.Set(ix, doc, docs.Match(doc, m.Cond))
	}
}

// Removed takes the retired document doc of ix out of every cached mask.
func (ms *Masks) Removed(ix *search.Index, doc int) {
	for _, m := range ms.m {
		m.Scope.Set(ix, doc, false)
	}
}

// Rank ranks the documents of ix that scope allows for text, at most k
// hits; document i has hit record docs[i] and vector vecs[i] (nil: none).
// With both a query vector and document vectors, the BM25F and cosine
// lists (each max(k, 50) deep) are fused by reciprocal rank, equal scores
// in document key order, and each hit's Explain names both parts. With
// explain false every Explain is empty and, without vectors, none is
// built (search.Index.SearchScopeQuiet).
func Rank(ix *search.Index, docs []memory.Record, vecs [][]float32, scope *search.Scope, text string, qvec []float32, k int, explain bool) []memory.Hit {
	return RankDocs(ix, Records(docs), vecs, scope, text, qvec, k, explain)
}

// RankDocs is Rank over documents presented by docs: only the hits
// returned have their record made.
func RankDocs(ix *search.Index, docs Docs, vecs [][]float32, scope *search.Scope, text string, qvec []float32, k int, explain bool) []memory.Hit {
	if qvec == nil || vecs == nil {
		if !explain {
			res := ix.SearchScopeQuiet(text, scope, k)
			hits := make([]memory.Hit, len(res))
			for i, r := range res {
				hits[i] = memory.Hit{Record: docs.Record(r.Doc), Score: r.Score}
			}
			return hits
		}
		res := ix.SearchScope(text, scope, k)
		hits := make([]memory.Hit, len(res))
		for i, r := range res {
			hits[i] = memory.Hit{Record: docs.Record(r.Doc), Score: r.Score, Explain: r.Explain}
			if vecs != nil { // an embedder is configured, but the query has no vector
				hits[i].Explain += " | " + NoQueryVectorExplain
			}
		}
		return hits
	}
	hits := rankHybrid(ix, docs, vecs, scope, text, qvec, k)
	if !explain {
		for i := range hits {
			hits[i].Explain = ""
		}
	}
	return hits
}

// rankHybrid is RankDocs with both a query vector and document vectors.
func rankHybrid(ix *search.Index, docs Docs, vecs [][]float32, scope *search.Scope, text string, qvec []float32, k int) []memory.Hit {
	depth := max(k, 50)
	res := ix.SearchScope(text, scope, depth)
	type vs struct {
		doc int
		sim float64
	}
	var sims []vs
	for i, v := range vecs {
		if len(v) == len(qvec) && scope.Allowed(i) { // another dimension is another model's: left out
			sims = append(sims, vs{i, search.Cosine(qvec, v)})
		}
	}
	sort.Slice(sims, func(i, j int) bool {
		if sims[i].sim != sims[j].sim {
			return sims[i].sim > sims[j].sim
		}
		return ix.Key(sims[i].doc) < ix.Key(sims[j].doc)
	})
	if len(sims) > depth {
		sims = sims[:depth]
	}
	bm := make([]int, len(res))
	bmWhy := map[int]string{}
	for i, r := range res {
		bm[i] = r.Doc
		bmWhy[r.Doc] = r.Explain
	}
	vl := make([]int, len(sims))
	vecRank := map[int]int{}
	for i, v := range sims {
		vl[i] = v.doc
		vecRank[v.doc] = i + 1
	}
	// why is the vector part beside BM25F's: cosine and vector rank, or
	// why the document has none.
	why := func(doc int) string {
		b, ok := bmWhy[doc]
		switch {
		case ok:
		case len(res) < depth:
			b = "bm25f: no match for the query" // BM25F listed every match
		default:
			b = fmt.Sprintf("bm25f: not in the top %d", depth)
		}
		var v string
		switch r := vecRank[doc]; {
		case r > 0:
			v = fmt.Sprintf("vector: cosine %.4f, rank %d", sims[r-1].sim, r)
		case len(vecs[doc]) == len(qvec):
			v = fmt.Sprintf("vector: cosine %.4f, not in the top %d", search.Cosine(qvec, vecs[doc]), depth)
		default:
			v = "vector: none (not embedded yet)"
		}
		return b + " | " + v
	}
	fused := search.FuseRRF([]string{"bm25f", "vector"}, bm, vl)
	sort.SliceStable(fused, func(i, j int) bool { // equal scores in key order, as after a rebuild
		if fused[i].Score != fused[j].Score {
			return fused[i].Score > fused[j].Score
		}
		return ix.Key(fused[i].Doc) < ix.Key(fused[j].Doc)
	})
	if len(fused) > k {
		fused = fused[:k]
	}
	hits := make([]memory.Hit, len(fused))
	for i, f := range fused {
		hits[i] = memory.Hit{Record: docs.Record(f.Doc), Score: f.Score, Explain: "hybrid " + f.Explain + " | " + why(f.Doc)}
	}
	return hits
}

// NoQueryVectorExplain ends the Explain of a BM25F-only hit when an
// embedder is configured but the query has no vector (the embedding call
// failed or ran out of its share of the retrieval budget).
const NoQueryVectorExplain = "vector: no query vector (embedding failed or timed out): BM25F only"

// SortHits orders hits by score, highest first, equal scores by record ID
// (stable).
func SortHits(h []memory.Hit) {
	sort.SliceStable(h, func(i, j int) bool {
		if h[i].Score != h[j].Score {
			return h[i].Score > h[j].Score
		}
		return h[i].Record.ID < h[j].Record.ID
	})
}

// ListedExplain is the Explain of a hit listed without query text.
const ListedExplain = "listed (no query text): index order"

// Actor is what List reads of one actor's cached rows: its records by ID
// (read only), their IDs by strategy, and its events by ID.
type Actor struct {
	Records map[string]*memory.Record
	ByStrat map[memory.Strategy]map[string]struct{}
	Events  map[string]memory.Event
}

// Events is how a store presents its events to List: which have expired,
// the namespace each is searched in, and its hit record (whose Namespace
// is that namespace).
type Events struct {
	Expired   func(memory.Event) bool
	Namespace func(memory.Event) string
	Record    func(memory.Event) memory.Record
}

// List filters a's records and its unexpired events by c, without
// ranking, in index order: records by (createdAt, ID), then events by
// (timestamp, ID); at most k hits (k ≤ 0: all), each with score 0 and
// ListedExplain.
func List(a Actor, c Cond, k int, ev Events) []memory.Hit {
	var recs []*memory.Record
	keep := func(id string) {
		r := a.Records[id]
		if c.Admits(r.Strategy, r.Status) && c.InScope(r.Namespace) && memory.MatchFilters(*r, c.Filters) {
			recs = append(recs, r)
		}
	}
	if len(c.Strategies) > 0 {
		done := map[memory.Strategy]bool{}
		for _, st := range c.Strategies {
			if !done[st] {
				done[st] = true
				for id := range a.ByStrat[st] {
					keep(id)
				}
			}
		}
	} else {
		for id := range a.Records {
			keep(id)
		}
	}
	sort.Slice(recs, func(i, j int) bool {
		if !recs[i].CreatedAt.Equal(recs[j].CreatedAt) {
			return recs[i].CreatedAt.Before(recs[j].CreatedAt)
		}
		return recs[i].ID < recs[j].ID
	})
	var evs []memory.Event
	if c.Admits(memory.StrategyEpisodic, memory.StatusActive) {
		for _, e := range a.Events {
			if ev.Expired(e) || !c.InScope(ev.Namespace(e)) {
				continue
			}
			evs = append(evs, e)
		}
		markdown.SortEvents(evs)
	}
	n := len(recs) + len(evs)
	if k > 0 && n > k {
		n = k
	}
	out := make([]memory.Hit, 0, n)
	for _, r := range recs {
		if len(out) == n {
			return out
		}
		out = append(out, memory.Hit{Record: *r, Explain: ListedExplain})
	}
	for _, e := range evs {
		if len(out) == n {
			return out
		}
		r := ev.Record(e)
		if !memory.MatchFilters(r, c.Filters) {
			continue
		}
		out = append(out, memory.Hit{Record: r, Explain: ListedExplain})
	}
	return out
}

// NormalizeRecord checks and normalizes a record about to be stored:
// content trimmed with CRLF as LF (non-empty), namespace cleaned
// (non-empty), strategy (default semantic) and status (default active)
// known, metadata normalized (memory.NormalizeMetadata), a new ID from
// newID when empty, and no newline in the ID. Errors wrap
// memory.ErrInvalidQuery, memory.ErrInvalidNamespace or the metadata
// error, prefixed "put record: ".
func NormalizeRecord(rec memory.Record, newID func() string) (memory.Record, error) {
	rec.Content = strings.TrimSpace(strings.ReplaceAll(rec.Content, "\r\n", "\n"))
	if rec.Content == "" {
		return rec, fmt.Errorf("put record: %w: empty content", memory.ErrInvalidQuery)
	}
	if rec.Namespace == "" {
		return rec, fmt.Errorf("put record: %w: empty namespace", memory.ErrInvalidNamespace)
	}
	rec.Namespace = memory.CleanNamespace(rec.Namespace)
	switch rec.Strategy {
	case memory.StrategyUserPreference, memory.StrategySemantic, memory.StrategySummary, memory.StrategyProcedural, memory.StrategyEpisodic:
	case "":
		rec.Strategy = memory.StrategySemantic
	default:
		return rec, fmt.Errorf("put record: %w: unknown strategy %q", memory.ErrInvalidQuery, rec.Strategy)
	}
	switch rec.Status {
	case memory.StatusActive, memory.StatusSuperseded, memory.StatusStaged, memory.StatusRejected:
	case "":
		rec.Status = memory.StatusActive
	default:
		return rec, fmt.Errorf("put record: %w: unknown status %q", memory.ErrInvalidQuery, rec.Status)
	}
	md, err := memory.NormalizeMetadata(rec.Metadata)
	if err != nil {
		return rec, fmt.Errorf("put record: %w", err)
	}
	rec.Metadata = md
	if rec.ID == "" {
		rec.ID = newID()
	}
	if strings.ContainsAny(rec.ID, "\n\r") {
		return rec, fmt.Errorf("put record: %w: id contains a newline", memory.ErrInvalidQuery)
	}
	return rec, nil
}

// DefaultTimes sets a zero createdAt to now and a zero updatedAt to
// createdAt.
func DefaultTimes(rec memory.Record, now time.Time) memory.Record {
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = now
	}
	if rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = rec.CreatedAt
	}
	return rec
}

// NormalizeEvent checks and normalizes an event about to be appended (its
// ID already set): no newline in the ID, a zero timestamp set from now
// (called only then; the store converts the timestamp to its precision
// afterwards), session "default" and role "user" when empty, text trimmed
// with CRLF as LF, metadata normalized (memory.NormalizeMetadata). Errors
// wrap memory.ErrInvalidQuery or the metadata error, prefixed "append
// events: ".
func NormalizeEvent(e memory.Event, now func() time.Time) (memory.Event, error) {
	if strings.ContainsAny(e.ID, "\n\r") {
		return e, fmt.Errorf("append events: %w: id contains a newline", memory.ErrInvalidQuery)
	}
	if e.Timestamp.IsZero() {
		e.Timestamp = now()
	}
	if e.SessionID == "" {
		e.SessionID = "default"
	}
	if e.Role == "" {
		e.Role = "user"
	}
	e.Text = strings.TrimSpace(strings.ReplaceAll(e.Text, "\r\n", "\n"))
	md, err := memory.NormalizeMetadata(e.Metadata)
	if err != nil {
		return e, fmt.Errorf("append events: %w", err)
	}
	e.Metadata = md
	return e, nil
}
