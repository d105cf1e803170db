// Package pgstate is the PostgreSQL state.Backend (SPEC §6.1, §9): the
// internal state of every actor in two tables shared by every `tendril
// serve` instance.
//
//	state_actors  (actor PK, state JSONB = state.Record, level, version, last_seq, updated_at)
//	state_changes (actor, seq, change JSON = state.Change, created_at), PK (actor, seq)
//
// Each Update is one transaction that locks the actor's row (SELECT … FOR
// UPDATE; a first update inserts the row, and a concurrent first update
// waits on its key), runs the engine's step on the locked record, writes
// the new record, appends the changes and deletes those beyond the
// history limit. Updates of one actor from any number of instances are
// therefore serialised and none is lost. Nothing is cached in memory:
// every read goes to the database.
package pgstate

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tendrilai/tendril/internal/pg"
	"github.com/tendrilai/tendril/internal/state"
)

//go:embed migrations/*.sql
var migrationsFS embed.FS

// Migrations returns the component's migrations ("state/001_init.sql", …).
func Migrations() []pg.Migration { return pg.FromFS("state", migrationsFS, "migrations") }

// Options tune a Store. The zero value is usable.
type Options struct {
	// AsyncCommit commits each update with synchronous_commit = off: the
	// commit returns before the server flushes its WAL, so a crash of the
	// PostgreSQL server (not of Tendril) may lose the last fraction of a
	// second of state changes, never corrupt them; the row lock still
	// serialises every update. State is derived data, not something the
	// user said (the file backend's NoSync makes the same trade), and the
	// flush is most of an update's latency.
	AsyncCommit bool
}

// Store is a state.Backend on PostgreSQL. It is safe for concurrent use,
// and any number of Stores (processes, pools) may share one database.
type Store struct {
	db   *pgxpool.Pool
	opts Options
}

var _ state.Backend = (*Store)(nil)

// New applies Migrations to db (through pg.Migrate) and returns a Store on
// it. The pool stays the caller's: the Store has nothing to close.
func New(ctx context.Context, db *pgxpool.Pool, opts Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("pgstate: nil pool")
	}
	if _, err := pg.Migrate(ctx, db, Migrations()); err != nil {
		return nil, fmt.Errorf("pgstate: %w", err)
	}
	return &Store{db: db, opts: opts}, nil
}

// decode reads a state_actors.state value; JSON null is a row created by
// an uncommitted first update (never visible to others) and means none.
func decode(actor string, raw []byte) (state.Record, bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return state.Record{}, false, nil
	}
	var r state.Record
	if err := json.Unmarshal(raw, &r); err != nil {
		return state.Record{}, false, fmt.Errorf("pgstate: decode %s: %w", actor, err)
	}
	return r, true, nil
}

// Load implements state.Backend: one statement (one snapshot) for the
// record and, with history, the changes in seq order.
func (s *Store) Load(ctx context.Context, actor string, history bool) (state.Record, []state.Change, bool, error) {
	var raw, hist []byte
	err := s.db.QueryRow(ctx, `
SELECT a.state,
       CASE WHEN $2 THEN (SELECT coalesce(json_agg(c.change ORDER BY c.seq), '[]'::json)
                          FROM state_changes c WHERE c.actor = a.actor) END
FROM state_actors a WHERE a.actor = $1`, actor, history).Scan(&raw, &hist)
	if errors.Is(err, pgx.ErrNoRows) {
		return state.Record{}, nil, false, nil
	}
	if err != nil {
		return state.Record{}, nil, false, fmt.Errorf("pgstate: load %s: %w", actor, err)
	}
	rec, ok, err := decode(actor, raw)
	if err != nil || !ok {
		return state.Record{}, nil, false, err
	}
	var changes []state.Change
	if history && len(hist) > 0 {
		if err := json.Unmarshal(hist, &changes); err != nil {
			return state.Record{}, nil, false, fmt.Errorf("pgstate: decode history of %s: %w", actor, err)
		}
	}
	return rec, changes, true, nil
}

const lockRow = `SELECT state, last_seq FROM state_actors WHERE actor = $1 FOR UPDATE`

// Update implements state.Backend in one transaction holding the actor's
// row lock; fn runs once per call.
func (s *Store) Update(ctx context.Context, actor string, limit int, fn func(state.Record, bool) (state.Record, []state.Change, error)) error {
	if limit < 1 {
		return fmt.Errorf("pgstate: history limit %d < 1", limit)
	}
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var raw []byte
		var last int64
		err := tx.QueryRow(ctx, lockRow, actor).Scan(&raw, &last)
		if errors.Is(err, pgx.ErrNoRows) {
			// First update: create the row (a concurrent first update
			// blocks here on the key until this one commits), then lock it.
			if _, err := tx.Exec(ctx, `INSERT INTO state_actors (actor, state, level, version) VALUES ($1, 'null', 'NORMAL', 0)
ON CONFLICT (actor) DO NOTHING`, actor); err != nil {
				return err
			}
			err = tx.QueryRow(ctx, lockRow, actor).Scan(&raw, &last)
		}
		if err != nil {
			return err
		}
		cur, ok, err := decode(actor, raw)
		if err != nil {
			return err
		}
		next, add, err := fn(cur, ok)
		if err != nil {
			return errFn{err}
		}
		if next.ActorID != actor {
			return errFn{fmt.Errorf("pgstate: update of %q returned actor %q", actor, next.ActorID)}
		}
		rec, err := json.Marshal(next)
		if err != nil {
			return err
		}
		changes := make([]string, len(add))
		for i, c := range add {
			b, err := json.Marshal(c)
			if err != nil {
				return err
			}
			changes[i] = string(b)
		}
		newLast := last + int64(len(add))
		b := &pgx.Batch{}
		if s.opts.AsyncCommit {
			b.Queue(`SET LOCAL synchronous_commit = off`)
		}
		b.Queue(`UPDATE state_actors SET state = $2::jsonb, level = $3, version = version + 1, last_seq = $4, updated_at = now()
WHERE actor = $1`, actor, string(rec), next.Level.String(), newLast)
		if len(add) > 0 {
			b.Queue(`INSERT INTO state_changes (actor, seq, change)
SELECT $1, $2 + t.o, t.c::json FROM unnest($3::text[]) WITH ORDINALITY AS t(c, o)`, actor, last, changes)
		}
		if cut := newLast - int64(limit); cut > 0 {
			b.Queue(`DELETE FROM state_changes WHERE actor = $1 AND seq <= $2`, actor, cut)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	var fe errFn
	if errors.As(err, &fe) {
		return fe.err
	}
	if err != nil {
		return fmt.Errorf("pgstate: update %s: %w", actor, err)
	}
	return nil
}

// errFn carries fn's own error through the transaction unwrapped.
type errFn struct{ err error }

func (e errFn) Error() string { return e.err.Error() }

// Actors implements state.Backend.
func (s *Store) Actors(ctx context.Context) ([]string, error) {
	rows, err := s.db.Query(ctx, `SELECT actor FROM state_actors WHERE jsonb_typeof(state) = 'object'`)
	if err != nil {
		return nil, fmt.Errorf("pgstate: actors: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pgstate: actors: %w", err)
	}
	return out, nil
}

// Records implements state.Backend: one scan of state_actors.
func (s *Store) Records(ctx context.Context) (map[string]state.Record, error) {
	rows, err := s.db.Query(ctx, `SELECT actor, state FROM state_actors WHERE jsonb_typeof(state) = 'object'`)
	if err != nil {
		return nil, fmt.Errorf("pgstate: records: %w", err)
	}
	defer rows.Close()
	out := map[string]state.Record{}
	for rows.Next() {
		var actor string
		var raw []byte
		if err := rows.Scan(&actor, &raw); err != nil {
			return nil, fmt.Errorf("pgstate: records: %w", err)
		}
		r, ok, err := decode(actor, raw)
		if err != nil {
			return nil, err
		}
		if ok {
			out[actor] = r
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstate: records: %w", err)
	}
	return out, nil
}

// Forget implements state.Backend; the changes go with the row (ON DELETE
// CASCADE).
func (s *Store) Forget(ctx context.Context, actor string) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM state_actors WHERE actor = $1`, actor); err != nil {
		return fmt.Errorf("pgstate: forget %s: %w", actor, err)
	}
	return nil
}
