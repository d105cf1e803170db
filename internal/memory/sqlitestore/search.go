package sqlitestore

import (
	"context"
	"encoding/binary"
	"encoding/json"
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

// ensureIndex builds the actor's ranking index: records by (createdAt, id),
// then unexpired events by (timestamp, id). Each event's context field
// holds the previous and next turn of its session.
func (s *Store) ensureIndex(ctx context.Context, a *actorState) {
	if a.idx != nil {
		return
	}
	recs := make([]memory.Record, 0, len(a.records))
	for _, r := range a.records {
		recs = append(recs, r)
	}
	markdown.SortRecords(recs)
	evs := make([]memory.Event, 0, len(a.events))
	for _, e := range a.events {
		if !s.expired(e) {
			evs = append(evs, e)
		}
	}
	markdown.SortEvents(evs)
	idx := search.NewIndex(s.params)
	docs := make([]memory.Record, 0, len(recs)+len(evs))
	for _, r := range recs {
		idx.Add(search.Doc{Text: r.Content, Date: dateWords(r.CreatedAt)})
		docs = append(docs, r)
	}
	prev := map[string]int{} // session → index in evs of its last event
	next := make([]int, len(evs))
	prevOf := make([]int, len(evs))
	for i, e := range evs {
		next[i] = -1
		prevOf[i] = -1
		if p, ok := prev[e.SessionID]; ok {
			prevOf[i] = p
			next[p] = i
		}
		prev[e.SessionID] = i
	}
	for i, e := range evs {
		text := e.Text
		if c, ok := e.Metadata["caption"].(string); ok && c != "" {
			text += " " + c
		}
		var d search.Doc
		if s.opts.PlainDocs {
			d = search.Doc{Text: fmt.Sprintf("(%s) %s: %s", plainDate(e.Timestamp), speakerOf(e), text)}
		} else {
			var ctxText []string
			if p := prevOf[i]; p >= 0 {
				ctxText = append(ctxText, evs[p].Text)
			}
			if n := next[i]; n >= 0 {
				ctxText = append(ctxText, evs[n].Text)
			}
			d = search.Doc{Text: text, Context: strings.Join(ctxText, "\n"), Speaker: speakerOf(e), Date: dateWords(e.Timestamp), Group: e.SessionID}
		}
		idx.Add(d)
		docs = append(docs, s.eventRecord(e))
	}
	a.idx = idx
	a.docs = docs
	if s.opts.Embedder != nil {
		a.vecs = s.loadVectors(ctx, a)
	}
}

func dateWords(t time.Time) string { return t.UTC().Format("2 January 2006 Monday") }

func plainDate(t time.Time) string { return t.UTC().Format("3:04 pm on 2 January, 2006") }

// Search implements memory.Store. Exactly one of q.Namespace (exact) and
// q.NamespacePath (whole-segment prefix) must be set; a path naming an
// actor (/<agent>/<actor>/…) searches only that actor. Filters are
// validated (memory.ErrInvalidFilter) and applied with namespace, status
// and strategy before ranking. Events appear as episodic records. Text ""
// lists in index order with score 0; TopK ≤ 0 means 50 for a search and
// no limit for a listing.
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
	text := strings.TrimSpace(q.Text)
	// The query vector is fetched before taking the store lock, so a slow
	// embedding server never blocks other actors' turns.
	var qvec []float32
	if s.opts.Embedder != nil && text != "" {
		v, err := s.opts.Embedder.Embed(ctx, []string{text})
		if err != nil {
			s.opts.Logger.Warn("memory query embedding failed; BM25F only", "err", err)
		} else if len(v) == 1 {
			qvec = v[0]
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("memory store closed")
	}
	scope := q.Namespace
	if scope == "" {
		scope = q.NamespacePath
	}
	// Hand edits: before a search, re-read Markdown changed since the index
	// saw it (only the searched actor's, at most once per SyncInterval).
	due := func(last time.Time) bool {
		return s.opts.SyncInterval > 0 && s.opts.Now().Sub(last) >= s.opts.SyncInterval
	}
	var actors []string
	if _, actor, ok := memory.NamespaceActor(scope); ok {
		if due(s.actorSync[actor]) {
			if err := s.syncActorLocked(ctx, actor); err != nil {
				return nil, err
			}
			s.actorSync[actor] = s.opts.Now()
		}
		if s.known(ctx, actor) {
			actors = []string{actor}
		}
	} else {
		if due(s.lastSync) {
			if err := s.syncLocked(ctx); err != nil {
				return nil, err
			}
		}
		if actors, err = s.actorIDs(ctx); err != nil {
			return nil, err
		}
	}
	statuses := q.Statuses
	if len(statuses) == 0 {
		statuses = []memory.Status{memory.StatusActive}
	}
	k := q.TopK
	if k <= 0 && text != "" {
		k = memory.DefaultTopK
	}
	var all []memory.Hit
	for _, id := range actors {
		a, err := s.actor(ctx, id)
		if err != nil {
			return nil, err
		}
		s.ensureIndex(ctx, a)
		m := a.mask(q, statuses, filters)
		allow, any := m.allow, m.any
		if !any {
			continue
		}
		if text == "" {
			for i, ok := range allow {
				if ok {
					all = append(all, memory.Hit{Record: a.docs[i], Explain: "listed (no query text): index order"})
				}
			}
			continue
		}
		hits, err := s.rank(a, text, qvec, m, k)
		if err != nil {
			return nil, err
		}
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

// mask returns which documents of a pass the query's scope, statuses,
// strategies and filters (cached per distinct condition set).
func (a *actorState) mask(q memory.Query, statuses []memory.Status, filters []memory.Filter) mask {
	key, err := json.Marshal([]any{q.Namespace, q.NamespacePath, statuses, q.Strategies, filters})
	if err == nil {
		if m, ok := a.masks[string(key)]; ok {
			return m
		}
	}
	ns, path := q.Namespace, q.NamespacePath
	if ns != "" {
		ns = memory.CleanNamespace(ns)
	}
	if path != "" {
		path = memory.CleanNamespace(path)
	}
	allow := make([]bool, len(a.docs))
	any := false
	for i, r := range a.docs {
		ok := ns != "" && memory.NamespaceEqual(r.Namespace, ns) || path != "" && memory.NamespaceUnder(r.Namespace, path)
		ok = ok && hasStatus(statuses, r.Status) && hasStrategy(q.Strategies, r.Strategy) && memory.MatchFilters(r, filters)
		allow[i] = ok
		any = any || ok
	}
	m := mask{allow: allow, any: any, scope: a.idx.NewScope(allow)}
	if err == nil {
		if a.masks == nil || len(a.masks) >= 16 {
			a.masks = map[string]mask{}
		}
		a.masks[string(key)] = m
	}
	return m
}

func (s *Store) rank(a *actorState, text string, qvec []float32, m mask, k int) ([]memory.Hit, error) {
	allow := m.allow
	if qvec == nil || a.vecs == nil {
		res := a.idx.SearchScope(text, m.scope, k)
		hits := make([]memory.Hit, len(res))
		for i, r := range res {
			hits[i] = memory.Hit{Record: a.docs[r.Doc], Score: r.Score, Explain: r.Explain}
		}
		return hits, nil
	}
	depth := max(k, 50)
	res := a.idx.SearchScope(text, m.scope, depth)
	type vs struct {
		doc int
		sim float64
	}
	var sims []vs
	for i, ok := range allow {
		if ok && a.vecs[i] != nil {
			sims = append(sims, vs{i, search.Cosine(qvec, a.vecs[i])})
		}
	}
	sort.Slice(sims, func(i, j int) bool {
		if sims[i].sim != sims[j].sim {
			return sims[i].sim > sims[j].sim
		}
		return sims[i].doc < sims[j].doc
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
	if len(fused) > k {
		fused = fused[:k]
	}
	hits := make([]memory.Hit, len(fused))
	for i, f := range fused {
		hits[i] = memory.Hit{Record: a.docs[f.Doc], Score: f.Score, Explain: f.Explain + " | " + strings.TrimPrefix(why[f.Doc], "; ")}
	}
	return hits, nil
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

// embedMissing embeds documents of a that have no stored vector. Errors are
// logged: search then falls back to BM25F alone for those documents.
func (s *Store) embedMissing(ctx context.Context, a *actorState) {
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

func (s *Store) loadVectors(ctx context.Context, a *actorState) [][]float32 {
	byID := map[string][]float32{}
	rows, err := s.db.QueryContext(ctx, `SELECT id,vec FROM vectors WHERE actor=?`, a.id)
	if err != nil {
		return nil
	}
	for rows.Next() {
		var id string
		var b []byte
		rows.Scan(&id, &b)
		byID[id] = decodeVec(b)
	}
	rows.Close()
	out := make([][]float32, len(a.docs))
	for i, d := range a.docs {
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.known(ctx, actorID) {
		return nil
	}
	a, err := s.actor(ctx, actorID)
	if err != nil {
		return err
	}
	s.ensureIndex(ctx, a)
	return nil
}
