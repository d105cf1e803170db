package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/memindex"
)

// Search implements memory.Store, with the semantics of the embedded
// store's Search: exactly one of q.Namespace (exact) and q.NamespacePath
// (whole-segment prefix) must be set (memory.ErrInvalidQuery); a path
// naming an actor (/<agent>/<actor>/…) searches only that actor, a
// shorter one every actor. Filters are validated (memory.ErrInvalidFilter)
// and applied with namespace, status and strategy before ranking. Events
// appear as episodic records. Text "" lists in index order (records by
// createdAt then ID, then events by timestamp then ID) with score 0; TopK
// ≤ 0 means 50 for a search and no limit for a listing.
//
// Before ranking an actor the store reads its version row; when another
// instance (or this one) wrote since the cache was filled, the rows
// stamped since are read and applied first.
func (s *Store) Search(ctx context.Context, q memory.Query) ([]memory.Hit, error) {
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
	if s.closed.Load() {
		return nil, ErrClosed
	}
	text := strings.TrimSpace(q.Text)
	qvec := s.queryVector(ctx, text) // within the retrieval budget; nil: BM25F only
	scope := q.Namespace
	if scope == "" {
		scope = q.NamespacePath
	}
	var actors []string
	if _, actor, ok := memory.NamespaceActor(scope); ok {
		actors = []string{actor}
	} else if actors, err = s.Actors(ctx); err != nil {
		return nil, err
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
		a, done, err := s.state(ctx, id, text != "")
		if err != nil {
			return nil, err
		}
		if a == nil {
			continue
		}
		var hits []memory.Hit
		if text == "" {
			hits = s.listActor(a, c, k)
		} else {
			hits = s.searchActor(a, c, text, qvec, k, !q.NoExplain)
		}
		done()
		all = append(all, hits...)
	}
	if len(actors) > 1 && text != "" {
		memindex.SortHits(all)
	}
	if k > 0 && len(all) > k {
		all = all[:k]
	}
	if q.NoExplain { // ranked hits skipped them; listings drop them here
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

// Prepare brings an actor's cache up to date and builds its ranking index
// now rather than on its first search (warm-up after bulk loads).
func (s *Store) Prepare(ctx context.Context, actorID string) error {
	if s.closed.Load() {
		return ErrClosed
	}
	_, done, err := s.state(ctx, actorID, true)
	if err == nil && done != nil {
		done()
	}
	return err
}

func (s *Store) searchActor(a *actorState, c memindex.Cond, text string, qvec []float32, k int, explain bool) []memory.Hit {
	m := a.x.mask(c)
	if m.Scope.N() == 0 {
		return nil
	}
	return s.rank(a.x, text, qvec, m, k, explain)
}

// listActor filters a's records and unexpired events and returns them in
// index order, at most k (k ≤ 0: all). The caller holds a.mu shared.
func (s *Store) listActor(a *actorState, c memindex.Cond, k int) []memory.Hit {
	return memindex.List(memindex.Actor{Records: a.records, ByStrat: a.byStrat, Events: a.events}, c, k,
		memindex.Events{Expired: s.expired, Namespace: s.eventNamespace, Record: s.eventRecord})
}

// state returns the actor's cached state, up to date with the database
// as of the version read now, read-locked until done is called; with
// index, its ranking index is built too. An actor with no memory returns
// nil (and drops any stale cache of it).
func (s *Store) state(ctx context.Context, actor string, index bool) (*actorState, func(), error) {
	if !storable(actor) {
		return nil, nil, nil
	}
	var v int64
	err := s.pool.QueryRow(ctx, `SELECT version FROM memory_actors WHERE actor = $1`, actor).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		s.drop(actor)
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("memory version %q: %w", actor, err)
	}
	a := s.cached(actor)
	for {
		a.mu.RLock()
		if a.loaded && a.version >= v && (!index || (a.x != nil && !s.needsExpiry(a.x))) {
			return a, a.mu.RUnlock, nil
		}
		a.mu.RUnlock()
		a.mu.Lock()
		err := s.refresh(ctx, a, v, index)
		a.bytes.Store(a.estimate())
		a.mu.Unlock()
		s.trim(a)
		if err != nil {
			return nil, nil, err
		}
	}
}

// cached returns the cache entry of actor, creating it when missing, and
// evicts the least recently used beyond MaxCachedActors or
// Options.CacheBytes (never the entry returned). An evicted state still
// in use stays valid for its users.
func (s *Store) cached(actor string) *actorState {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.actors[actor]
	if ok {
		s.lru.MoveToFront(el)
	} else {
		el = s.lru.PushFront(&actorState{id: actor})
		s.actors[actor] = el
	}
	a := el.Value.(*actorState)
	a.usedAt = time.Now()
	s.trimLocked(a)
	return a
}

// trim evicts as cached does, once keep's estimate has changed.
func (s *Store) trim(keep *actorState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trimLocked(keep)
}

// trimLocked drops least recently used entries other than keep until at
// most MaxCachedActors remain within Options.CacheBytes. The caller holds
// s.mu.
func (s *Store) trimLocked(keep *actorState) {
	var total int64
	if s.opts.CacheBytes > 0 {
		for e := s.lru.Front(); e != nil; e = e.Next() {
			total += e.Value.(*actorState).bytes.Load()
		}
	}
	var now time.Time
	for e := s.lru.Back(); e != nil && s.lru.Len() > 1 && (s.lru.Len() > s.opts.MaxCachedActors || s.opts.CacheBytes > 0 && total > s.opts.CacheBytes); {
		prev := e.Prev()
		// past the byte budget alone, actors used within HotFor stay
		// until the heap reaches 2 × the budget (Options.HotFor)
		hot := s.lru.Len() <= s.opts.MaxCachedActors && s.opts.HotFor > 0 && total <= 2*s.opts.CacheBytes
		if hot && now.IsZero() {
			now = time.Now()
		}
		if a := e.Value.(*actorState); a != keep && (!hot || now.Sub(a.usedAt) >= s.opts.HotFor) {
			s.lru.Remove(e)
			delete(s.actors, a.id)
			total -= a.bytes.Load()
		}
		e = prev
	}
}

// estimate is a's heap in bytes by a count-based model (per record,
// event, vector and index document, fitted to sqlitestore's profile; the
// texts' own lengths are not read). The caller holds a.mu.
func (a *actorState) estimate() int64 {
	n := int64(len(a.records))*600 + int64(len(a.events))*330
	for _, v := range a.vecs {
		n += int64(len(a.vecs)) * (64 + 4*int64(len(v)))
		break
	}
	if a.x != nil {
		n += int64(a.x.ix.Len()) * 900
	}
	return n
}

// drop forgets the cache entry of actor.
func (s *Store) drop(actor string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.actors[actor]; ok {
		s.lru.Remove(el)
		delete(s.actors, actor)
	}
}

// CachedActors is how many actors' states are held in memory now (at most
// Options.MaxCachedActors).
func (s *Store) CachedActors() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len()
}

// refresh brings a up to version v at least: the rows stamped since its
// version when nothing was deleted since (catch-up), else everything
// (reload); with index it also builds, expires or compacts the ranking
// index. The caller holds a.mu exclusively.
func (s *Store) refresh(ctx context.Context, a *actorState, v int64, index bool) error {
	if !a.loaded || a.version < v {
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return fmt.Errorf("read memory %q: %w", a.id, err)
		}
		defer tx.Rollback(ctx)
		var cur, reset int64
		err = tx.QueryRow(ctx, `SELECT version, reset_version FROM memory_actors WHERE actor = $1`, a.id).Scan(&cur, &reset)
		if errors.Is(err, pgx.ErrNoRows) { // forgotten meanwhile
			a.reset()
			a.loaded, a.version = true, v
			return nil
		}
		if err != nil {
			return fmt.Errorf("read memory %q: %w", a.id, err)
		}
		since := a.version
		if !a.loaded || reset > a.version {
			since = 0
		}
		recs, evs, err := s.readRows(ctx, tx, a.id, since)
		if err != nil {
			return err
		}
		var vecs map[string][]float32
		if s.opts.Embedder != nil {
			if vecs, err = s.readVectors(ctx, tx, a.id, since); err != nil {
				return err
			}
		}
		if since == 0 {
			s.loads.Add(1)
			a.reset()
		}
		a.apply(s, recs, evs, vecs, since == 0)
		a.loaded, a.version = true, max(cur, v)
		if since == 0 {
			s.embedLoaded(a) // vectors missing after a crash, a rebuild or a model change
		}
	}
	if index && (a.x == nil || s.needsExpiry(a.x) || a.x.compactable()) {
		for id, e := range a.events {
			if s.expired(e) {
				delete(a.events, id)
			}
		}
		a.x = s.buildIndex(a)
	}
	return nil
}

// reset empties a.
func (a *actorState) reset() {
	a.records = map[string]*memory.Record{}
	a.byStrat = map[memory.Strategy]map[string]struct{}{}
	a.events = map[string]memory.Event{}
	a.mds = memindex.MetaInterner{}
	a.vecs = map[string][]float32{}
	a.x = nil
}

// apply puts rows read from the database into a and, when its ranking
// index is built (and fresh is false), into the index in place: changed
// records are retired and re-added, new events added with their
// neighbours re-indexed, exactly as the embedded store applies a write.
func (a *actorState) apply(s *Store, recs []memory.Record, evs []memory.Event, vecs map[string][]float32, fresh bool) {
	if a.records == nil {
		a.reset()
	}
	sort.Slice(recs, func(i, j int) bool { return memindex.RecordKey(recs[i]) < memindex.RecordKey(recs[j]) })
	for _, r := range recs {
		if old, ok := a.records[r.ID]; ok && old.Strategy != r.Strategy {
			delete(a.byStrat[old.Strategy], r.ID)
		}
		a.records[r.ID] = &r
		set := a.byStrat[r.Strategy]
		if set == nil {
			set = map[string]struct{}{}
			a.byStrat[r.Strategy] = set
		}
		set[r.ID] = struct{}{}
	}
	var added []memory.Event
	for _, e := range evs {
		if _, ok := a.events[e.ID]; !ok {
			e.Metadata = a.mds.Intern(e.Metadata)
			a.events[e.ID] = e
			added = append(added, e)
		}
	}
	for id, v := range vecs {
		a.vecs[id] = v
	}
	if fresh || a.x == nil {
		return
	}
	a.x.putRecords(recs)
	sort.Slice(added, func(i, j int) bool { return memindex.EventKey(added[i]) < memindex.EventKey(added[j]) })
	s.addEvents(a, a.x, added)
	if s.opts.Embedder != nil {
		a.x.vecs = vectorsFor(a.x, a.vecs)
	}
}
