package pgstore

import (
	"sort"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/memindex"
	"github.com/tendrilai/tendril/internal/memory/search"
)

// The ranking below is package sqlitestore's, document for document: both
// build their documents, masks and fusion with package memindex, so that
// the same rows rank the same on both backends; TestSameRankingAsSQLite
// holds it to that.

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

	masks memindex.Masks
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

// eventNamespace is where an event is searched (memindex.EventNamespace
// with Options.AgentID).
func (s *Store) eventNamespace(e memory.Event) string {
	return memindex.EventNamespace(s.opts.AgentID, e)
}

// eventRecord presents an event as an episodic record
// (memindex.EventRecord in its eventNamespace).
func (s *Store) eventRecord(e memory.Event) memory.Record {
	return memindex.EventRecord(e, s.eventNamespace(e))
}

// buildIndex builds a's ranking index from its cached rows. The caller
// holds a.mu exclusively.
func (s *Store) buildIndex(a *actorState) *actorIndex {
	recs := make([]*memory.Record, 0, len(a.records))
	for _, r := range a.records {
		recs = append(recs, r)
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
		x.add(memindex.RecordDoc(*r), *r)
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
	if s.opts.PlainDocs {
		for _, r := range evs {
			e := a.events[r.id]
			x.add(s.eventDoc(a, x, e), s.eventRecord(e))
		}
	} else {
		// each turn's text is analysed once, for its own document and as
		// the context of its two neighbours
		an := x.ix.Params().Analyzer
		terms := make(map[string][]string, len(evs))
		termsOf := func(id string) []string {
			t, ok := terms[id]
			if !ok {
				t = an.Terms(a.events[id].Text)
				terms[id] = t
			}
			return t
		}
		var ctxText []string
		var ctxTerms [][]string
		for _, r := range evs {
			e := a.events[r.id]
			ctxText, ctxTerms = ctxText[:0], ctxTerms[:0]
			list := x.sess[e.SessionID]
			i := sort.Search(len(list), func(i int) bool { return !list[i].before(r) })
			for _, j := range [2]int{i - 1, i + 1} {
				if j >= 0 && j < len(list) {
					ctxText = append(ctxText, a.events[list[j].id].Text)
					ctxTerms = append(ctxTerms, termsOf(list[j].id))
				}
			}
			d := memindex.EventTerms(e, ctxText, an, termsOf(e.ID), ctxTerms)
			x.placed(s.eventRecord(e), x.ix.AddAnalyzed(d))
		}
	}
	if len(evs) > 0 {
		x.oldest = evs[0].ts
	}
	if s.opts.Embedder != nil {
		x.vecs = vectorsFor(x, a.vecs)
	}
	return x
}

// eventDoc is the document of event e (memindex.EventDoc), with the
// previous and next turn of its session as context.
func (s *Store) eventDoc(a *actorState, x *actorIndex, e memory.Event) search.Doc {
	if s.opts.PlainDocs {
		return memindex.EventDoc(e, true, nil)
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
	return memindex.EventDoc(e, false, ctxText)
}

// add appends a document for rec and places it in every cached mask.
func (x *actorIndex) add(d search.Doc, rec memory.Record) {
	x.placed(rec, x.ix.Add(d))
}

// placed records document doc, just added to x.ix for rec, and places it
// in every cached mask.
func (x *actorIndex) placed(rec memory.Record, doc int) {
	x.docs = append(x.docs, rec)
	x.docOf[rec.ID] = doc
	if x.vecs != nil {
		x.vecs = append(x.vecs, nil)
	}
	x.masks.Added(x.ix, doc, rec)
}

// remove retires the document of id, if any.
func (x *actorIndex) remove(id string) {
	doc, ok := x.docOf[id]
	if !ok {
		return
	}
	x.ix.Remove(doc)
	delete(x.docOf, id)
	x.masks.Removed(x.ix, doc)
}

// putRecords replaces or adds the documents of recs (in order).
func (x *actorIndex) putRecords(recs []memory.Record) {
	for _, r := range recs {
		x.remove(r.ID)
		x.add(memindex.RecordDoc(r), r)
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
// rebuild from scratch pays off: more than 256 and more than a quarter
// of the live ones, as in sqlitestore (a turn appended in order retires its
// predecessor's document, so "more retired than live" was never reached).
func (x *actorIndex) compactable() bool {
	d := x.ix.Dead()
	return d > 256 && 4*d > x.ix.Len()-d
}

// mask returns the cached mask of a condition set, computing it on a miss.
// The caller holds the actor's lock (shared suffices).
func (x *actorIndex) mask(c memindex.Cond) *memindex.Mask {
	return x.masks.Get(x.ix, x.docs, c)
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
func (s *Store) rank(x *actorIndex, text string, qvec []float32, m *memindex.Mask, k int, explain bool) []memory.Hit {
	return memindex.Rank(x.ix, x.docs, x.vecs, m.Scope, text, qvec, k, explain)
}
