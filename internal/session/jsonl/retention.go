package jsonl

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// RetentionOptions configure Archive (sessions.retention in tendril.json).
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

// ParseRetention parses the config strings, e.g. "30d" and "100mb" (see
// ParseAge and ParseSize); "" leaves a limit off.
func ParseRetention(maxAge, maxSize string, del bool) (RetentionOptions, error) {
	o := RetentionOptions{Delete: del}
	var err error
	if maxAge != "" {
		if o.MaxAge, err = ParseAge(maxAge); err != nil {
			return o, err
		}
	}
	if maxSize != "" {
		if o.MaxSize, err = ParseSize(maxSize); err != nil {
			return o, err
		}
	}
	return o, nil
}

// ParseAge parses "30d", "2w", "12h", "1d12h" or any time.ParseDuration
// form; d is 24h and w is 7d.
func ParseAge(s string) (time.Duration, error) {
	orig := s
	s = strings.ToLower(strings.TrimSpace(s))
	var total time.Duration
	for s != "" {
		i := 0
		for i < len(s) && (s[i] == '.' || unicode.IsDigit(rune(s[i]))) {
			i++
		}
		j := i
		for j < len(s) && unicode.IsLetter(rune(s[j])) {
			j++
		}
		if i == 0 || j == i {
			return 0, fmt.Errorf("bad age %q: want e.g. 30d, 2w, 12h", orig)
		}
		n, err := strconv.ParseFloat(s[:i], 64)
		if err != nil {
			return 0, fmt.Errorf("bad age %q: %w", orig, err)
		}
		var unit time.Duration
		switch s[i:j] {
		case "w":
			unit = 7 * 24 * time.Hour
		case "d":
			unit = 24 * time.Hour
		default:
			d, err := time.ParseDuration(s[:j])
			if err != nil {
				return 0, fmt.Errorf("bad age %q: %w", orig, err)
			}
			total += d
			s = s[j:]
			continue
		}
		total += time.Duration(n * float64(unit))
		s = s[j:]
	}
	if total <= 0 {
		return 0, fmt.Errorf("bad age %q: must be positive", orig)
	}
	return total, nil
}

// ParseSize parses a byte size: "100mb", "1.5GB", "512kb", "2 MiB" or a
// plain number of bytes. Multiples are binary: 1kb = 1024 bytes, 1mb =
// 1024 kb, 1gb = 1024 mb.
func ParseSize(s string) (int64, error) {
	orig := s
	s = strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), " ", ""))
	i := 0
	for i < len(s) && (s[i] == '.' || unicode.IsDigit(rune(s[i]))) {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("bad size %q: want e.g. 100mb", orig)
	}
	n, err := strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, fmt.Errorf("bad size %q: %w", orig, err)
	}
	mult := map[string]float64{"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
		"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
		"t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}[s[i:]]
	if mult == 0 || n <= 0 {
		return 0, fmt.Errorf("bad size %q: want e.g. 100mb", orig)
	}
	return int64(n * mult), nil
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
