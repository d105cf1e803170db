// Package jsonl is the embedded session store (SPEC §3): one append-only
// JSON Lines file per session at
//
//	<dir>/<agentId>/sessions/<channel>_<userId>.jsonl
//
// where dir is $TENDRIL_HOME/agents and each ID is encoded with
// session.EncodeID (path-safe and injective).
//
// # File format
//
// Each line is one record, written by a single write(2):
//
//	{"type":"session","version":1,"agentId":..,"channel":..,"id":..}   first line: the key, so List can recover long (hashed) names
//	{"id":"msg_..","parentId":..,"role":..,"content":..,...}          a node (session.Node's JSON)
//	{"type":"leaf","leafId":"msg_..","timestamp":N}                   SetLeaf: the active leaf moved
//
// The active leaf is the node of the last node line or leaf record,
// whichever comes later, so Append moves it without an extra record and the
// file is never rewritten; it is only ever appended to, and truncated only
// to cut off a torn last line. One Append writes all its nodes (a turn) with
// one write and, under FsyncAlways, one fsync before it returns.
//
// # Crash safety
//
// On load, bytes after the last newline (a torn write) and a last line that
// is not valid JSON are copied to "<file>.torn-<unix>" beside the file
// (fsynced), then the file is truncated to the last good line and loading
// continues. A bad line in the middle of the file is skipped and logged,
// never deleted. A failed or short write is truncated away before Append
// returns its error.
//
// # Concurrency
//
// One writer per session (a per-session mutex, plus flock(2) on the file so
// a second process, e.g. the CLI, appends safely); readers run concurrently
// against an in-memory index (id → record offset and parent), so Path(n)
// costs O(n) reads whatever the session size. Loading a session reads its
// file once, extracting only id and parentId from each line.
package jsonl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tendrilai/tendril/internal/session"
)

// Fsync policies (sessions.fsync in tendril.json).
// DefaultBatchInterval is Options.BatchInterval when unset: how long at
// most a FsyncBatch append waits for its fsync.
const DefaultBatchInterval = 100 * time.Millisecond

const (
	// FsyncAlways fsyncs every Append and SetLeaf before returning (and the
	// directory when a file is created): acknowledged turns survive power
	// loss. The default.
	FsyncAlways = "always"
	// FsyncBatch fsyncs dirty files every Options.BatchInterval: a crash of
	// the process loses nothing, a power loss at most that interval.
	FsyncBatch = "batch"
	// FsyncNever leaves flushing to the OS.
	FsyncNever = "never"
)

// Options configure a Store. The zero value is FsyncAlways.
type Options struct {
	Fsync         string        // FsyncAlways (""), FsyncBatch or FsyncNever
	BatchInterval time.Duration // FsyncBatch period; default DefaultBatchInterval
	Logger        *slog.Logger  // torn lines and skipped records; default slog.Default()
	// MaxOpen bounds the sessions kept loaded, each holding one open file
	// and its index; the least recently used idle one is unloaded (and
	// reloaded from its file on next use) beyond it. Default 512.
	MaxOpen int
	// MaxNodeCaches bounds the loaded sessions that also keep their
	// recently read nodes decoded (nodeCacheSlots each, about 75 KB of
	// heap for ordinary turns): past it the least recently used other
	// session drops its decoded nodes, and its next turn decodes its path
	// from the file again. Default DefaultMaxNodeCaches; negative: no
	// bound.
	MaxNodeCaches int
	Now           func() time.Time
}

// Store is the JSONL session store. It implements session.Store and is safe
// for concurrent use. It keeps one open file per session it has touched
// until Close.
type Store struct {
	dir  string
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	sessions map[string]*sess
	closed   bool
	tick     atomic.Int64 // LRU clock
	open     atomic.Int64 // sessions holding an open file
	caches   atomic.Int64 // sessions holding a node cache

	stop chan struct{}
	done chan struct{}
}

var _ session.Store = (*Store)(nil)

// Open returns a Store rooted at dir ($TENDRIL_HOME/agents), creating it if
// needed. Sessions are loaded lazily on first use.
func Open(dir string, opts Options) (*Store, error) {
	switch opts.Fsync {
	case "":
		opts.Fsync = FsyncAlways
	case FsyncAlways, FsyncBatch, FsyncNever:
	default:
		return nil, fmt.Errorf("open session store: unknown fsync policy %q (want always, batch or never)", opts.Fsync)
	}
	if opts.BatchInterval <= 0 {
		opts.BatchInterval = DefaultBatchInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxOpen <= 0 {
		opts.MaxOpen = 512
	}
	if opts.MaxNodeCaches == 0 {
		opts.MaxNodeCaches = DefaultMaxNodeCaches
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open session store: %w", err)
	}
	s := &Store{dir: dir, opts: opts, log: lg, sessions: map[string]*sess{}}
	if opts.Fsync == FsyncBatch {
		s.stop, s.done = make(chan struct{}), make(chan struct{})
		go s.syncLoop()
	}
	return s, nil
}

// Dir returns the directory the store was opened on.
func (s *Store) Dir() string { return s.dir }

// PathFor returns the file of a session:
// <dir>/<EncodeID(agent)>/sessions/<EncodeID(channel)>_<EncodeID(id)>.jsonl.
func PathFor(dir string, k session.Key) string {
	return filepath.Join(dir, session.EncodeID(k.AgentID), "sessions",
		session.EncodeID(k.Channel)+"_"+session.EncodeID(k.ID)+".jsonl")
}

// ErrClosed is returned after Close.
var ErrClosed = errors.New("jsonl: store closed")

func (s *Store) get(k session.Key) (*sess, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	p := PathFor(s.dir, k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	ss := s.sessions[p]
	if ss == nil {
		ss = &sess{st: s, key: k, path: p, leaf: -1}
		s.sessions[p] = ss
	}
	ss.used.Store(s.tick.Add(1))
	return ss, nil
}

// rec locates one node line in the file.
type rec struct {
	off    int64
	n      int32
	parent int32 // index of the parent node, -1 for a root
}

type sess struct {
	st   *Store
	key  session.Key
	path string

	wmu    sync.Mutex // the one writer; also guards loading and f's lifetime
	loaded atomic.Bool
	dirty  atomic.Bool  // FsyncBatch: written since the last fsync
	used   atomic.Int64 // Store.tick at last use

	mu     sync.RWMutex // guards the index below
	f      *os.File     // nil when the file does not exist
	size   int64
	recs   []rec
	ids    nodeIDs
	leaf   int32 // index of the active leaf, -1 when empty
	leafID string

	// cache holds recently read nodes, decoded, in nodeCacheSlots slots by
	// index modulo the size: a turn reads the same tail of the path as the
	// turn before, and decoding JSON was most of Path's cost. Lines are
	// never rewritten in place, so an entry stays valid until the index is
	// rebuilt (load, eviction, Clear), which drops the cache (with mu held
	// for writing). cmu guards the slots while readers share mu.
	cmu   sync.Mutex
	cache []cachedNode
}

// nodeCacheSlots is the number of decoded nodes a loaded session keeps:
// the history path of the largest default limit (100 messages plus the
// 16-node margin) fits.
const nodeCacheSlots = 128

// DefaultMaxNodeCaches is Options.MaxNodeCaches when unset: 32 sessions
// in use at once keep their decoded nodes (issue 14: 100 actors taking
// turns in rotation held about 7.5 MB of decoded nodes, 128 per session,
// while only the sessions with a turn in flight read them).
const DefaultMaxNodeCaches = 32

type cachedNode struct {
	i  int32 // index + 1; 0 for an empty slot
	nd session.Node
}

// ensure loads the session index once.
func (ss *sess) ensure() error {
	if ss.loaded.Load() && !ss.stale() {
		return nil
	}
	ss.wmu.Lock()
	defer ss.wmu.Unlock()
	return ss.refreshLocked()
}

// rlock loads the index if needed and returns with mu read-locked and the
// index loaded (an eviction between loading and locking is retried).
func (ss *sess) rlock() error {
	for {
		if err := ss.ensure(); err != nil {
			return err
		}
		ss.mu.RLock()
		if ss.loaded.Load() {
			return nil
		}
		ss.mu.RUnlock()
	}
}

// refreshLocked loads the index, or reloads it when another process
// changed the file; wmu held.
func (ss *sess) refreshLocked() error {
	if ss.loaded.Load() && ss.stale() {
		ss.loaded.Store(false)
	}
	return ss.loadLocked()
}

// stale reports whether the file changed behind the index: another process
// appended, truncated, removed or created it. One fstat(2).
func (ss *sess) stale() bool {
	ss.mu.RLock()
	f, size := ss.f, ss.size
	ss.mu.RUnlock()
	if f == nil {
		_, err := os.Stat(ss.path)
		return err == nil
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return true
	}
	return st.Size != size || st.Nlink == 0
}

// loadLocked (re)builds the index from the file; wmu held.
func (ss *sess) loadLocked() error {
	if ss.loaded.Load() {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closeFileLocked()
	ss.recs, ss.ids, ss.leaf, ss.leafID, ss.size = nil, nodeIDs{}, -1, "", 0
	ss.dropCache()
	f, err := os.OpenFile(ss.path, os.O_RDWR|os.O_APPEND, 0)
	if errors.Is(err, os.ErrNotExist) {
		ss.loaded.Store(true)
		return nil
	}
	if err != nil {
		return fmt.Errorf("load session %s: %w", ss.key, err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return fmt.Errorf("load session %s: %w", ss.key, err)
	}
	defer unlockFile(f)
	good, bad, err := ss.scan(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("load session %s: %w", ss.key, err)
	}
	if len(bad) > 0 {
		if err := ss.quarantine(f, bad, good); err != nil {
			f.Close()
			return fmt.Errorf("load session %s: %w", ss.key, err)
		}
	}
	ss.f, ss.size = f, good
	ss.st.open.Add(1)
	ss.loaded.Store(true)
	ss.st.evict(ss)
	return nil
}

// closeFileLocked closes the session file; mu held.
func (ss *sess) closeFileLocked() error {
	if ss.f == nil {
		return nil
	}
	err := ss.f.Close()
	ss.f = nil
	ss.st.open.Add(-1)
	return err
}

// evict unloads least recently used idle sessions while more than MaxOpen
// hold a file. keep (the caller's session, whose locks are held) is never
// chosen; busy sessions are skipped.
func (s *Store) evict(keep *sess) {
	for s.open.Load() > int64(s.opts.MaxOpen) {
		s.mu.Lock()
		var victim *sess
		for _, x := range s.sessions {
			if x == keep || !x.loaded.Load() {
				continue
			}
			if victim == nil || x.used.Load() < victim.used.Load() {
				victim = x
			}
		}
		s.mu.Unlock()
		if victim == nil || !victim.wmu.TryLock() {
			return
		}
		if !victim.mu.TryLock() {
			victim.wmu.Unlock()
			return
		}
		if victim.dirty.Swap(false) && victim.f != nil {
			_ = victim.f.Sync()
		}
		victim.loaded.Store(false)
		victim.closeFileLocked()
		victim.recs, victim.ids, victim.leaf, victim.leafID, victim.size = nil, nodeIDs{}, -1, "", 0
		victim.dropCache()
		victim.mu.Unlock()
		victim.wmu.Unlock()
	}
}

// scanChunk is the read size of scan; tests shrink it.
var scanChunk = 4 << 20

// scan reads the file in chunks and indexes every complete line. It
// returns the length of the good prefix (up to the last complete, valid
// line) and the bytes after it: a tail without newline (a torn write) and a
// last line that is not valid JSON.
func (ss *sess) scan(f *os.File) (good int64, bad []byte, err error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, nil, err
	}
	if est := fi.Size() / 256; est > 0 {
		ss.recs = make([]rec, 0, est)
		ss.ids = newNodeIDs(int(est))
	}
	buf := make([]byte, 0, scanChunk)
	var base int64   // file offset of buf[0]
	ps, pe := -1, -1 // the pending (latest complete) line, relative to buf
	ls := 0          // start of the next line, relative to buf
	for eof := false; !eof; {
		if len(buf) == cap(buf) {
			keep := ls
			if ps >= 0 {
				keep = ps
			}
			if keep == 0 { // one line fills the buffer: grow it
				nb := make([]byte, len(buf), 2*cap(buf))
				copy(nb, buf)
				buf = nb
			} else {
				n := copy(buf, buf[keep:])
				buf = buf[:n]
				base += int64(keep)
				ls -= keep
				if ps >= 0 {
					ps, pe = ps-keep, pe-keep
				}
			}
		}
		n, rerr := f.Read(buf[len(buf):cap(buf)])
		if rerr == io.EOF || (rerr == nil && n == 0) {
			eof = true
		} else if rerr != nil {
			return 0, nil, rerr
		}
		from := len(buf)
		buf = buf[:len(buf)+n]
		for {
			nl := bytes.IndexByte(buf[from:], '\n')
			if nl < 0 {
				break
			}
			nl += from
			if ps >= 0 {
				ss.indexLine(buf[ps:pe], base+int64(ps))
			}
			ps, pe = ls, nl
			ls, from = nl+1, nl+1
		}
	}
	good = base + int64(ls)
	if ps >= 0 {
		if json.Valid(buf[ps:pe]) {
			ss.indexLine(buf[ps:pe], base+int64(ps))
		} else {
			good = base + int64(ps)
		}
	}
	if rel := int(good - base); rel < len(buf) {
		bad = append([]byte(nil), buf[rel:]...)
	}
	return good, bad, nil
}

var (
	pfxNode   = []byte(`{"id":"`)
	pfxParent = []byte(`,"parentId":`)
	pfxLeaf   = []byte(`{"type":"leaf","leafId":"`)
)

// indexLine adds one line at off: a node, a leaf record or a header.
func (ss *sess) indexLine(line []byte, off int64) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if id, parent, ok := fastNode(line); ok {
		ss.addNode(id, parent, off, len(line))
		return
	}
	if bytes.HasPrefix(line, pfxLeaf) {
		rest := line[len(pfxLeaf):]
		if q := bytes.IndexByte(rest, '"'); q >= 0 && bytes.IndexByte(rest[:q], '\\') < 0 {
			ss.setLeafID(string(rest[:q]))
			return
		}
	}
	var r struct {
		Type     string  `json:"type"`
		ID       string  `json:"id"`
		ParentID *string `json:"parentId"`
		Role     string  `json:"role"`
		LeafID   string  `json:"leafId"`
	}
	if err := json.Unmarshal(line, &r); err != nil {
		ss.st.log.Warn("session: skipping bad line", "file", ss.path, "offset", off, "err", err)
		return
	}
	switch {
	case r.Type == "leaf":
		ss.setLeafID(r.LeafID)
	case r.Type == "session":
	case r.ID != "" && r.Role != "":
		var p []byte
		if r.ParentID != nil {
			p = []byte(*r.ParentID)
		}
		ss.addNode([]byte(r.ID), p, off, len(line))
	default:
		ss.st.log.Warn("session: skipping unknown record", "file", ss.path, "offset", off)
	}
}

// fastNode extracts id and parentId from a line our encoder wrote:
// {"id":"…","parentId":null|"…",… with no escapes in either ID. The slices
// alias line.
func fastNode(line []byte) (id, parent []byte, ok bool) {
	if !bytes.HasPrefix(line, pfxNode) {
		return nil, nil, false
	}
	rest := line[len(pfxNode):]
	q := bytes.IndexByte(rest, '"')
	if q <= 0 || bytes.IndexByte(rest[:q], '\\') >= 0 {
		return nil, nil, false
	}
	id = rest[:q]
	rest = rest[q+1:]
	if !bytes.HasPrefix(rest, pfxParent) {
		return nil, nil, false
	}
	rest = rest[len(pfxParent):]
	switch {
	case bytes.HasPrefix(rest, []byte("null")):
		return id, nil, true
	case len(rest) > 0 && rest[0] == '"':
		rest = rest[1:]
		q = bytes.IndexByte(rest, '"')
		if q < 0 || bytes.IndexByte(rest[:q], '\\') >= 0 {
			return nil, nil, false
		}
		return id, rest[:q], true
	}
	return nil, nil, false
}

func (ss *sess) addNode(idb, parent []byte, off int64, n int) {
	if ss.ids.has(string(idb)) {
		ss.st.log.Warn("session: skipping duplicate node", "file", ss.path, "id", string(idb))
		return
	}
	p := int32(-1)
	if len(parent) > 0 {
		if i, ok := ss.ids.get(string(parent)); ok {
			p = i
		} else {
			ss.st.log.Warn("session: node with unknown parent treated as a root", "file", ss.path, "id", string(idb), "parentId", string(parent))
		}
	}
	id := string(idb)
	i := int32(len(ss.recs))
	ss.recs = append(ss.recs, rec{off: off, n: int32(n), parent: p})
	ss.ids.put(id, i)
	ss.leaf, ss.leafID = i, id
}

func (ss *sess) setLeafID(id string) {
	if i, ok := ss.ids.get(id); ok {
		ss.leaf, ss.leafID = i, id
	}
}

// quarantine copies bad (the bytes after the good prefix) to
// <file>.torn-<unix>, fsyncs it, and truncates the file to good.
func (ss *sess) quarantine(f *os.File, bad []byte, good int64) error {
	base := fmt.Sprintf("%s.torn-%d", ss.path, ss.st.opts.Now().Unix())
	name := base
	var q *os.File
	var err error
	for i := 1; ; i++ {
		q, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if !errors.Is(err, os.ErrExist) {
			break
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
	if err != nil {
		return fmt.Errorf("quarantine torn line: %w", err)
	}
	if _, err := q.Write(bad); err != nil {
		q.Close()
		return fmt.Errorf("quarantine torn line: %w", err)
	}
	if err := q.Sync(); err != nil {
		q.Close()
		return fmt.Errorf("quarantine torn line: %w", err)
	}
	if err := q.Close(); err != nil {
		return fmt.Errorf("quarantine torn line: %w", err)
	}
	if err := syncDir(filepath.Dir(ss.path)); err != nil {
		return fmt.Errorf("quarantine torn line: %w", err)
	}
	if err := f.Truncate(good); err != nil {
		return fmt.Errorf("truncate torn line: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("truncate torn line: %w", err)
	}
	ss.st.log.Warn("session: quarantined torn last line", "file", ss.path, "bytes", len(bad), "copy", name)
	return nil
}

// Append implements session.Store. The nodes are validated
// (session.PrepareAppend; each ParentID must be "" or a node already in
// the session or earlier in nodes; IDs must be new; the first ParentID
// must be the active leaf, else *session.LeafMovedError), written as one
// write(2), and fsynced per policy before it returns. On any error nothing
// is appended.
func (s *Store) Append(ctx context.Context, k session.Key, nodes ...session.Node) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(nodes) == 0 {
		return nil
	}
	nodes, err := session.PrepareAppend(k, nodes, s.opts.Now())
	if err != nil {
		return err
	}
	ss, err := s.get(k)
	if err != nil {
		return err
	}
	ss.wmu.Lock()
	defer ss.wmu.Unlock()
	if err := ss.refreshLocked(); err != nil {
		return err
	}
	// check runs here and again under flock once the index has caught up
	// with any other process's appends, so the leaf compare-and-set holds
	// across processes too.
	check := func() error {
		ss.mu.RLock()
		defer ss.mu.RUnlock()
		batch := make(map[string]bool, len(nodes))
		for _, n := range nodes {
			dup := ss.ids.has(n.ID)
			if dup || batch[n.ID] {
				return fmt.Errorf("append %s: %w: %s", k, session.ErrDuplicateNode, n.ID)
			}
			if n.ParentID != "" && !ss.ids.has(n.ParentID) && !batch[n.ParentID] {
				return fmt.Errorf("append %s: parent %s of %s: %w", k, n.ParentID, n.ID, session.ErrNotFound)
			}
			batch[n.ID] = true
		}
		if leaf := ss.leafID; nodes[0].ParentID != leaf {
			return &session.LeafMovedError{Key: k, Expected: nodes[0].ParentID, Actual: leaf}
		}
		return nil
	}
	if err := check(); err != nil {
		return err
	}

	var buf bytes.Buffer
	lens := make([]int, len(nodes))
	if ss.f == nil || ss.size == 0 {
		hdr, _ := json.Marshal(struct {
			Type    string `json:"type"`
			Version int    `json:"version"`
			AgentID string `json:"agentId"`
			Channel string `json:"channel"`
			ID      string `json:"id"`
		}{"session", 1, k.AgentID, k.Channel, k.ID})
		buf.Write(hdr)
		buf.WriteByte('\n')
	}
	hdrLen := buf.Len()
	for i, n := range nodes {
		b, err := session.EncodeNode(n)
		if err != nil {
			return fmt.Errorf("append %s: %w", k, err)
		}
		lens[i] = len(b)
		buf.Write(b)
		buf.WriteByte('\n')
	}
	base, err := ss.write(buf.Bytes(), check)
	var lm *session.LeafMovedError
	if errors.As(err, &lm) || errors.Is(err, session.ErrDuplicateNode) || errors.Is(err, session.ErrNotFound) {
		return err
	}
	if err != nil {
		return fmt.Errorf("append %s: %w", k, err)
	}
	ss.mu.Lock()
	off := base + int64(hdrLen)
	for i, n := range nodes {
		p := int32(-1)
		if j, ok := ss.ids.get(n.ParentID); ok && n.ParentID != "" {
			p = j
		}
		idx := int32(len(ss.recs))
		ss.recs = append(ss.recs, rec{off: off, n: int32(lens[i]), parent: p})
		ss.ids.put(n.ID, idx)
		ss.leaf, ss.leafID = idx, n.ID
		off += int64(lens[i] + 1)
	}
	ss.mu.Unlock()
	return nil
}

// write appends b with one write(2) under flock, fsyncs per policy, and
// returns the offset it was written at. wmu held. If another process
// appended or removed the file since our load, the index is reloaded first;
// check then runs under the flock against the current index, and its error
// aborts the write.
func (ss *sess) write(b []byte, check func() error) (int64, error) {
	created := false
	var f *os.File
	for attempt := 0; ; attempt++ {
		if ss.f == nil {
			if err := os.MkdirAll(filepath.Dir(ss.path), 0o700); err != nil {
				return 0, err
			}
			nf, err := os.OpenFile(ss.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
			if err != nil {
				return 0, err
			}
			ss.mu.Lock()
			ss.f, ss.size = nf, 0
			ss.mu.Unlock()
			ss.st.open.Add(1)
			ss.st.evict(ss)
			created = true
		}
		f = ss.f
		if err := lockFile(f); err != nil {
			return 0, err
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
			unlockFile(f)
			return 0, err
		}
		if st.Size == ss.size && st.Nlink > 0 {
			break
		}
		if attempt >= 50 { // never write against a stale index: check would be wrong
			unlockFile(f)
			return 0, fmt.Errorf("session file %s keeps changing under other writers", ss.path)
		}
		// Another process appended, truncated or removed the file.
		unlockFile(f)
		ss.loaded.Store(false)
		if err := ss.loadLocked(); err != nil {
			return 0, err
		}
	}
	defer unlockFile(f)
	if err := check(); err != nil {
		return 0, err
	}
	base := ss.size
	n, err := f.Write(b)
	if err != nil || n != len(b) {
		if n > 0 {
			if terr := f.Truncate(base); terr != nil {
				ss.loaded.Store(false) // re-scan (and quarantine) on next use
			}
		}
		if err == nil {
			err = fmt.Errorf("short write: %d of %d bytes", n, len(b))
		}
		return 0, err
	}
	switch ss.st.opts.Fsync {
	case FsyncAlways:
		if err := f.Sync(); err != nil {
			ss.loaded.Store(false)
			return 0, fmt.Errorf("fsync: %w", err)
		}
		if created {
			if err := syncDir(filepath.Dir(ss.path)); err != nil {
				return 0, err
			}
		}
	case FsyncBatch:
		ss.dirty.Store(true)
	}
	ss.mu.Lock()
	ss.size = base + int64(n)
	ss.mu.Unlock()
	return base, nil
}

// Leaf implements session.Store: "" for an empty or unknown session.
func (s *Store) Leaf(ctx context.Context, k session.Key) (string, error) {
	ss, err := s.get(k)
	if err != nil {
		return "", err
	}
	if err := ss.rlock(); err != nil {
		return "", err
	}
	defer ss.mu.RUnlock()
	return ss.leafID, nil
}

// SetLeaf implements session.Store by appending a leaf record. ErrNotFound
// if nodeID is not in the session.
func (s *Store) SetLeaf(ctx context.Context, k session.Key, nodeID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ss, err := s.get(k)
	if err != nil {
		return err
	}
	ss.wmu.Lock()
	defer ss.wmu.Unlock()
	if err := ss.refreshLocked(); err != nil {
		return err
	}
	check := func() error {
		ss.mu.RLock()
		ok := ss.ids.has(nodeID)
		ss.mu.RUnlock()
		if !ok {
			return fmt.Errorf("set leaf %s: node %q: %w", k, nodeID, session.ErrNotFound)
		}
		return nil
	}
	if err := check(); err != nil {
		return err
	}
	b, _ := json.Marshal(struct {
		Type      string `json:"type"`
		LeafID    string `json:"leafId"`
		Timestamp int64  `json:"timestamp"`
	}{"leaf", nodeID, s.opts.Now().Unix()})
	if _, err := ss.write(append(b, '\n'), check); err != nil {
		if errors.Is(err, session.ErrNotFound) {
			return err
		}
		return fmt.Errorf("set leaf %s: %w", k, err)
	}
	ss.mu.Lock()
	ss.leaf, _ = ss.ids.get(nodeID)
	ss.leafID = nodeID // the index may have been reloaded
	ss.mu.Unlock()
	return nil
}

// readNode reads and decodes node i, or takes it from the cache; mu held
// (read). The node returned is the caller's: its Metadata map and Blocks
// slice are copies (values nested inside them are shared with the cache
// and must not be modified).
func (ss *sess) readNode(i int32) (session.Node, error) {
	slot := int(i) % nodeCacheSlots
	ss.cmu.Lock()
	if ss.cache != nil && ss.cache[slot].i == i+1 {
		n := ss.cache[slot].nd
		ss.cmu.Unlock()
		return cloneNode(n), nil
	}
	ss.cmu.Unlock()
	n, err := ss.decodeNode(i)
	if err != nil {
		return n, err
	}
	ss.cmu.Lock()
	made := ss.cache == nil
	if made {
		ss.cache = make([]cachedNode, nodeCacheSlots)
	}
	ss.cache[slot] = cachedNode{i: i + 1, nd: n}
	ss.cmu.Unlock()
	if made && ss.st.caches.Add(1) > int64(ss.st.opts.MaxNodeCaches) && ss.st.opts.MaxNodeCaches > 0 {
		ss.st.trimNodeCaches(ss)
	}
	return cloneNode(n), nil
}

// dropCache drops ss's decoded nodes, if it holds any.
func (ss *sess) dropCache() {
	ss.cmu.Lock()
	had := ss.cache != nil
	ss.cache = nil
	ss.cmu.Unlock()
	if had {
		ss.st.caches.Add(-1)
	}
}

// trimNodeCaches drops the decoded nodes of the least recently used
// sessions other than keep while more than Options.MaxNodeCaches hold
// them. A session's nodes stay valid in its file, so dropping them costs
// only its next turn a decode; it takes the victim's cmu alone, never a
// lock a reader of the victim holds while waiting for another session.
func (s *Store) trimNodeCaches(keep *sess) {
	for s.caches.Load() > int64(s.opts.MaxNodeCaches) {
		s.mu.Lock()
		var victim *sess
		for _, x := range s.sessions {
			if x == keep {
				continue
			}
			x.cmu.Lock()
			has := x.cache != nil
			x.cmu.Unlock()
			if has && (victim == nil || x.used.Load() < victim.used.Load()) {
				victim = x
			}
		}
		s.mu.Unlock()
		if victim == nil {
			return
		}
		victim.dropCache()
	}
}

// cloneNode copies n's Metadata map and Blocks slice, so that a caller
// changing them leaves the cached node as it was stored.
func cloneNode(n session.Node) session.Node {
	n.Metadata = maps.Clone(n.Metadata)
	n.Blocks = slices.Clone(n.Blocks)
	return n
}

// decodeNode reads and decodes node i; mu held (read).
func (ss *sess) decodeNode(i int32) (session.Node, error) {
	r := ss.recs[i]
	buf := make([]byte, r.n)
	if _, err := ss.f.ReadAt(buf, r.off); err != nil {
		return session.Node{}, fmt.Errorf("read session %s at %d: %w", ss.key, r.off, err)
	}
	var n session.Node
	if err := n.UnmarshalJSON(buf); err != nil { // direct: skips a second validation pass
		return session.Node{}, fmt.Errorf("read session %s at %d: %w", ss.key, r.off, err)
	}
	return n, nil
}

// Path implements session.Store: up to max nodes ending at leafID, oldest
// first; O(max) whatever the session size. ErrNotFound for an unknown node.
func (s *Store) Path(ctx context.Context, k session.Key, leafID string, max int) ([]session.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ss, err := s.get(k)
	if err != nil {
		return nil, err
	}
	if err := ss.rlock(); err != nil {
		return nil, err
	}
	defer ss.mu.RUnlock()
	i, ok := ss.ids.get(leafID)
	if !ok {
		return nil, fmt.Errorf("path %s: node %q: %w", k, leafID, session.ErrNotFound)
	}
	var chain []int32
	for ; i >= 0 && (max <= 0 || len(chain) < max); i = ss.recs[i].parent {
		chain = append(chain, i)
		if len(chain) > len(ss.recs) {
			return nil, fmt.Errorf("path %s: parent cycle at %q", k, leafID)
		}
	}
	out := make([]session.Node, len(chain))
	for j, idx := range chain {
		n, err := ss.readNode(idx)
		if err != nil {
			return nil, err
		}
		out[len(chain)-1-j] = n
	}
	return out, nil
}

// Nodes implements session.Store: every node in append order; nil for an
// unknown session.
func (s *Store) Nodes(ctx context.Context, k session.Key) ([]session.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ss, err := s.get(k)
	if err != nil {
		return nil, err
	}
	if err := ss.rlock(); err != nil {
		return nil, err
	}
	defer ss.mu.RUnlock()
	if len(ss.recs) == 0 {
		return nil, nil
	}
	data := make([]byte, ss.size)
	if _, err := ss.f.ReadAt(data, 0); err != nil {
		return nil, fmt.Errorf("read session %s: %w", k, err)
	}
	out := make([]session.Node, len(ss.recs))
	for i, r := range ss.recs {
		if err := out[i].UnmarshalJSON(data[r.off : r.off+int64(r.n)]); err != nil {
			return nil, fmt.Errorf("read session %s at %d: %w", k, r.off, err)
		}
	}
	return out, nil
}

// List implements session.Store by scanning <dir>/*/sessions/*.jsonl. Keys
// whose file name is hashed (long IDs) are read from the file's first line.
func (s *Store) List(ctx context.Context, agentID string) ([]session.Key, error) {
	var agentDirs []string
	if agentID != "" {
		agentDirs = []string{filepath.Join(s.dir, session.EncodeID(agentID))}
	} else {
		ents, err := os.ReadDir(s.dir)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		for _, e := range ents {
			if e.IsDir() {
				agentDirs = append(agentDirs, filepath.Join(s.dir, e.Name()))
			}
		}
	}
	var keys []session.Key
	for _, ad := range agentDirs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ents, err := os.ReadDir(filepath.Join(ad, "sessions"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		for _, e := range ents {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".jsonl") {
				continue
			}
			p := filepath.Join(ad, "sessions", e.Name())
			k, ok := keyFromName(filepath.Base(ad), e.Name())
			if !ok {
				if k, ok = keyFromHeader(p); !ok {
					s.log.Warn("session: cannot tell the key of a file", "file", p)
					continue
				}
			}
			if fi, err := e.Info(); err == nil && fi.Size() == 0 {
				continue
			}
			keys = append(keys, k)
		}
	}
	session.SortKeys(keys)
	return keys, nil
}

// keyFromName decodes "<agent>" and "<channel>_<id>.jsonl".
func keyFromName(agentDir, name string) (session.Key, bool) {
	agent, ok1 := session.DecodeID(agentDir)
	ch, id, ok2 := strings.Cut(strings.TrimSuffix(name, ".jsonl"), "_")
	if !ok1 || !ok2 {
		return session.Key{}, false
	}
	c, ok3 := session.DecodeID(ch)
	i, ok4 := session.DecodeID(id)
	return session.Key{AgentID: agent, Channel: c, ID: i}, ok3 && ok4
}

func keyFromHeader(p string) (session.Key, bool) {
	f, err := os.Open(p)
	if err != nil {
		return session.Key{}, false
	}
	defer f.Close()
	buf := make([]byte, 4*session.MaxIDLen+256)
	n, _ := f.Read(buf)
	line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
	var h struct {
		Type    string `json:"type"`
		AgentID string `json:"agentId"`
		Channel string `json:"channel"`
		ID      string `json:"id"`
	}
	if json.Unmarshal(line, &h) != nil || h.Type != "session" {
		return session.Key{}, false
	}
	k := session.Key{AgentID: h.AgentID, Channel: h.Channel, ID: h.ID}
	return k, k.Validate() == nil
}

// Clear implements session.Store: it removes the session file. ErrNotFound
// if the session has no file.
func (s *Store) Clear(ctx context.Context, k session.Key) error {
	ss, err := s.get(k)
	if err != nil {
		return err
	}
	ss.wmu.Lock()
	defer ss.wmu.Unlock()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closeFileLocked()
	ss.recs, ss.ids, ss.leaf, ss.leafID, ss.size = nil, nodeIDs{}, -1, "", 0
	ss.dropCache()
	ss.loaded.Store(true)
	err = os.Remove(ss.path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("clear %s: %w", k, session.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("clear %s: %w", k, err)
	}
	if s.opts.Fsync == FsyncAlways {
		_ = syncDir(filepath.Dir(ss.path))
	}
	return nil
}

// Close stops the batch fsync loop, fsyncs dirty files and closes every
// file. Later calls return ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ss := s.sessions
	s.sessions = nil
	s.mu.Unlock()
	if s.stop != nil {
		close(s.stop)
		<-s.done
	}
	var errs []error
	for _, x := range ss {
		x.wmu.Lock()
		x.mu.Lock()
		if x.f != nil && x.dirty.Swap(false) {
			errs = append(errs, x.f.Sync())
		}
		errs = append(errs, x.closeFileLocked())
		x.mu.Unlock()
		x.wmu.Unlock()
	}
	return errors.Join(errs...)
}

func (s *Store) syncLoop() {
	defer close(s.done)
	t := time.NewTicker(s.opts.BatchInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		var dirty []*sess
		for _, x := range s.sessions {
			if x.dirty.Load() {
				dirty = append(dirty, x)
			}
		}
		s.mu.Unlock()
		for _, x := range dirty {
			x.mu.RLock()
			if x.f != nil && x.dirty.Swap(false) {
				if err := x.f.Sync(); err != nil {
					s.log.Error("session: batch fsync failed", "file", x.path, "err", err)
				}
			}
			x.mu.RUnlock()
		}
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}
