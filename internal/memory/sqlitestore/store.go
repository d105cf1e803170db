// Package sqlitestore is the embedded memory.Store: Markdown layer files
// under <home>/memory/ are the source of truth (package markdown) and a
// SQLite database (modernc.org/sqlite, pure Go) at <home>/index/memory.db is
// a rebuildable index of their rows. Ranking runs in package search over an
// in-memory BM25F index per actor, built from the SQLite rows on the first
// ranked search and then updated in place by every write (documents added,
// changed ones retired and re-added, corpus statistics kept exact), so
// corpus statistics never mix actors and an index built from scratch, or
// after Rebuild, gives identical results. The index database also holds
// an FTS5 full-text table (memory_fts, see ftsSchema) written in the same
// transactions as the rows; Options.Engine or SearchEngine with
// EngineFTS5 ranks with its bm25() instead.
package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"runtime/trace"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unique"

	"github.com/oklog/ulid/v2"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/markdown"
	"github.com/tendrilai/tendril/internal/memory/memindex"
	"github.com/tendrilai/tendril/internal/memory/search"
	"github.com/tendrilai/tendril/internal/sqlitewal"
)

// Options configures Open. Zero values take the defaults.
type Options struct {
	// AgentID names the agent in namespaces of events and hand-written
	// records ("main").
	AgentID string
	// IndexedKeys are the filterable metadata keys (default type, section,
	// plants); at most 10.
	IndexedKeys []memory.IndexedKey
	// EventExpiryDays drops events older than this many days (30); a
	// negative value keeps events forever (used by evaluation).
	EventExpiryDays int
	// SyncInterval is the least time between automatic checks of the
	// Markdown files for hand edits before a search (1s); negative turns
	// automatic checks off (call Sync).
	SyncInterval time.Duration
	// Ranking selects the ranking parameters; nil = search.DefaultParams.
	Ranking *search.Params
	// Engine is the ranking engine of Search: EngineBM25F ("" too, the
	// default) or EngineFTS5 (SQLite FTS5 bm25()). SearchEngine picks one
	// per call.
	Engine Engine
	// PlainDocs indexes events as the single text "(<date>) <speaker>: <text>"
	// as in the LoCoMo reference baseline, instead of separate fields.
	PlainDocs bool
	// Embedder, when set, adds vector similarity fused with BM25 by
	// reciprocal rank fusion. Off by default.
	Embedder search.Embedder
	// QueryEmbedTimeout bounds the query's embedding call of a Search (1s);
	// it also never takes more than half of the time left before the
	// search context's deadline (the retrieval budget, memory.retrieveTimeout).
	// On timeout or error the search ranks with BM25F alone. Documents are
	// embedded in the background after each write, never on the turn.
	QueryEmbedTimeout time.Duration
	// Now is the clock (time.Now).
	Now    func() time.Time
	Logger *slog.Logger
	// NoFsync skips fsync on appends (bulk loads and evaluation).
	NoFsync bool
	// FsyncEvery, when positive, makes appends to the Markdown files
	// durable in the background at most this long after they were written
	// (config session.fsync "batch"; the default 0 fsyncs each append
	// before the index is written). A machine crash (not a process
	// crash: the kernel keeps what was written) can then lose up to this
	// long of appends; the session, which holds the same turns, is on the
	// same policy. Close makes everything durable.
	FsyncEvery time.Duration
	// MaxCachedActors bounds how many actors' records, events and ranking
	// indexes stay in memory (1000); the least recently used is dropped and
	// reloaded from the index when needed.
	MaxCachedActors int
	// CacheBytes bounds the estimated heap, in bytes, of the actors held
	// in memory (their records, events and ranking indexes; see
	// eventBytes, recordBytes, docBytes): past it the least recently used
	// idle actors are dropped and rebuilt from the index on their next
	// use (the most recently used one always stays). 0 means
	// DefaultCacheBytes; negative means no byte bound (MaxCachedActors
	// alone).
	CacheBytes int64
	// HotFor protects actors used within this long from the byte budget
	// until the estimated heap reaches 2 × CacheBytes: when more actors
	// are in active use than fit (16 actors talking at once, each with
	// thousands of events), a strict budget evicts an actor only to
	// rebuild it on its next turn (tens of ms of CPU per 1,000 events,
	// every turn); the budget then holds again once they fall quiet
	// [5s; negative: no protection, CacheBytes is strict].
	HotFor time.Duration
	// EventWindow is how many of an actor's newest events stay in memory
	// and in the in-memory BM25F index (DefaultEventWindow); older ones
	// are searched through SQLite FTS5 and merged by score (tier.go).
	// Negative: every event stays in memory.
	EventWindow int
	// RecordWindow is how many of an actor's records stay in memory and
	// in the in-memory BM25F index (DefaultRecordWindow), narrowed under
	// CacheBytes once the events are at their narrowest; the rest are
	// cold, read from SQLite when needed and searched through FTS5 with
	// the cold events (rtier.go). Negative: every record stays in memory.
	RecordWindow int
}

// DefaultHotFor is Options.HotFor when unset.
const DefaultHotFor = 5 * time.Second

// DefaultCacheBytes is Options.CacheBytes when unset: 32 MiB, about
// 30,000 events with their index, so that the heap stays well within
// 150 MiB of resident memory with the Go collector's default headroom
// (issue 14).
const DefaultCacheBytes = 32 << 20

// Store is the embedded memory store. It is safe for concurrent use.
//
// Locking: ordinary operations hold gate shared; operations that replace
// whole actors (Sync reloads, Rebuild, Forget, ExpireEvents, ExportMarkdown,
// Close) hold it exclusively. mu guards only the actor cache. Each actor
// has its own writer lock (held across the Markdown append, fsync and index
// transaction, so writes of one actor stay ordered) and a read-write lock
// over its in-memory state (writers hold it only to apply a change that is
// already durable), so searches of one actor never wait for another
// actor's work or for any fsync.
type Store struct {
	home, dir string
	// db is the index's one writer connection; rdb is a pool of
	// query_only connections for the searches and checks on a turn's path
	// (cold search, owners), which in WAL mode read the last committed
	// snapshot without waiting for the writer (https://sqlite.org/wal.html#concurrency).
	db, rdb *sql.DB
	opts    Options
	params  search.Params
	// legacy drops the ranking index on every write and lists through it
	// (the behaviour before incremental indexing), for benchmarks.
	legacy bool

	gate   sync.RWMutex
	closed bool // written under gate exclusively

	// stmts and rstmts hold the prepared statements of the short queries
	// run on every turn, by text, on db and rdb.
	stmtMu sync.Mutex
	stmts  map[string]*sql.Stmt
	rstmts map[string]*sql.Stmt

	// emb is the background embedding worker (nil without an Embedder).
	emb *embedWorker

	mu       sync.Mutex
	actors   map[string]*actorState
	lastSync time.Time
	// warnings collects the Markdown warnings of a Rebuild (nil outside
	// one); guarded by gate held exclusively.
	warnings  []string
	actorSync map[string]time.Time // last per-actor Markdown check
	tick      uint64

	evictions int    // actors dropped by evictLocked; guarded by mu
	loads     uint64 // actor states created by acquire (each loads its actor); guarded by mu

	// ftsRows estimates the rows of the full-text index, every actor's
	// (counted at Open, plus the rows written since): whether a query
	// names its actor inside FTS5, and how many rows its words' matches
	// are estimated over, depend on it (ftsScope).
	ftsRows atomic.Int64
	// coldScans counts the scans of an actor's cold history for its
	// cold scopes (scanColdScopes), for tests.
	coldScans atomic.Int64
	// coldRecordReads counts the reads of cold records from SQLite
	// (recordsOf, coldRecords), for tests.
	coldRecordReads atomic.Int64

	ftsStmts [ftsCached + 1]*sql.Stmt // prepared fts_docs upserts by row count, set by Open

	// dirtyMu guards dirty: Markdown files appended and not yet fsynced
	// (Options.FsyncEvery); flushStop and flushDone end the flusher.
	dirtyMu   sync.Mutex
	dirty     map[string]struct{}
	flushStop chan struct{}
	flushDone chan struct{}
	// ckpt checkpoints memory.db's write-ahead log off the writers' path.
	ckpt *sqlitewal.Checkpointer

	// owedMu guards owed: the size and mtime of Markdown files appended by
	// event writes whose files rows are not written yet (oweFiles).
	owedMu sync.Mutex
	owed   map[string]owedFile // "enc/rel" → stat
	// testHooks run at points of the background work where tests need
	// it to pause (nil in production).
	testHooks struct {
		compactBuilt   func()       // compact: built, before taking a.wmu
		demotionPicked func()       // demote: events picked, a.wmu released
		demotionChunk  func() error // writeDemotion: after each transaction but the last; an error stops it there
	}
}

// owedFile is a files row not yet written.
type owedFile struct {
	actor string
	st    fileStat
}

var (
	_ memory.Store          = (*Store)(nil)
	_ memory.RejectionStore = (*Store)(nil)
)

type actorState struct {
	id  string
	enc string

	// wmu serialises the writers of this actor.
	wmu sync.Mutex
	// dmu serialises the demotions of this actor (tier.go), which hold
	// wmu only in part; order: dmu before wmu.
	dmu sync.Mutex
	// qmu guards evq, the event batches waiting for a group commit.
	qmu sync.Mutex
	evq []*evBatch
	// mu guards records, byStrat, events and rejected: reads hold it
	// shared, writers exclusively (and only while applying a durable
	// change). Writers, holding wmu, may read the maps without it.
	mu       sync.RWMutex
	records  map[string]*memory.Record               // never changed in place: the index shares them
	byStrat  map[memory.Strategy]map[string]struct{} // record IDs by strategy (listings)
	events   map[string]memory.Event
	rejected map[string]bool
	// The ranking index is kept twice (left-right): searches read the
	// active copy under its read lock and never wait for a change, which
	// is applied to the inactive copy, made active, then applied to the
	// other once its last readers leave. ixw serialises changes. Both
	// copies are nil until the first ranked search. Order: ixw, mu, slot
	// locks (no slot lock is held while taking mu).
	ixw    sync.Mutex
	slots  [2]ixSlot
	active atomic.Int32

	// ftsBehind is set when events were indexed without their full-text
	// rows (see writeEvents); ftsCatchUp clears it. ftsChecked is set once
	// ftsCatchUp has looked for rows missing since before this process.
	ftsBehind  atomic.Bool
	ftsChecked atomic.Bool

	// compacting is set while compactSoon rebuilds the ranking index.
	compacting atomic.Bool
	// demoting is set while demoteSoon moves old events out of memory.
	demoting atomic.Bool
	// coldTo is the rowid of a's newest cold event (0: none; tier.go).
	// Written with wmu and mu held.
	coldTo int64
	// recCold counts a's cold records (rtier.go: in SQLite, not in
	// records) by namespace, strategy and status. Written with wmu and mu
	// held.
	recCold coldCounts
	// coldN is how many cold events a has (an estimate after expiry:
	// cold searches size their term budget by it). Guarded like coldTo.
	coldN int
	// coldMaxTS is the latest timestamp among a's cold events (a
	// superset after expiry). Guarded like coldTo.
	coldMaxTS time.Time
	// coldNS holds the namespaces of a's cold events (a superset after
	// expiry), nil until needed (coldScope); guarded like coldTo, and by
	// coldNSMu for its lazy fill under a shared a.mu.
	coldNSMu sync.Mutex
	coldNS   map[string]bool

	once    sync.Once // loads the state from the index
	loadErr error

	used   uint64    // Store.tick at last use, for eviction; guarded by Store.mu
	usedAt time.Time // when it was last acquired (Options.HotFor); guarded by Store.mu
	refs   int       // operations using the state; guarded by Store.mu

	// mapBytes estimates the heap of records, byStrat, events and
	// rejected (eventBytes, recordBytes), ixBytes that of the ranking
	// index (actorIndex.bytes, 0 when not built): the actor's share of
	// Options.CacheBytes. Written with mu or ixw held, read by eviction.
	mapBytes, ixBytes atomic.Int64
	// strs interns the sessions and roles of the actor's events, so each
	// is held once (guarded like events).
	strs map[string]string
	// mds interns the actor's small event metadata maps (guarded like
	// events).
	mds memindex.MetaInterner
}

// bytes is a's estimated heap (see mapBytes).
func (a *actorState) bytes() int64 { return a.mapBytes.Load() + a.ixBytes.Load() }

// intern returns the actor's copy of str. The caller holds a.mu
// exclusively or has a to itself.
func (a *actorState) intern(str string) string {
	if v, ok := a.strs[str]; ok {
		return v
	}
	if a.strs == nil {
		a.strs = map[string]string{}
	}
	a.strs[str] = str
	return str
}

// putEvent stores e (its actor, session and role interned) in a's events.
// The caller holds a.mu exclusively or has a to itself.
func (a *actorState) putEvent(e memory.Event) {
	e.ActorID, e.SessionID, e.Role = a.id, a.intern(e.SessionID), a.intern(e.Role)
	e.Metadata = a.mds.Intern(e.Metadata)
	if old, ok := a.events[e.ID]; ok {
		a.mapBytes.Add(-eventBytes(old))
	}
	a.events[e.ID] = e
	a.mapBytes.Add(eventBytes(e))
}

// eventBytes estimates the heap an event holds in actorState.events: the
// map slot (key and memory.Event, at the map's load), its ID and text, and
// its metadata. Sessions, roles and small metadata maps are interned
// (memindex.MetaInterner) and not counted.
func eventBytes(e memory.Event) int64 {
	n := 224 + int64(len(e.ID)+len(e.Text))
	if !memindex.Internable(e.Metadata) {
		n += metaBytes(e.Metadata)
	}
	return n
}

// recordBytes estimates the heap a record holds in actorState.records and
// byStrat.
func recordBytes(r memory.Record) int64 {
	n := 320 + int64(len(r.ID)+len(r.Namespace)+len(r.Content)) + metaBytes(r.Metadata)
	for _, src := range r.Sources {
		n += 16 + int64(len(src))
	}
	return n
}

// metaBytes estimates the heap of a metadata map: a Go map of up to 8
// entries is its header and one group of 8 slots (key and value, 32 bytes
// each) whatever its length, about 336 bytes; each value boxed in its
// interface adds 16 (BenchmarkRecordHeap measures the result).
func metaBytes(md map[string]any) int64 {
	if len(md) == 0 {
		return 0
	}
	n := int64(336)
	if len(md) > 8 {
		n += int64(len(md)-8) * 40
	}
	for k, v := range md {
		n += 16 + int64(len(k))
		if str, ok := v.(string); ok {
			n += int64(len(str))
		}
	}
	return n
}

const schema = `
CREATE TABLE IF NOT EXISTS records(
  id TEXT PRIMARY KEY, actor TEXT NOT NULL, namespace TEXT NOT NULL, strategy TEXT NOT NULL,
  status TEXT NOT NULL, content TEXT NOT NULL, metadata TEXT, created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL, sources TEXT, importance REAL NOT NULL);
CREATE INDEX IF NOT EXISTS records_actor ON records(actor);
CREATE TABLE IF NOT EXISTS events(
  id TEXT PRIMARY KEY, actor TEXT NOT NULL, session TEXT NOT NULL, role TEXT NOT NULL,
  text TEXT NOT NULL, ts TEXT NOT NULL, metadata TEXT);
CREATE INDEX IF NOT EXISTS events_actor ON events(actor);
CREATE TABLE IF NOT EXISTS rejections(actor TEXT NOT NULL, hash TEXT NOT NULL, PRIMARY KEY(actor, hash));
CREATE TABLE IF NOT EXISTS files(path TEXT PRIMARY KEY, actor TEXT NOT NULL, size INTEGER NOT NULL, mtime INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS vectors(id TEXT PRIMARY KEY, actor TEXT NOT NULL, vec BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS vectors_actor ON vectors(actor);
` + tierSchema

// Open opens (creating if needed) the store under home: Markdown in
// <home>/memory/, the index in <home>/index/memory.db. Markdown changed
// since the index was written is re-read before Open returns.
func Open(home string, opts Options) (*Store, error) {
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
	if opts.SyncInterval == 0 {
		opts.SyncInterval = time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxCachedActors <= 0 {
		opts.MaxCachedActors = 1000
	}
	if opts.HotFor == 0 {
		opts.HotFor = DefaultHotFor
	}
	if opts.CacheBytes == 0 {
		opts.CacheBytes = DefaultCacheBytes
	}
	if opts.RecordWindow == 0 {
		opts.RecordWindow = DefaultRecordWindow
	}
	if opts.EventWindow == 0 {
		opts.EventWindow = DefaultEventWindow
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Store{home: home, dir: filepath.Join(home, "memory"), opts: opts, actors: map[string]*actorState{}, actorSync: map[string]time.Time{}}
	if _, err := ParseEngine(string(opts.Engine)); err != nil {
		return nil, fmt.Errorf("open memory: %w", err)
	}
	s.params = search.DefaultParams()
	if opts.Ranking != nil {
		s.params = *opts.Ranking
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("open memory: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(home, "index"), 0o700); err != nil {
		return nil, fmt.Errorf("open memory: %w", err)
	}
	dbPath := filepath.Join(home, "index", "memory.db")
	if err := createIndexFile(dbPath); err != nil {
		return nil, fmt.Errorf("open memory index: %w", err)
	}
	dsn := sqlitewal.FileURI(dbPath) + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)" + sqlitewal.WriterPragmas(walCheckpointBytes, indexPageSize)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open memory index: %w", err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("create memory index: %w", err)
	}
	rdb, err := sql.Open("sqlite", dsn+fmt.Sprintf("&_pragma=query_only(1)&_pragma=cache_size(%d)", readCacheKiB))
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open memory index: %w", err)
	}
	rdb.SetMaxOpenConns(readConns)
	rdb.SetMaxIdleConns(readConns)
	s.db, s.rdb = db, rdb
	// The checkpointer runs from here on, so that Sync's re-indexing of
	// the Markdown (after a crash, a large write) is checkpointed too.
	if s.ckpt, err = sqlitewal.Start(dbPath, walCheckpointBytes, opts.Logger); err != nil {
		db.Close()
		rdb.Close()
		return nil, fmt.Errorf("open memory index: %w", err)
	}
	closeDBs := func() { s.ckpt.Close(); db.Close(); rdb.Close() }
	if err := s.createFTS(context.Background()); err != nil {
		closeDBs()
		return nil, err
	}
	var rows int64
	if err := db.QueryRow(`SELECT count(*) FROM fts_docs`).Scan(&rows); err != nil {
		closeDBs()
		return nil, fmt.Errorf("memory index: %w", err)
	}
	s.ftsRows.Store(rows)
	if err := s.Sync(context.Background()); err != nil {
		closeDBs()
		return nil, err
	}
	if opts.Embedder != nil {
		if err := s.startEmbedWorker(); err != nil {
			closeDBs()
			return nil, err
		}
	}
	if opts.FsyncEvery > 0 && !opts.NoFsync {
		s.flushStop, s.flushDone = make(chan struct{}), make(chan struct{})
		go s.runFlusher(s.flushStop, s.flushDone)
	}
	return s, nil
}

// readConns is the size of the index's read pool (Store.rdb): searches
// of different actors run side by side on it, at most this many at once.
// readCacheKiB is each read connection's page cache (SQLite cache_size,
// negative KiB; the writer keeps the default 2,000 KiB): a cold search
// reads a few FTS5 pages and rows, and the operating system's page cache
// holds the rest.
const (
	readConns    = 4
	readCacheKiB = -512
)

// walCheckpointBytes is the index's write-ahead log size at which it is
// checkpointed into memory.db, in the background (sqlitewal.Checkpointer:
// before, the commit that crossed it did the copy and the fsyncs while
// every turn's event write waited): walAutoCheckpoint pages.
var walCheckpointBytes = sqlitewal.Pages(walAutoCheckpoint, indexPageSize)

// walAutoCheckpoint is the index's write-ahead log size, in pages, at
// which it is checkpointed (SQLite's wal_autocheckpoint, default 1000;
// https://sqlite.org/pragma.html#pragma_wal_autocheckpoint).
// A checkpoint copies each page in the log once however often it changed,
// and a turn keeps changing the same few pages (the right edge of the
// event and ID B-trees, its actor's leaf of events_actor, FTS5's structure
// record), so a longer log copies fewer pages per turn: 4,096 pages (4 MiB
// at indexPageSize) wrote 17 % fewer bytes per turn than the default at
// 100 actors (docs/bench/soak.md, stop 16); 16,384 wrote 25 % fewer but
// cost more CPU per turn.
const walAutoCheckpoint = 4096

// indexPageSize is the page size of a new index database (bytes). A turn
// changes a handful of rows in different B-trees (the event row, its ID
// and actor indexes), and the write-ahead log stores every changed page
// whole, so the page size sets the bytes a turn writes: with 1 KiB pages
// a turn's commit is about a quarter of SQLite's default 4 KiB pages. An
// existing index keeps the page size it was created with.
const indexPageSize = 1024

// createIndexFile creates a new, empty index database with indexPageSize
// pages; the page size must be set before the first table and before the
// switch to WAL (the driver runs _pragma values in lexical order, which
// would put journal_mode first). An existing file is left alone.
func createIndexFile(path string) error {
	if _, err := os.Stat(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	db, err := sql.Open("sqlite", sqlitewal.FileURI(path)+fmt.Sprintf("?_pragma=page_size(%d)", indexPageSize))
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(schema)
	return err
}

// Close closes the index.
func (s *Store) Close() error {
	s.stopEmbedWorker() // before the gate: the worker holds it shared
	s.gate.Lock()
	defer s.gate.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.flushStop != nil {
		close(s.flushStop)
		<-s.flushDone
	}
	s.ckpt.Close()
	err := s.payOwed(context.Background())
	s.stmtMu.Lock()
	for _, st := range s.stmts {
		st.Close()
	}
	for _, st := range s.rstmts {
		st.Close()
	}
	s.stmts, s.rstmts = nil, nil
	s.stmtMu.Unlock()
	if cerr := s.rdb.Close(); err == nil {
		err = cerr
	}
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// Home returns the home directory.
func (s *Store) Home() string { return s.home }

// MemoryDir returns <home>/memory.
func (s *Store) MemoryDir() string { return s.dir }

// IndexedKeys returns the declared filterable keys.
func (s *Store) IndexedKeys() []memory.IndexedKey { return s.opts.IndexedKeys }

func newID(prefix string) string { return prefix + strings.ToLower(ulid.Make().String()) }

// recordActor derives the owning actor of a namespace (its second segment).
func recordActor(ns string) (string, error) {
	_, actor, ok := memory.NamespaceActor(ns)
	if !ok || actor == "" {
		return "", fmt.Errorf("%w: %q needs /<agent>/<actor>/…", memory.ErrInvalidNamespace, ns)
	}
	return actor, nil
}

// Put implements memory.Store.
func (s *Store) Put(ctx context.Context, rec memory.Record) (memory.Record, error) {
	recs, err := s.PutBatch(ctx, []memory.Record{rec})
	if err != nil {
		return memory.Record{}, err
	}
	return recs[0], nil
}

func (s *Store) prepare(rec memory.Record) (memory.Record, error) {
	rec, err := memindex.NormalizeRecord(rec, func() string { return newID("mem_") })
	if err != nil {
		return rec, err
	}
	rec = memindex.DefaultTimes(rec, s.opts.Now().UTC())
	rec.CreatedAt, rec.UpdatedAt = rec.CreatedAt.UTC(), rec.UpdatedAt.UTC()
	rec.Sources = append([]string(nil), rec.Sources...)
	return rec, nil
}

// PutBatch stores many records in one transaction (bulk loads). It is Put
// for each, atomically in the index.
func (s *Store) PutBatch(ctx context.Context, recs []memory.Record) ([]memory.Record, error) {
	out := make([]memory.Record, 0, len(recs))
	fresh := make([]bool, len(recs)) // IDs we generate need no ownership check
	for i, r := range recs {
		fresh[i] = r.ID == ""
		p, err := s.prepare(r)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed {
		return nil, errors.New("memory store closed")
	}
	byActor := map[string][]int{}
	for i, r := range out {
		actor, err := recordActor(r.Namespace)
		if err != nil {
			return nil, fmt.Errorf("put record: %w", err)
		}
		byActor[actor] = append(byActor[actor], i)
	}
	order := make([]string, 0, len(byActor))
	for actor := range byActor {
		order = append(order, actor)
	}
	sort.Strings(order) // writer locks are taken in this order
	states := make([]*actorState, 0, len(order))
	defer func() {
		for _, a := range states {
			a.wmu.Unlock()
		}
	}()
	for _, actor := range order {
		a, release, err := s.acquire(ctx, actor)
		if err != nil {
			return nil, err
		}
		defer release()
		a.wmu.Lock()
		states = append(states, a)
	}
	for ai, actor := range order {
		a := states[ai]
		for _, i := range byActor[actor] {
			r := out[i]
			old, ok, err := s.record(ctx, a, r.ID)
			if err != nil {
				return nil, err
			}
			if ok {
				if r.CreatedAt.IsZero() || recs[i].CreatedAt.IsZero() {
					r.CreatedAt = old.CreatedAt
				}
				if recs[i].UpdatedAt.IsZero() {
					r.UpdatedAt = s.opts.Now().UTC()
				}
				out[i] = r
			} else if !fresh[i] {
				owner, err := s.ownerOf(ctx, r.ID)
				if err != nil {
					return nil, err
				}
				if owner != "" && owner != actor {
					return nil, fmt.Errorf("put record %s: %w: id belongs to another actor", r.ID, memory.ErrInvalidQuery)
				}
				if owner == actor { // not one of its records: one of its events
					return nil, fmt.Errorf("put record %s: %w: id belongs to an event", r.ID, memory.ErrInvalidQuery)
				}
			}
		}
	}
	for ai, actor := range order {
		group := make([]memory.Record, len(byActor[actor]))
		for j, i := range byActor[actor] {
			group[j] = out[i]
		}
		if err := s.writeRecords(ctx, states[ai], group); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Store) ownerOf(ctx context.Context, id string) (string, error) {
	var actor string
	err := s.db.QueryRowContext(ctx, `SELECT actor FROM records WHERE id=? UNION ALL SELECT actor FROM events WHERE id=? LIMIT 1`, id, id).Scan(&actor)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("memory index: %w", err)
	}
	return actor, nil
}

// writeRecords persists recs of one actor: Markdown first, then the index
// rows, then the in-memory state and ranking index. The caller holds
// a.wmu.
//
// In the Markdown a new record is appended to its layer file, and so is
// the new version of a changed record (a merge, update or supersede: last
// entry of an ID wins), which leaves its earlier entry stale. A file is
// rewritten whole (compacted) when it would be mostly stale, and the file
// a record moves out of (another layer or day) is rewritten without it.
func (s *Store) writeRecords(ctx context.Context, a *actorState, recs []memory.Record) error {
	region := trace.StartRegion(ctx, "records: markdown")
	appends := map[string][]byte{}
	staled := map[string]int64{} // bytes of entries this write makes stale, by file
	rewrite := map[string]bool{}
	pending := map[string]memory.Record{}
	var warmed []memory.Record // the cold records this write makes warm, as they were
	for _, r := range recs {
		f := markdown.RecordFile(r)
		old, ok := pending[r.ID]
		if !ok {
			_, warm := a.records[r.ID]
			var err error
			if old, ok, err = s.record(ctx, a, r.ID); err != nil {
				return err
			}
			if ok && !warm {
				warmed = append(warmed, old)
			}
		}
		if ok && markdown.RecordFile(old) != f {
			rewrite[markdown.RecordFile(old)] = true
		} else if ok {
			staled[f] += int64(len(markdown.FormatRecord(old)))
		}
		appends[f] = append(appends[f], markdown.FormatRecord(r)...)
		pending[r.ID] = r
	}
	for f, b := range appends {
		if rewrite[f] {
			continue
		}
		path := filepath.Join(s.dir, a.enc, f)
		if staled[f] > 0 {
			compact, err := appendStales(path, int64(len(b)), staled[f])
			if err != nil {
				return fmt.Errorf("write memory markdown: %w", err)
			}
			if compact {
				rewrite[f] = true
				continue
			}
		}
		if err := s.appendRecords(a, f, b, staled[f]); err != nil {
			return err
		}
	}
	region.End()
	for f := range rewrite {
		r := trace.StartRegion(ctx, "records: rewrite "+strings.SplitN(f, "/", 2)[0])
		if err := s.rewriteFile(a, f, pending, ""); err != nil {
			return err
		}
		r.End()
	}
	region = trace.StartRegion(ctx, "records: wait memory db")
	tx, err := s.db.BeginTx(ctx, nil)
	region.End()
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	defer tx.Rollback()
	region = trace.StartRegion(ctx, "records: rows")
	stmt, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO records(id,actor,namespace,strategy,status,content,metadata,created_at,updated_at,sources,importance) VALUES(?,?,?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	var fts ftsBatch
	for _, r := range recs {
		if err := insertRecord(ctx, stmt, a.id, r); err != nil {
			return err
		}
		fts.record(a.id, r)
	}
	if err := fts.write(ctx, s, tx); err != nil {
		return err
	}
	files := map[string]bool{}
	for _, r := range recs {
		files[markdown.RecordFile(r)] = true
	}
	for f := range rewrite {
		files[f] = true
	}
	if err := s.noteFiles(ctx, tx, a, files); err != nil {
		return err
	}
	region.End()
	region = trace.StartRegion(ctx, "records: commit")
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	region.End()
	defer trace.StartRegion(ctx, "records: in memory").End()
	stored := make([]*memory.Record, len(recs))
	a.mu.Lock()
	for i, r := range recs {
		stored[i] = a.setRecord(r)
	}
	for _, r := range warmed {
		a.recCold.add(recordWarmKey(&r), -1)
	}
	a.mu.Unlock()
	s.changeIndex(a, func(x *actorIndex) *actorIndex { // wmu keeps the maps still
		if s.legacy {
			return nil
		}
		x.putRecords(stored)
		return x
	})
	s.demoteRecords(a)
	s.compactSoon(a)
	if s.opts.Embedder != nil {
		s.scheduleEmbed(a.id)
	}
	return nil
}

// compactSoon rebuilds a's ranking index in the background when the
// change just applied left it compactable (actorIndex.compactable). The
// write that crossed the threshold, and with it the turn, does not wait
// for the rebuild (about 25 µs per document: half a second for an actor
// with 20,000 events), and searches go on reading the current index
// until the new one replaces it. The actor's writes wait only for the
// catch-up at its end (compact); with a.compacting, one runs per actor at
// a time. It pins a against eviction, and Close waits for it (gate).
func (s *Store) compactSoon(a *actorState) {
	if s.legacy || !s.indexCompactable(a) || !a.compacting.CompareAndSwap(false, true) {
		return
	}
	s.inBackground(a, &a.compacting, func() {
		if !s.indexCompactable(a) {
			return
		}
		s.compact(context.Background(), a)
	})
}

// compact rebuilds a's ranking index from scratch without holding a's
// writer lock while it builds (tens of milliseconds for a few thousand
// documents, which the actor's next turn used to wait for: the slowest
// 2 % of one actor's turns past the event window, docs/bench/soak.md
// stop 26). It builds from a snapshot of a's maps taken under a.mu
// shared, then, holding a.wmu (the maps stay still), brings the build up
// to date with what the writers and demotions changed meanwhile (the
// records whose pointer changed, the events gone or new, as their own
// index changes do), and swaps it in.
func (s *Store) compact(ctx context.Context, a *actorState) {
	defer trace.StartRegion(ctx, "background: compaction").End()
	a.mu.RLock()
	recs, evs := maps.Clone(a.records), maps.Clone(a.events)
	a.mu.RUnlock()
	built := s.buildIndexFrom(ctx, a, recs, evs)
	if h := s.testHooks.compactBuilt; h != nil {
		h()
	}
	a.wmu.Lock()
	defer a.wmu.Unlock()
	defer trace.StartRegion(ctx, "background: compaction catch-up").End()
	s.catchUp(ctx, a, built, recs, evs)
	s.changeIndex(a, func(x *actorIndex) *actorIndex {
		if x == nil {
			return nil
		}
		return built
	})
}

// catchUp applies to x, built from the snapshot recs and evs of a's
// maps, what changed in the maps since, so that x equals an index built
// from them now. The caller holds a.wmu.
func (s *Store) catchUp(ctx context.Context, a *actorState, x *actorIndex, recs map[string]*memory.Record, evs map[string]memory.Event) {
	var put []*memory.Record
	for id, r := range recs {
		if cur, ok := a.records[id]; !ok {
			x.remove(id)
		} else if cur != r {
			put = append(put, cur)
		}
	}
	for id, r := range a.records {
		if _, ok := recs[id]; !ok {
			put = append(put, r)
		}
	}
	sort.Slice(put, func(i, j int) bool { // the order buildIndex adds them in
		if !put[i].CreatedAt.Equal(put[j].CreatedAt) {
			return put[i].CreatedAt.Before(put[j].CreatedAt)
		}
		return put[i].ID < put[j].ID
	})
	x.putRecords(put)
	gone := map[string]bool{}
	for id, e := range evs {
		if cur, ok := a.events[id]; !ok || cur.Text != e.Text || cur.SessionID != e.SessionID || !cur.Timestamp.Equal(e.Timestamp) {
			gone[id] = true
		}
	}
	if len(gone) > 0 {
		s.dropIndexed(a, x, gone)
	}
	var added []memory.Event
	for id, e := range a.events {
		if _, ok := evs[id]; !ok || gone[id] {
			added = append(added, e)
		}
	}
	sort.Slice(added, func(i, j int) bool {
		return evRef{added[i].Timestamp, added[i].ID}.before(evRef{added[j].Timestamp, added[j].ID})
	})
	s.addEvents(a, x, added)
	if s.opts.Embedder != nil && (len(put) > 0 || len(added) > 0) {
		x.vecs = s.loadVectors(ctx, a, x)
	}
}

// inBackground runs f in a goroutine for a's background work (compaction,
// demotion) once the caller has set busy: under gate shared (Close waits
// for it), with a pinned against eviction, clearing busy at the end. f
// takes a's locks itself (compact, demote), so that the actor's writers
// wait only for the short parts of the work. It does nothing
// when the store is closed or a was evicted meanwhile (its state went
// with it).
func (s *Store) inBackground(a *actorState, busy *atomic.Bool, f func()) {
	go func() {
		defer busy.Store(false)
		s.gate.RLock()
		defer s.gate.RUnlock()
		if s.closed {
			return
		}
		s.mu.Lock()
		if s.actors[a.id] != a {
			s.mu.Unlock()
			return
		}
		a.refs++
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			a.refs--
			s.evictLocked(s.opts.MaxCachedActors)
			s.mu.Unlock()
		}()
		f()
	}()
}

// indexCompactable reports whether a's current ranking index is built
// and compactable.
func (s *Store) indexCompactable(a *actorState) bool {
	slot := &a.slots[a.active.Load()]
	slot.mu.RLock()
	defer slot.mu.RUnlock()
	return slot.x != nil && slot.x.compactable()
}

// ixSlot is one of the two read locks over an actor's ranking index.
type ixSlot struct {
	mu sync.RWMutex
	x  *actorIndex
}

// changeIndex applies f to a's ranking index, if built. f returns the
// index to keep (nil drops it).
//
// There is one copy of the index (two copies, left-right, doubled an
// actor's memory): both slots point to it, searches read it under the
// active slot's read lock, and a change holds both slots' locks
// exclusively, so it waits for the searches in flight and searches wait
// for it. A change is an in-memory update of a few documents (tens of
// microseconds), or a rebuild once most documents are retired.
func (s *Store) changeIndex(a *actorState, f func(x *actorIndex) *actorIndex) {
	a.ixw.Lock()
	defer a.ixw.Unlock()
	s.changeIndexLocked(a, f, false)
}

// changeIndexLocked is changeIndex with a.ixw held; build runs f even
// when the index is not built (f(nil) returns the build).
func (s *Store) changeIndexLocked(a *actorState, f func(x *actorIndex) *actorIndex, build bool) {
	cur := a.active.Load()
	x := a.slots[cur].x
	if x == nil && !build {
		return
	}
	a.slots[0].mu.Lock()
	a.slots[1].mu.Lock()
	x = f(x)
	a.slots[0].x, a.slots[1].x = x, x
	if x != nil {
		a.ixBytes.Store(x.heapBytes())
	} else {
		a.ixBytes.Store(0)
	}
	a.slots[1].mu.Unlock()
	a.slots[0].mu.Unlock()
}

func insertRecord(ctx context.Context, stmt *sql.Stmt, actor string, r memory.Record) error {
	md, _ := json.Marshal(markdown.EncodeMetadata(r.Metadata))
	src, _ := json.Marshal(r.Sources)
	_, err := stmt.ExecContext(ctx, r.ID, actor, r.Namespace, string(r.Strategy), string(r.Status), r.Content, string(md),
		r.CreatedAt.UTC().Format(time.RFC3339Nano), r.UpdatedAt.UTC().Format(time.RFC3339Nano), string(src), r.Importance)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	return nil
}

func insertEvent(ctx context.Context, stmt *sql.Stmt, actor string, e memory.Event) error {
	md, _ := json.Marshal(markdown.EncodeMetadata(e.Metadata))
	_, err := stmt.ExecContext(ctx, e.ID, actor, e.SessionID, e.Role, e.Text, e.Timestamp.UTC().Format(time.RFC3339Nano), string(md))
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	return nil
}

// rewriteFile renders one layer file of a from its in-memory state, with
// the pending records (written, not yet applied) and the pending rejection
// hash in place (removing the file when empty). The caller holds a.wmu.
func (s *Store) rewriteFile(a *actorState, rel string, pending map[string]memory.Record, pendingHash string) error {
	all, _, err := s.allRecords(context.Background(), a)
	if err != nil {
		return err
	}
	var recs []memory.Record
	for id, r := range all {
		if _, ok := pending[id]; ok {
			continue
		}
		if markdown.RecordFile(*r) == rel {
			recs = append(recs, *r)
		}
	}
	for _, r := range pending {
		if markdown.RecordFile(r) == rel {
			recs = append(recs, r)
		}
	}
	var evs []memory.Event
	if strings.HasPrefix(rel, "episodic") {
		for _, e := range a.events {
			if markdown.EventFile(e) == rel {
				evs = append(evs, e)
			}
		}
		cold, err := s.coldEvents(context.Background(), a, "")
		if err != nil {
			return err
		}
		for _, e := range cold {
			if markdown.EventFile(e) == rel && !s.expired(e) {
				evs = append(evs, e)
			}
		}
	}
	var rej []string
	if rel == markdown.RejectedFile {
		for h := range a.rejected {
			rej = append(rej, h)
		}
		if pendingHash != "" && !a.rejected[pendingHash] {
			rej = append(rej, pendingHash)
		}
	}
	path := filepath.Join(s.dir, a.enc, rel)
	data := markdown.Render(a.id, recs, evs, rej)[rel]
	forgetStale(path)
	if data == nil {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("write memory markdown: %w", err)
		}
		return nil
	}
	if err := markdown.WriteFileAtomic(path, data); err != nil {
		return fmt.Errorf("write memory markdown: %w", err)
	}
	noteStale(path, int64(len(data)), 0)
	return nil
}

// appendStales reports whether the record file at path, once add more
// bytes are appended to it and staled more of its bytes are stale, is
// mostly stale and should rather be rewritten whole.
func appendStales(path string, add, staled int64) (bool, error) {
	stale, err := countStale(path)
	if err != nil {
		return false, err
	}
	var size int64
	if st, err := os.Stat(path); err == nil {
		size = st.Size()
	}
	return mostlyStale(size+add, stale+staled), nil
}

// appendRecords appends the record entries b to a's layer file rel, of
// which they make staled bytes stale, and makes it durable. The caller
// holds a.wmu.
func (s *Store) appendRecords(a *actorState, rel string, b []byte, staled int64) error {
	path := filepath.Join(s.dir, a.enc, rel)
	var before int64 = -1
	if st, err := os.Stat(path); err == nil {
		before = st.Size()
	}
	stale, known := knownStale(path, max(before, 0))
	if err := markdown.AppendFile(path, markdown.FileHeader(a.id, markdown.Title(rel)), b); err != nil {
		return fmt.Errorf("write memory markdown: %w", err)
	}
	s.fsync(path)
	if before < 0 {
		stale, known = 0, true
	}
	if st, err := os.Stat(path); err == nil && (known || staled > 0) {
		// staled > 0 was counted by appendStales just before.
		noteStale(path, st.Size(), stale+staled)
	}
	return nil
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// noteFiles records the current size and mtime of files we wrote, so Sync
// does not mistake our own writes for hand edits.
func (s *Store) noteFiles(ctx context.Context, tx execer, a *actorState, rels map[string]bool) error {
	// Owed rows of this actor go with this transaction, with the stat
	// they were owed with: a re-stat would take a hand edit made since
	// the append for ours (editedSinceKnown).
	prefix := filepath.ToSlash(a.enc) + "/"
	owed := map[string]fileStat{}
	s.owedMu.Lock()
	for key, o := range s.owed {
		if o.actor == a.id && strings.HasPrefix(key, prefix) {
			owed[key] = o.st
		}
	}
	s.owedMu.Unlock()
	defer s.dropOwed(func(o owedFile, key string) bool {
		_, paid := owed[key]
		return o.actor == a.id && paid && o.st == owed[key]
	})
	for key, st := range owed {
		if rels[strings.TrimPrefix(key, prefix)] {
			continue // written now: re-stat below
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO files(path,actor,size,mtime) VALUES(?,?,?,?)`, key, a.id, st.size, st.mtime); err != nil {
			return fmt.Errorf("memory index: %w", err)
		}
	}
	for rel := range rels {
		key := filepath.ToSlash(filepath.Join(a.enc, rel))
		st, err := os.Stat(filepath.Join(s.dir, a.enc, rel))
		if errors.Is(err, os.ErrNotExist) {
			if _, err := tx.ExecContext(ctx, `DELETE FROM files WHERE path=?`, key); err != nil {
				return fmt.Errorf("memory index: %w", err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("memory markdown: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO files(path,actor,size,mtime) VALUES(?,?,?,?)`, key, a.id, st.Size(), st.ModTime().UnixNano()); err != nil {
			return fmt.Errorf("memory index: %w", err)
		}
	}
	return nil
}

// oweFiles records the current size and mtime of a's files rels as owed
// files rows. Sync and the per-actor check read owed rows over the table,
// the actor's next record or rejection write and Close write them. After
// a crash the rows are stale: the next Open re-reads that actor's Markdown
// (what a hand edit costs), and nothing is lost.
func (s *Store) oweFiles(a *actorState, rels map[string]bool) error {
	for rel, owe := range rels {
		if !owe {
			continue
		}
		key := filepath.ToSlash(filepath.Join(a.enc, rel))
		st, err := os.Stat(filepath.Join(s.dir, a.enc, rel))
		if err != nil {
			return fmt.Errorf("memory markdown: %w", err)
		}
		s.owedMu.Lock()
		if s.owed == nil {
			s.owed = map[string]owedFile{}
		}
		s.owed[key] = owedFile{a.id, fileStat{st.Size(), st.ModTime().UnixNano()}}
		s.owedMu.Unlock()
	}
	return nil
}

// editedSinceKnown reports whether the file at path (key "enc/rel") differs
// from what the index knows of it: its owed stat, or else its files row.
// A file the index does not know yet is not edited.
func (s *Store) editedSinceKnown(ctx context.Context, key, path string) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	s.owedMu.Lock()
	o, ok := s.owed[key]
	s.owedMu.Unlock()
	known := o.st
	if !ok {
		// The first append to this file in this process: one read.
		if err := s.rdb.QueryRowContext(ctx, `SELECT size, mtime FROM files WHERE path=?`, key).Scan(&known.size, &known.mtime); err != nil {
			return false
		}
	}
	return st.Size() != known.size || st.ModTime().UnixNano() != known.mtime
}

// dropOwed forgets the owed rows drop selects.
func (s *Store) dropOwed(drop func(o owedFile, key string) bool) {
	s.owedMu.Lock()
	defer s.owedMu.Unlock()
	for k, o := range s.owed {
		if drop(o, k) {
			delete(s.owed, k)
		}
	}
}

// overlayOwed puts the owed rows whose key starts with prefix over known
// (keyed by enc, then rel).
func (s *Store) overlayOwed(known map[string]map[string]fileStat, prefix string) {
	s.owedMu.Lock()
	defer s.owedMu.Unlock()
	for k, o := range s.owed {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		enc, rel, ok := strings.Cut(k, "/")
		if !ok {
			continue
		}
		if known[enc] == nil {
			known[enc] = map[string]fileStat{}
		}
		known[enc][rel] = o.st
	}
}

// payOwed writes every owed files row (Close).
func (s *Store) payOwed(ctx context.Context) error {
	s.owedMu.Lock()
	owed := s.owed
	s.owed = nil
	s.owedMu.Unlock()
	if len(owed) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for k, o := range owed {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO files(path,actor,size,mtime) VALUES(?,?,?,?)`, k, o.actor, o.st.size, o.st.mtime); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Get implements memory.Store. Event IDs return the event as an episodic
// record. Unknown IDs are memory.ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (memory.Record, error) {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed {
		return memory.Record{}, errors.New("memory store closed")
	}
	owner, err := s.ownerOf(ctx, id)
	if err != nil {
		return memory.Record{}, err
	}
	if owner == "" {
		return memory.Record{}, fmt.Errorf("get %q: %w", id, memory.ErrNotFound)
	}
	a, release, err := s.acquire(ctx, owner)
	if err != nil {
		return memory.Record{}, err
	}
	defer release()
	a.mu.RLock()
	defer a.mu.RUnlock()
	if r, ok, err := s.record(ctx, a, id); err != nil {
		return memory.Record{}, err
	} else if ok {
		return r, nil
	}
	if e, ok := a.events[id]; ok && !s.expired(e) {
		return s.eventRecord(e), nil
	}
	cold, err := s.coldByID(ctx, a, []string{id})
	if err != nil {
		return memory.Record{}, err
	}
	if e, ok := cold[id]; ok && !s.expired(e) {
		return s.eventRecord(e), nil
	}
	return memory.Record{}, fmt.Errorf("get %q: %w", id, memory.ErrNotFound)
}

// AppendEvents implements memory.Store: events go to the actor's daily
// episodic log and the index. Missing IDs and timestamps are filled in; an
// event whose ID is already stored is skipped (idempotent retries).
func (s *Store) AppendEvents(ctx context.Context, events []memory.Event) error {
	if len(events) == 0 {
		return nil
	}
	byActor := map[string][]memory.Event{}
	var order []string
	generated := map[string]bool{} // IDs made here: unique, no ownership check
	for _, e := range events {
		if e.ActorID == "" {
			return fmt.Errorf("append events: %w: empty actor", memory.ErrInvalidQuery)
		}
		if e.ID == "" {
			e.ID = newID("ev_")
			generated[e.ID] = true
		}
		ne, err := memindex.NormalizeEvent(e, s.opts.Now)
		if err != nil {
			return err
		}
		e = ne
		e.Timestamp = e.Timestamp.UTC()
		if _, ok := byActor[e.ActorID]; !ok {
			order = append(order, e.ActorID)
		}
		byActor[e.ActorID] = append(byActor[e.ActorID], e)
	}
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed {
		return errors.New("memory store closed")
	}
	for _, actor := range order {
		if err := s.appendActorEvents(ctx, actor, &evBatch{evs: byActor[actor], generated: generated}); err != nil {
			return err
		}
	}
	return nil
}

// evBatch is one AppendEvents call's events of one actor, waiting for a
// group commit.
type evBatch struct {
	evs       []memory.Event
	generated map[string]bool
	err       error
	done      chan struct{}
}

// appendActorEvents writes b by group commit: concurrent calls for the
// same actor queue their batches, and whoever holds the actor's writer
// lock writes every queued batch with one append per file, one fsync and
// one index transaction. Each call returns once its own events are durable
// (or failed).
func (s *Store) appendActorEvents(ctx context.Context, actor string, b *evBatch) error {
	a, release, err := s.acquire(ctx, actor)
	if err != nil {
		return err
	}
	defer release()
	b.done = make(chan struct{})
	a.qmu.Lock()
	a.evq = append(a.evq, b)
	a.qmu.Unlock()
	region := trace.StartRegion(ctx, "wait: actor writer")
	a.wmu.Lock()
	region.End()
	a.qmu.Lock()
	group := a.evq
	a.evq = nil
	a.qmu.Unlock()
	if len(group) > 0 {
		wctx := ctx
		if len(group) > 1 {
			wctx = context.WithoutCancel(ctx) // the others' writes must not fail with our cancellation
		}
		region := trace.StartRegion(ctx, "write events")
		err := s.writeEvents(wctx, a, group)
		region.End()
		for _, g := range group {
			if g.err == nil {
				g.err = err
			}
			close(g.done)
		}
	}
	a.wmu.Unlock()
	<-b.done // written by us or by an earlier holder of the lock
	return b.err
}

// stmt returns the prepared statement of query q on the writer
// connection, preparing it on first use. The statements are closed by
// Close.
func (s *Store) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	return s.prepared(ctx, s.db, &s.stmts, q)
}

// rstmt is stmt on the read pool, for a read-only query that may run
// beside the writer and other readers.
func (s *Store) rstmt(ctx context.Context, q string) (*sql.Stmt, error) {
	return s.prepared(ctx, s.rdb, &s.rstmts, q)
}

func (s *Store) prepared(ctx context.Context, db *sql.DB, cache *map[string]*sql.Stmt, q string) (*sql.Stmt, error) {
	s.stmtMu.Lock()
	defer s.stmtMu.Unlock()
	if st, ok := (*cache)[q]; ok {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if *cache == nil {
		*cache = map[string]*sql.Stmt{}
	}
	(*cache)[q] = st
	return st, nil
}

// owners returns the owning actor of each of ids that is stored.
func (s *Store) owners(ctx context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	for start := 0; start < len(ids); start += 400 {
		chunk := ids[start:min(start+400, len(ids))]
		ph := strings.TrimSuffix(strings.Repeat("?,", len(chunk)), ",")
		args := make([]any, 0, 2*len(chunk))
		for _, id := range chunk {
			args = append(args, id)
		}
		args = append(args, args...)
		q := `SELECT id,actor FROM records WHERE id IN (` + ph + `) UNION ALL SELECT id,actor FROM events WHERE id IN (` + ph + `)`
		var rows *sql.Rows
		var err error
		if len(chunk) <= 8 { // a turn's few IDs: prepared once
			var st *sql.Stmt
			if st, err = s.rstmt(ctx, q); err == nil {
				rows, err = st.QueryContext(ctx, args...)
			}
		} else {
			rows, err = s.rdb.QueryContext(ctx, q, args...)
		}
		if err != nil {
			return nil, fmt.Errorf("memory index: %w", err)
		}
		for rows.Next() {
			var id, actor string
			if err := rows.Scan(&id, &actor); err != nil {
				rows.Close()
				return nil, fmt.Errorf("memory index: %w", err)
			}
			out[id] = actor
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("memory index: %w", err)
		}
	}
	return out, nil
}

// writeEvents persists the new events of a group of batches of one actor:
// the daily Markdown logs (appended and fsynced), the index rows, then the
// in-memory state and ranking index. A batch naming an ID of another
// actor fails alone (g.err) and writes nothing; the returned error fails
// every other batch. The caller holds a.wmu.
func (s *Store) writeEvents(ctx context.Context, a *actorState, group []*evBatch) error {
	var check []string
	for _, g := range group {
		for _, e := range g.evs {
			if _, ok := a.events[e.ID]; !ok && !g.generated[e.ID] {
				check = append(check, e.ID)
			}
		}
	}
	owner := map[string]string{}
	if len(check) > 0 {
		var err error
		if owner, err = s.owners(ctx, check); err != nil {
			return err
		}
	}
	appends := map[string][]byte{}
	var fresh []memory.Event
	seen := map[string]bool{}
	for _, g := range group {
		var mine []memory.Event
		for _, e := range g.evs {
			if _, ok := a.events[e.ID]; ok || seen[e.ID] {
				continue
			}
			o := owner[e.ID]
			isRec := false
			if o == a.id {
				var err error
				if _, isRec, err = s.record(ctx, a, e.ID); err != nil {
					return err
				}
			}
			if o == a.id && !isRec {
				continue // a cold event of this actor (tier.go): already stored
			} else if o == a.id {
				g.err = fmt.Errorf("append event %s: %w: id belongs to a record", e.ID, memory.ErrInvalidQuery)
				break
			} else if o != "" {
				g.err = fmt.Errorf("append event %s: %w: id belongs to another actor", e.ID, memory.ErrInvalidQuery)
				break
			}
			mine = append(mine, e)
		}
		if g.err != nil {
			continue
		}
		for _, e := range mine {
			if seen[e.ID] {
				continue
			}
			seen[e.ID] = true
			f := markdown.EventFile(e)
			appends[f] = append(appends[f], markdown.FormatEvent(e)...)
			fresh = append(fresh, e)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	files := map[string]bool{}
	for f, b := range appends {
		path := filepath.Join(s.dir, a.enc, f)
		// A file changed since the index last knew it was edited by hand:
		// its stat after our append must not be owed as ours, or the sync
		// check would never see the edit.
		edited := s.editedSinceKnown(ctx, filepath.ToSlash(filepath.Join(a.enc, f)), path)
		if err := markdown.AppendFile(path, markdown.FileHeader(a.id, markdown.Title(f)), b); err != nil {
			return fmt.Errorf("write episodic log: %w", err)
		}
		s.fsync(path)
		files[f] = !edited
	}
	region := trace.StartRegion(ctx, "wait: memory db")
	tx, err := s.db.BeginTx(ctx, nil)
	region.End()
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO events(id,actor,session,role,text,ts,metadata) VALUES(?,?,?,?,?,?,?)`)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	// The full-text rows of events are written here only when FTS5 is the
	// configured engine; otherwise the first FTS5 search of the actor
	// writes them (ftsCatchUp), so a turn does not pay FTS5's segment and
	// merge writes (about 43 KB per turn) for an engine it does not use.
	eager := s.opts.Engine == EngineFTS5
	var fts ftsBatch
	for _, e := range fresh {
		if err := insertEvent(ctx, stmt, a.id, e); err != nil {
			return err
		}
		if eager {
			s.ftsEvent(&fts, a.id, e)
		}
	}
	if !eager {
		a.ftsBehind.Store(true)
	}
	if err := fts.write(ctx, s, tx); err != nil {
		return err
	}
	// The daily log's files row (its size and mtime, so Sync does not
	// take our append for a hand edit) is owed, not written: it would be
	// two more B-tree pages in every turn's commit. See oweFiles.
	if err := s.oweFiles(a, files); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	a.mu.Lock()
	for i, e := range fresh {
		a.putEvent(e)
		fresh[i] = a.events[e.ID] // interned strings for the index too
	}
	a.mu.Unlock()
	s.changeIndex(a, func(x *actorIndex) *actorIndex { // wmu keeps the maps still
		if s.legacy {
			return nil
		}
		s.addEvents(a, x, fresh)
		return x
	})
	s.compactSoon(a)
	s.demoteSoon(a)
	if s.opts.Embedder != nil {
		s.scheduleEmbed(a.id)
	}
	return nil
}

func (s *Store) expired(e memory.Event) bool {
	if s.opts.EventExpiryDays < 0 {
		return false
	}
	return e.Timestamp.Before(s.opts.Now().Add(-time.Duration(s.opts.EventExpiryDays) * 24 * time.Hour))
}

// Events implements memory.Store: the actor's unexpired events, oldest
// first; sessionID "" means every session.
func (s *Store) Events(ctx context.Context, actorID, sessionID string) ([]memory.Event, error) {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed {
		return nil, errors.New("memory store closed")
	}
	if !s.known(ctx, actorID) {
		return nil, nil
	}
	a, release, err := s.acquire(ctx, actorID)
	if err != nil {
		return nil, err
	}
	defer release()
	if sessionID != "" && !s.legacy {
		return s.sessionEvents(ctx, a, sessionID, "", time.Time{})
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	all, err := s.allEvents(ctx, a)
	if err != nil {
		return nil, err
	}
	var out []memory.Event
	for _, e := range all {
		if (sessionID == "" || e.SessionID == sessionID) && !s.expired(e) {
			out = append(out, e)
		}
	}
	markdown.SortEvents(out)
	return out, nil
}

// EventsSince returns the unexpired events of one session of the actor
// that come after the cursor, oldest first: after the event afterID when
// it is still indexed, else those with a timestamp after afterTS (afterID
// "" and a zero afterTS: every event). It costs O(log n + new events), not
// O(the actor's history), so an extraction that runs every few turns reads
// only what is new. Errors: the store is closed.
func (s *Store) EventsSince(ctx context.Context, actorID, sessionID, afterID string, afterTS time.Time) ([]memory.Event, error) {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed {
		return nil, errors.New("memory store closed")
	}
	if !s.known(ctx, actorID) {
		return nil, nil
	}
	a, release, err := s.acquire(ctx, actorID)
	if err != nil {
		return nil, err
	}
	defer release()
	if s.legacy {
		a.mu.RLock()
		defer a.mu.RUnlock()
		var out []memory.Event
		for _, e := range a.events {
			if e.SessionID == sessionID && !s.expired(e) {
				out = append(out, e)
			}
		}
		markdown.SortEvents(out)
		return eventsAfterCursor(out, afterID, afterTS), nil
	}
	return s.sessionEvents(ctx, a, sessionID, afterID, afterTS)
}

// ListRecords returns the records (never events) of the exact namespace
// with one of statuses (none: active), in (createdAt, ID) order. It visits
// only the actor's records, so consolidation's listing does not grow with
// the actor's events (pipeline.RecordLister). Errors: a namespace naming
// no actor is memory.ErrInvalidNamespace; the store is closed.
func (s *Store) ListRecords(ctx context.Context, namespace string, statuses []memory.Status) ([]memory.Record, error) {
	actor, err := recordActor(namespace)
	if err != nil {
		return nil, err
	}
	if len(statuses) == 0 {
		statuses = []memory.Status{memory.StatusActive}
	}
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed {
		return nil, errors.New("memory store closed")
	}
	if err := s.maybeSyncActor(ctx, actor); err != nil {
		return nil, err
	}
	if !s.known(ctx, actor) {
		return nil, nil
	}
	a, release, err := s.acquire(ctx, actor)
	if err != nil {
		return nil, err
	}
	defer release()
	ns := memory.CleanNamespace(namespace)
	a.mu.RLock()
	all, _, err := s.allRecords(ctx, a)
	if err != nil {
		a.mu.RUnlock()
		return nil, err
	}
	var out []memory.Record
	for _, r := range all {
		if memindex.HasStatus(statuses, r.Status) && memory.NamespaceEqual(r.Namespace, ns) {
			out = append(out, *r)
		}
	}
	a.mu.RUnlock()
	markdown.SortRecords(out)
	return out, nil
}

// WarmRecent loads, and builds the ranking index of, the n actors with the
// most recent events (n ≤ 0: none; at most MaxCachedActors), most recent
// first, so that their first search after a restart costs what a warm
// search does. It warms only as many as the estimated heap of their
// events fits in Options.CacheBytes (warmBytes), so that warming never
// evicts the actors it warmed first. Meant to run in the background after
// Open; a search that arrives while its actor is being warmed waits for
// that build instead of starting its own. It stops at the first error
// (ctx done, store closed).
func (s *Store) WarmRecent(ctx context.Context, n int) error {
	n = min(n, s.opts.MaxCachedActors)
	if n <= 0 {
		return nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT actor, count(*), sum(length(id)+length(text)) FROM events GROUP BY actor ORDER BY max(ts) DESC LIMIT ?`, n)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	var actors []string
	var total int64
	for rows.Next() {
		var a string
		var count, size int64
		if err := rows.Scan(&a, &count, &size); err != nil {
			rows.Close()
			return fmt.Errorf("memory index: %w", err)
		}
		total += warmBytes(count, size)
		if s.opts.CacheBytes > 0 && total > s.opts.CacheBytes && len(actors) > 0 {
			break
		}
		actors = append(actors, a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	for _, a := range actors {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.Prepare(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// warmBytes estimates the heap of an actor with count events of size
// bytes of ID and text once loaded and indexed, by the model of
// eventBytes and docBytes: about 1.5 documents per event (a turn re-adds
// its neighbour with the new context), each indexing its text, its
// neighbours' and its sort key.
func warmBytes(count, size int64) int64 {
	return count*640 + size*13/4
}

// eventsAfterCursor is the cursor rule of EventsSince over a sorted list.
func eventsAfterCursor(evs []memory.Event, afterID string, afterTS time.Time) []memory.Event {
	if afterID == "" && afterTS.IsZero() {
		return evs
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].ID == afterID {
			return evs[i+1:]
		}
	}
	i := sort.Search(len(evs), func(i int) bool { return evs[i].Timestamp.After(afterTS) })
	return evs[i:]
}

// sessionEvents reads one session's events through the ranking index's
// per-session list (kept in (timestamp, ID) order), from the cursor on.
// Lock order (a.mu is never taken while a slot lock is held): the cursor
// event is looked up first, the list's tail is copied under the index's
// read lock, then the events are read.
//
// With cold events (tier.go), the session's cold events after the cursor
// are read from SQLite first when the cursor is not a warm event: an
// extraction cursor at a recent turn reads memory only.
func (s *Store) sessionEvents(ctx context.Context, a *actorState, sessionID, afterID string, afterTS time.Time) ([]memory.Event, error) {
	var cur *evRef
	warmCur := false
	a.mu.RLock()
	if afterID != "" {
		if e, ok := a.events[afterID]; ok && e.SessionID == sessionID {
			cur, warmCur = &evRef{e.Timestamp, e.ID}, true
		}
	}
	cold := a.hasCold()
	a.mu.RUnlock()
	// Cold events can come after the cursor only when the cursor is not
	// past the latest cold timestamp (out-of-order appends).
	a.mu.RLock()
	maxTS := a.coldMaxTS
	a.mu.RUnlock()
	needCold := cold
	switch {
	case warmCur:
		needCold = cold && !cur.ts.After(maxTS)
	case afterID == "" && !afterTS.IsZero():
		needCold = cold && afterTS.Before(maxTS)
	}
	var older []memory.Event
	if needCold {
		a.mu.RLock()
		evs, err := s.coldEvents(ctx, a, `session=?`, sessionID)
		a.mu.RUnlock()
		if err != nil {
			return nil, err
		}
		markdown.SortEvents(evs)
		if warmCur {
			for _, e := range evs {
				if cur.before(evRef{e.Timestamp, e.ID}) {
					older = append(older, e)
				}
			}
		} else {
			older = eventsAfterCursor(evs, afterID, afterTS)
		}
		if afterID != "" && len(older) < len(evs) {
			for _, e := range evs {
				if e.ID == afterID {
					cur = &evRef{e.Timestamp, e.ID}
				}
			}
		}
	}
	x, done := s.readIndex(ctx, a)
	list := x.sess[sessionID]
	start := 0
	switch {
	case cur != nil:
		start = sort.Search(len(list), func(i int) bool { return cur.before(list[i]) })
	case !afterTS.IsZero():
		start = sort.Search(len(list), func(i int) bool { return list[i].ts.After(afterTS) })
	}
	refs := append([]evRef(nil), list[start:]...)
	done()
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := make([]memory.Event, 0, len(older)+len(refs))
	for _, e := range older {
		if !s.expired(e) {
			out = append(out, e)
		}
	}
	for _, r := range refs {
		if e, ok := a.events[r.id]; ok && !s.expired(e) {
			out = append(out, e)
		}
	}
	if len(older) > 0 {
		markdown.SortEvents(out)
	}
	return out, nil
}

// known reports whether the actor has any state, without creating it.
func (s *Store) known(ctx context.Context, actor string) bool {
	s.mu.Lock()
	_, ok := s.actors[actor]
	s.mu.Unlock()
	if ok {
		return true
	}
	var n int
	s.db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM records WHERE actor=?)+(SELECT count(*) FROM events WHERE actor=?)+(SELECT count(*) FROM rejections WHERE actor=?)`, actor, actor, actor).Scan(&n)
	return n > 0
}

// ExpireEvents removes events older than EventExpiryDays from the
// Markdown and the index and returns how many went.
func (s *Store) ExpireEvents(ctx context.Context) (int, error) {
	s.gate.Lock()
	defer s.gate.Unlock()
	if s.closed {
		return 0, errors.New("memory store closed")
	}
	actors, err := s.actorIDs(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, id := range actors {
		a, release, err := s.acquire(ctx, id)
		if err != nil {
			return total, err
		}
		n, err := s.expire(ctx, a, true)
		release()
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// expire deletes a's expired events. The caller has a to itself (loading
// it, or holding gate exclusively).
//
// With cold, the cold events (tier.go) are checked too, read from SQLite;
// loading an actor leaves them to the scheduled ExpireEvents.
func (s *Store) expire(ctx context.Context, a *actorState, cold bool) (int, error) {
	files := map[string]bool{}
	var gone []string
	coldGone := 0
	if cold {
		evs, err := s.coldEvents(ctx, a, "")
		if err != nil {
			return 0, err
		}
		for _, e := range evs {
			if s.expired(e) {
				files[markdown.EventFile(e)] = true
				gone = append(gone, e.ID)
			}
		}
		coldGone = len(gone)
		if coldGone > 0 {
			a.mu.Lock()
			a.coldN = max(0, a.coldN-coldGone)
			a.mu.Unlock()
		}
	}
	a.mu.Lock()
	for id, e := range a.events {
		if s.expired(e) {
			files[markdown.EventFile(e)] = true
			gone = append(gone, id)
			delete(a.events, id)
			a.mapBytes.Add(-eventBytes(e))
		}
	}
	a.mu.Unlock()
	if len(gone) > 0 {
		s.changeIndex(a, func(*actorIndex) *actorIndex { return nil })
	}
	if len(gone) == 0 {
		return 0, nil
	}
	for f := range files {
		if err := s.rewriteFile(a, f, nil, ""); err != nil {
			return 0, err
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("memory index: %w", err)
	}
	defer tx.Rollback()
	for _, id := range gone {
		if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE id=?`, id); err != nil {
			return 0, fmt.Errorf("memory index: %w", err)
		}
		tx.ExecContext(ctx, `DELETE FROM vectors WHERE id=?`, id)
	}
	if err := s.noteFiles(ctx, tx, a, files); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("memory index: %w", err)
	}
	if coldGone > 0 {
		if err := s.boundAfterExpiry(ctx, a); err != nil {
			return len(gone), err
		}
	}
	return len(gone), nil
}

// Forget implements memory.Store. The embedded store keeps memory per
// actor, so everything of actorID goes, under every agent: events, records
// (any status, including staged), rejections, vectors, index rows and the
// actor's Markdown directory. agentID is only logged.
func (s *Store) Forget(ctx context.Context, agentID, actorID string) error {
	if actorID == "" {
		return fmt.Errorf("forget: %w: empty actor", memory.ErrInvalidQuery)
	}
	s.gate.Lock()
	defer s.gate.Unlock()
	if s.closed {
		return errors.New("memory store closed")
	}
	enc, err := markdown.EncodeActor(actorID)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(s.dir, enc)); err != nil {
		return fmt.Errorf("forget %s: %w", actorID, err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	defer tx.Rollback()
	s.dropOwed(func(o owedFile, _ string) bool { return o.actor == actorID })
	for _, q := range []string{`DELETE FROM records WHERE actor=?`, `DELETE FROM events WHERE actor=?`,
		`DELETE FROM rejections WHERE actor=?`, `DELETE FROM files WHERE actor=?`, `DELETE FROM vectors WHERE actor=?`,
		`DELETE FROM fts_docs WHERE actor=?`, `DELETE FROM event_tiers WHERE actor=?`, `DELETE FROM cold_scopes WHERE actor=?`} {
		if _, err := tx.ExecContext(ctx, q, actorID); err != nil {
			return fmt.Errorf("forget %s: %w", actorID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("forget %s: %w", actorID, err)
	}
	s.mu.Lock()
	delete(s.actors, actorID)
	s.mu.Unlock()
	s.opts.Logger.Info("memory forgotten", "agent", agentID, "actor", actorID)
	return nil
}

// IsRejected implements memory.RejectionStore.
func (s *Store) IsRejected(ctx context.Context, actorID, content string) (bool, error) {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed {
		return false, errors.New("memory store closed")
	}
	if !s.known(ctx, actorID) {
		return false, nil
	}
	a, release, err := s.acquire(ctx, actorID)
	if err != nil {
		return false, err
	}
	defer release()
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.rejected[memory.ContentHash(content)], nil
}

// MarkRejected implements memory.RejectionStore; the hash is kept in
// memory/<actor>/rejected.md.
func (s *Store) MarkRejected(ctx context.Context, actorID, content string) error {
	if actorID == "" {
		return fmt.Errorf("mark rejected: %w: empty actor", memory.ErrInvalidQuery)
	}
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed {
		return errors.New("memory store closed")
	}
	a, release, err := s.acquire(ctx, actorID)
	if err != nil {
		return err
	}
	defer release()
	a.wmu.Lock()
	defer a.wmu.Unlock()
	h := memory.ContentHash(content)
	if a.rejected[h] {
		return nil
	}
	if err := s.rewriteFile(a, markdown.RejectedFile, nil, h); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, `INSERT OR IGNORE INTO rejections(actor,hash) VALUES(?,?)`, actorID, h); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	if err := s.noteFiles(ctx, s.db, a, map[string]bool{markdown.RejectedFile: true}); err != nil {
		return err
	}
	a.mu.Lock()
	a.rejected[h] = true
	a.mu.Unlock()
	return nil
}

// actorIDs lists every actor in the index.
func (s *Store) actorIDs(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT actor FROM records UNION SELECT actor FROM events UNION SELECT actor FROM rejections`)
	if err != nil {
		return nil, fmt.Errorf("memory index: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	sort.Strings(out)
	return out, rows.Err()
}

// Actors lists every actor with memory, sorted.
func (s *Store) Actors(ctx context.Context) ([]string, error) {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed {
		return nil, errors.New("memory store closed")
	}
	return s.actorIDs(ctx)
}

// acquire returns the state of an actor, loading it from the index on
// first use, and pins it in the cache until release is called. The caller
// holds gate (shared or exclusive).
func (s *Store) acquire(ctx context.Context, id string) (*actorState, func(), error) {
	s.mu.Lock()
	s.tick++
	a, ok := s.actors[id]
	if !ok {
		enc, err := markdown.EncodeActor(id)
		if err != nil {
			s.mu.Unlock()
			return nil, nil, err
		}
		s.evictLocked(s.opts.MaxCachedActors - 1)
		a = &actorState{id: id, enc: enc, records: map[string]*memory.Record{}, byStrat: map[memory.Strategy]map[string]struct{}{}, events: map[string]memory.Event{}, rejected: map[string]bool{}}
		s.actors[id] = a
		s.loads++
	}
	a.used, a.usedAt = s.tick, time.Now()
	a.refs++
	s.mu.Unlock()
	release := func() {
		s.mu.Lock()
		a.refs--
		s.evictLocked(s.opts.MaxCachedActors) // states pinned at insertion, or grown, may have overfilled it
		s.mu.Unlock()
	}
	a.once.Do(func() { a.loadErr = s.load(ctx, a) })
	if a.loadErr != nil {
		s.mu.Lock()
		if s.actors[id] == a {
			delete(s.actors, id)
		}
		a.refs--
		s.mu.Unlock()
		return nil, nil, a.loadErr
	}
	return a, release, nil
}

// CacheStats implements memory.CacheReporter: the cached actors, their
// estimated heap (the figure Options.CacheBytes bounds), the budget, and
// the actors loaded and evicted since Open.
func (s *Store) CacheStats() memory.CacheStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := memory.CacheStats{Actors: len(s.actors), BudgetBytes: s.opts.CacheBytes, Loads: s.loads, Evictions: uint64(s.evictions)}
	for _, a := range s.actors {
		st.Bytes += a.bytes()
	}
	return st
}

// evictLocked drops least recently used unpinned actors until at most
// limit remain and their estimated heap is within Options.CacheBytes (or
// every remaining one is in use, or only the most recently used is left).
// The caller holds s.mu.
func (s *Store) evictLocked(limit int) {
	var total int64
	if s.opts.CacheBytes > 0 {
		for _, a := range s.actors {
			total += a.bytes()
		}
	}
	var now time.Time
	for len(s.actors) > limit || s.opts.CacheBytes > 0 && total > s.opts.CacheBytes {
		// Past the byte budget alone (not the count), actors used within
		// HotFor stay until the heap reaches 2 × the budget.
		hot := len(s.actors) <= limit && s.opts.HotFor > 0 && total <= 2*s.opts.CacheBytes
		if hot && now.IsZero() {
			now = time.Now()
		}
		var lru *actorState
		for _, a := range s.actors {
			if a.refs == 0 && a.used != s.tick && (lru == nil || a.used < lru.used) && (!hot || now.Sub(a.usedAt) >= s.opts.HotFor) {
				lru = a
			}
		}
		if lru == nil {
			return // every other cached actor is in use
		}
		delete(s.actors, lru.id)
		total -= lru.bytes()
		s.evictions++
	}
}

// load reads an actor's records, events and rejections from the index and
// deletes its expired events.
func (s *Store) load(ctx context.Context, a *actorState) error {
	id := a.id
	if err := s.loadRecords(ctx, a); err != nil {
		return err
	}
	// Only the warm events (tier.go) are loaded. Sized once: a map grown
	// by doubling holds about 1.5× the slots.
	if err := s.loadColdBound(ctx, a); err != nil {
		return err
	}
	var nev int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE actor=? AND rowid>?`, id, a.coldTo).Scan(&nev); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	a.events = make(map[string]memory.Event, nev)
	rows, err := s.db.QueryContext(ctx, `SELECT id,session,role,text,ts,metadata FROM events WHERE actor=? AND rowid>?`, id, a.coldTo)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	if err := scanEvents(rows, id, a.putEvent); err != nil {
		return err
	}
	rows, err = s.db.QueryContext(ctx, `SELECT hash FROM rejections WHERE actor=?`, id)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	for rows.Next() {
		var h string
		rows.Scan(&h)
		a.rejected[h] = true
		a.mapBytes.Add(64 + int64(len(h)))
	}
	rows.Close()
	_, err = s.expire(ctx, a, false)
	return err
}

// setRecord stores r in a's records and returns the stored copy, which
// the ranking index shares (a stored record is replaced, never changed in
// place). The caller holds a.mu exclusively (or has a to itself).
func (a *actorState) setRecord(r memory.Record) *memory.Record {
	if old, ok := a.records[r.ID]; ok {
		if old.Strategy != r.Strategy {
			delete(a.byStrat[old.Strategy], r.ID)
		}
		a.mapBytes.Add(-recordBytes(*old))
	}
	p := &r
	a.records[r.ID] = p
	a.mapBytes.Add(recordBytes(r))
	set := a.byStrat[r.Strategy]
	if set == nil {
		set = map[string]struct{}{}
		a.byStrat[r.Strategy] = set
	}
	set[r.ID] = struct{}{}
	return p
}

// decodeJSONMetadata decodes a metadata column as markdown.DecodeMetadata
// reads it (times from {"$time": RFC 3339}); nil for none or for JSON
// that does not parse. The common shape, a flat object of plain strings
// and times as the store writes it, is read by decodeFlatMetadata without
// encoding/json's reflection (it was a quarter of an actor's reload);
// anything else takes the general path, with the same result.
func decodeJSONMetadata(s string) map[string]any {
	if s == "" || s == "null" {
		return nil
	}
	if m, ok := decodeFlatMetadata(s); ok {
		return m
	}
	var m map[string]any
	if json.Unmarshal([]byte(s), &m) != nil {
		return nil
	}
	return markdown.DecodeMetadata(m)
}

// metaKeys holds the metadata keys the store writes, so that decoded maps
// share them instead of each holding its own copy.
var metaKeys = map[string]string{"section": "section", "type": "type", "statedAt": "statedAt", "agentId": "agentId"}

// decodeFlatMetadata reads s when it is exactly a JSON object without
// whitespace whose values are strings or {"$time":"…"} objects holding an
// RFC 3339 time, no string having an escape, a control character or
// invalid UTF-8; ok is false for anything else (the caller then decodes
// it in full). An empty object gives nil, as DecodeMetadata does. String
// values are interned (package unique).
func decodeFlatMetadata(s string) (m map[string]any, ok bool) {
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return nil, false
	}
	if s == "{}" {
		return nil, true
	}
	// str reads a plain string starting at s[i] == '"'; j is past it.
	str := func(i int) (v string, j int, ok bool) {
		if i >= len(s) || s[i] != '"' {
			return "", 0, false
		}
		for j = i + 1; j < len(s); j++ {
			switch c := s[j]; {
			case c == '"':
				v = s[i+1 : j]
				return v, j + 1, utf8.ValidString(v)
			case c == '\\' || c < 0x20:
				return "", 0, false
			}
		}
		return "", 0, false
	}
	m = make(map[string]any, strings.Count(s, ":")-strings.Count(s, "$time"))
	for i := 1; ; {
		k, j, ok := str(i)
		if !ok || j >= len(s) || s[j] != ':' {
			return nil, false
		}
		if key, ok := metaKeys[k]; ok {
			k = key
		}
		i = j + 1
		switch {
		case i < len(s) && s[i] == '"':
			v, j, ok := str(i)
			if !ok {
				return nil, false
			}
			// canonical copies: values repeat (sections, types, agents),
			// and a slice of s would keep all of s alive
			m[k], i = unique.Make(v).Value(), j
		case strings.HasPrefix(s[i:], `{"$time":`):
			v, j, ok := str(i + len(`{"$time":`))
			if !ok || j >= len(s) || s[j] != '}' {
				return nil, false
			}
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return nil, false
			}
			m[k], i = t, j+1
		default:
			return nil, false
		}
		if i >= len(s) {
			return nil, false
		}
		switch s[i] {
		case ',':
			i++
		case '}':
			if i != len(s)-1 {
				return nil, false
			}
			return m, true
		default:
			return nil, false
		}
	}
}

// decodeDir reverses EncodeActor for directories whose files lack an actor
// header (a person created them by hand).
func decodeDir(enc string) string {
	if s, err := url.PathUnescape(enc); err == nil {
		return s
	}
	return enc
}

// fsync makes an appended Markdown file durable (the source of truth is
// written before the index); skipped with Options.NoFsync, left to the
// background flusher with Options.FsyncEvery.
func (s *Store) fsync(path string) {
	if s.opts.NoFsync {
		return
	}
	if s.opts.FsyncEvery > 0 {
		s.dirtyMu.Lock()
		if s.dirty == nil {
			s.dirty = map[string]struct{}{}
		}
		s.dirty[path] = struct{}{}
		s.dirtyMu.Unlock()
		return
	}
	syncFile(path)
}

// syncFile fsyncs the file at path (a variable for tests to count).
var syncFile = func(path string) {
	if fh, err := os.Open(path); err == nil {
		fh.Sync()
		fh.Close()
	}
}

// flushDirty fsyncs the files appended since the last flush
// (Options.FsyncEvery).
func (s *Store) flushDirty() {
	s.dirtyMu.Lock()
	paths := s.dirty
	s.dirty = nil
	s.dirtyMu.Unlock()
	for p := range paths {
		syncFile(p)
	}
}

// runFlusher flushes every Options.FsyncEvery until stop is closed, then
// once more.
func (s *Store) runFlusher(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(s.opts.FsyncEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.flushDirty()
		case <-stop:
			s.flushDirty()
			return
		}
	}
}

func unixNano(n int64) time.Time { return time.Unix(0, n).UTC() }
