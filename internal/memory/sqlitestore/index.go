package sqlitestore

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/memindex"
	"github.com/tendrilai/tendril/internal/memory/search"
)

// actorIndex is the ranking index of one actor, kept up to date in place:
// a write adds the new documents (and re-adds the documents whose text
// changed: an updated record, or the neighbouring turns of a new event,
// whose context field holds it) and retires the old ones. Every document
// carries a sort key, records by (createdAt, ID) then events by (timestamp,
// ID), so that equal scores rank the same as in an index built from
// scratch; the index is rebuilt from scratch once more than half of its
// documents are retired. Each copy is guarded by its ixSlot lock (changes
// exclusive, searches shared); the mask cache has its own lock.
type actorIndex struct {
	ix    *search.Index
	docs  []memory.Record    // the hit record of each document number
	docOf map[string]int     // live document of each record or event ID
	sess  map[string][]evRef // session → its indexed events in (timestamp, ID) order
	// oldest is the earliest indexed event's timestamp (zero: none), so a
	// search notices when an event expires.
	oldest time.Time
	vecs   [][]float32 // per document, with an Embedder

	masks memindex.Masks

	// shared holds one copy of the namespace and metadata that many
	// event documents carry alike (same role, session and event
	// metadata), so each event's hit record points to it instead of
	// holding its own map and strings (docRecord).
	shared map[string]sharedMeta
}

// sharedMeta is what docRecord shares between event records.
type sharedMeta struct {
	ns string
	md map[string]any
}

// maxShared bounds actorIndex.shared: event metadata that differs per
// event stops being shared past it.
const maxShared = 4096

// docRecord is the hit record of event e's document: s.eventRecord(e), its
// namespace and metadata map shared with the earlier events alike (the
// records handed out by a search must be treated as read-only, as the
// index's own copies always were).
func (s *Store) docRecord(x *actorIndex, e memory.Event) memory.Record {
	r := s.eventRecord(e)
	key, err := json.Marshal([]any{e.Role, e.SessionID, e.Metadata})
	if err != nil {
		return r
	}
	if sh, ok := x.shared[string(key)]; ok {
		r.Namespace, r.Metadata = sh.ns, sh.md
		return r
	}
	if x.shared == nil {
		x.shared = map[string]sharedMeta{}
	}
	if len(x.shared) < maxShared {
		x.shared[string(key)] = sharedMeta{r.Namespace, r.Metadata}
	}
	return r
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

// buildIndex builds a ranking index of a from scratch. The caller keeps
// the maps still (a.mu shared, or a.wmu).
func (s *Store) buildIndex(ctx context.Context, a *actorState) *actorIndex {
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
	for _, r := range evs {
		e := a.events[r.id]
		x.add(s.eventDoc(a, x, e), s.docRecord(x, e))
	}
	if len(evs) > 0 {
		x.oldest = evs[0].ts
	}
	if s.opts.Embedder != nil {
		x.vecs = s.loadVectors(ctx, a, x)
	}
	return x
}

// clone returns an independent copy of x (masks are not copied: each copy
// computes its own on first use).
func (x *actorIndex) clone() *actorIndex {
	c := &actorIndex{ix: x.ix.Clone(), docs: x.docs[:len(x.docs):len(x.docs)], oldest: x.oldest}
	c.docOf = make(map[string]int, len(x.docOf))
	for k, v := range x.docOf {
		c.docOf[k] = v
	}
	c.sess = make(map[string][]evRef, len(x.sess))
	for k, v := range x.sess {
		c.sess[k] = append([]evRef(nil), v...) // insertions shift in place
	}
	if x.vecs != nil {
		c.vecs = x.vecs[:len(x.vecs):len(x.vecs)]
	}
	c.shared = make(map[string]sharedMeta, len(x.shared))
	for k, v := range x.shared {
		c.shared[k] = v
	}
	return c
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
	doc := x.ix.Add(d)
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

// putRecords replaces or adds the documents of recs (in order; the last
// version of an ID wins).
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
	s.reindexEvents(a, x, affected)
}

// reindexEvents re-adds the documents of the given events, in key order.
func (s *Store) reindexEvents(a *actorState, x *actorIndex, ids map[string]bool) {
	evs := make([]memory.Event, 0, len(ids))
	for id := range ids {
		if e, ok := a.events[id]; ok {
			evs = append(evs, e)
		}
	}
	sort.Slice(evs, func(i, j int) bool {
		return evRef{evs[i].Timestamp, evs[i].ID}.before(evRef{evs[j].Timestamp, evs[j].ID})
	})
	for _, e := range evs {
		x.remove(e.ID)
		x.add(s.eventDoc(a, x, e), s.docRecord(x, e))
	}
}

// needsExpiry reports whether an indexed event has expired.
func (s *Store) needsExpiry(x *actorIndex) bool {
	return !x.oldest.IsZero() && s.expired(memory.Event{Timestamp: x.oldest})
}

// expireIndexed retires expired events from the index (they stay in the
// Markdown until ExpireEvents or the next load) and re-indexes the turns
// that had them as context.
func (s *Store) expireIndexed(a *actorState, x *actorIndex) {
	affected := map[string]bool{}
	x.oldest = time.Time{}
	for sid, list := range x.sess {
		n := 0
		for n < len(list) && s.expired(memory.Event{Timestamp: list[n].ts}) {
			x.remove(list[n].id)
			delete(affected, list[n].id)
			n++
		}
		list = list[n:]
		if len(list) == 0 {
			delete(x.sess, sid)
			continue
		}
		x.sess[sid] = list
		if n > 0 {
			affected[list[0].id] = true
		}
		if x.oldest.IsZero() || list[0].ts.Before(x.oldest) {
			x.oldest = list[0].ts
		}
	}
	s.reindexEvents(a, x, affected)
}

// compactable reports whether so many documents are retired that a
// rebuild from scratch pays off.
func (x *actorIndex) compactable() bool {
	d := x.ix.Dead()
	return d > 256 && 2*d > x.ix.Len()
}

// mask returns the cached mask of a condition set, computing it on a miss.
// The caller holds the copy's slot lock (shared suffices).
func (x *actorIndex) mask(c memindex.Cond) *memindex.Mask {
	return x.masks.Get(x.ix, x.docs, c)
}
