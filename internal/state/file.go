package state

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// FileOptions configure a FileBackend. The zero value is usable.
type FileOptions struct {
	// NoSync skips fsync after appends and compactions (see Options.NoSync).
	NoSync bool
	// CompactEvery is how many lines an actor's log may hold before the
	// next Update rewrites it as one snapshot line. Default max(64, 2·limit),
	// limit being the Update's history limit.
	CompactEvery int
}

// FileBackend stores each actor's state under one directory as an
// append-only JSON Lines log, <name>.jsonl. Every line is one Update:
//
//	{"rec":{...Record...},"add":[...Change...]}
//
// so an Update appends one line (a few hundred bytes to a couple of KB)
// instead of rewriting the whole state. The newest complete line holds the
// current record; the history is the concatenation of the lines' "add",
// oldest first. Once the log holds CompactEvery lines, the next Update
// replaces it (temp file and rename) by a single line carrying the record
// and the last limit changes, so a load reads O(CompactEvery + limit)
// changes at most.
//
// Crash safety: a last line without its newline, or a last line that does
// not decode (a torn append), is ignored on load and cut off then, so the
// next append starts on a line boundary; a damaged line followed by others
// is an error, and the file is left as it is. Compaction is atomic (rename).
//
// File names: every byte outside [a-z0-9_-] is escaped as %XX (uppercase
// letters included, so actors differing only in case stay apart on
// case-insensitive file systems); a name longer than 200 bytes is replaced
// by "~" and the SHA-256 of the actor ID in hex, the ID itself being read
// from the file. No actor ID can name a path outside dir.
//
// Old format: the engine once kept one JSON document per actor,
// <legacy name>.json, rewritten on every change (legacy names escape
// outside [A-Za-z0-9_-]). Such a file is read and migrated to the log on
// first access (written as one snapshot line, then removed); a corrupt one
// is an error and is not touched.
//
// The backend caches every actor it loaded, and the records of all actors
// once Records has scanned the directory: like the engine before it, it
// assumes it is the directory's only writer. It is safe for concurrent use
// within one process; Updates are serialised by one mutex.
type FileBackend struct {
	dir  string
	opts FileOptions

	mu   sync.Mutex
	logs map[string]*actorLog // loaded actors with stored state
	idx  recordIndex

	written atomic.Int64 // bytes appended or rewritten, for the benchmarks
}

// actorLog is the cached view of one actor's log. Guarded by FileBackend.mu.
type actorLog struct {
	rec   Record
	hist  []Change
	lines int   // complete lines in the file
	size  int64 // bytes of those lines
}

// logLine is one line of an actor log.
type logLine struct {
	Rec Record   `json:"rec"`
	Add []Change `json:"add,omitempty"`
}

// legacyFile is the old whole-file format.
type legacyFile struct {
	Record
	History []Change `json:"history,omitempty"`
}

const (
	logExt    = ".jsonl"
	legacyExt = ".json"
	// maxEscaped is the longest escaped name before hashing (NAME_MAX is
	// 255 bytes on most file systems).
	maxEscaped = 200
)

// NewFileBackend returns a FileBackend under dir, creating dir (mode 0700)
// if needed.
func NewFileBackend(dir string, opts FileOptions) (*FileBackend, error) {
	if opts.CompactEvery < 0 {
		return nil, fmt.Errorf("state: CompactEvery %d < 0", opts.CompactEvery)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return &FileBackend{dir: dir, opts: opts, logs: map[string]*actorLog{}, idx: recordIndex{entries: map[string]Record{}}}, nil
}

// Dir returns the directory.
func (f *FileBackend) Dir() string { return f.dir }

// LogName returns the file name (in Dir) of actor's log.
func LogName(actor string) string {
	var b strings.Builder
	for i := 0; i < len(actor); i++ {
		c := actor[i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if b.Len() > maxEscaped {
		sum := sha256.Sum256([]byte(actor))
		return "~" + hex.EncodeToString(sum[:]) + logExt
	}
	return b.String() + logExt
}

// legacyName is the old per-actor file name; "" when it exceeds NAME_MAX
// (the old engine could never have written it).
func legacyName(actor string) string {
	var b strings.Builder
	for i := 0; i < len(actor); i++ {
		c := actor[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if b.Len()+len(legacyExt) > 255 {
		return ""
	}
	return b.String() + legacyExt
}

// unescape decodes an escaped name (without extension).
func unescape(name string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if name[i] != '%' {
			b.WriteByte(name[i])
			continue
		}
		if i+2 >= len(name) {
			return "", false
		}
		v, err := hex.DecodeString(name[i+1 : i+3])
		if err != nil {
			return "", false
		}
		b.WriteByte(v[0])
		i += 2
	}
	return b.String(), true
}

// errCorrupt marks a log or legacy file that cannot be decoded.
var errCorrupt = errors.New("corrupt state file")

// parseLog decodes a log. want is the expected actor ("" to accept the
// first line's). good is the length of the complete, decoded prefix; a
// torn tail after it is reported by good < len(data).
func parseLog(data []byte, want string) (lg actorLog, good int64, err error) {
	pos := 0
	for pos < len(data) {
		i := bytes.IndexByte(data[pos:], '\n')
		if i < 0 {
			break // torn: no newline
		}
		line := data[pos : pos+i]
		end := pos + i + 1
		var ln logLine
		if err := json.Unmarshal(line, &ln); err != nil {
			if end == len(data) {
				break // torn last line
			}
			return actorLog{}, 0, fmt.Errorf("%w: line %d: %v", errCorrupt, lg.lines+1, err)
		}
		if want == "" {
			want = ln.Rec.ActorID
		}
		if ln.Rec.ActorID != want {
			return actorLog{}, 0, fmt.Errorf("%w: line %d holds actor %q, not %q", errCorrupt, lg.lines+1, ln.Rec.ActorID, want)
		}
		lg.rec = ln.Rec
		lg.hist = append(lg.hist, ln.Add...)
		lg.lines++
		pos = end
	}
	lg.size = int64(pos)
	return lg, int64(pos), nil
}

// get returns actor's cached log, loading (and migrating) it if needed;
// nil when nothing is stored. Caller holds f.mu.
func (f *FileBackend) get(actor string) (*actorLog, error) {
	if lg, ok := f.logs[actor]; ok {
		return lg, nil
	}
	p := filepath.Join(f.dir, LogName(actor))
	legacy := ""
	if n := legacyName(actor); n != "" {
		legacy = filepath.Join(f.dir, n)
	}
	data, err := os.ReadFile(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return f.migrate(actor, p, legacy)
	case err != nil:
		return nil, fmt.Errorf("state: load %s: %w", actor, err)
	}
	lg, good, err := parseLog(data, actor)
	if err != nil {
		return nil, fmt.Errorf("state: load %s (%s): %w", actor, p, err)
	}
	if good < int64(len(data)) {
		// Cut the torn tail so the next append starts on a line boundary.
		if good == 0 {
			err = os.Remove(p)
		} else {
			err = os.Truncate(p, good)
		}
		if err != nil {
			return nil, fmt.Errorf("state: repair %s: %w", p, err)
		}
	}
	// A log written after a migration that crashed before removing the
	// old file wins; the old file goes now.
	if legacy != "" {
		if err := os.Remove(legacy); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("state: load %s: %w", actor, err)
		}
	}
	if lg.lines == 0 {
		return nil, nil
	}
	f.logs[actor] = &lg
	f.note(lg.rec)
	return &lg, nil
}

// migrate converts actor's legacy file, if any, into a log.
func (f *FileBackend) migrate(actor, p, legacy string) (*actorLog, error) {
	if legacy == "" {
		return nil, nil
	}
	data, err := os.ReadFile(legacy)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state: load %s: %w", actor, err)
	}
	var old legacyFile
	if err := json.Unmarshal(data, &old); err != nil {
		return nil, fmt.Errorf("state: load %s (%s): %w: %v", actor, legacy, errCorrupt, err)
	}
	if old.ActorID != actor {
		return nil, fmt.Errorf("state: %s holds actor %q, not %q", legacy, old.ActorID, actor)
	}
	lg := &actorLog{rec: old.Record, hist: old.History}
	if err := f.compact(p, lg, old.Record, nil, len(old.History)+1); err != nil {
		return nil, fmt.Errorf("state: migrate %s: %w", actor, err)
	}
	if err := os.Remove(legacy); err != nil {
		return nil, fmt.Errorf("state: migrate %s: %w", actor, err)
	}
	f.logs[actor] = lg
	f.note(lg.rec)
	return lg, nil
}

// compact replaces p by one line holding rec and the last limit changes of
// lg.hist followed by add, and updates lg.
func (f *FileBackend) compact(p string, lg *actorLog, rec Record, add []Change, limit int) error {
	hist := append(append([]Change{}, lg.hist...), add...)
	if len(hist) > limit {
		hist = hist[len(hist)-limit:]
	}
	b, err := json.Marshal(logLine{Rec: rec, Add: hist})
	if err != nil {
		return err
	}
	b = append(b, '\n')
	tmp, err := os.CreateTemp(f.dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if !f.opts.NoSync {
		if err := tmp.Sync(); err != nil {
			tmp.Close()
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return err
	}
	f.written.Add(int64(len(b)))
	f.syncDir()
	lg.rec, lg.hist, lg.lines, lg.size = rec, hist, 1, int64(len(b))
	return nil
}

// appendLine appends one line for rec and add to p and updates lg. On a
// failed write it cuts the file back to its last complete line.
func (f *FileBackend) appendLine(p string, lg *actorLog, rec Record, add []Change, limit int) error {
	b, err := json.Marshal(logLine{Rec: rec, Add: add})
	if err != nil {
		return err
	}
	b = append(b, '\n')
	fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err = fh.Write(b); err == nil && !f.opts.NoSync {
		err = fh.Sync()
	}
	if err != nil {
		fh.Truncate(lg.size)
		fh.Close()
		return err
	}
	f.written.Add(int64(len(b)))
	if err := fh.Close(); err != nil {
		return err
	}
	if lg.lines == 0 {
		f.syncDir() // a new file
	}
	lg.hist = append(lg.hist, add...)
	if len(lg.hist) > limit {
		lg.hist = lg.hist[len(lg.hist)-limit:]
	}
	lg.rec, lg.lines, lg.size = rec, lg.lines+1, lg.size+int64(len(b))
	return nil
}

func (f *FileBackend) syncDir() {
	if f.opts.NoSync {
		return
	}
	if d, err := os.Open(f.dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// Load implements Backend. The history may hold up to CompactEvery lines'
// changes beyond the last Update's limit; the engine keeps its
// HistoryLimit.
func (f *FileBackend) Load(ctx context.Context, actor string, history bool) (Record, []Change, bool, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, nil, false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	lg, err := f.get(actor)
	if err != nil || lg == nil {
		return Record{}, nil, false, err
	}
	rec := lg.rec
	rec.Recent = append([]RecentStimulus(nil), rec.Recent...)
	var hist []Change
	if history {
		hist = append([]Change{}, lg.hist...)
	}
	return rec, hist, true, nil
}

// Update implements Backend: one appended line, or a compaction once the
// log holds CompactEvery lines.
func (f *FileBackend) Update(ctx context.Context, actor string, limit int, fn func(Record, bool) (Record, []Change, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if limit < 1 {
		return fmt.Errorf("state: history limit %d < 1", limit)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	lg, err := f.get(actor)
	if err != nil {
		return err
	}
	stored := lg != nil
	if !stored {
		lg = &actorLog{}
	}
	cur := lg.rec
	cur.Recent = append([]RecentStimulus(nil), cur.Recent...)
	next, add, err := fn(cur, stored)
	if err != nil {
		return err
	}
	if next.ActorID != actor {
		return fmt.Errorf("state: update of %q returned actor %q", actor, next.ActorID)
	}
	p := filepath.Join(f.dir, LogName(actor))
	every := f.opts.CompactEvery
	if every == 0 {
		every = max(64, 2*limit)
	}
	if lg.lines >= every {
		err = f.compact(p, lg, next, add, limit)
	} else {
		err = f.appendLine(p, lg, next, add, limit)
	}
	if err != nil {
		delete(f.logs, actor) // reload from disk next time
		return fmt.Errorf("state: save %s: %w", actor, err)
	}
	f.logs[actor] = lg
	f.note(lg.rec)
	return nil
}

// Forget implements Backend.
func (f *FileBackend) Forget(ctx context.Context, actor string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.logs, actor)
	f.drop(actor)
	for _, name := range []string{LogName(actor), legacyName(actor)} {
		if name == "" {
			continue
		}
		if err := os.Remove(filepath.Join(f.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("state: forget %s: %w", actor, err)
		}
	}
	f.syncDir()
	return nil
}

// Actors implements Backend: one directory read, plus one file read per
// hashed (long) name.
func (f *FileBackend) Actors(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	found, err := f.scan(ctx, false)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(found))
	for a := range found {
		out = append(out, a)
	}
	return out, nil
}

// scan lists the directory's actors; with records it decodes every file
// (skipping those that cannot be read or decoded), otherwise only hashed
// names. It runs without f.mu: a file may change meanwhile.
func (f *FileBackend) scan(ctx context.Context, records bool) (map[string]Record, error) {
	ents, err := os.ReadDir(f.dir)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	found := make(map[string]Record, len(ents))
	legacy := map[string]Record{}
	for _, de := range ents {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := de.Name()
		if de.IsDir() || strings.HasPrefix(name, ".") {
			continue
		}
		switch {
		case strings.HasSuffix(name, logExt):
			base := strings.TrimSuffix(name, logExt)
			var a string
			if !strings.HasPrefix(base, "~") {
				var ok bool
				if a, ok = unescape(base); !ok || validActor(a) != nil || LogName(a) != name {
					continue
				}
				if !records {
					found[a] = Record{}
					continue
				}
			}
			data, err := os.ReadFile(filepath.Join(f.dir, name))
			if err != nil {
				continue
			}
			lg, _, err := parseLog(data, a)
			if err != nil || lg.lines == 0 || validActor(lg.rec.ActorID) != nil || LogName(lg.rec.ActorID) != name {
				continue
			}
			found[lg.rec.ActorID] = lg.rec
		case strings.HasSuffix(name, legacyExt):
			a, ok := unescape(strings.TrimSuffix(name, legacyExt))
			if !ok || validActor(a) != nil || legacyName(a) != name {
				continue
			}
			if !records {
				legacy[a] = Record{}
				continue
			}
			data, err := os.ReadFile(filepath.Join(f.dir, name))
			if err != nil {
				continue
			}
			var old legacyFile
			if json.Unmarshal(data, &old) != nil || old.ActorID != a {
				continue
			}
			legacy[a] = old.Record
		}
	}
	for a, r := range legacy {
		if _, ok := found[a]; !ok { // a log wins over a leftover legacy file
			found[a] = r
		}
	}
	return found, nil
}

// recordIndex is the in-memory record of every actor behind Records.
// Guarded by FileBackend.mu.
type recordIndex struct {
	// entries holds every actor with stored state: filled by one directory
	// scan (at the first Records) and kept current by get, Update and
	// Forget, which also write it before the scan has run.
	entries map[string]Record
	ready   bool        // the scan has been merged
	scan    *recordScan // the scan in progress, if any
	// touched records the actors written meanwhile while a scan runs; the
	// scan's (possibly older) reading of them is discarded.
	touched map[string]struct{}
}

type recordScan struct {
	done chan struct{} // closed when the scan ended
	err  error         // set before done is closed
}

// note records r as its actor's current record. Caller holds f.mu.
func (f *FileBackend) note(r Record) {
	r.Recent = nil // not needed by Records' callers; keeps the index small
	f.idx.entries[r.ActorID] = r
	if f.idx.touched != nil {
		f.idx.touched[r.ActorID] = struct{}{}
	}
}

// drop forgets the actor. Caller holds f.mu.
func (f *FileBackend) drop(actor string) {
	delete(f.idx.entries, actor)
	if f.idx.touched != nil {
		f.idx.touched[actor] = struct{}{}
	}
}

// Records implements Backend, without Record.Recent. The first call scans
// the directory once in the background, decoding every file (files that
// cannot be read or decoded are left out); the scan outlives ctx: if ctx
// ends first Records returns ctx.Err() and a later call picks up the
// finished scan. From then on the records come from memory, kept current by
// Update and Forget, at O(actors) per call and no file I/O. Errors:
// ctx.Err(), or the directory read error of the scan (the next call
// retries).
func (f *FileBackend) Records(ctx context.Context) (map[string]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	if !f.idx.ready {
		sc := f.idx.scan
		if sc == nil {
			sc = &recordScan{done: make(chan struct{})}
			f.idx.scan = sc
			f.idx.touched = map[string]struct{}{}
			go f.scanRecords(sc)
		}
		f.mu.Unlock()
		select {
		case <-sc.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if sc.err != nil {
			return nil, sc.err
		}
		f.mu.Lock()
	}
	defer f.mu.Unlock()
	out := make(map[string]Record, len(f.idx.entries))
	for a, r := range f.idx.entries {
		out[a] = r
	}
	return out, nil
}

// scanRecords reads every state file once and merges the result into the
// index, skipping actors touched meanwhile. It reads without f.mu held, so
// turns are not blocked by the scan.
func (f *FileBackend) scanRecords(sc *recordScan) {
	found, err := f.scan(context.Background(), true)
	f.mu.Lock()
	if err != nil {
		sc.err = err
	} else {
		for a, r := range found {
			if _, ok := f.idx.touched[a]; !ok {
				r.Recent = nil
				f.idx.entries[a] = r
			}
		}
		f.idx.ready = true
	}
	f.idx.scan = nil
	f.idx.touched = nil
	f.mu.Unlock()
	close(sc.done)
}

var _ Backend = (*FileBackend)(nil)
