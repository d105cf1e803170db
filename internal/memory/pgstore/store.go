// Package pgstore is the PostgreSQL memory.Store (SPEC §4, §9): the rows
// of memory_records, memory_events, memory_rejections and memory_vectors
// are the source of truth, and nothing of the user's memory is written to
// files. Ranking is package search's BM25F, exactly as in the embedded
// store (package sqlitestore): each instance keeps an in-memory index per
// actor, built from the rows, in a bounded LRU cache.
//
// Several instances share one database. Every write of an actor bumps
// memory_actors.version in its own transaction (the row lock orders the
// actor's writers) and stamps the rows it writes with that version; before
// each search an instance reads the actor's version (one primary-key
// lookup) and, when it moved, reads only the rows stamped since, or the
// whole actor after a deletion (reset_version). Memory written on one
// instance is therefore searched on every other at once.
//
// Text columns reject NUL bytes and invalid UTF-8 (PostgreSQL TEXT cannot
// hold them): such input is a memory.ErrInvalidQuery error, never
// silently altered. Timestamps are stored with PostgreSQL's microsecond
// precision; Put and AppendEvents truncate them before storing and return
// the stored values.
package pgstore

import (
	"container/list"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/markdown"
	"github.com/tendrilai/tendril/internal/memory/memindex"
	"github.com/tendrilai/tendril/internal/memory/search"
	"github.com/tendrilai/tendril/internal/pg"
)

//go:embed migrations/*.sql
var migrationsFS embed.FS

// Migrations returns the store's schema scripts ("memory/NNN_name.sql"),
// for pg.Migrate and pg.Status.
func Migrations() []pg.Migration { return pg.FromFS("memory", migrationsFS, "migrations") }

// ErrClosed is returned by every method after Close.
var ErrClosed = errors.New("memory store closed")

// Options configures New. Zero values take the defaults; the fields mean
// what they mean in sqlitestore.Options.
type Options struct {
	// AgentID names the agent in the namespaces of events ("main").
	AgentID string
	// IndexedKeys are the filterable metadata keys (default type, section,
	// plants); at most 10.
	IndexedKeys []memory.IndexedKey
	// EventExpiryDays hides and, with ExpireEvents, deletes events older
	// than this many days (30); negative keeps events forever.
	EventExpiryDays int
	// Ranking selects the ranking parameters; nil = search.DefaultParams.
	Ranking *search.Params
	// PlainDocs indexes events as the single text "(<date>) <speaker>:
	// <text>" (the LoCoMo reference baseline).
	PlainDocs bool
	// Embedder, when set, adds vector similarity fused with BM25F by
	// reciprocal rank fusion; vectors are stored as real[] in
	// memory_vectors, tagged with ModelID(Embedder), and computed by a
	// background worker after each write, never on the write path.
	Embedder search.Embedder
	// QueryEmbedTimeout bounds the query's embedding call of a Search (1s);
	// it also gets at most half the time left before the context's
	// deadline, so a slow embedder leaves the rest of the retrieval budget
	// to BM25F.
	QueryEmbedTimeout time.Duration
	// MaxCachedActors bounds how many actors' rows and ranking indexes stay
	// in memory (256); the least recently used is dropped and reloaded from
	// the database when needed.
	MaxCachedActors int
	// CacheBytes bounds the estimated heap, in bytes, of the cached actors
	// (rows, vectors and ranking indexes; see actorState.estimate): past
	// it the least recently used are dropped as with MaxCachedActors (the
	// most recently used one always stays). 0 means 32 MiB (as sqlitestore); negative
	// means no byte bound.
	CacheBytes int64
	// HotFor protects actors used within this long from the byte budget
	// until the estimated heap reaches 2 × CacheBytes, as in sqlitestore
	// (Options.HotFor there) [5s; negative: CacheBytes is strict].
	HotFor time.Duration
	// Now is the clock (time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Store is the PostgreSQL memory store. It is safe for concurrent use,
// and several Stores (in one or many processes) may share one database.
type Store struct {
	pool   *pgxpool.Pool
	opts   Options
	params search.Params
	closed atomic.Bool

	mu     sync.Mutex // guards lru and actors
	lru    *list.List // of *actorState, most recently used first
	actors map[string]*list.Element

	loads atomic.Int64 // full actor loads, for tests

	// Vectors, with an Embedder (vectors.go): the background worker, the
	// model tag of stored vectors and the last dimension the embedder
	// returned (0: none yet).
	emb   *embedWorker
	model string
	dim   atomic.Int64
}

var (
	_ memory.Store          = (*Store)(nil)
	_ memory.RejectionStore = (*Store)(nil)
	_ memory.Admin          = (*Store)(nil)
)

// actorState is one actor's cached rows and ranking index as of version.
// mu guards everything: searches hold it shared, catch-up exclusively.
type actorState struct {
	id string

	mu      sync.RWMutex
	loaded  bool
	version int64
	records map[string]*memory.Record
	byStrat map[memory.Strategy]map[string]struct{}
	events  map[string]memory.Event
	mds     memindex.MetaInterner // the events' small metadata maps, shared
	usedAt  time.Time             // last cached() call (Options.HotFor); guarded by Store.mu
	vecs    map[string][]float32
	x       *actorIndex // nil until the first ranked search
	// bytes is estimate() as of the last refresh, read by the cache
	// under Store.mu.
	bytes atomic.Int64
}

// New migrates the schema (pg.Migrate with Migrations) and returns a store
// over pool. The pool stays the caller's: Close does not close it.
// Errors: invalid IndexedKeys (memory.ErrInvalidFilter), a failed
// migration.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, errors.New("memory store: nil pool")
	}
	if opts.AgentID == "" {
		opts.AgentID = "main"
	}
	if opts.IndexedKeys == nil {
		opts.IndexedKeys = memory.DefaultIndexedKeys()
	}
	if err := memory.ValidateIndexedKeys(opts.IndexedKeys); err != nil {
		return nil, err
	}
	if opts.EventExpiryDays == 0 {
		opts.EventExpiryDays = 30
	}
	if opts.MaxCachedActors <= 0 {
		opts.MaxCachedActors = 256
	}
	if opts.HotFor == 0 {
		opts.HotFor = 5 * time.Second
	}
	if opts.CacheBytes == 0 {
		opts.CacheBytes = 32 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Store{pool: pool, opts: opts, params: search.DefaultParams(), lru: list.New(), actors: map[string]*list.Element{}}
	if opts.Ranking != nil {
		s.params = *opts.Ranking
	}
	if _, err := pg.Migrate(ctx, pool, Migrations()); err != nil {
		return nil, fmt.Errorf("memory store: %w", err)
	}
	if opts.Embedder != nil {
		s.model = ModelID(opts.Embedder)
		s.startEmbedWorker()
	}
	return s, nil
}

// Close stops the embedding worker (an unfinished pass is picked up
// again by the next instance that writes or loads the actor) and drops
// the caches; the pool is left open.
func (s *Store) Close() error {
	s.closed.Store(true)
	s.stopEmbedWorker()
	s.mu.Lock()
	s.lru.Init()
	s.actors = map[string]*list.Element{}
	s.mu.Unlock()
	return nil
}

// IndexedKeys returns the declared filterable keys.
func (s *Store) IndexedKeys() []memory.IndexedKey { return s.opts.IndexedKeys }

func newID(prefix string) string { return prefix + strings.ToLower(ulid.Make().String()) }

func (s *Store) expired(e memory.Event) bool {
	if s.opts.EventExpiryDays < 0 {
		return false
	}
	return e.Timestamp.Before(s.cutoff())
}

// cutoff is the oldest unexpired event time.
func (s *Store) cutoff() time.Time {
	if s.opts.EventExpiryDays < 0 {
		return time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return s.opts.Now().Add(-time.Duration(s.opts.EventExpiryDays) * 24 * time.Hour)
}

// storable reports whether s can be a key in the database at all; a
// lookup by anything else finds nothing.
func storable(s string) bool { return strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) }

// recordActor derives the owning actor of a namespace (its second segment).
func recordActor(ns string) (string, error) {
	_, actor, ok := memory.NamespaceActor(ns)
	if !ok || actor == "" {
		return "", fmt.Errorf("%w: %q needs /<agent>/<actor>/…", memory.ErrInvalidNamespace, ns)
	}
	return actor, nil
}

func (s *Store) prepare(rec memory.Record) (memory.Record, error) {
	rec, err := memindex.NormalizeRecord(rec, func() string { return newID("mem_") })
	if err != nil {
		return rec, err
	}
	for _, c := range []struct{ f, v string }{{"id", rec.ID}, {"namespace", rec.Namespace}, {"content", rec.Content}} {
		if err := memory.CheckText(c.f, c.v); err != nil {
			return rec, fmt.Errorf("put record: %w", err)
		}
	}
	for _, src := range rec.Sources {
		if err := memory.CheckText("source", src); err != nil {
			return rec, fmt.Errorf("put record: %w", err)
		}
	}
	if err := memory.CheckMetadataText("metadata", rec.Metadata); err != nil {
		return rec, fmt.Errorf("put record: %w", err)
	}
	rec = memindex.DefaultTimes(rec, s.opts.Now().UTC())
	rec.CreatedAt, rec.UpdatedAt = pgTime(rec.CreatedAt), pgTime(rec.UpdatedAt)
	rec.Sources = append([]string(nil), rec.Sources...)
	return rec, nil
}

// pgTime is t as TIMESTAMPTZ keeps it: UTC, whole microseconds.
func pgTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// bump takes the next version for actor inside tx (creating its row),
// holding the row lock until tx ends; reset also marks a deletion, so
// caches older than it reload the actor.
func bump(ctx context.Context, tx pgx.Tx, actor string, reset bool) (int64, error) {
	var v, r int64
	err := tx.QueryRow(ctx, `INSERT INTO memory_actors AS a (actor, version, reset_version) VALUES ($1, nextval('memory_version_seq'), 0)
ON CONFLICT (actor) DO UPDATE SET version = nextval('memory_version_seq') RETURNING version, reset_version`, actor).Scan(&v, &r)
	if err != nil {
		return 0, fmt.Errorf("memory version %q: %w", actor, err)
	}
	if r == 0 || reset {
		if _, err := tx.Exec(ctx, `UPDATE memory_actors SET reset_version = version WHERE actor = $1`, actor); err != nil {
			return 0, fmt.Errorf("memory version %q: %w", actor, err)
		}
	}
	return v, nil
}

// Put implements memory.Store.
func (s *Store) Put(ctx context.Context, rec memory.Record) (memory.Record, error) {
	recs, err := s.PutBatch(ctx, []memory.Record{rec})
	if err != nil {
		return memory.Record{}, err
	}
	return recs[0], nil
}

// PutBatch stores many records in one transaction: Put for each (the last
// version of a repeated ID wins). An ID owned by another actor's record or
// event is memory.ErrInvalidQuery and writes nothing.
func (s *Store) PutBatch(ctx context.Context, recs []memory.Record) ([]memory.Record, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	out := make([]memory.Record, 0, len(recs))
	actorOf := make([]string, len(recs))
	byActor := map[string]bool{}
	var check []string
	for i, r := range recs {
		p, err := s.prepare(r)
		if err != nil {
			return nil, err
		}
		actor, err := recordActor(p.Namespace)
		if err != nil {
			return nil, fmt.Errorf("put record: %w", err)
		}
		if r.ID != "" {
			check = append(check, p.ID)
		}
		actorOf[i] = actor
		byActor[actor] = true
		out = append(out, p)
	}
	if len(out) == 0 {
		return out, nil
	}
	order := make([]string, 0, len(byActor))
	for a := range byActor {
		order = append(order, a)
	}
	sort.Strings(order) // row locks are taken in this order
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("put record: %w", err)
	}
	defer tx.Rollback(ctx)
	version := map[string]int64{}
	for _, a := range order {
		if version[a], err = bump(ctx, tx, a, false); err != nil {
			return nil, err
		}
	}
	if len(check) > 0 {
		type old struct {
			actor   string
			created time.Time
			record  bool
		}
		existing := map[string]old{}
		rows, err := tx.Query(ctx, `SELECT id, actor, created_at, true FROM memory_records WHERE id = ANY($1)
UNION ALL SELECT id, actor, ts, false FROM memory_events WHERE id = ANY($1)`, check)
		if err != nil {
			return nil, fmt.Errorf("put record: %w", err)
		}
		for rows.Next() {
			var id string
			var o old
			if err := rows.Scan(&id, &o.actor, &o.created, &o.record); err != nil {
				rows.Close()
				return nil, fmt.Errorf("put record: %w", err)
			}
			if prev, ok := existing[id]; !ok || !prev.record {
				existing[id] = o
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("put record: %w", err)
		}
		for i, r := range out {
			o, ok := existing[r.ID]
			if !ok {
				continue
			}
			if o.actor != actorOf[i] {
				return nil, fmt.Errorf("put record %s: %w: id belongs to another actor", r.ID, memory.ErrInvalidQuery)
			}
			if !o.record {
				continue
			}
			if r.CreatedAt.IsZero() || recs[i].CreatedAt.IsZero() {
				r.CreatedAt = o.created.UTC()
			}
			if recs[i].UpdatedAt.IsZero() {
				r.UpdatedAt = pgTime(s.opts.Now())
			}
			out[i] = r
		}
	}
	b := &pgx.Batch{}
	for i, r := range out {
		md, err := metadataJSON(r.Metadata)
		if err != nil {
			return nil, fmt.Errorf("put record %s: %w", r.ID, err)
		}
		src := r.Sources
		if src == nil {
			src = []string{}
		}
		b.Queue(`INSERT INTO memory_records (id, actor, namespace, strategy, status, content, metadata, created_at, updated_at, sources, importance, version)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT (id) DO UPDATE SET namespace = EXCLUDED.namespace, strategy = EXCLUDED.strategy, status = EXCLUDED.status,
  content = EXCLUDED.content, metadata = EXCLUDED.metadata, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at,
  sources = EXCLUDED.sources, importance = EXCLUDED.importance, version = EXCLUDED.version
WHERE memory_records.actor = EXCLUDED.actor`,
			r.ID, actorOf[i], r.Namespace, string(r.Strategy), string(r.Status), r.Content, md, r.CreatedAt, r.UpdatedAt, src, r.Importance, version[actorOf[i]])
	}
	br := tx.SendBatch(ctx, b)
	for _, r := range out {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return nil, fmt.Errorf("put record %s: %w", r.ID, err)
		}
		if tag.RowsAffected() == 0 { // a concurrent write of another actor took the ID
			br.Close()
			return nil, fmt.Errorf("put record %s: %w: id belongs to another actor", r.ID, memory.ErrInvalidQuery)
		}
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("put record: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("put record: %w", err)
	}
	s.scheduleEmbed(order...) // vectors follow in the background
	return out, nil
}

func metadataJSON(md map[string]any) ([]byte, error) {
	if len(md) == 0 {
		return nil, nil
	}
	return json.Marshal(markdown.EncodeMetadata(md))
}

func decodeMetadata(b []byte) map[string]any {
	if len(b) == 0 {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil || len(m) == 0 {
		return nil
	}
	return markdown.DecodeMetadata(m)
}

const recordCols = `id, namespace, strategy, status, content, metadata, created_at, updated_at, sources, importance`

func scanRecord(row pgx.Row) (memory.Record, error) {
	var r memory.Record
	var md []byte
	var strat, status string
	if err := row.Scan(&r.ID, &r.Namespace, &strat, &status, &r.Content, &md, &r.CreatedAt, &r.UpdatedAt, &r.Sources, &r.Importance); err != nil {
		return r, err
	}
	r.Strategy, r.Status = memory.Strategy(strat), memory.Status(status)
	r.Metadata = decodeMetadata(md)
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	if len(r.Sources) == 0 {
		r.Sources = nil
	}
	return r, nil
}

const eventCols = `id, actor, session, role, text, ts, metadata`

func scanEvent(row pgx.Row) (memory.Event, error) {
	var e memory.Event
	var md []byte
	if err := row.Scan(&e.ID, &e.ActorID, &e.SessionID, &e.Role, &e.Text, &e.Timestamp, &md); err != nil {
		return e, err
	}
	e.Timestamp = e.Timestamp.UTC()
	e.Metadata = decodeMetadata(md)
	return e, nil
}

// Get implements memory.Store. Event IDs return the (unexpired) event as
// an episodic record. Unknown IDs are memory.ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (memory.Record, error) {
	if s.closed.Load() {
		return memory.Record{}, ErrClosed
	}
	if storable(id) {
		r, err := scanRecord(s.pool.QueryRow(ctx, `SELECT `+recordCols+` FROM memory_records WHERE id = $1`, id))
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return memory.Record{}, fmt.Errorf("get %q: %w", id, err)
		}
		e, err := scanEvent(s.pool.QueryRow(ctx, `SELECT `+eventCols+` FROM memory_events WHERE id = $1 AND ts >= $2`, id, s.cutoff()))
		if err == nil {
			return s.eventRecord(e), nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return memory.Record{}, fmt.Errorf("get %q: %w", id, err)
		}
	}
	return memory.Record{}, fmt.Errorf("get %q: %w", id, memory.ErrNotFound)
}

// AppendEvents implements memory.Store: the events of every actor are
// written in one transaction. Missing IDs and timestamps are filled in; an
// event whose ID is already stored for the same actor is skipped
// (idempotent retries); an ID owned by anything else is
// memory.ErrInvalidQuery and writes nothing.
func (s *Store) AppendEvents(ctx context.Context, events []memory.Event) error {
	if len(events) == 0 {
		return nil
	}
	if s.closed.Load() {
		return ErrClosed
	}
	var evs []memory.Event
	var check []string
	for _, e := range events {
		if e.ActorID == "" {
			return fmt.Errorf("append events: %w: empty actor", memory.ErrInvalidQuery)
		}
		if e.ID == "" {
			e.ID = newID("ev_")
		} else {
			check = append(check, e.ID)
		}
		ne, err := memindex.NormalizeEvent(e, s.opts.Now)
		if err != nil {
			return err
		}
		e = ne
		e.Timestamp = pgTime(e.Timestamp)
		for _, c := range []struct{ f, v string }{{"id", e.ID}, {"actor", e.ActorID}, {"session", e.SessionID}, {"role", e.Role}, {"text", e.Text}} {
			if err := memory.CheckText(c.f, c.v); err != nil {
				return fmt.Errorf("append events: %w", err)
			}
		}
		if err := memory.CheckMetadataText("metadata", e.Metadata); err != nil {
			return fmt.Errorf("append events: %w", err)
		}
		evs = append(evs, e)
	}
	owner := map[string]string{}
	own := map[string]bool{} // an event of the same actor: skipped
	if len(check) > 0 {
		rows, err := s.pool.Query(ctx, `SELECT id, actor, false FROM memory_records WHERE id = ANY($1)
UNION ALL SELECT id, actor, true FROM memory_events WHERE id = ANY($1)`, check)
		if err != nil {
			return fmt.Errorf("append events: %w", err)
		}
		for rows.Next() {
			var id, actor string
			var ev bool
			if err := rows.Scan(&id, &actor, &ev); err != nil {
				rows.Close()
				return fmt.Errorf("append events: %w", err)
			}
			if ev {
				own[id+"\x00"+actor] = true
			}
			if _, ok := owner[id]; !ok || !ev {
				owner[id] = actor
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("append events: %w", err)
		}
	}
	var fresh []memory.Event
	seen := map[string]bool{}
	actors := map[string]bool{}
	for _, e := range evs {
		if seen[e.ID] || own[e.ID+"\x00"+e.ActorID] {
			continue
		}
		if owner[e.ID] != "" {
			return fmt.Errorf("append event %s: %w: id belongs to another actor or a record", e.ID, memory.ErrInvalidQuery)
		}
		seen[e.ID] = true
		actors[e.ActorID] = true
		fresh = append(fresh, e)
	}
	if len(fresh) == 0 {
		return nil
	}
	order := make([]string, 0, len(actors))
	for a := range actors {
		order = append(order, a)
	}
	sort.Strings(order)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("append events: %w", err)
	}
	defer tx.Rollback(ctx)
	version := map[string]int64{}
	for _, a := range order {
		if version[a], err = bump(ctx, tx, a, false); err != nil {
			return err
		}
	}
	rows := make([][]any, 0, len(fresh))
	for _, e := range fresh {
		md, err := metadataJSON(e.Metadata)
		if err != nil {
			return fmt.Errorf("append event %s: %w", e.ID, err)
		}
		rows = append(rows, []any{e.ID, e.ActorID, e.SessionID, e.Role, e.Text, e.Timestamp, md, version[e.ActorID]})
	}
	b := &pgx.Batch{}
	for _, r := range rows {
		b.Queue(`INSERT INTO memory_events (id, actor, session, role, text, ts, metadata, version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (id) DO NOTHING`, r...)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("append events: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("append events: %w", err)
	}
	s.scheduleEmbed(order...) // vectors follow in the background
	return nil
}

// Events implements memory.Store: the actor's unexpired events, oldest
// first (timestamp, then ID); sessionID "" means every session.
func (s *Store) Events(ctx context.Context, actorID, sessionID string) ([]memory.Event, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if !storable(actorID) || !storable(sessionID) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+eventCols+` FROM memory_events WHERE actor = $1 AND ($2 = '' OR session = $2) AND ts >= $3`, actorID, sessionID, s.cutoff())
	if err != nil {
		return nil, fmt.Errorf("events %q: %w", actorID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (memory.Event, error) { return scanEvent(r) })
	if err != nil {
		return nil, fmt.Errorf("events %q: %w", actorID, err)
	}
	markdown.SortEvents(out)
	return out, nil
}

// ExpireEvents deletes events older than EventExpiryDays (and their
// vectors) and returns how many went; each actor touched gets a reset
// version so every instance reloads it.
func (s *Store) ExpireEvents(ctx context.Context) (int, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if s.opts.EventExpiryDays < 0 {
		return 0, nil
	}
	cut := s.cutoff()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("expire events: %w", err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, `SELECT DISTINCT actor FROM memory_events WHERE ts < $1`, cut)
	if err != nil {
		return 0, fmt.Errorf("expire events: %w", err)
	}
	actors, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("expire events: %w", err)
	}
	sort.Strings(actors)
	for _, a := range actors {
		if _, err := bump(ctx, tx, a, true); err != nil {
			return 0, err
		}
	}
	var n int
	err = tx.QueryRow(ctx, `WITH gone AS (DELETE FROM memory_events WHERE ts < $1 AND actor = ANY($2) RETURNING id),
vec AS (DELETE FROM memory_vectors WHERE id IN (SELECT id FROM gone))
SELECT count(*) FROM gone`, cut, actors).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("expire events: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("expire events: %w", err)
	}
	return n, nil
}

// Forget implements memory.Store: every row of actorID — events, records
// of any status (staged included), rejections, vectors and the version
// row — goes in one transaction, under every agent (memory is kept per
// actor); agentID is only logged. Other instances see the actor gone at
// their next version check.
func (s *Store) Forget(ctx context.Context, agentID, actorID string) error {
	if actorID == "" {
		return fmt.Errorf("forget: %w: empty actor", memory.ErrInvalidQuery)
	}
	if s.closed.Load() {
		return ErrClosed
	}
	if !storable(actorID) {
		return nil // nothing can be stored under it
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("forget %s: %w", actorID, err)
	}
	defer tx.Rollback(ctx)
	// Lock the version row first so no write of the actor interleaves.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM memory_actors WHERE actor = $1 FOR UPDATE`, actorID); err != nil {
		return fmt.Errorf("forget %s: %w", actorID, err)
	}
	for _, q := range []string{`DELETE FROM memory_records WHERE actor = $1`, `DELETE FROM memory_events WHERE actor = $1`,
		`DELETE FROM memory_rejections WHERE actor = $1`, `DELETE FROM memory_vectors WHERE actor = $1`, `DELETE FROM memory_actors WHERE actor = $1`} {
		if _, err := tx.Exec(ctx, q, actorID); err != nil {
			return fmt.Errorf("forget %s: %w", actorID, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("forget %s: %w", actorID, err)
	}
	s.drop(actorID)
	s.opts.Logger.Info("memory forgotten", "agent", agentID, "actor", actorID)
	return nil
}

// IsRejected implements memory.RejectionStore.
func (s *Store) IsRejected(ctx context.Context, actorID, content string) (bool, error) {
	if s.closed.Load() {
		return false, ErrClosed
	}
	if !storable(actorID) {
		return false, nil
	}
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM memory_rejections WHERE actor = $1 AND hash = $2)`, actorID, memory.ContentHash(content)).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("is rejected: %w", err)
	}
	return ok, nil
}

// MarkRejected implements memory.RejectionStore: content's hash is kept in
// memory_rejections.
func (s *Store) MarkRejected(ctx context.Context, actorID, content string) error {
	if actorID == "" {
		return fmt.Errorf("mark rejected: %w: empty actor", memory.ErrInvalidQuery)
	}
	if err := memory.CheckText("actor", actorID); err != nil {
		return fmt.Errorf("mark rejected: %w", err)
	}
	if s.closed.Load() {
		return ErrClosed
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("mark rejected: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := bump(ctx, tx, actorID, false); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO memory_rejections (actor, hash) VALUES ($1, $2) ON CONFLICT DO NOTHING`, actorID, memory.ContentHash(content)); err != nil {
		return fmt.Errorf("mark rejected: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("mark rejected: %w", err)
	}
	return nil
}

// Actors lists every actor with memory (records, events or rejections),
// sorted by byte order.
func (s *Store) Actors(ctx context.Context) ([]string, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	rows, err := s.pool.Query(ctx, `SELECT actor FROM memory_actors`)
	if err != nil {
		return nil, fmt.Errorf("memory actors: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("memory actors: %w", err)
	}
	sort.Strings(out)
	return out, nil
}

// Rebuild drops this instance's caches and reloads every actor from the
// rows (the database is the source of truth). With an Embedder it first
// drops every stored vector and queues every actor for re-embedding: the
// vectors are recomputed by the background worker after Rebuild returns
// (logged when done); until then searches rank those documents by BM25F
// alone. progress, when non-nil, sees (done, total) actors.
func (s *Store) Rebuild(ctx context.Context, progress func(done, total int)) error {
	ids, err := s.Actors(ctx)
	if err != nil {
		return err
	}
	if s.emb != nil && len(ids) > 0 {
		if err := s.reembedAll(ctx, ids); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.lru.Init()
	s.actors = map[string]*list.Element{}
	s.mu.Unlock()
	for i, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.Prepare(ctx, id); err != nil {
			return err
		}
		if progress != nil {
			progress(i+1, len(ids))
		}
	}
	return nil
}

// ExportMarkdown writes every actor's layer files, rendered by package
// markdown from the rows exactly as the embedded store writes them, under
// dir (<dir>/<encoded actor>/…), and returns the number of files. Each
// actor is read in one snapshot.
func (s *Store) ExportMarkdown(ctx context.Context, dir string) (int, error) {
	ids, err := s.Actors(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		enc, err := markdown.EncodeActor(id)
		if err != nil {
			return n, fmt.Errorf("export %q: %w", id, err)
		}
		recs, evs, rej, err := s.readActor(ctx, id)
		if err != nil {
			return n, err
		}
		for rel, data := range markdown.Render(id, recs, evs, rej) {
			if err := markdown.WriteFileAtomic(filepath.Join(dir, enc, rel), data); err != nil {
				return n, fmt.Errorf("export: %w", err)
			}
			n++
		}
	}
	return n, nil
}

// readActor reads all of an actor's records, unexpired events and
// rejection hashes in one snapshot.
func (s *Store) readActor(ctx context.Context, actor string) ([]memory.Record, []memory.Event, []string, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read memory %q: %w", actor, err)
	}
	defer tx.Rollback(ctx)
	recs, evs, err := s.readRows(ctx, tx, actor, 0)
	if err != nil {
		return nil, nil, nil, err
	}
	rows, err := tx.Query(ctx, `SELECT hash FROM memory_rejections WHERE actor = $1`, actor)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read memory %q: %w", actor, err)
	}
	rej, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read memory %q: %w", actor, err)
	}
	return recs, evs, rej, nil
}

// readRows reads the actor's records and unexpired events stamped with a
// version above since (0: all).
func (s *Store) readRows(ctx context.Context, tx pgx.Tx, actor string, since int64) ([]memory.Record, []memory.Event, error) {
	rows, err := tx.Query(ctx, `SELECT `+recordCols+` FROM memory_records WHERE actor = $1 AND version > $2`, actor, since)
	if err != nil {
		return nil, nil, fmt.Errorf("read memory %q: %w", actor, err)
	}
	recs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (memory.Record, error) { return scanRecord(r) })
	if err != nil {
		return nil, nil, fmt.Errorf("read memory %q: %w", actor, err)
	}
	rows, err = tx.Query(ctx, `SELECT `+eventCols+` FROM memory_events WHERE actor = $1 AND version > $2 AND ts >= $3`, actor, since, s.cutoff())
	if err != nil {
		return nil, nil, fmt.Errorf("read memory %q: %w", actor, err)
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (memory.Event, error) { return scanEvent(r) })
	if err != nil {
		return nil, nil, fmt.Errorf("read memory %q: %w", actor, err)
	}
	return recs, evs, nil
}
