package pgstore

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/search"
)

// The ranking below mirrors package sqlitestore document for document
// (the same Doc fields, sort keys, masks and fusion), so that the same rows
// rank the same on both backends; TestSameRankingAsSQLite holds it to that.

// actorIndex is the ranking index of one actor, updated in place by
// catch-up (new documents added, changed ones retired and re-added) and
// rebuilt from the cached rows when more than half of it is retired.
type actorIndex struct {
	ix     *search.Index
	docs   []memory.Record    // the hit record of each document number
	docOf  map[string]int     // live document of each record or event ID
	sess   map[string][]evRef // session → its indexed events in (timestamp, ID) order
	oldest time.Time          // earliest indexed event (zero: none)
	vecs   [][]float32        // per document, with an Embedder

	maskMu sync.RWMutex
	masks  map[string]*mask
}

type evRef struct {
	ts time.Time
	id string
}

func (r evRef) before(o evRef) bool {
	if !r.ts.Equal(o.ts) {
		return r.ts.Before(o.ts)
	}
	return r.id < o.id
}

// mask is the set of documents a query's scope, statuses, strategies and
// filters allow, with its corpus statistics.
type mask struct {
	cond  cond
	scope *search.Scope
}

// cond is the non-text part of a query.
type cond struct {
	ns, path   string
	statuses   []memory.Status
	strategies []memory.Strategy
	filters    []memory.Filter
}

func newCond(q memory.Query, statuses []memory.Status, filters []memory.Filter) cond {
	c := cond{statuses: statuses, strategies: q.Strategies, filters: filters}
	if q.Namespace != "" {
		c.ns = memory.CleanNamespace(q.Namespace)
	}
	if q.NamespacePath != "" {
		c.path = memory.CleanNamespace(q.NamespacePath)
	}
	return c
}

func (c cond) admits(st memory.Strategy, status memory.Status) bool {
	return hasStatus(c.statuses, status) && hasStrategy(c.strategies, st)
}

func (c cond) inScope(ns string) bool {
	return c.ns != "" && memory.NamespaceEqual(ns, c.ns) || c.path != "" && memory.NamespaceUnder(ns, c.path)
}

func (c cond) match(r memory.Record) bool {
	return c.admits(r.Strategy, r.Status) && c.inScope(r.Namespace) && memory.MatchFilters(r, c.filters)
}

func hasStatus(set []memory.Status, s memory.Status) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

func hasStrategy(set []memory.Strategy, s memory.Strategy) bool {
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

const keyTime = "2006-01-02T15:04:05.000000000"

// recordKey and eventKey order documents as a fresh build does: records
// by (createdAt, ID), then events by (timestamp, ID).
func recordKey(r memory.Record) string { return "0" + r.CreatedAt.UTC().Format(keyTime) + r.ID }
func eventKey(e memory.Event) string   { return "1" + e.Timestamp.UTC().Format(keyTime) + e.ID }

func dateWords(t time.Time) string { return t.UTC().Format("2 January 2006 Monday") }

func plainDate(t time.Time) string { return t.UTC().Format("3:04 pm on 2 January, 2006") }

func speakerOf(e memory.Event) string {
	if sp, ok := e.Metadata["speaker"].(string); ok && sp != "" {
		return sp
	}
	return e.Role
}

// eventNamespace is where an event is searched: the default episodic
// namespace of its agent (metadata "agentId", else Options.AgentID), actor
// and session.
func (s *Store) eventNamespace(e memory.Event) string {
	agent := s.opts.AgentID
	if a, ok := e.Metadata["agentId"].(string); ok && a != "" {
		agent = a
	}
	return memory.MustNamespace(memory.DefaultEpisodicTemplate, memory.NamespaceVars{AgentID: agent, ActorID: e.ActorID, SessionID: e.SessionID})
}

// eventRecord presents an event as an episodic record: content
// "(YYYY-MM-DD) <speaker>: <text>", metadata with kind "event", role and
// session (plus the event's own metadata), sources = [event ID].
func (s *Store) eventRecord(e memory.Event) memory.Record {
	md := map[string]any{}
	for k, v := range e.Metadata {
		md[k] = v
	}
	md["kind"] = "event"
	md["role"] = e.Role
	md["sessionId"] = e.SessionID
	return memory.Record{
		ID: e.ID, Namespace: s.eventNamespace(e), Strategy: memory.StrategyEpisodic,
		Content:   fmt.Sprintf("(%s) %s: %s", e.Timestamp.UTC().Format("2006-01-02"), speakerOf(e), e.Text),
		Metadata:  md,
		CreatedAt: e.Timestamp, UpdatedAt: e.Timestamp, Sources: []string{e.ID}, Status: memory.StatusActive,
	}
}

func recordDoc(r memory.Record) search.Doc {
	return search.Doc{Text: r.Content, Date: dateWords(r.CreatedAt), Key: recordKey(r)}
}

// buildIndex builds a's ranking index from its cached rows. The caller
// holds a.mu exclusively.
func (s *Store) buildIndex(a *actorState) *actorIndex {
	recs := make([]*memory.Record, 0, len(a.records))
	for id := range a.records {
		r := a.records[id]
		recs = append(recs, &r)
	}
	sort.Slice(recs, func(i, j int) bool {
		if !recs[i].CreatedAt.Equal(recs[j].CreatedAt) {
			return recs[i].CreatedAt.Before(recs[j].CreatedAt)
		}
		return recs[i].ID < recs[j].ID
	})
	x := &actorIndex{ix: search.NewIndex(s.params), docOf: make(map[string]int, len(a.records)+len(a.events)), sess: map[string][]evRef{}}
	x.docs = make([]memory.Record, 0, len(a.records)+len(a.events))
	for _, r := range recs {
		x.add(recordDoc(*r), *r)
	}
	var evs []evRef
	for _, e := range a.events {
		if !s.expired(e) {
			evs = append(evs, evRef{e.Timestamp, e.ID})
		}
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].before(evs[j]) })
	for _, r := range evs {
		sid := a.events[r.id].SessionID
		x.sess[sid] = append(x.sess[sid], r)
	}
	for _, r := range evs {
		e := a.events[r.id]
		x.add(s.eventDoc(a, x, e), s.eventRecord(e))
	}
	if len(evs) > 0 {
		x.oldest = evs[0].ts
	}
	if s.opts.Embedder != nil {
		x.vecs = vectorsFor(x, a.vecs)
	}
	return x
}

// eventDoc is the document of event e: its text (and image caption), the
// previous and next turn of its session as context, its speaker and date.
func (s *Store) eventDoc(a *actorState, x *actorIndex, e memory.Event) search.Doc {
	text := e.Text
	if c, ok := e.Metadata["caption"].(string); ok && c != "" {
		text += " " + c
	}
	if s.opts.PlainDocs {
		return search.Doc{Text: fmt.Sprintf("(%s) %s: %s", plainDate(e.Timestamp), speakerOf(e), text), Key: eventKey(e)}
	}
	var ctxText []string
	list := x.sess[e.SessionID]
	i := sort.Search(len(list), func(i int) bool { return !list[i].before(evRef{e.Timestamp, e.ID}) })
	if i > 0 {
		ctxText = append(ctxText, a.events[list[i-1].id].Text)
	}
	if i+1 < len(list) {
		ctxText = append(ctxText, a.events[list[i+1].id].Text)
	}
	return search.Doc{Text: text, Context: strings.Join(ctxText, "\n"), Speaker: speakerOf(e), Date: dateWords(e.Timestamp), Group: e.SessionID, Key: eventKey(e)}
}

// add appends a document for rec and places it in every cached mask.
func (x *actorIndex) add(d search.Doc, rec memory.Record) {
	doc := x.ix.Add(d)
	x.docs = append(x.docs, rec)
	x.docOf[rec.ID] = doc
	if x.vecs != nil {
		x.vecs = append(x.vecs, nil)
	}
	for _, m := range x.masks {
		m.scope.Set(x.ix, doc, m.cond.match(rec))
	}
}

// remove retires the document of id, if any.
func (x *actorIndex) remove(id string) {
	doc, ok := x.docOf[id]
	if !ok {
		return
	}
	x.ix.Remove(doc)
	delete(x.docOf, id)
	for _, m := range x.masks {
		m.scope.Set(x.ix, doc, false)
	}
}

// putRecords replaces or adds the documents of recs (in order).
func (x *actorIndex) putRecords(recs []memory.Record) {
	for _, r := range recs {
		x.remove(r.ID)
		x.add(recordDoc(r), r)
	}
}

// addEvents indexes new events of a (already in a.events) and re-indexes
// their neighbours, whose context field changes.
func (s *Store) addEvents(a *actorState, x *actorIndex, evs []memory.Event) {
	var added []memory.Event
	for _, e := range evs {
		if s.expired(e) {
			continue
		}
		if _, ok := x.docOf[e.ID]; ok {
			continue
		}
		r := evRef{e.Timestamp, e.ID}
		list := x.sess[e.SessionID]
		i := sort.Search(len(list), func(i int) bool { return !list[i].before(r) })
		list = append(list, evRef{})
		copy(list[i+1:], list[i:])
		list[i] = r
		x.sess[e.SessionID] = list
		if x.oldest.IsZero() || e.Timestamp.Before(x.oldest) {
			x.oldest = e.Timestamp
		}
		added = append(added, e)
	}
	affected := map[string]bool{}
	for _, e := range added {
		list := x.sess[e.SessionID]
		r := evRef{e.Timestamp, e.ID}
		i := sort.Search(len(list), func(i int) bool { return !list[i].before(r) })
		affected[e.ID] = true
		if i > 0 {
			affected[list[i-1].id] = true
		}
		if i+1 < len(list) {
			affected[list[i+1].id] = true
		}
	}
	evs = make([]memory.Event, 0, len(affected))
	for id := range affected {
		if e, ok := a.events[id]; ok {
			evs = append(evs, e)
		}
	}
	sort.Slice(evs, func(i, j int) bool {
		return evRef{evs[i].Timestamp, evs[i].ID}.before(evRef{evs[j].Timestamp, evs[j].ID})
	})
	for _, e := range evs {
		x.remove(e.ID)
		x.add(s.eventDoc(a, x, e), s.eventRecord(e))
	}
}

// needsExpiry reports whether an indexed event has expired.
func (s *Store) needsExpiry(x *actorIndex) bool {
	return !x.oldest.IsZero() && s.expired(memory.Event{Timestamp: x.oldest})
}

// compactable reports whether so many documents are retired that a
// rebuild from scratch pays off.
func (x *actorIndex) compactable() bool {
	d := x.ix.Dead()
	return d > 256 && 2*d > x.ix.Len()
}

// mask returns the cached mask of a condition set, computing it on a miss.
// The caller holds the actor's lock (shared suffices).
func (x *actorIndex) mask(c cond) *mask {
	key, err := json.Marshal([]any{c.ns, c.path, c.statuses, c.strategies, c.filters})
	if err == nil {
		x.maskMu.RLock()
		m, ok := x.masks[string(key)]
		x.maskMu.RUnlock()
		if ok {
			return m
		}
	}
	x.maskMu.Lock()
	defer x.maskMu.Unlock()
	if err == nil {
		if m, ok := x.masks[string(key)]; ok {
			return m
		}
	}
	allow := make([]bool, x.ix.Len())
	for i, r := range x.docs {
		allow[i] = x.ix.Live(i) && c.match(r)
	}
	m := &mask{cond: c, scope: x.ix.NewScope(allow)}
	if err == nil {
		if x.masks == nil || len(x.masks) >= 16 {
			x.masks = map[string]*mask{}
		}
		x.masks[string(key)] = m
	}
	return m
}

func vectorsFor(x *actorIndex, byID map[string][]float32) [][]float32 {
	out := make([][]float32, len(x.docs))
	for i, d := range x.docs {
		out[i] = byID[d.ID]
	}
	return out
}

// rank ranks the documents of x allowed by m for text, fused with vector
// similarity when both a query vector and document vectors exist.
func (s *Store) rank(x *actorIndex, text string, qvec []float32, m *mask, k int) []memory.Hit {
	if qvec == nil || x.vecs == nil {
		res := x.ix.SearchScope(text, m.scope, k)
		hits := make([]memory.Hit, len(res))
		for i, r := range res {
			hits[i] = memory.Hit{Record: x.docs[r.Doc], Score: r.Score, Explain: r.Explain}
		}
		return hits
	}
	depth := max(k, 50)
	res := x.ix.SearchScope(text, m.scope, depth)
	type vs struct {
		doc int
		sim float64
	}
	var sims []vs
	for i, v := range x.vecs {
		if v != nil && m.scope.Allowed(i) {
			sims = append(sims, vs{i, search.Cosine(qvec, v)})
		}
	}
	sort.Slice(sims, func(i, j int) bool {
		if sims[i].sim != sims[j].sim {
			return sims[i].sim > sims[j].sim
		}
		return x.ix.Key(sims[i].doc) < x.ix.Key(sims[j].doc)
	})
	if len(sims) > depth {
		sims = sims[:depth]
	}
	bm := make([]int, len(res))
	why := map[int]string{}
	for i, r := range res {
		bm[i] = r.Doc
		why[r.Doc] = r.Explain
	}
	vl := make([]int, len(sims))
	for i, v := range sims {
		vl[i] = v.doc
		why[v.doc] += fmt.Sprintf("; cosine %.4f", v.sim)
	}
	fused := search.FuseRRF([]string{"bm25f", "vector"}, bm, vl)
	sort.SliceStable(fused, func(i, j int) bool {
		if fused[i].Score != fused[j].Score {
			return fused[i].Score > fused[j].Score
		}
		return x.ix.Key(fused[i].Doc) < x.ix.Key(fused[j].Doc)
	})
	if len(fused) > k {
		fused = fused[:k]
	}
	hits := make([]memory.Hit, len(fused))
	for i, f := range fused {
		hits[i] = memory.Hit{Record: x.docs[f.Doc], Score: f.Score, Explain: f.Explain + " | " + strings.TrimPrefix(why[f.Doc], "; ")}
	}
	return hits
}

func sortHits(h []memory.Hit) {
	sort.SliceStable(h, func(i, j int) bool {
		if h[i].Score != h[j].Score {
			return h[i].Score > h[j].Score
		}
		return h[i].Record.ID < h[j].Record.ID
	})
}
