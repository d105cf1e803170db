package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/memindex"
)

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

// Search implements memory.Store. Exactly one of q.Namespace (exact) and
// q.NamespacePath (whole-segment prefix) must be set; a path naming an
// actor (/<agent>/<actor>/…) searches only that actor. Filters are
// validated (memory.ErrInvalidFilter) and applied with namespace, status
// and strategy before ranking. Events appear as episodic records. Text ""
// lists in index order (records by createdAt then ID, then events by
// timestamp then ID) with score 0, without touching the ranking index;
// TopK ≤ 0 means 50 for a search and no limit for a listing.
//
// Searches of one actor run concurrently with each other and with every
// operation on other actors; a write of the same actor holds them only
// while it applies its (already durable) change to the in-memory index.
func (s *Store) Search(ctx context.Context, q memory.Query) ([]memory.Hit, error) {
	return s.search(ctx, q, s.opts.Engine)
}

// SearchEngine is Search ranked by the given engine instead of
// Options.Engine: EngineFTS5 ranks with SQLite FTS5 bm25() (explain
// "fts5 bm25=<raw bm25()>", score = -bm25(), higher is better), after the
// same scope, status, strategy and filter checks; EngineBM25F (or "") is
// the default BM25F. An unknown engine is memory.ErrInvalidQuery.
func (s *Store) SearchEngine(ctx context.Context, q memory.Query, engine Engine) ([]memory.Hit, error) {
	e, err := ParseEngine(string(engine))
	if err != nil {
		return nil, fmt.Errorf("search: %w: %v", memory.ErrInvalidQuery, err)
	}
	return s.search(ctx, q, e)
}

func (s *Store) search(ctx context.Context, q memory.Query, engine Engine) ([]memory.Hit, error) {
	fts := engine == EngineFTS5
	if (q.Namespace == "") == (q.NamespacePath == "") {
		return nil, fmt.Errorf("search: %w: set exactly one of namespace and namespacePath", memory.ErrInvalidQuery)
	}
	filters, err := memory.ValidateFilters(q.Filters, s.opts.IndexedKeys)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	text := strings.TrimSpace(q.Text)
	// The query vector is fetched before taking any lock, so a slow
	// embedding server never blocks other turns.
	var qvec []float32
	if s.opts.Embedder != nil && text != "" && !fts {
		ectx, cancel := s.queryEmbedContext(ctx)
		v, err := s.opts.Embedder.Embed(ectx, []string{text})
		cancel()
		if err != nil {
			s.opts.Logger.Warn("memory query embedding failed; BM25F only", "err", err)
		} else if len(v) == 1 {
			qvec = v[0]
		}
	}
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed {
		return nil, fmt.Errorf("memory store closed")
	}
	scope := q.Namespace
	if scope == "" {
		scope = q.NamespacePath
	}
	var actors []string
	if _, actor, ok := memory.NamespaceActor(scope); ok {
		if err := s.maybeSyncActor(ctx, actor); err != nil {
			return nil, err
		}
		if s.known(ctx, actor) {
			actors = []string{actor}
		}
	} else {
		if err := s.maybeSyncAll(ctx); err != nil {
			return nil, err
		}
		if actors, err = s.actorIDs(ctx); err != nil {
			return nil, err
		}
	}
	if s.closed {
		return nil, fmt.Errorf("memory store closed")
	}
	statuses := q.Statuses
	if len(statuses) == 0 {
		statuses = []memory.Status{memory.StatusActive}
	}
	k := q.TopK
	if k <= 0 && text != "" {
		k = memory.DefaultTopK
	}
	c := memindex.NewCond(q, statuses, filters)
	var all []memory.Hit
	for _, id := range actors {
		a, release, err := s.acquire(ctx, id)
		if err != nil {
			return nil, err
		}
		var hits []memory.Hit
		if text == "" && !s.legacy {
			hits, err = s.listActor(ctx, a, c, k)
			if err != nil {
				release()
				return nil, err
			}
		} else if fts {
			hits, err = s.searchFTS(ctx, a, c, text, k)
			if err != nil {
				release()
				return nil, err
			}
		} else {
			// The full-text half of the cold search runs beside the warm
			// search (both only read), so a turn waits for the longer of
			// the two, not their sum; the warm hits then set the floor
			// that decides which cold events are read.
			var cands chan coldResult
			a.mu.RLock()
			hasCold := a.hasColdFor(c)
			a.mu.RUnlock()
			if hasCold {
				cands = make(chan coldResult, 1)
				go func() {
					rows, err := s.coldCandidates(ctx, a, c, text)
					cands <- coldResult{rows, err}
				}()
			}
			hits = s.searchActor(ctx, a, c, text, qvec, k, !q.NoExplain)
			var r coldResult
			if cands != nil {
				r = <-cands
			} else {
				// the actor's first events or records may have gone cold meanwhile
				a.mu.RLock()
				hasCold = a.hasColdFor(c)
				a.mu.RUnlock()
				if hasCold {
					r.rows, r.err = s.coldCandidates(ctx, a, c, text)
				}
			}
			floor := math.Inf(-1)
			if k > 0 && len(hits) >= k {
				floor = hits[k-1].Score
			}
			var cold []memory.Hit
			if r.err == nil {
				cold, r.err = s.coldHits(ctx, a, c, r.rows, k, floor, !q.NoExplain)
			}
			if r.err != nil {
				release()
				return nil, r.err
			}
			hits = mergeHits(hits, cold, k)
		}
		release()
		if all == nil {
			all = hits // one actor, the usual query: no copy
		} else {
			all = append(all, hits...)
		}
	}
	if len(actors) > 1 && text != "" {
		memindex.SortHits(all)
	}
	if k > 0 && len(all) > k {
		all = all[:k]
	}
	if q.NoExplain { // the BM25F path skipped them; FTS5 and listings drop them here
		for i := range all {
			all[i].Explain = ""
		}
	}
	return all, nil
}

// List implements pipeline.Lister: the records q selects (q.Text is
// ignored), in index order, without ranking.
func (s *Store) List(ctx context.Context, q memory.Query) ([]memory.Record, error) {
	q.Text = ""
	hits, err := s.Search(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]memory.Record, len(hits))
	for i, h := range hits {
		out[i] = h.Record
	}
	return out, nil
}

// listActor filters a's records and unexpired events directly (no ranking
// index) and returns them in index order, at most k (k ≤ 0: all). Cold
// events (tier.go) are read from SQLite when c admits events, cold records
// (rtier.go) when it admits records.
func (s *Store) listActor(ctx context.Context, a *actorState, c memindex.Cond, k int) ([]memory.Hit, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	events := a.events
	sessions, err := s.coldScope(ctx, a, c)
	if err != nil {
		return nil, err
	}
	if len(sessions) > 0 {
		where, args := sessionsIn(sessions)
		cold, err := s.coldEvents(ctx, a, where, args...)
		if err != nil {
			return nil, err
		}
		events = make(map[string]memory.Event, len(a.events)+len(cold))
		for id, e := range a.events {
			events[id] = e
		}
		for _, e := range cold {
			events[e.ID] = e
		}
	}
	recs, byStrat, err := s.recordsOf(ctx, a, &c)
	if err != nil {
		return nil, err
	}
	return memindex.List(memindex.Actor{Records: recs, ByStrat: byStrat, Events: events}, c, k,
		memindex.Events{Expired: s.expired, Namespace: s.eventNamespace, Record: s.eventRecord}), nil
}

// readIndex returns the active copy of a's ranking index, read-locked
// until done is called, building it (or retiring expired events) first
// when needed.
func (s *Store) readIndex(ctx context.Context, a *actorState) (x *actorIndex, done func()) {
	for {
		slot := &a.slots[a.active.Load()]
		slot.mu.RLock()
		if x := slot.x; x != nil && !s.needsExpiry(x) {
			return x, slot.mu.RUnlock
		}
		slot.mu.RUnlock()
		a.ixw.Lock()
		a.mu.RLock() // the maps stay still for both copies
		if x := a.slots[a.active.Load()].x; x == nil {
			built := s.buildIndex(ctx, a)
			s.changeIndexLocked(a, func(*actorIndex) *actorIndex { return built }, true)
		} else if s.needsExpiry(x) {
			s.changeIndexLocked(a, func(x *actorIndex) *actorIndex { s.expireIndexed(a, x); return x }, false)
		}
		a.mu.RUnlock()
		a.ixw.Unlock()
	}
}

// searchActor ranks a's documents allowed by c for text (or, text "",
// lists them in document order: the path before incremental indexing,
// kept for the benchmark's baseline).
func (s *Store) searchActor(ctx context.Context, a *actorState, c memindex.Cond, text string, qvec []float32, k int, explain bool) []memory.Hit {
	x, done := s.readIndex(ctx, a)
	defer done()
	m := x.mask(c)
	if m.Scope.N() == 0 {
		return nil
	}
	if text == "" {
		var out []memory.Hit
		for i := range x.docs {
			if m.Scope.Allowed(i) {
				out = append(out, memory.Hit{Record: x.docs.Record(i), Explain: memindex.ListedExplain})
			}
		}
		return out
	}
	return s.rank(x, text, qvec, m, k, explain)
}

// rank ranks the documents of x allowed by m for text, fused with vector
// similarity when both a query vector and document vectors exist.
func (s *Store) rank(x *actorIndex, text string, qvec []float32, m *memindex.Mask, k int, explain bool) []memory.Hit {
	return memindex.RankDocs(x.ix, x.docs, x.vecs, m.Scope, text, qvec, k, explain)
}

// The vectors' storage and the embedding worker are in embedworker.go.

func vectorsFor(x *actorIndex, byID map[string][]float32) [][]float32 {
	out := make([][]float32, len(x.docs))
	for i, d := range x.docs {
		if d.id != "" {
			out[i] = byID[d.id]
		}
	}
	return out
}

// Prepare builds the ranking index of an actor now rather than on its first
// search (warm-up after bulk loads), after moving the events past
// Options.EventWindow out of memory.
func (s *Store) Prepare(ctx context.Context, actorID string) error {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed {
		return errors.New("memory store closed")
	}
	if !s.known(ctx, actorID) {
		return nil
	}
	a, release, err := s.acquire(ctx, actorID)
	if err != nil {
		return err
	}
	defer release()
	if w := s.windowFor(a); w > 0 {
		// Bring the actor to its steady state: the events past the
		// window leave memory now (waiting for a demotion running).
		if err := s.demote(ctx, a, w); err != nil {
			return err
		}
	}
	_, done := s.readIndex(ctx, a)
	done()
	return nil
}

// coldResult is what coldCandidates returned, passed back from the
// goroutine that ran it.
type coldResult struct {
	rows []coldRow
	err  error
}
