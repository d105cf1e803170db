package sqlitestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/markdown"
	"github.com/tendrilai/tendril/internal/memory/search"
)

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

func speakerOf(e memory.Event) string {
	if sp, ok := e.Metadata["speaker"].(string); ok && sp != "" {
		return sp
	}
	return e.Role
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

func dateWords(t time.Time) string { return t.UTC().Format("2 January 2006 Monday") }

func plainDate(t time.Time) string { return t.UTC().Format("3:04 pm on 2 January, 2006") }

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
	c := newCond(q, statuses, filters)
	var all []memory.Hit
	for _, id := range actors {
		a, release, err := s.acquire(ctx, id)
		if err != nil {
			return nil, err
		}
		var hits []memory.Hit
		if text == "" && !s.legacy {
			hits = s.listActor(a, c, k)
		} else if fts {
			hits, err = s.searchFTS(ctx, a, c, text, k)
			if err != nil {
				release()
				return nil, err
			}
		} else {
			hits = s.searchActor(ctx, a, c, text, qvec, k)
		}
		release()
		all = append(all, hits...)
	}
	if len(actors) > 1 && text != "" {
		sortHits(all)
	}
	if k > 0 && len(all) > k {
		all = all[:k]
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
// index) and returns them in index order, at most k (k ≤ 0: all).
func (s *Store) listActor(a *actorState, c cond, k int) []memory.Hit {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var recs []*memory.Record
	keep := func(id string) {
		r := a.records[id]
		if c.admits(r.Strategy, r.Status) && c.inScope(r.Namespace) && memory.MatchFilters(r, c.filters) {
			recs = append(recs, &r)
		}
	}
	if len(c.strategies) > 0 {
		done := map[memory.Strategy]bool{}
		for _, st := range c.strategies {
			if !done[st] {
				done[st] = true
				for id := range a.byStrat[st] {
					keep(id)
				}
			}
		}
	} else {
		for id := range a.records {
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
	if c.admits(memory.StrategyEpisodic, memory.StatusActive) {
		for _, e := range a.events {
			if s.expired(e) || !c.inScope(s.eventNamespace(e)) {
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
		out = append(out, memory.Hit{Record: *r, Explain: "listed (no query text): index order"})
	}
	for _, e := range evs {
		if len(out) == n {
			return out
		}
		r := s.eventRecord(e)
		if !memory.MatchFilters(r, c.filters) {
			continue
		}
		out = append(out, memory.Hit{Record: r, Explain: "listed (no query text): index order"})
	}
	return out
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
			first := true
			s.changeIndexLocked(a, func(*actorIndex) *actorIndex { // one build, one clone
				if first {
					first = false
					return built.clone()
				}
				return built
			}, true)
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
func (s *Store) searchActor(ctx context.Context, a *actorState, c cond, text string, qvec []float32, k int) []memory.Hit {
	x, done := s.readIndex(ctx, a)
	defer done()
	m := x.mask(c)
	if m.scope.N() == 0 {
		return nil
	}
	if text == "" {
		var out []memory.Hit
		for i := range x.docs {
			if m.scope.Allowed(i) {
				out = append(out, memory.Hit{Record: x.docs[i], Explain: "listed (no query text): index order"})
			}
		}
		return out
	}
	return s.rank(x, text, qvec, m, k)
}

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
	sort.SliceStable(fused, func(i, j int) bool { // equal scores in key order, as after a rebuild
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

// docText is what is embedded for a document.
func docText(r memory.Record) string { return r.Content }

// embedMissing embeds documents of a that have no stored vector and
// refreshes the ranking index's vectors. Errors are logged: search then
// falls back to BM25F alone for those documents. The caller holds a.wmu.
func (s *Store) embedMissing(ctx context.Context, a *actorState) {
	defer func() {
		byID := s.vectorsByID(ctx, a.id)
		s.changeIndex(a, func(x *actorIndex) *actorIndex { x.vecs = vectorsFor(x, byID); return x })
	}()
	have := map[string]bool{}
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM vectors WHERE actor=?`, a.id)
	if err != nil {
		return
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		have[id] = true
	}
	rows.Close()
	var ids, texts []string
	for _, r := range a.records {
		if !have[r.ID] {
			ids, texts = append(ids, r.ID), append(texts, docText(r))
		}
	}
	for _, e := range a.events {
		if !have[e.ID] {
			ids, texts = append(ids, e.ID), append(texts, docText(s.eventRecord(e)))
		}
	}
	for start := 0; start < len(ids); start += 64 {
		end := min(start+64, len(ids))
		vecs, err := s.opts.Embedder.Embed(ctx, texts[start:end])
		if err != nil {
			s.opts.Logger.Warn("memory embedding failed; BM25F only for these documents", "actor", a.id, "err", err)
			return
		}
		for i, v := range vecs {
			s.db.ExecContext(ctx, `INSERT OR REPLACE INTO vectors(id,actor,vec) VALUES(?,?,?)`, ids[start+i], a.id, encodeVec(v))
		}
	}
}

// loadVectors returns the stored vector of each document of x (nil where
// none).
func (s *Store) loadVectors(ctx context.Context, a *actorState, x *actorIndex) [][]float32 {
	return vectorsFor(x, s.vectorsByID(ctx, a.id))
}

func (s *Store) vectorsByID(ctx context.Context, actor string) map[string][]float32 {
	byID := map[string][]float32{}
	rows, err := s.db.QueryContext(ctx, `SELECT id,vec FROM vectors WHERE actor=?`, actor)
	if err != nil {
		return byID
	}
	for rows.Next() {
		var id string
		var b []byte
		rows.Scan(&id, &b)
		byID[id] = decodeVec(b)
	}
	rows.Close()
	return byID
}

func vectorsFor(x *actorIndex, byID map[string][]float32) [][]float32 {
	out := make([][]float32, len(x.docs))
	for i, d := range x.docs {
		out[i] = byID[d.ID]
	}
	return out
}

func encodeVec(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func decodeVec(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// Prepare builds the ranking index of an actor now rather than on its first
// search (warm-up after bulk loads).
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
	_, done := s.readIndex(ctx, a)
	done()
	return nil
}
