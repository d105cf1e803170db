package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/markdown"
)

type fileStat struct {
	size  int64
	mtime int64
}

// scan lists every Markdown file under the memory directory by actor
// directory.
func (s *Store) scan() (map[string]map[string]fileStat, error) {
	out := map[string]map[string]fileStat{}
	err := filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".md") || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		rel, err := filepath.Rel(s.dir, path)
		if err != nil {
			return nil
		}
		parts := strings.SplitN(filepath.ToSlash(rel), "/", 2)
		if len(parts) != 2 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if out[parts[0]] == nil {
			out[parts[0]] = map[string]fileStat{}
		}
		out[parts[0]][parts[1]] = fileStat{info.Size(), info.ModTime().UnixNano()}
		return nil
	})
	return out, err
}

// Sync picks up hand edits: every actor directory whose Markdown files
// changed (size or mtime), appeared or disappeared since the index last
// saw them is re-read from Markdown into the index.
func (s *Store) Sync(ctx context.Context) error {
	s.gate.Lock()
	defer s.gate.Unlock()
	if s.closed {
		return errors.New("memory store closed")
	}
	return s.syncLocked(ctx)
}

// maybeSyncAll runs Sync when SyncInterval has passed since the last one.
// The caller holds gate shared; it is held exclusively meanwhile.
func (s *Store) maybeSyncAll(ctx context.Context) error {
	if s.opts.SyncInterval <= 0 {
		return nil
	}
	due := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.opts.Now().Sub(s.lastSync) >= s.opts.SyncInterval
	}
	if !due() {
		return nil
	}
	s.gate.RUnlock()
	s.gate.Lock()
	var err error
	if !s.closed && due() {
		err = s.syncLocked(ctx)
	}
	s.gate.Unlock()
	s.gate.RLock()
	return err
}

// maybeSyncActor checks the actor's Markdown for hand edits at most once
// per SyncInterval. The check runs with gate shared; only a change found
// takes gate exclusively (re-checked there, since a write of ours may have
// been between its append and its index transaction) to reload the actor.
func (s *Store) maybeSyncActor(ctx context.Context, actor string) error {
	if s.opts.SyncInterval <= 0 {
		return nil
	}
	s.mu.Lock()
	now := s.opts.Now()
	due := now.Sub(s.actorSync[actor]) >= s.opts.SyncInterval
	if due {
		s.actorSync[actor] = now
	}
	s.mu.Unlock()
	if !due {
		return nil
	}
	enc, err := markdown.EncodeActor(actor)
	if err != nil {
		return err
	}
	// A write of this actor between its Markdown append and its index
	// transaction looks like a hand edit; check only while no write is in
	// flight (holding the writer lock), else retry on a later search.
	s.mu.Lock()
	a := s.actors[actor]
	if a != nil {
		a.refs++
	}
	s.mu.Unlock()
	if a != nil {
		defer func() {
			s.mu.Lock()
			a.refs--
			s.mu.Unlock()
		}()
		if !a.wmu.TryLock() {
			s.mu.Lock()
			if s.actorSync[actor].Equal(now) {
				delete(s.actorSync, actor)
			}
			s.mu.Unlock()
			return nil
		}
	}
	changed, err := s.actorChanged(ctx, enc)
	if a != nil {
		a.wmu.Unlock()
	}
	if err != nil || !changed {
		return err
	}
	s.gate.RUnlock()
	s.gate.Lock()
	if !s.closed {
		if changed, err = s.actorChanged(ctx, enc); err == nil && changed {
			err = s.reload(ctx, enc, false)
		}
	}
	s.gate.Unlock()
	s.gate.RLock()
	return err
}

// syncLocked is Sync; the caller holds gate exclusively.
func (s *Store) syncLocked(ctx context.Context) error {
	s.mu.Lock()
	s.lastSync = s.opts.Now()
	s.mu.Unlock()
	disk, err := s.scan()
	if err != nil {
		return fmt.Errorf("scan memory markdown: %w", err)
	}
	known := map[string]map[string]fileStat{}
	rows, err := s.db.QueryContext(ctx, `SELECT path,size,mtime FROM files`)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	for rows.Next() {
		var p string
		var st fileStat
		if err := rows.Scan(&p, &st.size, &st.mtime); err != nil {
			rows.Close()
			return err
		}
		parts := strings.SplitN(p, "/", 2)
		if len(parts) != 2 {
			continue
		}
		if known[parts[0]] == nil {
			known[parts[0]] = map[string]fileStat{}
		}
		known[parts[0]][parts[1]] = st
	}
	rows.Close()
	s.overlayOwed(known, "")
	changed := map[string]bool{}
	for enc, files := range disk {
		for f, st := range files {
			if known[enc][f] != st {
				changed[enc] = true
			}
		}
	}
	for enc, files := range known {
		for f := range files {
			if _, ok := disk[enc][f]; !ok {
				changed[enc] = true
			}
		}
	}
	encs := make([]string, 0, len(changed))
	for enc := range changed {
		encs = append(encs, enc)
	}
	sort.Strings(encs)
	for _, enc := range encs {
		if err := s.reload(ctx, enc, false); err != nil {
			return err
		}
	}
	return nil
}

// actorChanged reports whether one actor directory's Markdown differs from
// what the index last saw: cheap enough to run before that actor's
// searches.
func (s *Store) actorChanged(ctx context.Context, enc string) (bool, error) {
	disk := map[string]fileStat{}
	root := filepath.Join(s.dir, enc)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".md") || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		disk[filepath.ToSlash(rel)] = fileStat{info.Size(), info.ModTime().UnixNano()}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("scan memory markdown: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT path,size,mtime FROM files WHERE path LIKE ? ESCAPE '\'`, likeEscape(enc)+"/%")
	if err != nil {
		return false, fmt.Errorf("memory index: %w", err)
	}
	known := map[string]fileStat{}
	for rows.Next() {
		var p string
		var st fileStat
		if err := rows.Scan(&p, &st.size, &st.mtime); err != nil {
			rows.Close()
			return false, err
		}
		known[strings.TrimPrefix(p, enc+"/")] = st
	}
	rows.Close()
	owed := map[string]map[string]fileStat{enc: known}
	s.overlayOwed(owed, enc+"/")
	known = owed[enc]
	changed := len(disk) != len(known)
	for f, st := range disk {
		if known[f] != st {
			changed = true
		}
	}
	return changed, nil
}

// readActorDir parses every layer file of one actor directory. With
// compact, a file holding stale entries (earlier entries of a record
// appended again, see package markdown) is rewritten in its compact form
// first, when that form keeps every entry in the same file.
func (s *Store) readActorDir(enc string, compact bool) (actor string, recs []memory.Record, evs []memory.Event, rejected []string, files map[string]fileStat, err error) {
	root := filepath.Join(s.dir, enc)
	files = map[string]fileStat{}
	actor = decodeDir(enc)
	type item struct {
		rel  string
		data []byte
		st   fileStat
	}
	var items []item
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".md") || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		items = append(items, item{filepath.ToSlash(rel), data, fileStat{info.Size(), info.ModTime().UnixNano()}})
		return nil
	})
	if err != nil {
		return "", nil, nil, nil, nil, fmt.Errorf("read memory markdown %s: %w", enc, err)
	}
	sort.Slice(items, func(i, j int) bool { return items[i].rel < items[j].rel })
	// The actor ID is in every file header; find it first. Only a header
	// whose actor encodes to this directory's name counts: a file copied
	// in from another actor's directory must not make this directory that
	// actor's (its entries are read as this directory's, and rows another
	// actor owns are skipped by reload).
	for _, it := range items {
		p := markdown.Parse(it.data, markdown.Defaults{File: it.rel})
		if p.ActorID == "" {
			continue
		}
		if e, err := markdown.EncodeActor(p.ActorID); err == nil && e == enc {
			actor = p.ActorID
			break
		}
	}
	for _, it := range items {
		if p := markdown.Parse(it.data, markdown.Defaults{File: it.rel}); p.ActorID != "" && p.ActorID != actor {
			s.warn(actor, fmt.Sprintf("%s: its header names actor %q, not this directory's: read as %q", it.rel, p.ActorID, actor))
		}
	}
	for _, it := range items {
		files[it.rel] = it.st
		d := markdown.Defaults{ActorID: actor, File: it.rel, Time: unixNano(it.st.mtime)}
		switch {
		case it.rel == "procedural.md":
			d.Strategy = memory.StrategyProcedural
			d.Namespace = memory.MustNamespace(memory.DefaultLongTermTemplate, memory.NamespaceVars{AgentID: s.opts.AgentID, ActorID: actor})
		case strings.HasPrefix(it.rel, "episodic/"):
			d.Strategy = memory.StrategyEpisodic
			d.Namespace = memory.MustNamespace(memory.DefaultEpisodicTemplate, memory.NamespaceVars{AgentID: s.opts.AgentID, ActorID: actor, SessionID: "markdown"})
		case it.rel != markdown.RejectedFile:
			d.Strategy = memory.StrategySemantic
			d.Namespace = memory.MustNamespace(memory.DefaultLongTermTemplate, memory.NamespaceVars{AgentID: s.opts.AgentID, ActorID: actor})
		}
		p := markdown.Parse(it.data, d)
		for _, w := range p.Warnings {
			s.warn(actor, w)
		}
		if compact && p.Stale > 0 {
			st, err := s.compactFile(filepath.Join(root, filepath.FromSlash(it.rel)), it.rel, actor, p)
			if err != nil {
				return "", nil, nil, nil, nil, err
			}
			files[it.rel] = st
		}
		for _, r := range p.Records {
			if _, a, ok := memory.NamespaceActor(r.Namespace); ok && a == actor {
				recs = append(recs, r)
			} else {
				s.warn(actor, fmt.Sprintf("%s: record %s: its namespace names another actor: skipped", it.rel, r.ID))
			}
		}
		expired := 0
		for _, e := range p.Events {
			e.ActorID = actor
			evs = append(evs, e)
			if s.expired(e) {
				expired++
			}
		}
		if expired > 0 && s.warnings != nil { // a Rebuild: say why they are not found
			s.warnings = append(s.warnings, fmt.Sprintf("%s: %s: %d events older than memory.eventExpiryDays (%d days): not indexed; expiry removes them from the file",
				actor, it.rel, expired, s.opts.EventExpiryDays))
		}
		rejected = append(rejected, p.Hashes...)
	}
	return actor, recs, evs, rejected, files, nil
}

// warn logs a Markdown warning of actor's files and, during a Rebuild,
// keeps it for RebuildWarn's answer.
func (s *Store) warn(actor, w string) {
	s.opts.Logger.Warn("memory markdown", "actor", actor, "warning", w)
	if s.warnings != nil {
		s.warnings = append(s.warnings, actor+": "+w)
	}
}

// reload replaces the index rows of one actor directory with its
// Markdown, compacting its files first when compact is set (Rebuild).
func (s *Store) reload(ctx context.Context, enc string, compact bool) error {
	actor, recs, evs, rejected, files, err := s.readActorDir(enc, compact)
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	defer tx.Rollback()
	for _, q := range []string{`DELETE FROM records WHERE actor=?`, `DELETE FROM events WHERE actor=?`, `DELETE FROM rejections WHERE actor=?`, `DELETE FROM event_tiers WHERE actor=?`, `DELETE FROM cold_scopes WHERE actor=?`} {
		if _, err := tx.ExecContext(ctx, q, actor); err != nil {
			return fmt.Errorf("memory index: %w", err)
		}
	}
	s.dropOwed(func(_ owedFile, key string) bool { return strings.HasPrefix(key, enc+"/") })
	if _, err := tx.ExecContext(ctx, `DELETE FROM files WHERE path LIKE ? ESCAPE '\'`, likeEscape(enc)+"/%"); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	rs, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO records(id,actor,namespace,strategy,status,content,metadata,created_at,updated_at,sources,importance) VALUES(?,?,?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	// IDs are global: a row another actor owns (an entry pasted from its
	// file into this one) is skipped with a warning, so that one actor's
	// file can never replace, and so take over, another's record or event.
	ownerRec, err := tx.PrepareContext(ctx, `SELECT actor FROM records WHERE id=?`)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	ownerEv, err := tx.PrepareContext(ctx, `SELECT actor FROM events WHERE id=?`)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	foreign := func(st *sql.Stmt, kind, id string) (bool, error) {
		var other string
		switch err := st.QueryRowContext(ctx, id).Scan(&other); {
		case errors.Is(err, sql.ErrNoRows):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("memory index: %w", err)
		case other == actor:
			return false, nil
		}
		s.warn(actor, fmt.Sprintf("%s %s belongs to actor %q: skipped (give the entry a new ID to keep it here)", kind, id, other))
		return true, nil
	}
	var fts ftsBatch
	for _, r := range recs {
		if skip, err := foreign(ownerRec, "record", r.ID); err != nil {
			return err
		} else if skip {
			continue
		}
		if err := insertRecord(ctx, rs, actor, r); err != nil {
			return err
		}
		fts.record(actor, r)
	}
	es, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO events(id,actor,session,role,text,ts,metadata) VALUES(?,?,?,?,?,?,?)`)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	for _, e := range evs {
		if skip, err := foreign(ownerEv, "event", e.ID); err != nil {
			return err
		} else if skip {
			continue
		}
		if err := insertEvent(ctx, es, actor, e); err != nil {
			return err
		}
		s.ftsEvent(&fts, actor, e)
	}
	if err := fts.write(ctx, s, tx); err != nil {
		return err
	}
	for _, h := range rejected {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO rejections(actor,hash) VALUES(?,?)`, actor, h); err != nil {
			return fmt.Errorf("memory index: %w", err)
		}
	}
	for rel, st := range files {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO files(path,actor,size,mtime) VALUES(?,?,?,?)`, enc+"/"+rel, actor, st.size, st.mtime); err != nil {
			return fmt.Errorf("memory index: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	s.mu.Lock()
	delete(s.actors, actor)
	s.mu.Unlock()
	return nil
}

// compactFile rewrites the layer file at path (rel in its actor directory)
// from its parse p, one entry per record, and returns its new size and
// mtime. A file whose entries would not all render back into it (a record
// of another layer or day put there by hand) is left as it is.
func (s *Store) compactFile(path, rel, actor string, p markdown.Parsed) (fileStat, error) {
	out := markdown.Render(actor, p.Records, p.Events, p.Hashes)
	data, ok := out[rel]
	if !ok || len(out) != 1 {
		st, err := os.Stat(path)
		if err != nil {
			return fileStat{}, fmt.Errorf("compact memory markdown: %w", err)
		}
		return fileStat{st.Size(), st.ModTime().UnixNano()}, nil
	}
	if err := markdown.WriteFileAtomic(path, data); err != nil {
		return fileStat{}, fmt.Errorf("compact memory markdown: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fileStat{}, fmt.Errorf("compact memory markdown: %w", err)
	}
	noteStale(path, st.Size(), 0)
	return fileStat{st.Size(), st.ModTime().UnixNano()}, nil
}

func likeEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s)
}

// Rebuild recreates the whole index from the Markdown files (rows, then
// the FTS5 full-text index from them), reporting progress (actor directories done of total) when progress is non-nil.
func (s *Store) Rebuild(ctx context.Context, progress func(done, total int)) error {
	_, err := s.RebuildWarn(ctx, progress)
	return err
}

// RebuildWarn is Rebuild that also returns the Markdown warnings met on the
// way ("<actor>: <file>:<line>: …", e.g. an entry whose metadata does not
// parse, left in its file and out of the index), so that a user who edited
// a file by hand sees what was skipped (memory.RebuildWarner).
func (s *Store) RebuildWarn(ctx context.Context, progress func(done, total int)) ([]string, error) {
	s.gate.Lock()
	defer s.gate.Unlock()
	s.warnings = []string{}
	defer func() { s.warnings = nil }()
	err := s.rebuildLocked(ctx, progress)
	return s.warnings, err
}

func (s *Store) rebuildLocked(ctx context.Context, progress func(done, total int)) error {
	if s.closed {
		return errors.New("memory store closed")
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("memory index: %w", err)
	}
	s.dropOwed(func(owedFile, string) bool { return true })
	for _, t := range []string{"records", "events", "rejections", "files", "fts_docs", "event_tiers", "cold_scopes"} {
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+t); err != nil {
			tx.Rollback()
			return fmt.Errorf("rebuild memory index: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("rebuild memory index: %w", err)
	}
	s.mu.Lock()
	s.actors = map[string]*actorState{}
	s.mu.Unlock()
	entries, err := os.ReadDir(s.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("rebuild memory index: %w", err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			dirs = append(dirs, e.Name())
		}
	}
	for i, enc := range dirs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.reload(ctx, enc, true); err != nil {
			return err
		}
		if progress != nil {
			progress(i+1, len(dirs))
		}
	}
	// The full-text index is recreated from its content rows, so nothing
	// of the old index (segments, deleted-row tombstones) survives.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO memory_fts(memory_fts) VALUES('rebuild')`); err != nil {
		return fmt.Errorf("rebuild memory full-text index: %w", err)
	}
	s.mu.Lock()
	s.lastSync = s.opts.Now()
	s.mu.Unlock()
	// With an embedder, vectors are recomputed too, in the background.
	return s.reembedAll(ctx)
}

// ExportMarkdown writes every actor's layer files, rendered from the index,
// under dir (the same layout as <home>/memory).
func (s *Store) ExportMarkdown(ctx context.Context, dir string) (int, error) {
	s.gate.Lock()
	defer s.gate.Unlock()
	if s.closed {
		return 0, errors.New("memory store closed")
	}
	ids, err := s.actorIDs(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		a, release, err := s.acquire(ctx, id)
		if err != nil {
			return n, err
		}
		release() // gate is held exclusively: nothing changes a meanwhile
		all, _, err := s.allRecords(ctx, a)
		if err != nil {
			return n, err
		}
		recs := make([]memory.Record, 0, len(all))
		for _, r := range all {
			recs = append(recs, *r)
		}
		evs, err := s.allEvents(ctx, a)
		if err != nil {
			return n, err
		}
		var rej []string
		for h := range a.rejected {
			rej = append(rej, h)
		}
		for rel, data := range markdown.Render(a.id, recs, evs, rej) {
			if err := markdown.WriteFileAtomic(filepath.Join(dir, a.enc, rel), data); err != nil {
				return n, fmt.Errorf("export: %w", err)
			}
			n++
		}
	}
	return n, nil
}
