package approval

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// fileLog is the default Log: <dir>/ledger.jsonl, appended with O_APPEND
// and fsynced, under an exclusive flock on <dir>/ledger.lock; paused turns
// in <dir>/resume/<ref>.json.
type fileLog struct {
	dir, path string
	f         *os.File // ledger, O_APPEND
	lock      *os.File
	deleted   bool  // a resume file was removed in this unit
	g         *Gate // for the test hooks noSync and trace
}

func openFileLog(dir string) (*fileLog, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "ledger.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	return &fileLog{dir: dir, path: filepath.Join(dir, "ledger.jsonl"), lock: lock}, nil
}

func (l *fileLog) noSync() bool { return l.g != nil && l.g.noSync }

func (l *fileLog) Name() string { return l.path }

func (l *fileLog) Lock(ctx context.Context, write bool) error {
	if l.lock == nil {
		return errors.New("approval: gate closed")
	}
	if err := lockFile(l.lock); err != nil {
		return fmt.Errorf("approval: lock ledger: %w", err)
	}
	return nil
}

func (l *fileLog) Unlock(ctx context.Context, commit bool) error {
	var err error
	if l.deleted && !l.noSync() {
		if e := fsyncDir(l.resumeDir()); e != nil && !errors.Is(e, os.ErrNotExist) {
			err = fmt.Errorf("approval: fsync %s: %w", l.resumeDir(), e)
		}
	}
	l.deleted = false
	unlockFile(l.lock)
	return err
}

func (l *fileLog) Load(ctx context.Context) ([]byte, error) {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("approval: open ledger: %w", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("approval: read ledger: %w", err)
	}
	l.f = f
	return b, nil
}

func (l *fileLog) Snapshot(ctx context.Context) ([]byte, bool, error) {
	b, err := os.ReadFile(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("approval: read ledger: %w", err)
	}
	return b, true, nil
}

// Tail notices a reset (file replaced), truncation, or the last line
// rewritten in place (deep), then reads what other processes appended.
func (l *fileLog) Tail(ctx context.Context, at Pos, deep bool) (Tail, error) {
	onDisk, err := os.Stat(l.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Tail{Change: TailRemoved, Reason: "ledger file removed"}, nil
		}
		return Tail{}, fmt.Errorf("approval: stat ledger: %w", err)
	}
	ours, err := l.f.Stat()
	if err != nil {
		return Tail{}, fmt.Errorf("approval: stat ledger: %w", err)
	}
	if !os.SameFile(onDisk, ours) {
		return Tail{Change: TailReplaced}, nil
	}
	size := ours.Size()
	if size < at.Offset {
		return Tail{Change: TailAltered, Reason: fmt.Sprintf("ledger shrank from %d to %d bytes (truncated)", at.Offset, size)}, nil
	}
	if deep {
		// The last line we accepted must still be there, byte for byte.
		if n := int64(len(at.Last)); n > 0 {
			buf := make([]byte, n)
			if _, err := l.f.ReadAt(buf, at.Offset-n); err != nil || !bytes.Equal(buf, at.Last) {
				return Tail{Change: TailAltered, Reason: fmt.Sprintf("line %d changed after it was written", at.Entries)}, nil
			}
		}
	}
	if size == at.Offset {
		return Tail{}, nil
	}
	tail := make([]byte, size-at.Offset)
	if _, err := l.f.ReadAt(tail, at.Offset); err != nil && !errors.Is(err, io.EOF) {
		return Tail{}, fmt.Errorf("approval: read ledger: %w", err)
	}
	return Tail{Change: TailAppended, Data: tail}, nil
}

func (l *fileLog) Append(ctx context.Context, r Record) error {
	if _, err := l.f.Write(r.Line); err != nil {
		return fmt.Errorf("%w: append: %v", ErrLogDamaged, err)
	}
	if l.noSync() {
		return nil // test-only fast path
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("%w: fsync: %v", ErrLogDamaged, err)
	}
	return nil
}

func (l *fileLog) ArchiveName(now time.Time) string {
	return filepath.Base(l.path) + ".broken-" + now.UTC().Format("20060102T150405.000000000Z")
}

// Replace moves the ledger aside (nothing is deleted) and renames a
// fsynced one-line ledger into its place.
func (l *fileLog) Replace(ctx context.Context, archive string, exists bool, first Record) error {
	tmp := filepath.Join(l.dir, ".ledger.reset.tmp")
	if err := writeSync(tmp, first.Line); err != nil {
		return fmt.Errorf("approval: reset: %w", err)
	}
	if exists {
		if err := os.Rename(l.path, filepath.Join(l.dir, archive)); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("approval: reset: archive: %w", err)
		}
	}
	if err := os.Rename(tmp, l.path); err != nil {
		return fmt.Errorf("approval: reset: %w", err)
	}
	syncDir(l.dir)
	return nil
}

func (l *fileLog) resumeDir() string { return filepath.Join(l.dir, ResumeDir) }

func (l *fileLog) resumePath(ref string) string { return filepath.Join(l.resumeDir(), ref+".json") }

// StoreResume writes payload durably: temp file, fsync, rename, fsync of
// the directory (and of the gate directory when it created resume/). The
// caller holds the lock, so no other process writes the same temp file.
func (l *fileLog) StoreResume(ctx context.Context, ref string, payload []byte) error {
	dir := l.resumeDir()
	created := false
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		created = true
	} else if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+ref+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if _, err := f.Write(payload); err != nil {
		return fail(err)
	}
	if !l.noSync() {
		if err := f.Sync(); err != nil {
			return fail(err)
		}
	}
	l.g.traceEvent("resume:fsync")
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, l.resumePath(ref)); err != nil {
		os.Remove(tmp)
		return err
	}
	l.g.traceEvent("resume:rename")
	if !l.noSync() {
		if err := fsyncDir(dir); err != nil {
			return fmt.Errorf("fsync %s: %w", dir, err)
		}
		if created {
			if err := fsyncDir(l.dir); err != nil {
				return fmt.Errorf("fsync %s: %w", l.dir, err)
			}
		}
	}
	l.g.traceEvent("resume:dirsync")
	return nil
}

func (l *fileLog) LoadResume(ctx context.Context, ref string, limit int) ([]byte, error) {
	f, err := os.Open(l.resumePath(ref))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("%w: %s is over %d bytes", ErrResumeCorrupt, ref, limit)
	}
	return b, nil
}

func (l *fileLog) DeleteResume(ctx context.Context, ref string) error {
	if err := os.Remove(l.resumePath(ref)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	l.deleted = true
	return nil
}

func (l *fileLog) Close() error {
	var err error
	if l.f != nil {
		err = l.f.Close()
		l.f = nil
	}
	if l.lock != nil {
		l.lock.Close()
		l.lock = nil
	}
	return err
}
