package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/memindex"
)

// Engine names a ranking engine for ranked searches (listings, Text "",
// are the same under every engine).
type Engine string

const (
	// EngineBM25F is the default: package search's BM25F over an
	// in-memory index per actor (stemming, neighbouring turns as context,
	// speaker and time cues, optional vector fusion).
	EngineBM25F Engine = "bm25f"
	// EngineFTS5 ranks with SQLite FTS5's bm25() over the memory_fts table
	// of the index database: plain Okapi BM25 (k1 1.2, b 0.75) over the
	// document text, with corpus statistics of the whole table (every
	// actor; results are still only the searched actor's). No vectors.
	EngineFTS5 Engine = "fts5"
)

// ParseEngine maps "bm25f" (or "") and "fts5" to an Engine; anything else
// is an error naming the choices.
func ParseEngine(s string) (Engine, error) {
	switch Engine(strings.ToLower(strings.TrimSpace(s))) {
	case "", EngineBM25F:
		return EngineBM25F, nil
	case EngineFTS5:
		return EngineFTS5, nil
	}
	return "", fmt.Errorf("unknown memory search engine %q (want bm25f or fts5)", s)
}

// ftsSchema is the SQLite full-text index of every record and event row.
//
// fts_docs holds one row per record or event (keyed by its ID; its integer
// rowid is the FTS5 rowid): the text as indexed, the owning actor and the
// namespace searched. memory_fts is an external-content FTS5 table over
// fts_docs, so the text is stored once; triggers keep it in step with
// fts_docs, and triggers on records and events delete their fts_docs row,
// so every delete (expiry, forget, reload, rebuild) reaches the full-text
// index in the same transaction. Inserts and updates are written by the
// store (ftsBatch) in the transaction that writes the row, because an
// event's namespace and text are derived in Go.
//
// akey is the actor as one indexed token (ftsActorKey: "a" and the hex of
// the actor ID, a generated column, so no writer can get it wrong), so a
// query names its actor inside FTS5 (ftsScoped) and FTS5 scores only that
// actor's rows, instead of scoring the matches of every actor and leaving
// the join to drop the others' (issue 14: at 100 actors that was a third
// of the server's CPU). Its column weight in bm25() is 0 (ftsBM25).
//
// Tokenizer "porter unicode61 remove_diacritics 2": unicode61 splits on
// Unicode letter/number classes (so Hangul, accented Latin and CJK text
// tokenise, which the ASCII tokenizer does not), folds case, and with
// remove_diacritics 2 folds diacritics also from characters that
// remove_diacritics 1 misses (e.g. composed forms), so "café" and "cafe"
// match; porter wraps it with English stemming, so "watering" matches
// "watered", as package search's analyzer does for BM25F.
const ftsSchema = `
CREATE TABLE IF NOT EXISTS fts_docs(
  rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, actor TEXT NOT NULL,
  namespace TEXT NOT NULL, content TEXT NOT NULL,
  ` + ftsAkeyColumn + `);
` + ftsTableSchema

// ftsAkeyColumn is fts_docs' actor key, also added to an index written
// before it existed (migrateFTSActorKey).
const ftsAkeyColumn = `akey TEXT GENERATED ALWAYS AS ('a' || hex(actor)) VIRTUAL`

// ftsTableSchema is the FTS5 table over fts_docs and the triggers that
// keep it in step.
const ftsTableSchema = `
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(
  content, akey, actor UNINDEXED, namespace UNINDEXED,
  content='fts_docs', content_rowid='rowid',
  tokenize='porter unicode61 remove_diacritics 2');
CREATE TRIGGER IF NOT EXISTS fts_docs_ai AFTER INSERT ON fts_docs BEGIN
  INSERT INTO memory_fts(rowid,content,akey,actor,namespace) VALUES(new.rowid,new.content,new.akey,new.actor,new.namespace);
END;
CREATE TRIGGER IF NOT EXISTS fts_docs_ad AFTER DELETE ON fts_docs BEGIN
  INSERT INTO memory_fts(memory_fts,rowid,content,akey,actor,namespace) VALUES('delete',old.rowid,old.content,old.akey,old.actor,old.namespace);
END;
CREATE TRIGGER IF NOT EXISTS fts_docs_au AFTER UPDATE ON fts_docs BEGIN
  INSERT INTO memory_fts(memory_fts,rowid,content,akey,actor,namespace) VALUES('delete',old.rowid,old.content,old.akey,old.actor,old.namespace);
  INSERT INTO memory_fts(rowid,content,akey,actor,namespace) VALUES(new.rowid,new.content,new.akey,new.actor,new.namespace);
END;
CREATE TRIGGER IF NOT EXISTS records_fts_ad AFTER DELETE ON records BEGIN
  DELETE FROM fts_docs WHERE id=old.id;
END;
CREATE TRIGGER IF NOT EXISTS events_fts_ad AFTER DELETE ON events BEGIN
  DELETE FROM fts_docs WHERE id=old.id;
END;
`

// ftsBM25 is the score of a memory_fts row: bm25() with the text column's
// weight 1 and the actor key's 0 (the unindexed columns take no part).
const ftsBM25 = `bm25(memory_fts, 1.0, 0.0)`

// ftsActorKey is the token akey holds for actor: "a" and the upper-case
// hex of its bytes, as SQLite's hex() writes it (the tokenizer folds case
// on both sides).
func ftsActorKey(actor string) string {
	return "a" + strings.ToUpper(hex.EncodeToString([]byte(actor)))
}

// ftsScoped scopes a full-text query q (ftsQuery, coldQuery) to actor's
// rows: FTS5 then scores only those, whatever the other actors hold. The
// join on fts_docs.actor still decides; the key only prunes.
func ftsScoped(actor, q string) string {
	return `akey : "` + ftsActorKey(actor) + `" AND content : (` + q + `)`
}

// ftsScope decides whether a full-text query of an actor with about rows
// full-text rows names the actor (ftsScoped): when the other actors' rows
// are most of the index. FTS5 then still walks the postings of the
// query's words of every actor, but scores, and joins to fts_docs, only
// the actor's matches (BenchmarkColdSearchActors); an actor alone in the
// index gains nothing from the key and pays for walking its postings
// (about 0.45 ms more per search in the same benchmark).
func (s *Store) ftsScope(rows int) bool {
	return s.ftsRows.Load() > 2*int64(rows)
}

// ftsBatch collects the fts_docs rows one transaction writes. write puts
// them with one multi-row upsert per ftsChunk rows: FTS5 flushes its
// pending terms to a new index segment at every statement (savepoint), so
// one statement per row would cost a segment, and merge work, per row.
type ftsBatch struct{ args []any }

// ftsChunk is the most rows one upsert statement carries (4 parameters
// each, far below SQLite's parameter limit).
const ftsChunk = 250

func (b *ftsBatch) record(actor string, r memory.Record) {
	b.args = append(b.args, r.ID, actor, r.Namespace, r.Content)
}

func (s *Store) ftsEvent(b *ftsBatch, actor string, e memory.Event) {
	b.args = append(b.args, e.ID, actor, s.eventNamespace(e), s.ftsEventText(e))
}

// write upserts the rows (the last row of an ID wins); the fts_docs
// triggers index them. Statements of up to ftsCached rows are prepared
// once per store (their triggers make preparing cost more than running).
func (b *ftsBatch) write(ctx context.Context, s *Store, tx *sql.Tx) error {
	for start := 0; start < len(b.args); start += 4 * ftsChunk {
		args := b.args[start:min(start+4*ftsChunk, len(b.args))]
		n := len(args) / 4
		var err error
		if st := s.ftsStmt(n); st != nil {
			_, err = tx.StmtContext(ctx, st).ExecContext(ctx, args...)
		} else {
			_, err = tx.ExecContext(ctx, ftsUpsertN(n), args...)
		}
		if err != nil {
			return fmt.Errorf("memory full-text index: %w", err)
		}
	}
	// An estimate: an upsert of a row already there, or a transaction
	// rolled back, counts too (ftsScope).
	s.ftsRows.Add(int64(len(b.args) / 4))
	return nil
}

// commit writes the rows in a transaction of their own.
func (b *ftsBatch) commit(ctx context.Context, s *Store) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("memory full-text index: %w", err)
	}
	defer tx.Rollback()
	if err := b.write(ctx, s, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("memory full-text index: %w", err)
	}
	return nil
}

// ftsCached is the largest row count whose upsert statement is kept
// prepared (a turn writes two events).
const ftsCached = 4

func ftsUpsertN(n int) string {
	return `INSERT INTO fts_docs(id,actor,namespace,content) VALUES` + strings.TrimSuffix(strings.Repeat("(?,?,?,?),", n), ",") +
		` ON CONFLICT(id) DO UPDATE SET actor=excluded.actor, namespace=excluded.namespace, content=excluded.content`
}

// ftsStmt returns the prepared upsert of n rows, or nil when n is above
// ftsCached (the caller then runs the text).
func (s *Store) ftsStmt(n int) *sql.Stmt {
	if n < 1 || n > ftsCached {
		return nil
	}
	return s.ftsStmts[n]
}

// ftsEventText is the text an event is indexed under: its episodic record
// content "(YYYY-MM-DD) <speaker>: <text>", plus its image caption.
func (s *Store) ftsEventText(e memory.Event) string {
	t := s.eventRecord(e).Content
	if c, ok := e.Metadata["caption"].(string); ok && c != "" {
		t += " " + c
	}
	return t
}

// createFTS creates the full-text tables and, when they are new in an
// existing index (written before they existed), fills them from the rows.
func (s *Store) createFTS(ctx context.Context) error {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name='fts_docs'`).Scan(&n); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	if n > 0 {
		if err := s.migrateFTSActorKey(ctx); err != nil {
			return err
		}
	}
	if _, err := s.db.ExecContext(ctx, ftsSchema); err != nil {
		return fmt.Errorf("create memory full-text index: %w", err)
	}
	// Prepared here, outside any transaction: the pool has one connection.
	for i := 1; i <= ftsCached; i++ {
		st, err := s.db.PrepareContext(ctx, ftsUpsertN(i))
		if err != nil {
			return fmt.Errorf("create memory full-text index: %w", err)
		}
		s.ftsStmts[i] = st
	}
	if n > 0 {
		return nil
	}
	return s.backfillFTS(ctx)
}

// migrateFTSActorKey moves a full-text index written before the actor key
// (ftsSchema) to it, in one transaction: fts_docs gains the generated
// akey column, memory_fts and its triggers are made again with it, and
// FTS5 rebuilds the index from fts_docs. A crash before the commit leaves
// the old index, which the next Open migrates. An index that has the key
// is left alone.
func (s *Store) migrateFTSActorKey(ctx context.Context) error {
	var def string
	err := s.db.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE name='fts_docs'`).Scan(&def)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	if strings.Contains(def, "akey") {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	defer tx.Rollback()
	for _, q := range []string{
		`DROP TRIGGER IF EXISTS fts_docs_ai`, `DROP TRIGGER IF EXISTS fts_docs_ad`, `DROP TRIGGER IF EXISTS fts_docs_au`,
		`DROP TABLE IF EXISTS memory_fts`,
		`ALTER TABLE fts_docs ADD COLUMN ` + ftsAkeyColumn,
		ftsTableSchema,
		`INSERT INTO memory_fts(memory_fts) VALUES('rebuild')`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("memory full-text index: add the actor key: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("memory full-text index: add the actor key: %w", err)
	}
	return nil
}

// backfillFTS indexes every record and event row in one transaction.
func (s *Store) backfillFTS(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT id,actor,namespace,content FROM records`)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	var recs []memory.Record
	var recActors []string
	for rows.Next() {
		var r memory.Record
		var actor string
		if err := rows.Scan(&r.ID, &actor, &r.Namespace, &r.Content); err != nil {
			rows.Close()
			return fmt.Errorf("memory index: %w", err)
		}
		recs, recActors = append(recs, r), append(recActors, actor)
	}
	rows.Close()
	rows, err = tx.QueryContext(ctx, `SELECT id,actor,session,role,text,ts,metadata FROM events`)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	var evs []memory.Event
	for rows.Next() {
		var e memory.Event
		var ts, md string
		if err := rows.Scan(&e.ID, &e.ActorID, &e.SessionID, &e.Role, &e.Text, &ts, &md); err != nil {
			rows.Close()
			return fmt.Errorf("memory index: %w", err)
		}
		e.Timestamp, _ = time.Parse(time.RFC3339Nano, ts)
		e.Metadata = decodeJSONMetadata(md)
		evs = append(evs, e)
	}
	rows.Close()
	var b ftsBatch
	for i, r := range recs {
		b.record(recActors[i], r)
	}
	for _, e := range evs {
		s.ftsEvent(&b, e.ActorID, e)
	}
	if err := b.write(ctx, s, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	return nil
}

// maxFTSTerms bounds the terms of one full-text query.
const maxFTSTerms = 64

// ftsQuery turns free text into an FTS5 query that cannot carry FTS5
// syntax: the text is split into runs of letters, digits and marks, each
// run (at most maxFTSTerms distinct ones) is written as an FTS5 string
// ("…", with any '"' doubled) and the strings are OR-ed. Operators,
// column filters, prefixes, NEAR groups and quotes in the text are thus
// only separators. "" means the text has no searchable term.
func ftsQuery(text string) string {
	words := strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r) && !unicode.IsMark(r)
	})
	seen := map[string]bool{}
	var terms []string
	for _, w := range words {
		w = strings.ToLower(w)
		if seen[w] {
			continue
		}
		seen[w] = true
		terms = append(terms, `"`+strings.ReplaceAll(w, `"`, `""`)+`"`)
		if len(terms) == maxFTSTerms {
			break
		}
	}
	return strings.Join(terms, " OR ")
}

// searchFTS ranks a's documents allowed by c for text with FTS5 bm25():
// the match is scoped to the actor in SQL; namespace, status, strategy,
// filters and event expiry are applied to the matching rows (against the
// same records the BM25F engine returns) before the top k are taken.
// Scores are -bm25() (higher is better); ties go in index order (records
// by createdAt then ID, then events by timestamp then ID), as after a
// rebuild.
func (s *Store) searchFTS(ctx context.Context, a *actorState, c memindex.Cond, text string, k int) ([]memory.Hit, error) {
	q := ftsQuery(text)
	if q == "" {
		return nil, nil
	}
	if err := s.ftsCatchUp(ctx, a); err != nil {
		return nil, err
	}
	a.mu.RLock()
	own := len(a.records) + a.recCold.total() + len(a.events) + a.coldN
	a.mu.RUnlock()
	if s.ftsScope(own) {
		q = ftsScoped(a.id, q)
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT d.id, `+ftsBM25+` FROM memory_fts JOIN fts_docs d ON d.rowid=memory_fts.rowid WHERE memory_fts MATCH ? AND d.actor=?`, q, a.id)
	found, err := scanBM25(rows, err, func(float64) bool { return true })
	if err != nil {
		return nil, err
	}
	type hit struct {
		h   memory.Hit
		key string
	}
	hits := make([]hit, 0, len(found))
	a.mu.RLock()
	var cold map[string]memory.Event
	var coldRecs map[string]memory.Record
	if a.hasCold() || a.recCold.total() > 0 {
		var ids []string
		for _, f := range found {
			if _, ok := a.records[f.id]; !ok {
				if _, ok := a.events[f.id]; !ok {
					ids = append(ids, f.id)
				}
			}
		}
		var err error
		if cold, err = s.coldByID(ctx, a, ids); err == nil {
			coldRecs, err = s.coldRecords(ctx, a, ids)
		}
		if err != nil {
			a.mu.RUnlock()
			return nil, err
		}
	}
	for _, f := range found {
		var r memory.Record
		var key string
		e, ok := a.events[f.id]
		if !ok {
			e, ok = cold[f.id]
		}
		if rec, isRec := a.records[f.id]; isRec {
			r, key = *rec, memindex.RecordKey(*rec)
		} else if rec, isRec := coldRecs[f.id]; isRec {
			r, key = rec, memindex.RecordKey(rec)
		} else if ok && !s.expired(e) {
			r, key = s.eventRecord(e), memindex.EventKey(e)
		} else {
			continue // expired, or written to SQLite but not yet applied
		}
		if !c.Match(r) {
			continue
		}
		hits = append(hits, hit{memory.Hit{Record: r, Score: -f.raw, Explain: fmt.Sprintf("fts5 bm25=%.6g", f.raw)}, key})
	}
	a.mu.RUnlock()
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].h.Score != hits[j].h.Score {
			return hits[i].h.Score > hits[j].h.Score
		}
		return hits[i].key < hits[j].key
	})
	if k > 0 && len(hits) > k {
		hits = hits[:k]
	}
	out := make([]memory.Hit, len(hits))
	for i, h := range hits {
		out[i] = h.h
	}
	return out, nil
}

// ftsFound is one row of a full-text query: a document's ID and its raw
// bm25() (lower is better).
type ftsFound struct {
	id  string
	raw float64
}

// scanBM25 reads the (id, bm25) rows of a full-text query (qerr is the
// query's own error), keeping those whose raw score keep accepts.
func scanBM25(rows *sql.Rows, qerr error, keep func(raw float64) bool) ([]ftsFound, error) {
	if qerr != nil {
		return nil, fmt.Errorf("memory full-text search: %w", qerr)
	}
	defer rows.Close()
	var out []ftsFound
	for rows.Next() {
		var f ftsFound
		if err := rows.Scan(&f.id, &f.raw); err != nil {
			return nil, fmt.Errorf("memory full-text search: %w", err)
		}
		if keep(f.raw) {
			out = append(out, f)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory full-text search: %w", err)
	}
	return out, nil
}

// ftsCatchUp writes the full-text rows of a's events that have none: the
// events appended while FTS5 was not the configured engine (writeEvents),
// found once per process by an anti-join and afterwards only when
// ftsBehind says an append skipped them. It holds a's writer lock, so no
// append runs between the check and the write.
func (s *Store) ftsCatchUp(ctx context.Context, a *actorState) error {
	if !a.ftsBehind.Load() && a.ftsChecked.Load() {
		return nil
	}
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if !a.ftsBehind.Load() && a.ftsChecked.Load() {
		return nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT e.id,e.session,e.role,e.text,e.ts,e.metadata FROM events e LEFT JOIN fts_docs d ON d.id=e.id WHERE e.actor=? AND d.id IS NULL`, a.id)
	if err != nil {
		return fmt.Errorf("memory full-text index: %w", err)
	}
	var b ftsBatch
	for rows.Next() {
		e := memory.Event{ActorID: a.id}
		var ts, md string
		if err := rows.Scan(&e.ID, &e.SessionID, &e.Role, &e.Text, &ts, &md); err != nil {
			rows.Close()
			return fmt.Errorf("memory full-text index: %w", err)
		}
		e.Timestamp, _ = time.Parse(time.RFC3339Nano, ts)
		e.Metadata = decodeJSONMetadata(md)
		s.ftsEvent(&b, a.id, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("memory full-text index: %w", err)
	}
	if len(b.args) > 0 {
		if err := b.commit(ctx, s); err != nil {
			return err
		}
	}
	a.ftsBehind.Store(false)
	a.ftsChecked.Store(true)
	return nil
}

// ftsCount reports the full-text index's row count for one actor (tests
// and diagnostics), after writing any rows still owed (ftsCatchUp).
func (s *Store) ftsCount(ctx context.Context, actor string) (int, error) {
	if a, release, err := s.acquire(ctx, actor); err == nil {
		err = s.ftsCatchUp(ctx, a)
		release()
		if err != nil {
			return 0, err
		}
	}
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM memory_fts WHERE actor=?`, actor).Scan(&n)
	return n, err
}
