package pipeline

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/extract"
	"github.com/tendrilai/tendril/internal/memory/gate"
)

// Metadata keys the pipeline writes on records.
const (
	keyStatedAt     = "statedAt"     // time.Time of the latest source event
	keySupersededBy = "supersededBy" // on the old record: the new record's ID
	keySupersededAt = "supersededAt" // on the old record: when the new one was stated
	keySupersedes   = "supersedes"   // on the new record: []string of old IDs
)

// Outcome of consolidating one candidate.
type Outcome string

const (
	OutcomeDropped  Outcome = "dropped"  // gate score below Stage
	OutcomeRejected Outcome = "rejected" // its hash was rejected before
	OutcomeMerged   Outcome = "merged"   // duplicate of an existing record
	OutcomeStaged   Outcome = "staged"   // waiting for review
	OutcomeStored   Outcome = "stored"   // active
)

// Result is what happened to one candidate.
type Result struct {
	Outcome    Outcome       `json:"outcome"`
	Score      float64       `json:"score"`
	Record     memory.Record `json:"record"` // the written or merged record; zero when dropped
	Superseded []string      `json:"superseded,omitempty"`

	written []memory.Record // every record this candidate wrote, as stored
}

// consolidateAll consolidates candidates oldest first against one
// namespace, whose records (from list) are passed in and kept up to date
// with what each candidate writes, so a later candidate sees an earlier
// one without re-reading the store (each read after a write would rebuild
// the store's ranking index).
//
// The writes are collected and stored together at the end — in one
// transaction when the store implements BatchPutter — so a crash leaves
// all or (with BatchPutter) none of a batch, and the rerun merges.
func (p *Pipeline) consolidateAll(ctx context.Context, actorID, ns string, cands []extract.Candidate, existing []memory.Record) ([]Result, error) {
	b := newBatch()
	out, err := p.consolidateInto(ctx, actorID, ns, cands, existing, b)
	if err != nil {
		return out, err
	}
	if err := b.flush(ctx, p.store); err != nil {
		return out, err
	}
	return out, nil
}

// consolidateInto is consolidateAll collecting the writes in b, for the
// caller to flush (under queue.guard).
func (p *Pipeline) consolidateInto(ctx context.Context, actorID, ns string, cands []extract.Candidate, existing []memory.Record, b *batch) ([]Result, error) {
	sortByTime(cands)
	key := actorID + "\x00" + ns
	ix := p.cands.take(key, existing)
	var out []Result
	for _, c := range cands {
		r, err := p.consolidateIx(ctx, actorID, ns, c, ix, b)
		if err != nil {
			return out, err
		}
		out = append(out, r)
		for _, w := range r.written {
			ix.put(w)
		}
	}
	p.cands.keep(key, ix)
	return out, nil
}

// candCache keeps each namespace's candidate index between extraction
// jobs, so that a job costs O(records) comparisons of the listing instead
// of tokenising and indexing every record again (BenchmarkCandIndex: about
// 8 µs a record to build, against 0.04–0.15 µs to reuse). A kept index is
// used only when the store's fresh listing holds the same records (ID,
// content and topic) in the same positions — whatever changed them
// (approve, forget, a note, another instance, a batch that failed to
// flush) makes the next job build a new index — and its records are
// replaced by the listing's, so every other field is current. An index in
// use is taken out of the cache, so two jobs never share one.
//
// The cache holds at most maxCachedCandRecords records. When a new index
// does not fit, indexes unused for candIdleFor make room, oldest first;
// if that is not enough the new one is not kept, and the kept ones stay.
// (Starting over, as before, gave no hits at all once more actors were
// extracting in turn than fit — 100 actors with a few hundred records
// each — while the cache still held its full size; keeping the ones
// already in gives their actors hits, and an actor with the cache to
// itself always keeps its own.)
type candCache struct {
	mu    sync.Mutex
	m     map[string]*keptCand
	total int              // records held by the kept indexes
	now   func() time.Time // time.Now when nil (tests set it)

	hits, misses int // takes that reused a kept index, and those that built one
}

type keptCand struct {
	ix   *candIndex
	used time.Time
}

// maxCachedCandRecords bounds candCache by the records its indexes hold
// (about 1.5 KiB each with postings): about 6 MiB however many actors
// extract, and one actor's index of up to this many records is kept.
const maxCachedCandRecords = 4096

// candIdleFor is how long a kept index goes unused before a new one may
// take its place.
const candIdleFor = time.Minute

func (c *candCache) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

func (c *candCache) take(key string, existing []memory.Record) *candIndex {
	c.mu.Lock()
	var ix *candIndex
	if k := c.m[key]; k != nil {
		ix = k.ix
		delete(c.m, key)
		c.total -= len(ix.recs)
	}
	hit := ix != nil && ix.matches(existing)
	if hit {
		c.hits++
	} else {
		c.misses++
	}
	c.mu.Unlock()
	if hit {
		copy(ix.recs, existing)
		return ix
	}
	return newCandIndex(existing)
}

func (c *candCache) keep(key string, ix *candIndex) {
	if ix.replaced > len(ix.recs) || len(ix.recs) > maxCachedCandRecords { // mostly stale, or too big to keep
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock()
	if old := c.m[key]; old != nil {
		c.total -= len(old.ix.recs)
		delete(c.m, key)
	}
	for c.total+len(ix.recs) > maxCachedCandRecords {
		var idle string
		for k, e := range c.m {
			if now.Sub(e.used) >= candIdleFor && (idle == "" || e.used.Before(c.m[idle].used)) {
				idle = k
			}
		}
		if idle == "" {
			return // the kept indexes are in use: this one is not kept
		}
		c.total -= len(c.m[idle].ix.recs)
		delete(c.m, idle)
	}
	if c.m == nil {
		c.m = map[string]*keptCand{}
	}
	c.m[key] = &keptCand{ix: ix, used: now}
	c.total += len(ix.recs)
}

// matches reports whether x indexes exactly the records of the listing,
// position by position (ID, content and topic: what its postings hold).
func (x *candIndex) matches(existing []memory.Record) bool {
	if len(existing) != len(x.recs) {
		return false
	}
	for i := range existing {
		e, r := &existing[i], &x.recs[i]
		if e.ID != r.ID || e.Content != r.Content || topicOf(*e) != topicOf(*r) {
			return false
		}
	}
	return true
}

// BatchPutter is an optional fast path a memory.Store may implement:
// store many records at once, atomically (sqlitestore.Store.PutBatch).
type BatchPutter interface {
	PutBatch(ctx context.Context, recs []memory.Record) ([]memory.Record, error)
}

// sink receives the records consolidation writes.
type sink interface {
	put(ctx context.Context, r memory.Record) (memory.Record, error)
}

// direct writes each record to the store at once.
type direct struct{ st memory.Store }

func (d direct) put(ctx context.Context, r memory.Record) (memory.Record, error) {
	return d.st.Put(ctx, r)
}

// batch queues records (the last version of each ID wins) for flush.
type batch struct {
	recs []memory.Record
	idx  map[string]int
}

func newBatch() *batch { return &batch{idx: map[string]int{}} }

func (b *batch) put(_ context.Context, r memory.Record) (memory.Record, error) {
	if i, ok := b.idx[r.ID]; ok {
		b.recs[i] = r
	} else {
		b.idx[r.ID] = len(b.recs)
		b.recs = append(b.recs, r)
	}
	return r, nil
}

func (b *batch) flush(ctx context.Context, st memory.Store) error {
	if len(b.recs) == 0 {
		return nil
	}
	if bp, ok := st.(BatchPutter); ok {
		if _, err := bp.PutBatch(ctx, b.recs); err != nil {
			return fmt.Errorf("put %d records: %w", len(b.recs), err)
		}
		return nil
	}
	for _, r := range b.recs {
		if _, err := st.Put(ctx, r); err != nil {
			return fmt.Errorf("put %s record %s: %w", r.Strategy, r.ID, err)
		}
	}
	return nil
}

// Lister is an optional fast path a memory.Store may implement: list the
// records a Query with empty Text selects, without ranking. The pipeline
// lists a namespace before every consolidation; a store whose Search
// rebuilds a ranking index after each write pays that rebuild for every
// listing unless it implements Lister.
type Lister interface {
	List(ctx context.Context, q memory.Query) ([]memory.Record, error)
}

// listQuery lists through Lister when the store has it, else Search.
func (p *Pipeline) listQuery(ctx context.Context, q memory.Query) ([]memory.Record, error) {
	q.Text = ""
	if l, ok := p.store.(Lister); ok {
		return l.List(ctx, q)
	}
	hits, err := p.store.Search(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]memory.Record, len(hits))
	for i, h := range hits {
		out[i] = h.Record
	}
	return out, nil
}

// RecordLister is an optional fast path a memory.Store may implement:
// the records (never events) of one exact namespace with the given
// statuses, in (createdAt, ID) order (sqlitestore.Store.ListRecords). A
// listing through Lister also visits the actor's events to filter them
// out, which costs O(the actor's history) on every extraction.
type RecordLister interface {
	ListRecords(ctx context.Context, namespace string, statuses []memory.Status) ([]memory.Record, error)
}

// list returns every active, staged and superseded record of a namespace
// (at most Options.ListLimit).
func (p *Pipeline) list(ctx context.Context, ns string) ([]memory.Record, error) {
	if rl, ok := p.store.(RecordLister); ok {
		recs, err := rl.ListRecords(ctx, ns, []memory.Status{memory.StatusActive, memory.StatusStaged, memory.StatusSuperseded})
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", ns, err)
		}
		if p.opts.ListLimit > 0 && len(recs) > p.opts.ListLimit {
			recs = recs[:p.opts.ListLimit]
		}
		return recs, nil
	}
	recs, err := p.listQuery(ctx, memory.Query{Namespace: ns,
		Statuses: []memory.Status{memory.StatusActive, memory.StatusStaged, memory.StatusSuperseded}, TopK: p.opts.ListLimit})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", ns, err)
	}
	out := recs[:0]
	for _, r := range recs {
		if !isEvent(r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// isEvent reports a short-term event presented as an episodic record by
// the store (metadata kind "event"); it is never consolidated into.
func isEvent(r memory.Record) bool {
	k, _ := r.Metadata["kind"].(string)
	return k == "event"
}

// rejected checks the store's RejectionStore when it has one, else the
// pipeline's own table.
func (p *Pipeline) rejected(ctx context.Context, actorID, content string) (bool, error) {
	if rs, ok := p.store.(memory.RejectionStore); ok {
		return rs.IsRejected(ctx, actorID, content)
	}
	return p.q.isRejected(ctx, actorID, memory.ContentHash(content))
}

func (p *Pipeline) markRejected(ctx context.Context, actorID, content string) error {
	if rs, ok := p.store.(memory.RejectionStore); ok {
		return rs.MarkRejected(ctx, actorID, content)
	}
	return p.q.markRejected(ctx, actorID, memory.ContentHash(content), p.opts.Now())
}

// consolidate decides one candidate:
//
//  1. a content hash rejected before → OutcomeRejected;
//  2. a duplicate — same memory.ContentHash, or token Jaccard ≥
//     DuplicateOverlap with the same strategy — of an active or staged
//     record merges into it (UpdatedAt, statedAt, sources union); of a
//     superseded record it merges too, unless the candidate was stated after
//     the record was superseded, in which case it is a re-assertion and
//     goes on as new;
//  3. the gate scores it, with novelty measured against the namespace's
//     active records on other topics (an update on the same topic is news,
//     not repetition): dropped, staged or stored;
//  4. a stored candidate supersedes every active record on the same topic
//     stated before it; stated before one of them (another session's job
//     ran first), it is stored superseded by the latest instead.
//
// The records a candidate is compared with are found through a candIndex
// (by content hash, shared token and topic), not by comparing it with
// every record of the namespace.
func (p *Pipeline) consolidate(ctx context.Context, actorID, ns string, c extract.Candidate, existing []memory.Record, w sink) (Result, error) {
	return p.consolidateIx(ctx, actorID, ns, c, newCandIndex(existing), w)
}

// consolidateIx is consolidate over an index of the namespace's records.
func (p *Pipeline) consolidateIx(ctx context.Context, actorID, ns string, c extract.Candidate, ix *candIndex, w sink) (Result, error) {
	if strings.TrimSpace(c.Content) == "" {
		return Result{Outcome: OutcomeDropped}, nil
	}
	if rej, err := p.rejected(ctx, actorID, c.Content); err != nil {
		return Result{}, fmt.Errorf("rejections: %w", err)
	} else if rej {
		return Result{Outcome: OutcomeRejected}, nil
	}
	now := p.opts.Now().UTC()
	stated := c.Time.UTC()
	if c.Time.IsZero() {
		stated = now
	}
	hash := hashOf(c.Content)
	for _, i := range ix.duplicates(hash, c.Strategy, tokensOf(c.Content), p.opts.DuplicateOverlap) {
		r := ix.recs[i]
		if r.Status == memory.StatusSuperseded {
			if at, ok := timeMeta(r.Metadata[keySupersededAt]); ok && stated.After(at) {
				continue // re-assertion after it was superseded
			}
		}
		r.Sources = unionStrings(r.Sources, c.Sources)
		r.UpdatedAt = now
		if r.Metadata == nil {
			r.Metadata = map[string]any{}
		}
		if at, ok := timeMeta(r.Metadata[keyStatedAt]); !ok || stated.After(at) {
			r.Metadata[keyStatedAt] = stated
		}
		put, err := w.put(ctx, r)
		if err != nil {
			return Result{}, fmt.Errorf("merge into %s: %w", r.ID, err)
		}
		return Result{Outcome: OutcomeMerged, Score: r.Importance, Record: put, written: []memory.Record{put}}, nil
	}

	// Novelty is 1 − the highest token Jaccard with an active record on
	// another topic; records sharing no token score 0 and cannot change
	// it, so only the records sharing a token are passed.
	// The gate takes the maximum over the records it is given; passing only
	// the record with the highest Jaccard gives it the same novelty without
	// re-tokenising every record for every candidate (ix keeps each
	// record's gate tokens for the job).
	gin := c.GateInput(nil)
	words := gate.Tokens(gin.Text)
	wordSet := gate.TokenSet(words)
	best, bestJ := "", -1.0
	for _, i := range ix.sharing(words) {
		if r := ix.recs[i]; r.Status == memory.StatusActive && (c.Topic == "" || topicOf(r) != c.Topic) {
			if j := gate.JaccardSets(wordSet, ix.gateTokens(i)); j > bestJ {
				best, bestJ = r.Content, j
			}
		}
	}
	if bestJ >= 0 {
		gin.Existing = []string{best}
	}
	_, score, outcome := p.opts.Thresholds.Evaluate(gin)
	if outcome == gate.Dropped {
		return Result{Outcome: OutcomeDropped, Score: score}, nil
	}
	c.Time = stated
	if outcome == gate.Staged {
		rec, err := p.put(ctx, w, ns, c, score, outcome, now)
		return Result{Outcome: OutcomeStaged, Score: score, Record: rec, written: []memory.Record{rec}}, err
	}
	rec, sup, written, err := p.storeAndSupersede(ctx, w, ns, c, score, now, ix.onTopic(c.Topic))
	return Result{Outcome: OutcomeStored, Score: score, Record: rec, Superseded: sup, written: written}, err
}

func topicOf(r memory.Record) string {
	t, _ := r.Metadata[extract.KeyTopic].(string)
	return t
}

func timeMeta(v any) (time.Time, bool) {
	switch x := v.(type) {
	case time.Time:
		return x, !x.IsZero()
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		return t, err == nil
	}
	return time.Time{}, false
}

// put writes a new record for c with the gate's outcome.
func (p *Pipeline) put(ctx context.Context, w sink, ns string, c extract.Candidate, score float64, outcome gate.Outcome, now time.Time) (memory.Record, error) {
	rec := p.newRecord(ns, c, score, now)
	if outcome == gate.Staged {
		rec.Status = memory.StatusStaged
	}
	put, err := w.put(ctx, rec)
	if err != nil {
		return memory.Record{}, fmt.Errorf("put %s record: %w", rec.Strategy, err)
	}
	return put, nil
}

func (p *Pipeline) newRecord(ns string, c extract.Candidate, score float64, now time.Time) memory.Record {
	md := make(map[string]any, len(c.Metadata)+2)
	for k, v := range c.Metadata {
		md[k] = v
	}
	if c.Topic != "" {
		md[extract.KeyTopic] = c.Topic
	}
	stated := c.Time
	if stated.IsZero() {
		stated = now
	}
	md[keyStatedAt] = stated.UTC()
	return memory.Record{
		ID:         ulid.Make().String(),
		Namespace:  ns,
		Strategy:   c.Strategy,
		Content:    c.Content,
		Metadata:   md,
		CreatedAt:  now,
		UpdatedAt:  now,
		Sources:    append([]string(nil), c.Sources...),
		Importance: score,
		Status:     memory.StatusActive,
	}
}

// storeAndSupersede writes c as active and supersedes the active records of
// its topic, when c was stated after them. A candidate stated before an
// active record of its topic (the jobs of two sessions of one actor run in
// either order) does not overturn the later statement: it is stored
// already superseded by the latest of them, and nothing else changes, so
// the outcome does not depend on which job ran first.
func (p *Pipeline) storeAndSupersede(ctx context.Context, w sink, ns string, c extract.Candidate, score float64, now time.Time, existing []memory.Record) (memory.Record, []string, []memory.Record, error) {
	rec := p.newRecord(ns, c, score, now)
	old := contradicted(rec, existing)
	stated := statedAt(rec)
	later, laterAt := -1, time.Time{}
	for i, o := range old {
		if at := statedAt(o); at.After(stated) && (later < 0 || at.After(laterAt)) {
			later, laterAt = i, at
		}
	}
	if later >= 0 {
		rec.Status = memory.StatusSuperseded
		rec.Metadata[keySupersededBy] = old[later].ID
		rec.Metadata[keySupersededAt] = laterAt
		put, err := w.put(ctx, rec)
		if err != nil {
			return memory.Record{}, nil, nil, fmt.Errorf("put %s record: %w", rec.Strategy, err)
		}
		return put, nil, []memory.Record{put}, nil
	}
	var ids []string
	for _, o := range old {
		ids = append(ids, o.ID)
	}
	if len(ids) > 0 {
		rec.Metadata[keySupersedes] = ids
	}
	put, err := w.put(ctx, rec)
	if err != nil {
		return memory.Record{}, nil, nil, fmt.Errorf("put %s record: %w", rec.Strategy, err)
	}
	olds, err := p.supersede(ctx, w, put, old, now)
	if err != nil {
		return put, nil, nil, err
	}
	return put, ids, append([]memory.Record{put}, olds...), nil
}

// statedAt is when r was stated: its statedAt metadata, else its creation.
func statedAt(r memory.Record) time.Time {
	if at, ok := timeMeta(r.Metadata[keyStatedAt]); ok {
		return at
	}
	return r.CreatedAt
}

// contradicted lists the active records of rec's strategy on rec's topic
// with other content. A preference only supersedes a preference, a fact a
// fact: a topic label shared across kinds (an LLM extractor may reuse one)
// must not erase an unrelated memory.
func contradicted(rec memory.Record, existing []memory.Record) []memory.Record {
	topic := topicOf(rec)
	if topic == "" {
		return nil
	}
	hash := hashOf(rec.Content)
	var out []memory.Record
	for _, r := range existing {
		if r.ID == rec.ID || r.Status != memory.StatusActive || r.Strategy != rec.Strategy || topicOf(r) != topic || hashOf(r.Content) == hash {
			continue
		}
		out = append(out, r)
	}
	return out
}

func (p *Pipeline) supersede(ctx context.Context, w sink, by memory.Record, old []memory.Record, now time.Time) ([]memory.Record, error) {
	at, ok := timeMeta(by.Metadata[keyStatedAt])
	if !ok {
		at = now
	}
	var out []memory.Record
	for _, o := range old {
		md := mergeMeta(o.Metadata, nil)
		md[keySupersededBy] = by.ID
		md[keySupersededAt] = at
		o.Metadata = md
		o.Status = memory.StatusSuperseded
		o.UpdatedAt = now
		put, err := w.put(ctx, o)
		if err != nil {
			return out, fmt.Errorf("supersede %s: %w", o.ID, err)
		}
		out = append(out, put)
	}
	return out, nil
}

// memo caches memory.ContentHash and gate.Tokens by content: consolidation
// compares each candidate with every record of a namespace, and record
// contents repeat across candidates and calls. It holds at most memoMax
// entries and starts afresh when full.
type memo struct {
	mu     sync.Mutex
	hashes map[string]string
	toks   map[string][]string
}

const memoMax = 20000

var contentMemo = &memo{hashes: map[string]string{}, toks: map[string][]string{}}

func hashOf(content string) string {
	m := contentMemo
	m.mu.Lock()
	h, ok := m.hashes[content]
	m.mu.Unlock()
	if ok {
		return h
	}
	h = memory.ContentHash(content)
	m.mu.Lock()
	if len(m.hashes) >= memoMax {
		m.hashes = map[string]string{}
	}
	m.hashes[content] = h
	m.mu.Unlock()
	return h
}

func tokensOf(content string) []string {
	m := contentMemo
	m.mu.Lock()
	t, ok := m.toks[content]
	m.mu.Unlock()
	if ok {
		return t
	}
	t = gate.Tokens(content)
	m.mu.Lock()
	if len(m.toks) >= memoMax {
		m.toks = map[string][]string{}
	}
	m.toks[content] = t
	m.mu.Unlock()
	return t
}

// candIndex is an inverted index over one namespace's records for
// consolidation: by content hash, by token (each record's distinct
// gate.Tokens) and by topic, so a candidate is compared only with the
// records that can be its duplicate, lower its novelty or contradict it.
// Record positions follow the listing order, new records appended, as the
// linear scan it replaces saw them; a lookup returns positions in that
// order. A replaced record keeps its position; postings of its old
// content stay and are re-checked against the current record.
type candIndex struct {
	recs    []memory.Record
	pos     map[string]int   // record ID → position
	byHash  map[string][]int // memory.ContentHash → positions
	byTok   map[string][]int // token → positions
	byTopic map[string][]int // topic → positions
	ntok    []int            // distinct tokens of each position's content
	gtok    map[int][]string // gate.TokenSet of a position's content, filled on first use
	// replaced counts records whose content or topic changed in place (their
	// old postings stay), to drop an index that is mostly stale.
	replaced int
}

// gateTokens is gate.TokenSet(gate.Tokens(...)) of the content at
// position i, computed once per content.
func (x *candIndex) gateTokens(i int) []string {
	if t, ok := x.gtok[i]; ok {
		return t
	}
	if x.gtok == nil {
		x.gtok = map[int][]string{}
	}
	t := gate.TokenSet(gate.Tokens(x.recs[i].Content))
	x.gtok[i] = t
	return t
}

func newCandIndex(existing []memory.Record) *candIndex {
	x := &candIndex{pos: make(map[string]int, len(existing)), byHash: make(map[string][]int, len(existing)),
		byTok: map[string][]int{}, byTopic: map[string][]int{}}
	for _, r := range existing {
		x.put(r)
	}
	return x
}

// put adds r, or replaces the record with its ID.
func (x *candIndex) put(r memory.Record) {
	i, ok := x.pos[r.ID]
	if ok {
		old := x.recs[i]
		x.recs[i] = r
		if old.Content != r.Content {
			delete(x.gtok, i)
		}
		if old.Content == r.Content && topicOf(old) == topicOf(r) {
			return
		}
		x.replaced++
	} else {
		i = len(x.recs)
		x.pos[r.ID] = i
		x.recs = append(x.recs, r)
		x.ntok = append(x.ntok, 0)
	}
	addPosting(x.byHash, hashOf(r.Content), i)
	toks := distinct(tokensOf(r.Content))
	x.ntok[i] = len(toks)
	for _, t := range toks {
		addPosting(x.byTok, t, i)
	}
	if t := topicOf(r); t != "" {
		addPosting(x.byTopic, t, i)
	}
}

// addPosting appends i to m[k] unless it is already the last entry.
func addPosting(m map[string][]int, k string, i int) {
	l := m[k]
	if n := len(l); n > 0 && l[n-1] == i {
		return
	}
	m[k] = append(l, i)
}

func distinct(toks []string) []string {
	seen := make(map[string]bool, len(toks))
	out := make([]string, 0, len(toks))
	for _, t := range toks {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// overlaps counts, for every position sharing a token with toks, how many
// distinct tokens it shares (from the postings, without re-tokenising).
func (x *candIndex) overlaps(toks []string) map[int]int {
	cnt := map[int]int{}
	for _, t := range distinct(toks) {
		for _, i := range x.byTok[t] {
			cnt[i]++
		}
	}
	return cnt
}

// sharing lists, in order, the positions whose content shares a token
// with toks.
func (x *candIndex) sharing(toks []string) []int {
	cnt := x.overlaps(toks)
	out := make([]int, 0, len(cnt))
	for i := range cnt {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

// duplicates lists, in order, the positions that are duplicates of a
// candidate: the same content hash, or the same strategy and a token
// Jaccard of at least overlap (gate.Jaccard, computed here from the
// shared-token counts; a stale posting is re-checked on the record).
func (x *candIndex) duplicates(hash string, st memory.Strategy, toks []string, overlap float64) []int {
	set := map[int]bool{}
	for _, i := range x.byHash[hash] {
		if hashOf(x.recs[i].Content) == hash {
			set[i] = true
		}
	}
	ctoks := distinct(toks)
	for i, n := range x.overlaps(ctoks) {
		r := x.recs[i]
		if set[i] || r.Strategy != st {
			continue
		}
		j := float64(n) / float64(len(ctoks)+x.ntok[i]-n)
		if j >= overlap && gate.Jaccard(toks, tokensOf(r.Content)) >= overlap {
			set[i] = true
		}
	}
	out := make([]int, 0, len(set))
	for i := range set {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

// onTopic returns, in order, the records whose topic is topic (none for
// ""): the only records a stored candidate can contradict.
func (x *candIndex) onTopic(topic string) []memory.Record {
	if topic == "" {
		return nil
	}
	set := map[int]bool{}
	for _, i := range x.byTopic[topic] {
		if topicOf(x.recs[i]) == topic {
			set[i] = true
		}
	}
	pos := make([]int, 0, len(set))
	for i := range set {
		pos = append(pos, i)
	}
	sort.Ints(pos)
	out := make([]memory.Record, len(pos))
	for k, i := range pos {
		out[k] = x.recs[i]
	}
	return out
}
