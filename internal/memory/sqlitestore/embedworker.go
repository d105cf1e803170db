package sqlitestore

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/memindex"
	"github.com/tendrilai/tendril/internal/memory/search"
)

// Vectors (hybrid search, SPEC §4.6) live in the index's vectors table,
// one per record or event, tagged with the embedder's model (ModelID) and
// the MD5 of the embedded text. A vector is current when its model is
// the embedder's, its dimension the last one the embedder returned and
// its hash the document's: anything else (another model, a changed
// record) is re-embedded, never mixed. Writes only queue the actor; the
// worker below embeds without holding any of the actor's locks, so a
// write never waits for an embedding call.

// embedWorker embeds new documents in the background: writes name the
// actor, the worker embeds what has no current vector. One goroutine per
// store, stopped and awaited by Close.
type embedWorker struct {
	model string       // ModelID of the embedder
	dim   atomic.Int64 // dimension of the last vectors returned (0: none yet)

	mu      sync.Mutex
	pending map[string]bool
	busy    string // the actor being embedded now ("" when idle)
	// rebuild counts a Rebuild's re-embedding until the queue drains.
	rebuildStart time.Time
	rebuildDocs  int
	// retry re-queues an actor whose embedding call failed, with back-off.
	retry memindex.EmbedRetry

	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// ModelID names an embedder's model for its stored vectors: its
// ModelID() when it has one (package embed's embedders do:
// "openai/text-embedding-3-small"), else its Go type.
func ModelID(e search.Embedder) string {
	if m, ok := e.(interface{ ModelID() string }); ok {
		return m.ModelID()
	}
	return fmt.Sprintf("%T", e)
}

// embedBatch is how many texts go to one embedding call.
const embedBatch = 64

// startEmbedWorker adds the model and hash columns to an index created
// before them and starts the worker.
func (s *Store) startEmbedWorker() error {
	for _, col := range []string{"model", "hash"} {
		var n int
		if err := s.db.QueryRow(`SELECT count(*) FROM pragma_table_info('vectors') WHERE name = ?`, col).Scan(&n); err != nil {
			return fmt.Errorf("memory index vectors: %w", err)
		}
		if n == 0 {
			if _, err := s.db.Exec(`ALTER TABLE vectors ADD COLUMN ` + col + ` TEXT NOT NULL DEFAULT ''`); err != nil {
				return fmt.Errorf("memory index vectors: %w", err)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &embedWorker{model: ModelID(s.opts.Embedder), pending: map[string]bool{}, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	s.emb = w
	go s.embedLoop(w)
	return nil
}

func (s *Store) stopEmbedWorker() {
	if s.emb == nil {
		return
	}
	s.emb.retry.Stop()
	s.emb.cancel()
	<-s.emb.done
}

// scheduleEmbed queues actors for background embedding; it never blocks.
func (s *Store) scheduleEmbed(actors ...string) {
	w := s.emb
	if w == nil {
		return
	}
	w.mu.Lock()
	for _, a := range actors {
		w.pending[a] = true
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// WaitEmbedded blocks until no actor waits for background embedding and
// the worker is idle, or ctx ends (tests, evaluation). Documents whose
// embedding call failed stay BM25F-only until a retry (with back-off,
// memindex.EmbedRetry), the actor's next write or its next index build
// embeds them; a retry not yet due does not count as pending.
func (s *Store) WaitEmbedded(ctx context.Context) error {
	for {
		if s.emb == nil {
			return nil
		}
		s.emb.mu.Lock()
		idle := len(s.emb.pending) == 0 && s.emb.busy == ""
		s.emb.mu.Unlock()
		if idle {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (s *Store) embedLoop(w *embedWorker) {
	defer close(w.done)
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.wake:
		}
		for w.ctx.Err() == nil {
			w.mu.Lock()
			var actor string
			for a := range w.pending {
				actor = a
				break
			}
			// Taken off the queue before the pass: a write during the
			// pass queues the actor again.
			delete(w.pending, actor)
			w.busy = actor
			w.mu.Unlock()
			if actor == "" {
				break
			}
			n, failed := s.embedMissing(w.ctx, actor)
			if failed && w.ctx.Err() == nil {
				w.retry.Failed(actor, func(a string) { s.scheduleEmbed(a) })
			} else if !failed {
				w.retry.Succeeded(actor)
			}
			w.mu.Lock()
			w.busy = ""
			if !w.rebuildStart.IsZero() {
				w.rebuildDocs += n
				if len(w.pending) == 0 {
					s.opts.Logger.Info("memory rebuild: vectors re-embedded", "documents", w.rebuildDocs, "seconds", time.Since(w.rebuildStart).Seconds())
					w.rebuildStart, w.rebuildDocs = time.Time{}, 0
				}
			}
			w.mu.Unlock()
		}
	}
}

// docText is a document's text: hashed whole, embedded cut to
// memindex.MaxEmbedBytes.
func docText(r memory.Record) string { return r.Content }

// textHash is the hash stored with a vector: MD5 hex of the embedded text.
func textHash(text string) string {
	h := md5.Sum([]byte(text))
	return hex.EncodeToString(h[:])
}

// embedMissing embeds the actor's documents that have no current vector,
// stores the vectors and puts them into the ranking index; it returns how
// many it stored and whether an embedding call failed. No lock of the
// actor or the store is held during an embedding call. Errors are
// logged: search falls back to BM25F alone for those documents until the
// worker's retry (embedWorker.retry) embeds them.
func (s *Store) embedMissing(ctx context.Context, actor string) (n int, failed bool) {
	dim := s.emb.dim.Load()
	ids, texts := s.missingVectors(ctx, actor, dim)
	for start := 0; start < len(ids); start += embedBatch {
		end := min(start+embedBatch, len(ids))
		batch := make([]string, end-start)
		for i, t := range texts[start:end] {
			batch[i] = memindex.EmbedText(t)
		}
		vecs, err := s.opts.Embedder.Embed(ctx, batch)
		if err == nil && len(vecs) != end-start {
			err = fmt.Errorf("%d vectors for %d texts", len(vecs), end-start)
		}
		if err != nil {
			if ctx.Err() == nil {
				s.opts.Logger.Warn("memory embedding failed; BM25F only for these documents until a retry succeeds", "actor", actor, "documents", len(ids)-start, "err", err)
			}
			failed = true
			break
		}
		if len(vecs) > 0 && len(vecs[0]) > 0 {
			s.emb.dim.Store(int64(len(vecs[0])))
		}
		n += s.storeVectors(ctx, actor, ids[start:end], texts[start:end], vecs)
	}
	s.indexVectors(ctx, actor)
	if dim != 0 && s.emb.dim.Load() != dim {
		s.scheduleEmbed(actor) // the dimension changed: the older vectors are stale
	}
	return n, failed
}

// missingVectors lists the actor's records and unexpired events without a
// current vector, with their texts.
func (s *Store) missingVectors(ctx context.Context, actor string, dim int64) (ids, texts []string) {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed || !s.known(ctx, actor) {
		return nil, nil
	}
	a, release, err := s.acquire(ctx, actor)
	if err != nil {
		return nil, nil
	}
	defer release()
	type meta struct {
		model, hash string
		dim         int64
	}
	have := map[string]meta{}
	rows, err := s.db.QueryContext(ctx, `SELECT id, model, hash, length(vec)/4 FROM vectors WHERE actor=?`, actor)
	if err != nil {
		return nil, nil
	}
	for rows.Next() {
		var id string
		var m meta
		if rows.Scan(&id, &m.model, &m.hash, &m.dim) == nil {
			have[id] = m
		}
	}
	rows.Close()
	current := func(id, text string) bool {
		m, ok := have[id]
		return ok && m.model == s.emb.model && m.hash == textHash(text) && (dim == 0 || m.dim == dim)
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, r := range a.records {
		if t := docText(*r); !current(r.ID, t) {
			ids, texts = append(ids, r.ID), append(texts, t)
		}
	}
	for _, e := range a.events {
		if s.expired(e) {
			continue
		}
		if t := docText(s.eventRecord(e)); !current(e.ID, t) {
			ids, texts = append(ids, e.ID), append(texts, t)
		}
	}
	return ids, texts
}

// storeVectors stores the vectors of ids (embedded from texts) whose
// document still exists with the same text and returns how many it
// stored. A forgotten actor gets none.
func (s *Store) storeVectors(ctx context.Context, actor string, ids, texts []string, vecs [][]float32) int {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed || !s.known(ctx, actor) {
		return 0
	}
	a, release, err := s.acquire(ctx, actor)
	if err != nil {
		return 0
	}
	defer release()
	keep := make([]int, 0, len(ids))
	a.mu.RLock()
	for i, id := range ids {
		if r, ok := a.records[id]; ok && docText(*r) == texts[i] {
			keep = append(keep, i)
		} else if e, ok := a.events[id]; ok && docText(s.eventRecord(e)) == texts[i] {
			keep = append(keep, i)
		}
	}
	a.mu.RUnlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0
	}
	defer tx.Rollback()
	for _, i := range keep {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO vectors(id,actor,vec,model,hash) VALUES(?,?,?,?,?)`,
			ids[i], actor, encodeVec(vecs[i]), s.emb.model, textHash(texts[i])); err != nil {
			s.opts.Logger.Warn("memory embedding: store", "actor", actor, "err", err)
			return 0
		}
	}
	if err := tx.Commit(); err != nil {
		s.opts.Logger.Warn("memory embedding: store", "actor", actor, "err", err)
		return 0
	}
	return len(keep)
}

// indexVectors gives the actor's ranking index, when built, the stored
// vectors of all its documents (documents re-added by writes since, such
// as an event's neighbours, get theirs back too).
func (s *Store) indexVectors(ctx context.Context, actor string) {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed {
		return
	}
	s.mu.Lock()
	a, ok := s.actors[actor]
	s.mu.Unlock()
	if !ok {
		return // not cached: its next index build reads the vectors
	}
	byID := s.vectorsByID(ctx, actor)
	s.changeIndex(a, func(x *actorIndex) *actorIndex { x.vecs = vectorsFor(x, byID); return x })
}

// loadVectors returns the current vector of each document of x (nil
// where none) and queues the actor for embedding when a document has
// none: vectors lost to a crash, dropped by a Rebuild, or made by another
// model are recomputed in the background.
func (s *Store) loadVectors(ctx context.Context, a *actorState, x *actorIndex) [][]float32 {
	out := vectorsFor(x, s.vectorsByID(ctx, a.id))
	if s.emb == nil { // an index built while Open syncs, before the worker starts
		return out
	}
	dim := int(s.emb.dim.Load())
	for _, d := range x.docOf { // the live documents
		if v := out[d]; v == nil || dim != 0 && len(v) != dim {
			s.scheduleEmbed(a.id)
			break
		}
	}
	return out
}

// vectorsByID reads the actor's vectors of the current model.
func (s *Store) vectorsByID(ctx context.Context, actor string) map[string][]float32 {
	byID := map[string][]float32{}
	rows, err := s.db.QueryContext(ctx, `SELECT id,vec FROM vectors WHERE actor=? AND model=?`, actor, ModelID(s.opts.Embedder))
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

// reembedAll drops every stored vector (a Rebuild) and queues every
// actor for re-embedding in the background; without an Embedder it does
// nothing. The caller holds s.gate.
func (s *Store) reembedAll(ctx context.Context) error {
	if s.emb == nil {
		return nil
	}
	res, err := s.db.ExecContext(ctx, `DELETE FROM vectors`)
	if err != nil {
		return fmt.Errorf("rebuild memory vectors: %w", err)
	}
	dropped, _ := res.RowsAffected()
	actors, err := s.actorIDs(ctx)
	if err != nil {
		return err
	}
	if len(actors) == 0 {
		return nil
	}
	s.emb.mu.Lock()
	s.emb.rebuildStart, s.emb.rebuildDocs = time.Now(), 0
	s.emb.mu.Unlock()
	s.scheduleEmbed(actors...)
	s.opts.Logger.Info("memory rebuild: vectors dropped, re-embedding in the background", "actors", len(actors), "vectors", dropped, "model", s.emb.model)
	return nil
}

// queryEmbedContext is the context of a query's embedding call: at most
// Options.QueryEmbedTimeout (1s) and at most half the time left before
// ctx's deadline.
func (s *Store) queryEmbedContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := s.opts.QueryEmbedTimeout
	if d <= 0 {
		d = time.Second
	}
	if dl, ok := ctx.Deadline(); ok {
		if half := time.Until(dl) / 2; half < d {
			d = half
		}
	}
	return context.WithTimeout(ctx, d)
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

// EmbedStats implements memory.EmbedReporter (false when no embedder is
// configured).
func (s *Store) EmbedStats() (memory.EmbedStats, bool) {
	if s.emb == nil {
		return memory.EmbedStats{}, false
	}
	return memory.EmbedStats{Failures: s.emb.retry.Failures(), Retrying: s.emb.retry.Retrying()}, true
}
