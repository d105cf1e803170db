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
	docs  docList            // what each document number stands for
	docOf map[string]int     // live document of each record or event ID
	sess  map[string][]evRef // session → its indexed events in (timestamp, ID) order
	// oldest is the earliest indexed event's timestamp (zero: none), so a
	// search notices when an event expires.
	oldest time.Time
	vecs   [][]float32 // per document, with an Embedder

	masks memindex.Masks

	// shared holds one evMeta per (actor, role, session, metadata), so
	// that the documents of events alike point to one copy (event).
	shared map[string]*evMeta

	// bytes estimates the heap the index holds (docBytes per document
	// ever added, retired ones included until a rebuild); read by the
	// actor cache's byte budget.
	bytes int64
}

// docRef is what the index keeps of one document: a record's document
// points to its record; an event's keeps the event's ID, text and
// timestamp (strings shared with the event in actorState.events) and a
// shared evMeta. An event's hit record is made only when it is returned
// (memindex.EventRecord), instead of a full record held per document. A
// retired document's docRef is zero.
type docRef struct {
	id   string
	rec  *memory.Record
	text string
	ts   time.Time
	meta *evMeta
}

// evMeta is what many event documents share: the event's actor, session,
// role and metadata map (the event's own, read-only), and the namespace
// it is searched in.
type evMeta struct {
	actor, session, role string
	md                   map[string]any
	ns                   string
}

// event is the event d stands for.
func (d *docRef) event() memory.Event {
	return memory.Event{ID: d.id, ActorID: d.meta.actor, SessionID: d.meta.session, Role: d.meta.role, Text: d.text, Timestamp: d.ts, Metadata: d.meta.md}
}

// docList presents an index's documents to memindex (masks, ranking).
type docList []docRef

// Record is document i's hit record (zero for a retired document).
func (l docList) Record(i int) memory.Record {
	d := &l[i]
	switch {
	case d.rec != nil:
		return *d.rec
	case d.meta != nil:
		return memindex.EventRecord(d.event(), d.meta.ns)
	}
	return memory.Record{}
}

// Match reports whether document i passes c (never, retired).
func (l docList) Match(i int, c memindex.Cond) bool {
	d := &l[i]
	switch {
	case d.rec != nil:
		return c.Match(*d.rec)
	case d.meta != nil:
		return c.MatchEvent(d.event(), d.meta.ns)
	}
	return false
}

// maxShared bounds actorIndex.shared: event metadata that differs per
// event stops being shared past it.
const maxShared = 4096

// eventRef is the docRef of event e, its evMeta shared with the earlier
// events alike.
func (s *Store) eventRef(x *actorIndex, e memory.Event) docRef {
	d := docRef{id: e.ID, text: e.Text, ts: e.Timestamp}
	var key string
	if len(e.Metadata) == 0 {
		key = e.ActorID + "\x00" + e.Role + "\x00" + e.SessionID
	} else if b, err := json.Marshal([]any{e.ActorID, e.Role, e.SessionID, e.Metadata}); err == nil {
		key = string(b)
	}
	if m, ok := x.shared[key]; ok && key != "" {
		d.meta = m
		return d
	}
	d.meta = &evMeta{actor: e.ActorID, session: e.SessionID, role: e.Role, md: e.Metadata, ns: s.eventNamespace(e)}
	if key != "" && len(x.shared) < maxShared {
		if x.shared == nil {
			x.shared = map[string]*evMeta{}
		}
		x.shared[key] = d.meta
	}
	return d
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

// buildIndex builds a ranking index of a from scratch, its slices sized
// exactly. The caller keeps the maps still (a.mu shared, or a.wmu).
func (s *Store) buildIndex(ctx context.Context, a *actorState) *actorIndex {
	return s.buildIndexFrom(ctx, a, a.records, a.events)
}

// buildIndexFrom is buildIndex over the given records and events of a
// (its maps, or a snapshot of them: compactSoon builds from a snapshot
// without holding a's locks).
func (s *Store) buildIndexFrom(ctx context.Context, a *actorState, records map[string]*memory.Record, events map[string]memory.Event) *actorIndex {
	recs := make([]*memory.Record, 0, len(records))
	for _, r := range records {
		recs = append(recs, r) // shared with records: a stored record is never changed in place
	}
	sort.Slice(recs, func(i, j int) bool {
		if !recs[i].CreatedAt.Equal(recs[j].CreatedAt) {
			return recs[i].CreatedAt.Before(recs[j].CreatedAt)
		}
		return recs[i].ID < recs[j].ID
	})
	evs := make([]evRef, 0, len(events))
	perSess := map[string]int{}
	for _, e := range events {
		if !s.expired(e) {
			evs = append(evs, evRef{e.Timestamp, e.ID})
			perSess[e.SessionID]++
		}
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].before(evs[j]) })
	n := len(recs) + len(evs)
	x := &actorIndex{ix: search.NewIndex(s.params), docOf: make(map[string]int, n), sess: make(map[string][]evRef, len(perSess))}
	x.docs = make(docList, 0, n)
	for _, r := range recs {
		x.add(memindex.RecordDoc(*r), docRef{id: r.ID, rec: r})
	}
	for sid, c := range perSess {
		x.sess[sid] = make([]evRef, 0, c)
	}
	for _, r := range evs {
		sid := events[r.id].SessionID
		x.sess[sid] = append(x.sess[sid], r)
	}
	if s.opts.PlainDocs {
		for _, r := range evs {
			e := events[r.id]
			x.add(s.eventDoc(a, x, e), s.eventRef(x, e))
		}
	} else {
		// each turn's text is analysed once, for its own document and as
		// the context of its two neighbours
		an := x.ix.Params().Analyzer
		terms := make(map[string][]string, len(evs))
		termsOf := func(id string) []string {
			t, ok := terms[id]
			if !ok {
				t = an.Terms(events[id].Text)
				terms[id] = t
			}
			return t
		}
		var ctxText []string
		var ctxTerms [][]string
		for _, r := range evs {
			e := events[r.id]
			ctxText, ctxTerms = ctxText[:0], ctxTerms[:0]
			list := x.sess[e.SessionID]
			i := sort.Search(len(list), func(i int) bool { return !list[i].before(r) })
			for _, j := range [2]int{i - 1, i + 1} {
				if j >= 0 && j < len(list) {
					ctxText = append(ctxText, events[list[j].id].Text)
					ctxTerms = append(ctxTerms, termsOf(list[j].id))
				}
			}
			d := memindex.EventTerms(e, ctxText, an, termsOf(e.ID), ctxTerms)
			x.addAnalyzed(d, s.eventRef(x, e))
		}
	}
	if len(evs) > 0 {
		x.oldest = evs[0].ts
	}
	if s.opts.Embedder != nil {
		x.vecs = s.loadVectors(ctx, a, x)
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

// add appends document d, standing for ref, and places it in every
// cached mask.
func (x *actorIndex) add(d search.Doc, ref docRef) {
	x.placed(d, ref, x.ix.Add(d))
}

// addAnalyzed is add of a document with its terms analysed.
func (x *actorIndex) addAnalyzed(d search.Analyzed, ref docRef) {
	x.placed(d.Doc, ref, x.ix.AddAnalyzed(d))
}

// placed records document doc (d, standing for ref) just added to x.ix.
func (x *actorIndex) placed(d search.Doc, ref docRef, doc int) {
	x.docs = append(x.docs, ref)
	x.docOf[ref.id] = doc
	if x.vecs != nil {
		x.vecs = append(x.vecs, nil)
	}
	x.masks.AddedDoc(x.ix, doc, x.docs)
	x.bytes += docBytes(d, ref)
}

// remove retires the document of id, if any.
func (x *actorIndex) remove(id string) {
	doc, ok := x.docOf[id]
	if !ok {
		return
	}
	x.ix.Remove(doc)
	delete(x.docOf, id)
	x.docs[doc] = docRef{}
	x.masks.Removed(x.ix, doc)
}

// putRecords replaces or adds the documents of recs (in order; the last
// version of an ID wins).
func (x *actorIndex) putRecords(recs []*memory.Record) {
	for _, r := range recs {
		x.remove(r.ID)
		x.add(memindex.RecordDoc(*r), docRef{id: r.ID, rec: r})
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
		x.add(s.eventDoc(a, x, e), s.eventRef(x, e))
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
// rebuild from scratch pays off: more than 256, and more than a quarter
// of the live ones. A turn appended in order retires one document (the
// previous turn's, whose context field gains the new turn), so an index
// is rebuilt each time its actor's history has doubled (amortised O(1)
// per turn: about 0.1 ms per turn in BenchmarkActorHeap's 10,000 turns,
// 463-470 against 352-366 µs without compaction, for 13-22% less live
// heap) and carries at most a quarter more documents than it serves. (The
// rule was "more retired than live", which an append-only history never
// reaches: the index kept one retired document per turn forever, a third
// of its documents. An eighth costs about twice the rebuilds.)
func (x *actorIndex) compactable() bool {
	d := x.ix.Dead()
	return d > 256 && 4*d > x.ix.Len()-d
}

// mask returns the cached mask of a condition set, computing it on a miss.
// The caller holds the copy's slot lock (shared suffices).
func (x *actorIndex) mask(c memindex.Cond) *memindex.Mask {
	return x.masks.GetDocs(x.ix, x.docs, c)
}

// heapBytes estimates the heap x holds: its documents (docBytes) and its
// term dictionary (search.Index.TermBytes).
func (x *actorIndex) heapBytes() int64 { return x.bytes + x.ix.TermBytes() }

// docBytes estimates the heap one document holds in the index: its
// postings, per-document arrays and sort key in search.Index, its docRef
// and docOf entry, and (for a record) the record copy. The constants were
// fitted to BenchmarkActorHeap's heap profile (compact postings: about
// half a byte per byte of field text).
func docBytes(d search.Doc, ref docRef) int64 {
	n := int64(250 + len(d.Key))
	n += int64(len(d.Text)+len(d.Context)+len(d.Speaker)+len(d.Date)) / 2
	// a record's document shares its record with actorState.records,
	// which recordBytes counts
	return n
}
