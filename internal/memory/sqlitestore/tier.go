package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime/trace"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/memindex"
	"github.com/tendrilai/tendril/internal/memory/search"
)

// The event window (issue 14): an actor's newest Options.EventWindow
// events are warm, held in actorState.events and in the in-memory BM25F
// index; older ones are cold, held only in SQLite (the events table, the
// Markdown) and searched through the FTS5 index of memory.db. So an
// actor's heap, its index rebuild and its search cost are bounded by the
// window, not by its history.
//
// "Older" is insertion order: the events table's rowid. The boundary is
// kept in event_tiers as the ID of the newest cold event (its rowid is
// looked up on load, so a VACUUM, which may renumber rowids but keeps
// their order, does not move it). Every cold event has its fts_docs row:
// demote writes the rows, the boundary and then drops the events from
// memory, in that order. Paths that rewrite an actor's event rows
// wholesale (a Markdown reload, Rebuild, Forget) delete its boundary, so
// its events are all warm again until the next write demotes the oldest.

// DefaultEventWindow is Options.EventWindow when unset: 4,096 events
// (about 2,000 turns) of each actor stay in memory.
const DefaultEventWindow = 4096

// event_tiers: per actor, the ID of its newest cold event and the latest
// timestamp among its cold events (RFC 3339; events appended out of
// timestamp order may leave cold events after warm ones, which
// sessionEvents must then read).
//
// cold_scopes: per actor, the namespace and session pairs of its cold
// events (coldScopeKey), so that a reloaded actor knows which sessions a
// cold search may read without scanning its whole cold history (at 100
// actors in a 12 MiB budget that scan was 17 % of the server's CPU). The
// row whose scope is empty marks the set complete through the cold boundary
// upto (event_tiers.last_cold): a boundary moved by anything that did
// not also write the set (expiry, an older Tendril) leaves it stale, and
// the next load scans and rewrites it.
const tierSchema = `CREATE TABLE IF NOT EXISTS event_tiers(actor TEXT PRIMARY KEY, last_cold TEXT NOT NULL, max_ts TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS cold_scopes(actor TEXT NOT NULL, scope TEXT NOT NULL, upto TEXT NOT NULL DEFAULT '', PRIMARY KEY(actor, scope)) WITHOUT ROWID;`

// window is the effective event window (0: none).
func (s *Store) window() int {
	if s.opts.EventWindow < 0 || s.legacy {
		return 0
	}
	return s.opts.EventWindow
}

// minWindow is the smallest window windowFor gives an actor under the
// byte budget: 128 events, about 64 turns (100 actors in a 12 MiB budget
// get about 175 each).
const minWindow = 128

// windowFor is a's window: Options.EventWindow, narrowed when the cached
// actors would not fit Options.CacheBytes with their windows full. Each
// actor then gets its share of the budget (CacheBytes ÷ cached actors)
// in documents at its own bytes per document; its records stay in memory
// whatever the window, so its events get the documents the records leave,
// at least minWindow. So many actors in use at once shrink each other's
// windows (their older events go cold) instead of evicting each other and
// rebuilding an index on every turn. 0: no window.
func (s *Store) windowFor(a *actorState) int {
	w := s.window()
	if w == 0 || s.opts.CacheBytes <= 0 {
		return w
	}
	s.mu.Lock()
	n := len(s.actors)
	s.mu.Unlock()
	a.mu.RLock()
	recs := len(a.records)
	docs := len(a.events) + recs
	a.mu.RUnlock()
	if docs == 0 {
		return w
	}
	// One actor alone is held to the budget too: its window narrows when
	// its events are large (a client sending 100 KB messages of unique
	// words kept 4,096 of them, 400 MB against a 32 MiB budget).
	per := s.opts.CacheBytes / int64(max(n, 1))
	bpd := max(1, a.bytes()/int64(docs))
	return min(w, max(minWindow, int(per/bpd)-recs))
}

// windowSlack is how far past the window the warm events may grow before
// a demotion: an eighth of it (at least 1), so demotions come in batches.
func windowSlack(w int) int { return max(1, w/8) }

// loadColdBound sets a.coldTo from event_tiers (0 when the actor has no
// cold events, or its boundary event is gone, or the store has no window,
// which drops the boundary). A window raised since the boundary was
// written does not move it: those events stay cold until a rebuild (the
// window narrowed under the byte budget, windowFor, leaves the same
// state, and re-warming them on every reload would cost a demotion each).
func (s *Store) loadColdBound(ctx context.Context, a *actorState) error {
	if s.window() == 0 {
		// No window (a negative memory.eventWindow): every event is warm,
		// including those an earlier run with a window made cold.
		for _, q := range []string{`DELETE FROM event_tiers WHERE actor=?`, `DELETE FROM cold_scopes WHERE actor=?`} {
			if _, err := s.db.ExecContext(ctx, q, a.id); err != nil {
				return fmt.Errorf("memory index: %w", err)
			}
		}
		return nil
	}
	var last, maxTS string
	err := s.db.QueryRowContext(ctx, `SELECT last_cold, max_ts FROM event_tiers WHERE actor=?`, a.id).Scan(&last, &maxTS)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	var rowid int64
	err = s.db.QueryRowContext(ctx, `SELECT rowid FROM events WHERE id=? AND actor=?`, last, a.id).Scan(&rowid)
	if errors.Is(err, sql.ErrNoRows) {
		// The boundary event went (expiry deletes the oldest first, so
		// every cold event went with it, or the rows were edited by
		// hand): load everything, the next write demotes again.
		return nil
	}
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	a.coldTo = rowid
	a.coldMaxTS, _ = time.Parse(time.RFC3339Nano, maxTS)
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE actor=? AND rowid<=?`, a.id, rowid).Scan(&a.coldN); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	return s.loadColdScopes(ctx, a, last)
}

// coldScopeKey is the key of an event's namespace and session in
// actorState.coldNS and cold_scopes.
func (s *Store) coldScopeKey(e memory.Event) string {
	return s.eventNamespace(e) + "\x00" + e.SessionID
}

// loadColdScopes fills a.coldNS from cold_scopes when the set there is
// complete through the boundary last; otherwise it scans a's cold events
// (scanColdScopes) and rewrites the set. The caller has a to itself.
func (s *Store) loadColdScopes(ctx context.Context, a *actorState, last string) error {
	rows, err := s.db.QueryContext(ctx, `SELECT scope, upto FROM cold_scopes WHERE actor=?`, a.id)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	ns := map[string]bool{}
	complete := false
	for rows.Next() {
		var scope, upto string
		if err := rows.Scan(&scope, &upto); err != nil {
			rows.Close()
			return fmt.Errorf("memory index: %w", err)
		}
		if scope == "" {
			complete = upto == last
		} else {
			ns[scope] = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	if !complete {
		if ns, err = s.scanColdScopes(ctx, s.db, a); err != nil {
			return err
		}
		if err := s.writeColdScopes(ctx, a, ns, last); err != nil {
			return err
		}
	}
	a.coldNSMu.Lock()
	a.coldNS = ns
	a.coldNSMu.Unlock()
	return nil
}

// writeColdScopes replaces a's cold_scopes rows by ns, complete through
// the boundary last.
func (s *Store) writeColdScopes(ctx context.Context, a *actorState, ns map[string]bool, last string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM cold_scopes WHERE actor=?`, a.id); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	keys := make([]string, 0, len(ns))
	for k := range ns {
		keys = append(keys, k)
	}
	if err := addColdScopes(ctx, tx, a.id, keys, last); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	return nil
}

// addColdScopes adds keys to actor's cold_scopes and marks the set
// complete through the boundary last.
func addColdScopes(ctx context.Context, tx execer, actor string, keys []string, last string) error {
	for _, k := range keys {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO cold_scopes(actor,scope) VALUES(?,?)`, actor, k); err != nil {
			return fmt.Errorf("memory index: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO cold_scopes(actor,scope,upto) VALUES(?,'',?) ON CONFLICT(actor,scope) DO UPDATE SET upto=excluded.upto`, actor, last); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	return nil
}

// scanColdScopes reads the namespace and session keys of a's cold events
// from the events table: a read of its whole cold history, which
// cold_scopes saves on every load but the first.
func (s *Store) scanColdScopes(ctx context.Context, db *sql.DB, a *actorState) (map[string]bool, error) {
	s.coldScans.Add(1)
	rows, err := db.QueryContext(ctx, `SELECT DISTINCT session, json_extract(metadata,'$.agentId') FROM events WHERE actor=? AND rowid<=?`, a.id, a.coldTo)
	if err != nil {
		return nil, fmt.Errorf("memory index: %w", err)
	}
	defer rows.Close()
	ns := map[string]bool{}
	for rows.Next() {
		var sess string
		var agent sql.NullString
		if err := rows.Scan(&sess, &agent); err != nil {
			return nil, fmt.Errorf("memory index: %w", err)
		}
		e := memory.Event{ActorID: a.id, SessionID: sess}
		if agent.Valid && agent.String != "" {
			e.Metadata = map[string]any{"agentId": agent.String}
		}
		ns[s.coldScopeKey(e)] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory index: %w", err)
	}
	return ns, nil
}

// boundAfterExpiry moves a's boundary to its newest remaining cold event
// (none: no cold events) after expiry deleted some, so that rowids SQLite
// hands out again once the newest rows are gone are never taken for cold.
// The caller has a to itself (gate held exclusively, or loading).
func (s *Store) boundAfterExpiry(ctx context.Context, a *actorState) error {
	var rowid int64
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT rowid, id FROM events WHERE actor=? AND rowid<=? ORDER BY rowid DESC LIMIT 1`, a.id, a.coldTo).Scan(&rowid, &id)
	if errors.Is(err, sql.ErrNoRows) {
		for _, q := range []string{`DELETE FROM event_tiers WHERE actor=?`, `DELETE FROM cold_scopes WHERE actor=?`} {
			if _, err := s.db.ExecContext(ctx, q, a.id); err != nil {
				return fmt.Errorf("memory index: %w", err)
			}
		}
		a.mu.Lock()
		a.coldTo, a.coldN, a.coldMaxTS = 0, 0, time.Time{}
		a.mu.Unlock()
		a.coldNSMu.Lock()
		a.coldNS = nil
		a.coldNSMu.Unlock()
		return nil
	}
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE event_tiers SET last_cold=? WHERE actor=?`, id, a.id); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	a.mu.Lock()
	a.coldTo = rowid
	a.mu.Unlock()
	return nil
}

// hasCold reports whether a has cold events. The caller holds a.mu (either
// mode) or a.wmu.
func (a *actorState) hasCold() bool { return a.coldTo > 0 }

// scanEvents reads event rows (id,session,role,text,ts,metadata) of actor.
func scanEvents(rows *sql.Rows, actor string, each func(memory.Event)) error {
	defer rows.Close()
	for rows.Next() {
		e := memory.Event{ActorID: actor}
		var ts, md string
		if err := rows.Scan(&e.ID, &e.SessionID, &e.Role, &e.Text, &ts, &md); err != nil {
			return fmt.Errorf("memory index: %w", err)
		}
		e.Timestamp, _ = time.Parse(time.RFC3339Nano, ts)
		e.Metadata = decodeJSONMetadata(md)
		each(e)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	return nil
}

// coldEvents reads a's cold events (rowid ≤ coldTo) that pass the SQL
// condition extra (with args), in rowid order. The caller holds a.mu or
// a.wmu, so coldTo is still.
func (s *Store) coldEvents(ctx context.Context, a *actorState, extra string, args ...any) ([]memory.Event, error) {
	if !a.hasCold() {
		return nil, nil
	}
	q := `SELECT id,session,role,text,ts,metadata FROM events WHERE actor=? AND rowid<=?`
	if extra != "" {
		q += " AND " + extra
	}
	rows, err := s.db.QueryContext(ctx, q, append([]any{a.id, a.coldTo}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("memory index: %w", err)
	}
	var out []memory.Event
	err = scanEvents(rows, a.id, func(e memory.Event) { out = append(out, e) })
	return out, err
}

// coldByID reads the cold events of a among ids, by primary key (an
// "actor AND rowid" condition would lead SQLite to scan the actor's cold
// rows), checking owner and tier on each. One prepared statement takes
// the IDs as a JSON array.
func (s *Store) coldByID(ctx context.Context, a *actorState, ids []string) (map[string]memory.Event, error) {
	out := map[string]memory.Event{}
	if !a.hasCold() || len(ids) == 0 {
		return out, nil
	}
	err := s.queryByIDs(ctx, `SELECT rowid,actor,id,session,role,text,ts,metadata FROM events WHERE id IN (SELECT value FROM json_each(?))`, ids, func(rows *sql.Rows) error {
		var rowid int64
		var actor, ts, md string
		e := memory.Event{ActorID: a.id}
		if err := rows.Scan(&rowid, &actor, &e.ID, &e.SessionID, &e.Role, &e.Text, &ts, &md); err != nil {
			return fmt.Errorf("memory index: %w", err)
		}
		if actor != a.id || rowid > a.coldTo {
			return nil
		}
		e.Timestamp, _ = time.Parse(time.RFC3339Nano, ts)
		e.Metadata = decodeJSONMetadata(md)
		out[e.ID] = e
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// queryByIDs runs q, a read on the query_only pool whose one parameter is
// the JSON array of ids (json_each), calling scan for each row.
func (s *Store) queryByIDs(ctx context.Context, q string, ids []string, scan func(*sql.Rows) error) error {
	arr, _ := json.Marshal(ids)
	st, err := s.rstmt(ctx, q)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	rows, err := st.QueryContext(ctx, string(arr))
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	return nil
}

// allEvents returns every event of a, warm and cold, unsorted. The
// caller holds a.mu (either mode) or a.wmu.
func (s *Store) allEvents(ctx context.Context, a *actorState) ([]memory.Event, error) {
	out := make([]memory.Event, 0, len(a.events))
	for _, e := range a.events {
		out = append(out, e)
	}
	cold, err := s.coldEvents(ctx, a, "")
	return append(out, cold...), err
}

// demoteSoon moves a's oldest warm events out of memory in the background
// when the write just applied left more than the window and its slack
// warm: their full-text rows are written, then the boundary, then they
// leave actorState.events and the ranking index. It holds a.wmu only
// while it picks the events and while it drops them (see demote), pins a
// against eviction, and Close waits for it (gate).
func (s *Store) demoteSoon(a *actorState) {
	w := s.windowFor(a)
	if w == 0 || !a.demoting.CompareAndSwap(false, true) {
		return
	}
	a.mu.RLock()
	over := len(a.events) > w+windowSlack(w)
	a.mu.RUnlock()
	if !over {
		a.demoting.Store(false)
		return
	}
	s.inBackground(a, &a.demoting, func() {
		defer trace.StartRegion(context.Background(), "background: demotion").End()
		if err := s.demote(context.Background(), a, w); err != nil {
			s.opts.Logger.Warn("memory: moving old events out of memory failed; they stay in memory", "actor", a.id, "err", err)
		}
	})
}

// demote keeps a's newest w events warm and makes the rest cold. The
// caller holds gate shared and none of a's locks: demote serialises with
// other demotions (a.dmu) and holds a.wmu only to pick the events (the
// writers' commit and apply are then not half done) and to drop them from
// memory, not while their full-text rows are written (the actor's next
// turn used to wait for the whole demotion, docs/bench/soak.md stop 26).
// Between the commit and the drop the events are both warm and cold, as
// a search beside a demotion has always allowed (mergeHits, coldHits).
func (s *Store) demote(ctx context.Context, a *actorState, w int) error {
	a.dmu.Lock()
	defer a.dmu.Unlock()
	a.wmu.Lock()
	locked := true
	defer func() {
		if locked {
			a.wmu.Unlock()
		}
	}()
	if len(a.events) <= w {
		return nil
	}
	var bound int64
	var last string
	err := s.db.QueryRowContext(ctx, `SELECT rowid, id FROM events WHERE actor=? ORDER BY rowid DESC LIMIT 1 OFFSET ?`, a.id, w).Scan(&bound, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM events WHERE actor=? AND rowid>? AND rowid<=?`, a.id, a.coldTo, bound)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("memory index: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	var fts ftsBatch
	gone := make(map[string]bool, len(ids))
	maxTS := a.coldMaxTS
	for _, id := range ids {
		if e, ok := a.events[id]; ok { // not expired and dropped meanwhile
			s.ftsEvent(&fts, a.id, e)
			gone[id] = true
			if e.Timestamp.After(maxTS) {
				maxTS = e.Timestamp
			}
		}
	}
	// The cold scopes the batch adds. The set in cold_scopes is kept
	// complete when a's is known: always once loaded, or when a had no
	// cold events (its set is then this batch's).
	wasCold := a.hasCold()
	a.coldNSMu.Lock()
	known := a.coldNS != nil || !wasCold
	var newScopes []string
	added := map[string]bool{}
	for id := range gone {
		k := s.coldScopeKey(a.events[id])
		if !a.coldNS[k] && !added[k] {
			added[k] = true
			newScopes = append(newScopes, k)
		}
	}
	a.coldNSMu.Unlock()
	a.wmu.Unlock()
	locked = false
	if h := s.testHooks.demotionPicked; h != nil {
		h()
	}
	region := trace.StartRegion(ctx, "background: demotion rows")
	err = s.writeDemotion(ctx, a, &fts, known, wasCold, newScopes, last, maxTS)
	region.End()
	if err != nil {
		return err
	}
	a.wmu.Lock()
	locked = true
	a.mu.Lock()
	a.coldTo, a.coldMaxTS = bound, maxTS
	a.coldN += len(gone)
	demoted := make([]memory.Event, 0, len(gone))
	for id := range gone {
		e := a.events[id]
		demoted = append(demoted, e)
		a.mapBytes.Add(-eventBytes(e))
		delete(a.events, id)
	}
	if !wasCold {
		a.coldNSMu.Lock()
		a.coldNS = map[string]bool{}
		a.coldNSMu.Unlock()
	}
	s.noteColdNS(a, demoted)
	a.mu.Unlock()
	s.changeIndex(a, func(x *actorIndex) *actorIndex {
		s.dropIndexed(a, x, gone)
		return x
	})
	s.compactSoon(a)
	return nil
}

// writeDemotion commits a demotion's rows: the events' full-text rows,
// demoteTxRows at a time, then the last of them with the cold scopes they
// add (when a's set is known) and the new boundary, in one transaction.
// The index has one writer connection, which the actor's turns need for
// their own events: one transaction for a whole demotion (512 events at
// the default window, 13–19 ms) made the turn behind it wait that long
// (docs/bench/soak.md stop 26). A crash between the transactions leaves
// full-text rows of events still warm, which searches skip (coldHits) and
// the next demotion writes again.
func (s *Store) writeDemotion(ctx context.Context, a *actorState, fts *ftsBatch, known, wasCold bool, newScopes []string, last string, maxTS time.Time) error {
	for len(fts.args) > 4*demoteTxRows {
		part := ftsBatch{args: fts.args[:4*demoteTxRows]}
		fts.args = fts.args[4*demoteTxRows:]
		if err := part.commit(ctx, s); err != nil {
			return err
		}
		if h := s.testHooks.demotionChunk; h != nil {
			if err := h(); err != nil {
				return err
			}
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	defer tx.Rollback()
	if err := fts.write(ctx, s, tx); err != nil {
		return err
	}
	if known {
		if !wasCold {
			if _, err := tx.ExecContext(ctx, `DELETE FROM cold_scopes WHERE actor=?`, a.id); err != nil {
				return fmt.Errorf("memory index: %w", err)
			}
		}
		if err := addColdScopes(ctx, tx, a.id, newScopes, last); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO event_tiers(actor,last_cold,max_ts) VALUES(?,?,?) ON CONFLICT(actor) DO UPDATE SET last_cold=excluded.last_cold, max_ts=excluded.max_ts`,
		a.id, last, maxTS.UTC().Format(time.RFC3339Nano)); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	return nil
}

// demoteTxRows is how many full-text rows one transaction of a demotion
// writes (writeDemotion): about 4 ms of the writer connection.
const demoteTxRows = 128

// dropIndexed retires the documents of the events in gone (no longer in
// a.events) and re-indexes the turns that had them as context, as
// expireIndexed does for expired events, so that the index equals one
// built from the remaining events.
func (s *Store) dropIndexed(a *actorState, x *actorIndex, gone map[string]bool) {
	affected := map[string]bool{}
	x.oldest = time.Time{}
	for sid, list := range x.sess {
		keep := list[:0:0]
		cut := false
		for i, r := range list {
			if gone[r.id] {
				x.remove(r.id)
				cut = true
				if i > 0 && !gone[list[i-1].id] {
					affected[list[i-1].id] = true
				}
				if i+1 < len(list) && !gone[list[i+1].id] {
					affected[list[i+1].id] = true
				}
				continue
			}
			keep = append(keep, r)
		}
		if !cut {
			keep = list
		}
		if len(keep) == 0 {
			delete(x.sess, sid)
			continue
		}
		x.sess[sid] = keep
		if x.oldest.IsZero() || keep[0].ts.Before(x.oldest) {
			x.oldest = keep[0].ts
		}
	}
	s.reindexEvents(a, x, affected)
}

// coldScope returns the sessions of a's cold events whose namespaces c
// admits (none: c reaches no cold event, so no SQLite read is needed),
// reading the cold namespaces once per load. The caller holds a.mu (either
// mode) or a.wmu.
func (s *Store) coldScope(ctx context.Context, a *actorState, c memindex.Cond) ([]string, error) {
	if !a.hasCold() || !c.Admits(memory.StrategyEpisodic, memory.StatusActive) {
		return nil, nil
	}
	a.coldNSMu.Lock()
	defer a.coldNSMu.Unlock()
	if a.coldNS == nil { // filled by load; a scan only if that failed
		ns, err := s.scanColdScopes(ctx, s.rdb, a)
		if err != nil {
			return nil, err
		}
		a.coldNS = ns
	}
	var out []string
	seen := map[string]bool{}
	for k := range a.coldNS {
		ns, sess, _ := strings.Cut(k, "\x00")
		if c.InScope(ns) && !seen[sess] {
			seen[sess] = true
			out = append(out, sess)
		}
	}
	sort.Strings(out)
	return out, nil
}

// noteColdNS adds the namespaces of newly cold events to a.coldNS (when
// it is filled). The caller holds a.mu exclusively.
func (s *Store) noteColdNS(a *actorState, evs []memory.Event) {
	a.coldNSMu.Lock()
	defer a.coldNSMu.Unlock()
	if a.coldNS == nil {
		return
	}
	for _, e := range evs {
		a.coldNS[s.coldScopeKey(e)] = true
	}
}

// sessionsIn is the SQL condition "session IN (…)" with its arguments.
func sessionsIn(sessions []string) (string, []any) {
	args := make([]any, len(sessions))
	for i, v := range sessions {
		args[i] = v
	}
	return `session IN (` + strings.TrimSuffix(strings.Repeat("?,", len(sessions)), ",") + `)`, args
}

// Cold candidate terms. A cold search reads every cold row of the actor
// that holds one of its words, so its words are chosen under a budget:
// rarest first (by their document frequency in the warm index, scaled by
// the full-text rows (every actor's, Store.ftsRows: FTS5 walks the words'
// postings of every actor, even when the query names its actor,
// ftsScoped) ÷ warm events to estimate the rows each one matches), while
// the estimated matches stay within coldMatchBudget, at most coldMaxTerms
// words; none when even the rarest would pass the budget alone (the cold
// search is then skipped: a cold event holding only such words cannot
// score above the warm ones by much, and finding it would cost a read of
// a share of the whole history). This is the common-terms cutoff of
// Lucene's CommonTermsQuery and Elasticsearch's cutoff_frequency: frequent
// words contribute little to BM25 (low idf) and would make every search
// cost in proportion to the actor's history. coldReadMax caps the rows
// one search reads when the estimate is far off (the newest are read).
const (
	coldMatchBudget = 128
	coldMaxTerms    = 8
	coldReadMax     = 8 * coldMatchBudget
)

// coldWords returns the words of a cold search over about coldN
// full-text rows: the text's words chosen as above, stop words left out,
// lower-cased; nil when none is left.
func coldWords(x *actorIndex, text string, coldN int) []string {
	words := strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r) && !unicode.IsMark(r)
	})
	an := x.ix.Params().Analyzer
	warm := max(1, x.ix.Len()-x.ix.Dead())
	scale := float64(max(coldN, 1)) / float64(warm)
	type word struct {
		w  string
		df int
	}
	seen := map[string]bool{}
	var cand []word
	for _, w := range words {
		w = strings.ToLower(w)
		if seen[w] || len(w) < 2 || search.IsStopWord(w) {
			continue
		}
		seen[w] = true
		stems := an.Terms(w)
		if len(stems) == 0 {
			continue
		}
		df := 0
		for _, t := range stems {
			df = max(df, x.ix.DocFreq(t))
		}
		cand = append(cand, word{w, df})
	}
	sort.SliceStable(cand, func(i, j int) bool { return cand[i].df < cand[j].df })
	var out []string
	est := 0.0
	for _, c := range cand {
		// a word unseen in the warm events is counted as one cold match;
		// the rarest word is always looked for, however large its
		// estimate, or a query whose words all appear in the warm events
		// would never reach the cold ones once the scale is large (every
		// actor's rows over this actor's warm documents: a word of one
		// warm turn estimated past the budget at about 8,300 rows)
		e := max(1, float64(c.df)*scale)
		if len(out) == coldMaxTerms || len(out) > 0 && est+e > coldMatchBudget {
			break
		}
		est += e
		out = append(out, c.w)
	}
	return out
}

// coldQuery is the FTS5 query of words: each quoted, OR-ed.
func coldQuery(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = `"` + strings.ReplaceAll(w, `"`, `""`) + `"`
	}
	return strings.Join(q, " OR ")
}

// coldExplain starts the explanation of a cold event's hit,
// coldRecordExplain that of a cold record's (rtier.go).
const (
	coldExplain       = "older than the in-memory window: bm25="
	coldRecordExplain = "outside the in-memory record window: bm25="
)

// coldBM25B is Okapi BM25's length normalisation b for cold rows (FTS5's
// bm25() and Lucene use 0.75 too).
const coldBM25B = 0.75

// coldRow is one cold full-text row a search read, with its score.
type coldRow struct {
	id    string
	score float64
}

// scoreCold ranks the cold rows a full-text query matched (id and
// indexed text each) for words with Okapi BM25 (Robertson et al., TREC-3)
// over the text as the warm index analyses it (an), so the warm and cold
// scores are one family: idf = ln(1 + (N − n + 0.5)/(n + 0.5)), the warm
// index's (Lucene's), with N the actor's cold rows (coldN, at least the
// rows read) and n the rows read that hold the word, which are all the
// cold rows holding it unless the read stopped at coldReadMax; tf the
// word's occurrences (a word the analyzer splits, as Hangul bigrams, counts
// its least frequent part); k1 the warm index's, b coldBM25B, and the
// average length that of the rows read. Rows scoring 0 are dropped; the
// rest are returned best first (equal scores newest first, the order
// read).
func scoreCold(an search.Analyzer, k1 float64, words []string, ids, texts []string, coldN int) []coldRow {
	stems := make([][]string, len(words))
	counts := map[string]int{}
	for i, w := range words {
		stems[i] = an.Terms(w)
		for _, t := range stems[i] {
			counts[t] = 0
		}
	}
	type doc struct {
		tf  []int // per word
		len int
	}
	docs := make([]doc, len(texts))
	df := make([]int, len(words))
	total := 0
	for d, text := range texts {
		for t := range counts {
			counts[t] = 0
		}
		dl := an.CountTerms(text, counts)
		tf := make([]int, len(words))
		for i, ss := range stems {
			n := math.MaxInt
			for _, t := range ss {
				n = min(n, counts[t])
			}
			if n == math.MaxInt {
				n = 0
			}
			tf[i] = n
			if n > 0 {
				df[i]++
			}
		}
		docs[d] = doc{tf, dl}
		total += dl
	}
	if len(texts) == 0 {
		return nil
	}
	n := float64(max(coldN, len(texts)))
	avg := max(1, float64(total)/float64(len(texts)))
	idf := make([]float64, len(words))
	for i := range words {
		idf[i] = math.Log(1 + (n-float64(df[i])+0.5)/(float64(df[i])+0.5))
	}
	out := make([]coldRow, 0, len(texts))
	for d, dc := range docs {
		s := 0.0
		norm := k1 * (1 - coldBM25B + coldBM25B*float64(dc.len)/avg)
		for i, tf := range dc.tf {
			if tf > 0 {
				s += idf[i] * float64(tf) * (k1 + 1) / (float64(tf) + norm)
			}
		}
		if s > 0 {
			out = append(out, coldRow{ids[d], s})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].score > out[j].score })
	return out
}

// searchCold ranks a's cold events allowed by c for text: coldCandidates
// then coldHits, one after the other (Store.search runs the first beside
// the warm search).
func (s *Store) searchCold(ctx context.Context, a *actorState, c memindex.Cond, text string, k int, floor float64, explain bool) ([]memory.Hit, error) {
	all, err := s.coldCandidates(ctx, a, c, text)
	if err != nil {
		return nil, err
	}
	return s.coldHits(ctx, a, c, all, k, floor, explain)
}

// coldCandidates is the full-text half of a cold search: FTS5 finds the
// cold rows of the actor holding the query's rarer words (coldWords; the
// newest coldReadMax at most), and scoreCold ranks them with BM25 in Go
// (no bm25() in SQLite: its statistics are every actor's, and computing
// them walked the whole posting list of each query phrase, the actor
// key's included, on every search). The rows are best first; nil when a
// has no cold events or records (rtier.go) c admits, or the text no word
// to look for. It reads
// only SQLite and the warm index's document frequencies under their read
// locks, so it may run while the warm index is searched.
func (s *Store) coldCandidates(ctx context.Context, a *actorState, c memindex.Cond, text string) ([]coldRow, error) {
	a.mu.RLock()
	sessions, err := s.coldScope(ctx, a, c)
	coldN := a.coldN
	recs := a.recCold.admitted(c)
	recCold := recs > 0
	coldN += recs
	a.mu.RUnlock()
	if err != nil || len(sessions) == 0 && !recCold {
		return nil, err
	}
	scoped := s.ftsScope(coldN)
	x, done := s.readIndex(ctx, a)
	words := coldWords(x, text, max(coldN, int(min(s.ftsRows.Load(), math.MaxInt32))))
	p := x.ix.Params()
	done()
	if len(words) == 0 {
		return nil, nil
	}
	st, err := s.rstmt(ctx, `SELECT d.id, d.content FROM memory_fts JOIN fts_docs d ON d.rowid=memory_fts.rowid WHERE memory_fts MATCH ? AND d.actor=? ORDER BY memory_fts.rowid DESC LIMIT ?`)
	if err != nil {
		return nil, fmt.Errorf("memory full-text search: %w", err)
	}
	q := coldQuery(words)
	if scoped {
		q = ftsScoped(a.id, q)
	}
	ids, texts, err := scanIDText(st.QueryContext(ctx, q, a.id, coldReadMax))
	if err != nil {
		return nil, err
	}
	// The rows of warm documents (every warm record has one; a demoted
	// event may still be warm) are ranked by the warm index: they stay out
	// of the cold statistics too, so that cold scores depend on the cold
	// documents alone, whatever else has a full-text row.
	a.mu.RLock()
	keep := 0
	for i, id := range ids {
		_, rec := a.records[id]
		_, ev := a.events[id]
		if !rec && !ev {
			ids[keep], texts[keep] = id, texts[i]
			keep++
		}
	}
	a.mu.RUnlock()
	return scoreCold(p.Analyzer, p.K1, words, ids[:keep], texts[:keep], coldN), nil
}

// coldHits reads the events and records of the best of all
// (coldCandidates' rows) and returns at most k of them as hits, each
// allowed by c and scoring above floor (the k-th warm hit's score when
// there are k, so that only cold documents that can enter the merged list
// are read). Documents that are warm by now (an event being demoted, a
// record written again), expired or rejected by c are skipped, so a
// condition that rejects most cold documents may return fewer than k.
func (s *Store) coldHits(ctx context.Context, a *actorState, c memindex.Cond, all []coldRow, k int, floor float64, explain bool) ([]memory.Hit, error) {
	if k <= 0 {
		k = memory.DefaultTopK
	}
	for i, f := range all {
		if f.score <= floor {
			all = all[:i]
			break
		}
	}
	if len(all) == 0 {
		return nil, nil
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	// Only the kinds of cold document c may admit are read: a search of
	// the records' namespace reads no cold event, one of the episodic
	// namespace no cold record.
	sessions, err := s.coldScope(ctx, a, c)
	if err != nil {
		return nil, err
	}
	events, records := len(sessions) > 0, a.recCold.admitted(c) > 0
	var hits []memory.Hit
	isRec := map[string]bool{} // hits that are cold records
	// Rows are read k candidates at a time, best first, until k pass.
	for start := 0; start < len(all) && len(hits) < k; {
		var want []string
		var scores []float64
		for ; start < len(all) && len(want) < k; start++ {
			f := all[start]
			if _, ok := a.records[f.id]; ok {
				continue
			}
			if _, ok := a.events[f.id]; ok { // warm: ranked by the index
				continue
			}
			want, scores = append(want, f.id), append(scores, f.score)
		}
		evs := map[string]memory.Event{}
		if events {
			if evs, err = s.coldByID(ctx, a, want); err != nil {
				return nil, err
			}
		}
		var recs map[string]memory.Record
		if len(evs) < len(want) && records {
			if recs, err = s.coldRecords(ctx, a, want); err != nil {
				return nil, err
			}
		}
		for i, id := range want {
			if r, ok := recs[id]; ok {
				if c.Match(r) {
					isRec[id] = true
					h := memory.Hit{Record: r, Score: scores[i]}
					if explain {
						h.Explain = fmt.Sprintf("%s%.6g", coldRecordExplain, scores[i])
					}
					hits = append(hits, h)
					if len(hits) == k {
						break
					}
				}
				continue
			}
			e, ok := evs[id]
			if !ok || s.expired(e) {
				continue
			}
			ns := s.eventNamespace(e)
			if !c.MatchEvent(e, ns) {
				continue
			}
			h := memory.Hit{Record: memindex.EventRecord(e, ns), Score: scores[i]}
			if explain {
				h.Explain = fmt.Sprintf("%s%.6g", coldExplain, scores[i])
			}
			hits = append(hits, h)
			if len(hits) == k {
				break
			}
		}
	}
	// Equal scores go in index order (memindex.RecordKey, EventKey).
	keys := make(map[string]string, len(hits))
	for _, h := range hits {
		if isRec[h.Record.ID] {
			keys[h.Record.ID] = memindex.RecordKey(h.Record)
		} else {
			keys[h.Record.ID] = memindex.EventKey(memory.Event{Timestamp: h.Record.CreatedAt, ID: h.Record.Sources[0]})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return keys[hits[i].Record.ID] < keys[hits[j].Record.ID]
	})
	return hits, nil
}

// scanIDText reads the (id, text) rows of a query (qerr is the query's
// own error).
func scanIDText(rows *sql.Rows, qerr error) (ids, texts []string, err error) {
	if qerr != nil {
		return nil, nil, fmt.Errorf("memory full-text search: %w", qerr)
	}
	defer rows.Close()
	for rows.Next() {
		var id, text string
		if err := rows.Scan(&id, &text); err != nil {
			return nil, nil, fmt.Errorf("memory full-text search: %w", err)
		}
		ids, texts = append(ids, id), append(texts, text)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("memory full-text search: %w", err)
	}
	return ids, texts, nil
}

// mergeHits merges two lists each sorted by score (best first) into one
// of at most k (k ≤ 0: all); on equal scores warm comes first. A cold hit
// also in warm (an event being demoted, for a moment in both) is dropped.
func mergeHits(warm, cold []memory.Hit, k int) []memory.Hit {
	if len(cold) == 0 {
		return warm
	}
	inWarm := make(map[string]bool, len(warm))
	for _, h := range warm {
		inWarm[h.Record.ID] = true
	}
	out := make([]memory.Hit, 0, len(warm)+len(cold))
	i, j := 0, 0
	for (i < len(warm) || j < len(cold)) && (k <= 0 || len(out) < k) {
		switch {
		case j < len(cold) && inWarm[cold[j].Record.ID]:
			j++
		case j >= len(cold) || i < len(warm) && warm[i].Score >= cold[j].Score:
			out = append(out, warm[i])
			i++
		default:
			out = append(out, cold[j])
			j++
		}
	}
	return out
}
