package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/memindex"
)

// The record window (issue 14): an actor's records beyond its window are
// cold, as its old events are (tier.go). A cold record is held only in
// SQLite (the records table, its fts_docs row written in the same
// transaction) and in the Markdown; it is neither in actorState.records
// nor in the in-memory BM25F index. Searches find it through FTS5 with
// the cold events (coldCandidates, coldHits); Get, Put, the listings and
// the layer files' rewrite read it from SQLite when the actor has cold
// records (actorState.recCold). So an actor's heap no longer holds
// every record it ever had: at 100 actors × 1,000 turns the records were
// two thirds of the store (docs/bench/soak.md stop 28).
//
// Which records are warm is not a stored boundary, unlike the events':
// records change in place, so "cold" is simply "in SQLite and not in
// memory". The warm ones are the first of the actor's records in
// warmFirst order (active ones, then the most recently updated), as many
// as its window: a load reads those, and a write that leaves more warm
// (a record written is warm) drops the last of them. So the warm set is a
// function of the stored records and the window, and an index loaded or
// rebuilt from them ranks as the one kept up to date write by write
// (memorytest's RebuildEquivalence runs with a window of 1).

// DefaultRecordWindow is Options.RecordWindow when unset: at most 8,192
// records of each actor stay in memory, fewer when the byte budget is
// shared by many actors (recordWindowFor).
const DefaultRecordWindow = 8192

// minRecordWindow is the smallest record window recordWindowFor gives an
// actor under the byte budget.
const minRecordWindow = 64

// docBytesGuess is the heap assumed per document of an actor whose own
// is not known yet (on load): a record with its index document
// (BenchmarkRecordHeap: about 1,400 bytes).
const docBytesGuess = 1400

// recordCols are the records table's columns scanRecord reads.
const recordCols = `id,namespace,strategy,status,content,metadata,created_at,updated_at,sources,importance`

// scanRecord reads one row of recordCols, after the columns pre are
// scanned into.
func scanRecord(rows *sql.Rows, pre ...any) (memory.Record, error) {
	var r memory.Record
	var md, src, ca, ua string
	if err := rows.Scan(append(pre, &r.ID, &r.Namespace, &r.Strategy, &r.Status, &r.Content, &md, &ca, &ua, &src, &r.Importance)...); err != nil {
		return r, fmt.Errorf("memory index: %w", err)
	}
	r.Metadata = decodeJSONMetadata(md)
	json.Unmarshal([]byte(src), &r.Sources)
	r.CreatedAt, _ = time.Parse(time.RFC3339Nano, ca)
	r.UpdatedAt, _ = time.Parse(time.RFC3339Nano, ua)
	return r, nil
}

// recordWindow is the configured record window (0: none).
func (s *Store) recordWindow() int {
	if s.opts.RecordWindow < 0 || s.legacy {
		return 0
	}
	return s.opts.RecordWindow
}

// recordWindowFor is a's record window: Options.RecordWindow, narrowed
// when the cached actors would not fit Options.CacheBytes. Each actor's
// share of the budget (CacheBytes ÷ cached actors), in documents at its
// own bytes per document, goes to its events down to minWindow first
// (windowFor), then to its records down to minRecordWindow. 0: no window.
func (s *Store) recordWindowFor(a *actorState) int {
	w := s.recordWindow()
	if w == 0 || s.opts.CacheBytes <= 0 {
		return w
	}
	s.mu.Lock()
	n := len(s.actors)
	s.mu.Unlock()
	a.mu.RLock()
	docs := len(a.records) + len(a.events)
	a.mu.RUnlock()
	bpd := int64(docBytesGuess)
	if docs > 0 {
		bpd = max(1, a.bytes()/int64(docs))
	}
	per := s.opts.CacheBytes / int64(max(n, 1))
	events := 0
	if s.window() > 0 {
		events = minWindow
	}
	return min(w, max(minRecordWindow, int(per/bpd)-events))
}

// coldCounts counts an actor's cold records by namespace, strategy and
// status, so that a search or listing whose condition admits none of
// them (the standing listing, a search of the episodic namespace) reads
// no cold record.
type coldCounts map[coldKind]int

// coldKind is a namespace, strategy and status.
type coldKind struct {
	ns     string
	st     memory.Strategy
	status memory.Status
}

// add adds n records of r's namespace, strategy and status.
func (c *coldCounts) add(r warmKey, n int) {
	if *c == nil {
		*c = coldCounts{}
	}
	k := coldKind{r.ns, r.st, r.status}
	if (*c)[k] += n; (*c)[k] <= 0 {
		delete(*c, k)
	}
}

// total is the number of cold records.
func (c coldCounts) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// admitted is the number of cold records whose namespace, strategy and
// status cond admits.
func (c coldCounts) admitted(cond memindex.Cond) int {
	n := 0
	for k, v := range c {
		if cond.Admits(k.st, k.status) && cond.InScope(k.ns) {
			n += v
		}
	}
	return n
}

// warmRank is a record's class in the record window: standing records
// (active preferences and procedures, which every turn's retrieval lists),
// then other active records, then the rest (staged, superseded).
func warmRank(st memory.Strategy, status memory.Status) int {
	switch {
	case status != memory.StatusActive:
		return 2
	case st == memory.StrategyUserPreference || st == memory.StrategyProcedural:
		return 0
	default:
		return 1
	}
}

// warmKey is what warmFirst orders a record by.
type warmKey struct {
	id     string
	rank   int // warmRank
	at     time.Time
	ns     string
	st     memory.Strategy
	status memory.Status
}

func recordWarmKey(r *memory.Record) warmKey {
	return warmKey{r.ID, warmRank(r.Strategy, r.Status), r.UpdatedAt, r.Namespace, r.Strategy, r.Status}
}

// warmFirst orders records for the record window: by warmRank, then the
// most recently updated, then the greater ID.
func warmFirst(a, b warmKey) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	if !a.at.Equal(b.at) {
		return a.at.After(b.at)
	}
	return a.id > b.id
}

// loadRecords reads a's records into memory on load: all of them when
// they fit its record window, else the first of them in warmFirst order;
// the rest are cold.
func (s *Store) loadRecords(ctx context.Context, a *actorState) error {
	q, args := `SELECT `+recordCols+` FROM records WHERE actor=?`, []any{a.id}
	if w := s.recordWindowFor(a); w > 0 {
		ids, cold, err := s.warmRecordIDs(ctx, a.id, w)
		if err != nil {
			return err
		}
		if cold != nil {
			arr, _ := json.Marshal(ids)
			q, args = `SELECT `+recordCols+` FROM records WHERE id IN (SELECT value FROM json_each(?)) AND actor=?`, []any{string(arr), a.id}
			a.recCold = cold
		}
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return err
		}
		a.setRecord(r)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	return nil
}

// warmRecordIDs returns the IDs of the first w records of actor in
// warmFirst order and the others' counts by kind; nil, nil when it has no
// more than w (counted on the actor index alone). Otherwise it reads only
// the ordering columns.
func (s *Store) warmRecordIDs(ctx context.Context, actor string, w int) ([]string, coldCounts, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM records WHERE actor=?`, actor).Scan(&n); err != nil {
		return nil, nil, fmt.Errorf("memory index: %w", err)
	}
	if n <= w {
		return nil, nil, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, namespace, strategy, status, updated_at FROM records WHERE actor=?`, actor)
	if err != nil {
		return nil, nil, fmt.Errorf("memory index: %w", err)
	}
	defer rows.Close()
	var keys []warmKey
	for rows.Next() {
		var k warmKey
		var at string
		if err := rows.Scan(&k.id, &k.ns, &k.st, &k.status, &at); err != nil {
			return nil, nil, fmt.Errorf("memory index: %w", err)
		}
		k.rank = warmRank(k.st, k.status)
		k.at, _ = time.Parse(time.RFC3339Nano, at)
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("memory index: %w", err)
	}
	if len(keys) <= w {
		return nil, nil, nil
	}
	sort.Slice(keys, func(i, j int) bool { return warmFirst(keys[i], keys[j]) })
	cold := coldCounts{}
	for _, k := range keys[w:] {
		cold.add(k, 1)
	}
	ids := make([]string, w)
	for i, k := range keys[:w] {
		ids[i] = k.id
	}
	return ids, cold, nil
}

// demoteRecords makes a's warm records past its record window cold: the
// last of them in warmFirst order (staged and superseded ones first, then
// the least recently updated). Their rows and full-text rows are already
// in SQLite (written with them), so it only drops them from memory and
// retires their documents. The caller holds a.wmu and none of a's other
// locks.
func (s *Store) demoteRecords(a *actorState) {
	w := s.recordWindowFor(a)
	if w == 0 || len(a.records) <= w {
		return
	}
	recs := make([]*memory.Record, 0, len(a.records))
	for _, r := range a.records {
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool { return warmFirst(recordWarmKey(recs[i]), recordWarmKey(recs[j])) })
	gone := make([]string, 0, len(recs)-w)
	a.mu.Lock()
	for _, r := range recs[w:] {
		a.dropRecord(r.ID)
		a.recCold.add(recordWarmKey(r), 1)
		gone = append(gone, r.ID)
	}
	a.mu.Unlock()
	s.changeIndex(a, func(x *actorIndex) *actorIndex {
		for _, id := range gone {
			x.remove(id)
		}
		return x
	})
	s.compactSoon(a)
}

// dropRecord removes the record id from a's records. The caller holds
// a.mu exclusively.
func (a *actorState) dropRecord(id string) {
	r, ok := a.records[id]
	if !ok {
		return
	}
	delete(a.records, id)
	delete(a.byStrat[r.Strategy], id)
	a.mapBytes.Add(-recordBytes(*r))
}

// coldRecords reads the cold records of a among ids (those not in
// memory), by primary key. The caller holds a.mu (either mode) or a.wmu.
func (s *Store) coldRecords(ctx context.Context, a *actorState, ids []string) (map[string]memory.Record, error) {
	out := map[string]memory.Record{}
	if a.recCold.total() == 0 || len(ids) == 0 {
		return out, nil
	}
	want := make([]string, 0, len(ids))
	for _, id := range ids {
		if _, warm := a.records[id]; !warm {
			want = append(want, id)
		}
	}
	if len(want) == 0 {
		return out, nil
	}
	s.coldRecordReads.Add(1)
	err := s.queryByIDs(ctx, `SELECT actor,`+recordCols+` FROM records WHERE id IN (SELECT value FROM json_each(?))`, want, func(rows *sql.Rows) error {
		var actor string
		r, err := scanRecord(rows, &actor)
		if err == nil && actor == a.id {
			out[r.ID] = r
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// record returns a's record id, warm or cold. The caller holds a.mu
// (either mode) or a.wmu.
func (s *Store) record(ctx context.Context, a *actorState, id string) (memory.Record, bool, error) {
	if r, ok := a.records[id]; ok {
		return *r, true, nil
	}
	cold, err := s.coldRecords(ctx, a, []string{id})
	if err != nil {
		return memory.Record{}, false, err
	}
	r, ok := cold[id]
	return r, ok, nil
}

// allRecords returns every record of a, warm and cold, with their IDs by
// strategy: a's own maps when it has no cold records (read-only), else
// new ones merging SQLite's cold rows. The caller holds a.mu (either
// mode) or a.wmu.
func (s *Store) allRecords(ctx context.Context, a *actorState) (map[string]*memory.Record, map[memory.Strategy]map[string]struct{}, error) {
	return s.recordsOf(ctx, a, nil)
}

// recordsOf is allRecords of the strategies and statuses c admits (nil:
// all): a's own maps when it has no cold records c admits, so that the listing of
// standing records on every turn (preferences and procedures, warm
// first) reads no SQLite.
func (s *Store) recordsOf(ctx context.Context, a *actorState, c *memindex.Cond) (map[string]*memory.Record, map[memory.Strategy]map[string]struct{}, error) {
	cold := a.recCold.total()
	if c != nil {
		cold = a.recCold.admitted(*c)
	}
	if cold == 0 {
		return a.records, a.byStrat, nil
	}
	q, args := `SELECT `+recordCols+` FROM records WHERE actor=?`, []any{a.id}
	if c != nil && len(c.Strategies) > 0 {
		arr, _ := json.Marshal(c.Strategies)
		q, args = q+` AND strategy IN (SELECT value FROM json_each(?))`, append(args, string(arr))
	}
	if c != nil && len(c.Statuses) > 0 {
		arr, _ := json.Marshal(c.Statuses)
		q, args = q+` AND status IN (SELECT value FROM json_each(?))`, append(args, string(arr))
	}
	s.coldRecordReads.Add(1)
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("memory index: %w", err)
	}
	defer rows.Close()
	recs := make(map[string]*memory.Record, len(a.records)+cold)
	for id, r := range a.records {
		recs[id] = r
	}
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, nil, err
		}
		if _, warm := recs[r.ID]; !warm {
			recs[r.ID] = &r
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("memory index: %w", err)
	}
	by := map[memory.Strategy]map[string]struct{}{}
	for id, r := range recs {
		set := by[r.Strategy]
		if set == nil {
			set = map[string]struct{}{}
			by[r.Strategy] = set
		}
		set[id] = struct{}{}
	}
	return recs, by, nil
}

// hasColdFor reports whether a search of a under c may find cold
// documents: cold events when c admits events, cold records when it
// admits records. The caller holds a.mu (either mode) or a.wmu.
func (a *actorState) hasColdFor(c memindex.Cond) bool {
	return a.hasCold() && c.Admits(memory.StrategyEpisodic, memory.StatusActive) || a.recCold.admitted(c) > 0
}
