package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// docText is what is embedded for a document (as in the embedded store).
func docText(content string) string { return content }

// readVectors reads the actor's vectors stamped with a version above since.
func (s *Store) readVectors(ctx context.Context, tx pgx.Tx, actor string, since int64) (map[string][]float32, error) {
	rows, err := tx.Query(ctx, `SELECT id, vec FROM memory_vectors WHERE actor = $1 AND version > $2`, actor, since)
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

// embedMissing embeds the actor's records and unexpired events that have
// no stored vector and stores the vectors (real[]) with a new version, so
// every instance's index picks them up. Errors are logged: search then
// falls back to BM25F alone for those documents.
func (s *Store) embedMissing(ctx context.Context, actor string) {
	var ids, texts []string
	rows, err := s.pool.Query(ctx, `SELECT r.id, r.content FROM memory_records r
WHERE r.actor = $1 AND NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.id = r.id)`, actor)
	if err == nil {
		for rows.Next() {
			var id, text string
			if err = rows.Scan(&id, &text); err != nil {
				break
			}
			ids, texts = append(ids, id), append(texts, docText(text))
		}
		rows.Close()
	}
	if err == nil {
		rows, err = s.pool.Query(ctx, `SELECT `+eventCols+` FROM memory_events e
WHERE e.actor = $1 AND e.ts >= $2 AND NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.id = e.id)`, actor, s.cutoff())
	}
	if err == nil {
		for rows.Next() {
			e, serr := scanEvent(rows)
			if serr != nil {
				err = serr
				break
			}
			ids, texts = append(ids, e.ID), append(texts, docText(s.eventRecord(e).Content))
		}
		rows.Close()
	}
	if err != nil {
		s.opts.Logger.Warn("memory embedding: list documents", "actor", actor, "err", err)
		return
	}
	for start := 0; start < len(ids); start += 64 {
		end := min(start+64, len(ids))
		vecs, err := s.opts.Embedder.Embed(ctx, texts[start:end])
		if err != nil || len(vecs) != end-start {
			s.opts.Logger.Warn("memory embedding failed; BM25F only for these documents", "actor", actor, "err", err)
			return
		}
		if err := s.storeVectors(ctx, actor, ids[start:end], vecs); err != nil {
			s.opts.Logger.Warn("memory embedding: store", "actor", actor, "err", err)
			return
		}
	}
}

func (s *Store) storeVectors(ctx context.Context, actor string, ids []string, vecs [][]float32) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	v, err := bump(ctx, tx, actor, false)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	for i, id := range ids {
		b.Queue(`INSERT INTO memory_vectors (id, actor, vec, version) VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO UPDATE SET vec = EXCLUDED.vec, version = EXCLUDED.version WHERE memory_vectors.actor = EXCLUDED.actor`, id, actor, vecs[i], v)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
