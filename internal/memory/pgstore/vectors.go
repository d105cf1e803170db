package pgstore

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/memindex"
	"github.com/tendrilai/tendril/internal/memory/search"
)

// Vectors (hybrid search, SPEC §4.6). Writes never call the embedder:
// after a commit they queue the actor for the store's one background
// worker, which embeds what has no current vector (an anti-join, so a
// crash between commit and embedding loses nothing: the next pass finds
// the documents again) and stores the vectors stamped with a new actor
// version, so every instance's index catches up on them like on any
// other row. A vector is current when its model is the embedder's
// (ModelID), its dimension the last one the embedder returned, and, for
// a record, its hash the MD5 of the record's content.

// docText is a document's text, as in the embedded store: hashed whole,
// embedded cut to memindex.MaxEmbedBytes.
func docText(content string) string { return content }

// textHash is the hash stored with a vector: MD5 hex of the embedded
// text, as PostgreSQL's md5() computes it.
func textHash(text string) string {
	h := md5.Sum([]byte(text))
	return hex.EncodeToString(h[:])
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

// embedWorker embeds queued actors in the background, one at a time; a
// queued actor is queued once however many writes name it. Stopped and
// awaited by Close.
type embedWorker struct {
	mu      sync.Mutex
	pending map[string]bool // queued actors
	busy    string          // the actor being embedded now ("" when idle)
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

func (s *Store) startEmbedWorker() {
	ctx, cancel := context.WithCancel(context.Background())
	w := &embedWorker{pending: map[string]bool{}, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	s.emb = w
	go s.embedLoop(w)
}

func (s *Store) stopEmbedWorker() {
	if s.emb == nil {
		return
	}
	s.emb.retry.Stop()
	s.emb.cancel()
	<-s.emb.done
}

// scheduleEmbed queues actors for background embedding; it never blocks
// and is a no-op without an Embedder.
func (s *Store) scheduleEmbed(actors ...string) {
	w := s.emb
	if w == nil || len(actors) == 0 {
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

// WaitEmbedded blocks until this instance's embedding queue is empty and
// its worker idle, or ctx ends (tests, evaluation). Vectors are then
// stored for every document an embedding call succeeded for; documents
// whose call failed stay BM25F-only until a retry (with back-off,
// memindex.EmbedRetry), the actor's next write or its next load embeds
// them; a retry not yet due does not count as pending.
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

// readVectors reads the actor's vectors of the current model stamped
// with a version above since.
func (s *Store) readVectors(ctx context.Context, tx pgx.Tx, actor string, since int64) (map[string][]float32, error) {
	rows, err := tx.Query(ctx, `SELECT id, vec FROM memory_vectors WHERE actor = $1 AND version > $2 AND model = $3`, actor, since, s.model)
	if err != nil {
		return nil, fmt.Errorf("read memory vectors %q: %w", actor, err)
	}
	defer rows.Close()
	out := map[string][]float32{}
	for rows.Next() {
		var id string
		var v []float32
		if err := rows.Scan(&id, &v); err != nil {
			return nil, fmt.Errorf("read memory vectors %q: %w", actor, err)
		}
		out[id] = v
	}
	return out, rows.Err()
}

// embedLoaded queues the actor of a state just loaded in full when one of
// its documents has no current vector: vectors lost to a crash, dropped
// by a Rebuild on another process, or made by another model are
// recomputed by whichever instance reads the actor next. The caller holds
// a.mu.
func (s *Store) embedLoaded(a *actorState) {
	if s.emb == nil {
		return
	}
	dim := int(s.dim.Load())
	current := func(id string) bool {
		v, ok := a.vecs[id]
		return ok && (dim == 0 || len(v) == dim)
	}
	for id := range a.records {
		if !current(id) {
			s.scheduleEmbed(a.id)
			return
		}
	}
	for id, e := range a.events {
		if !s.expired(e) && !current(id) {
			s.scheduleEmbed(a.id)
			return
		}
	}
}

// embedMissing embeds the actor's records and unexpired events that have
// no current vector and stores the vectors (real[]) with a new version,
// so every instance's index picks them up, and returns how many it
// stored and whether a call failed. Errors are logged: search falls back
// to BM25F alone for those documents until the worker's retry
// (embedWorker.retry) embeds them.
func (s *Store) embedMissing(ctx context.Context, actor string) (n int, failed bool) {
	ids, texts, err := s.missingVectors(ctx, actor)
	if err != nil {
		if ctx.Err() == nil {
			s.opts.Logger.Warn("memory embedding: list documents", "actor", actor, "err", err)
		}
		return 0, true
	}
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
			return n, true
		}
		if len(vecs) > 0 && len(vecs[0]) > 0 {
			s.dim.Store(int64(len(vecs[0])))
		}
		stored, err := s.storeVectors(ctx, actor, ids[start:end], texts[start:end], vecs)
		if err != nil {
			if ctx.Err() == nil {
				s.opts.Logger.Warn("memory embedding: store", "actor", actor, "err", err)
			}
			return n, true
		}
		n += stored
	}
	return n, false
}

// missingVectors lists the actor's documents without a current vector
// and their texts.
func (s *Store) missingVectors(ctx context.Context, actor string) (ids, texts []string, err error) {
	dim := s.dim.Load()
	rows, err := s.pool.Query(ctx, `SELECT r.id, r.content FROM memory_records r
WHERE r.actor = $1 AND NOT EXISTS (SELECT 1 FROM memory_vectors v
  WHERE v.id = r.id AND v.model = $2 AND v.hash = md5(r.content) AND ($3 = 0 OR cardinality(v.vec) = $3))`, actor, s.model, dim)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var id, text string
		if err := rows.Scan(&id, &text); err != nil {
			rows.Close()
			return nil, nil, err
		}
		ids, texts = append(ids, id), append(texts, docText(text))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	rows, err = s.pool.Query(ctx, `SELECT `+eventCols+` FROM memory_events e
WHERE e.actor = $1 AND e.ts >= $2 AND NOT EXISTS (SELECT 1 FROM memory_vectors v
  WHERE v.id = e.id AND v.model = $3 AND ($4 = 0 OR cardinality(v.vec) = $4))`, actor, s.cutoff(), s.model, dim)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, nil, err
		}
		ids, texts = append(ids, e.ID), append(texts, docText(s.eventRecord(e).Content))
	}
	return ids, texts, rows.Err()
}

// storeVectors stores the vectors of ids (embedded from texts) in one
// transaction stamped with the actor's next version, and returns how many
// it stored. It never recreates a forgotten actor (the version row is
// updated, not inserted) and skips documents deleted meanwhile.
func (s *Store) storeVectors(ctx context.Context, actor string, ids, texts []string, vecs [][]float32) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx)
	var v int64
	err = tx.QueryRow(ctx, `UPDATE memory_actors SET version = nextval('memory_version_seq') WHERE actor = $1 RETURNING version`, actor).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil // forgotten meanwhile
	}
	if err != nil {
		return 0, err
	}
	b := &pgx.Batch{}
	for i, id := range ids {
		b.Queue(`INSERT INTO memory_vectors (id, actor, vec, version, model, hash)
SELECT $1, $2, $3, $4, $5, $6
WHERE EXISTS (SELECT 1 FROM memory_records WHERE id = $1 AND actor = $2) OR EXISTS (SELECT 1 FROM memory_events WHERE id = $1 AND actor = $2)
ON CONFLICT (id) DO UPDATE SET vec = EXCLUDED.vec, version = EXCLUDED.version, model = EXCLUDED.model, hash = EXCLUDED.hash
WHERE memory_vectors.actor = EXCLUDED.actor`, id, actor, vecs[i], v, s.model, textHash(texts[i]))
	}
	br := tx.SendBatch(ctx, b)
	n := 0
	for range ids {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return 0, err
		}
		n += int(tag.RowsAffected())
	}
	if err := br.Close(); err != nil {
		return 0, err
	}
	return n, tx.Commit(ctx)
}

// queryVector embeds a search's text within its budget: at most
// Options.QueryEmbedTimeout (1s) and at most half the time left before
// ctx's deadline, so a slow or failing embedder leaves the rest to BM25F.
// nil means BM25F only (no embedder, empty text, or a failed call, which
// is logged).
func (s *Store) queryVector(ctx context.Context, text string) []float32 {
	if s.opts.Embedder == nil || text == "" {
		return nil
	}
	d := s.opts.QueryEmbedTimeout
	if d <= 0 {
		d = time.Second
	}
	if dl, ok := ctx.Deadline(); ok {
		if half := time.Until(dl) / 2; half < d {
			d = half
		}
	}
	ectx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	v, err := s.opts.Embedder.Embed(ectx, []string{text})
	if err != nil || len(v) != 1 || len(v[0]) == 0 {
		s.opts.Logger.Warn("memory query embedding failed; BM25F only", "err", err)
		return nil
	}
	s.dim.Store(int64(len(v[0])))
	return v[0]
}

// reembedAll drops every stored vector (a Rebuild) and queues every
// actor for re-embedding. Each actor's version is bumped with a reset so
// other instances drop the vectors they cache too.
func (s *Store) reembedAll(ctx context.Context, actors []string) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("rebuild vectors: %w", err)
	}
	defer tx.Rollback(ctx)
	for _, a := range actors { // sorted: row locks in order
		if _, err := bump(ctx, tx, a, true); err != nil {
			return fmt.Errorf("rebuild vectors: %w", err)
		}
	}
	tag, err := tx.Exec(ctx, `DELETE FROM memory_vectors WHERE actor = ANY($1)`, actors)
	if err != nil {
		return fmt.Errorf("rebuild vectors: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("rebuild vectors: %w", err)
	}
	s.emb.mu.Lock()
	s.emb.rebuildStart, s.emb.rebuildDocs = time.Now(), 0
	s.emb.mu.Unlock()
	s.scheduleEmbed(actors...)
	s.opts.Logger.Info("memory rebuild: vectors dropped, re-embedding in the background", "actors", len(actors), "vectors", tag.RowsAffected(), "model", s.model)
	return nil
}

// EmbedStats implements memory.EmbedReporter (false when no embedder is
// configured).
func (s *Store) EmbedStats() (memory.EmbedStats, bool) {
	if s.emb == nil {
		return memory.EmbedStats{}, false
	}
	return memory.EmbedStats{Failures: s.emb.retry.Failures(), Retrying: s.emb.retry.Retrying()}, true
}
