package jsonl

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// RetentionOptions configure Archive (session.retention in tendril.json,
// parsed by config.RetentionConfig.Limits).
type RetentionOptions struct {
	// MaxAge archives a session file whose last append (mtime) is older; 0
	// means no age limit.
	MaxAge time.Duration
	// MaxSize in bytes bounds the total size of live session files under the
	// store directory (all agents); the least recently appended are archived
	// first until the total fits. 0 means no size limit.
	MaxSize int64
	// Delete removes files instead of archiving them. Only when set
	// explicitly.
	Delete bool
}

// ArchiveReport lists what Archive did, as paths.
type ArchiveReport struct {
	Archived []string `json:"archived"` // the .jsonl.gz files written
	Deleted  []string `json:"deleted"`  // files removed (Delete only)
	Bytes    int64    `json:"bytes"`    // uncompressed bytes moved out
}

type sessionFile struct {
	path  string
	size  int64
	mtime time.Time
}

// Archive applies retention to the session files under dir
// (<dir>/*/sessions/*.jsonl): files older than MaxAge, then the least
// recently appended until the total is at most MaxSize, are gzip-compressed
// into <dir>/<agent>/sessions/archive/<name>.gz (a ".<unix>" suffix is
// added if that exists) and the original removed only once the archive is
// fsynced. Nothing is deleted unless Delete is set. Run it at start-up,
// before a Store opens dir. Errors stop the run; the report says what was
// already done.
func Archive(dir string, opts RetentionOptions, now time.Time) (ArchiveReport, error) {
	var rep ArchiveReport
	if opts.MaxAge <= 0 && opts.MaxSize <= 0 {
		return rep, nil
	}
	files, err := filepath.Glob(filepath.Join(dir, "*", "sessions", "*.jsonl"))
	if err != nil {
		return rep, fmt.Errorf("retention: %w", err)
	}
	var live []sessionFile
	var total int64
	for _, p := range files {
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		live = append(live, sessionFile{p, fi.Size(), fi.ModTime()})
		total += fi.Size()
	}
	sort.Slice(live, func(i, j int) bool { return live[i].mtime.Before(live[j].mtime) })
	for _, f := range live {
		old := opts.MaxAge > 0 && now.Sub(f.mtime) > opts.MaxAge
		over := opts.MaxSize > 0 && total > opts.MaxSize
		if !old && !over {
			continue
		}
		if opts.Delete {
			if err := os.Remove(f.path); err != nil {
				return rep, fmt.Errorf("retention: %w", err)
			}
			rep.Deleted = append(rep.Deleted, f.path)
		} else {
			dst, err := archiveFile(f.path, now)
			if err != nil {
				return rep, fmt.Errorf("retention: archive %s: %w", f.path, err)
			}
			rep.Archived = append(rep.Archived, dst)
		}
		rep.Bytes += f.size
		total -= f.size
	}
	return rep, nil
}

// archiveFile gzips src into its archive/ directory and removes src.
func archiveFile(src string, now time.Time) (string, error) {
	adir := filepath.Join(filepath.Dir(src), "archive")
	if err := os.MkdirAll(adir, 0o700); err != nil {
		return "", err
	}
	dst := filepath.Join(adir, filepath.Base(src)+".gz")
	if _, err := os.Stat(dst); err == nil {
		dst = filepath.Join(adir, fmt.Sprintf("%s.%d.gz", filepath.Base(src), now.Unix()))
	}
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(adir, ".archive-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	zw := gzip.NewWriter(tmp)
	zw.Name = filepath.Base(src)
	_, err = io.Copy(zw, in)
	err = errors.Join(err, zw.Close(), tmp.Sync(), tmp.Close())
	if err != nil {
		return "", err
	}
	if err := os.Link(tmp.Name(), dst); err != nil { // never overwrite an archive
		return "", err
	}
	if err := syncDir(adir); err != nil {
		return "", err
	}
	if err := os.Remove(src); err != nil {
		return "", err
	}
	return dst, syncDir(filepath.Dir(src))
}
