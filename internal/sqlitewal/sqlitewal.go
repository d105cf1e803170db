// Package sqlitewal checkpoints a SQLite database's write-ahead log in the
// background, so that no writer's commit pays for it.
//
// With SQLite's automatic checkpoint (https://sqlite.org/wal.html#ckpt),
// the commit that takes the log past wal_autocheckpoint pages copies the
// whole log into the database file and fsyncs both before it returns, on
// the writer's only connection: every transaction queued behind it (a
// turn's events, a turn's count) waits too. A Checkpointer watches the
// log's size on a connection of its own and runs a PASSIVE checkpoint
// (https://sqlite.org/pragma.html#pragma_wal_checkpoint) when it passes a
// threshold. PASSIVE takes no writer lock, so writers go on appending to
// the log while it copies; the next writer after a complete checkpoint
// restarts the log from its beginning.
//
// Writers open the database with WriterPragmas: journal_size_limit, so
// that the restart truncates the file and its size is again the size of
// the log (it is the Checkpointer's signal), and wal_autocheckpoint at
// twice the threshold, a backstop should the Checkpointer fall behind or
// stop.
package sqlitewal

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver
)

// FileURI returns path as a SQLite URI filename ("file:" and the path with
// '%', '?' and '#' percent-encoded; https://sqlite.org/uri.html), for a
// DSN of modernc.org/sqlite, which hands a "file:" DSN to SQLite whole and
// reads its own "_pragma" parameters from after the first '?'. Without
// the encoding, a '?' or '#' in a directory name (TENDRIL_HOME) would cut
// the path there and open a database elsewhere.
func FileURI(path string) string {
	return "file:" + uriEscaper.Replace(path)
}

var uriEscaper = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// Interval is how often a Checkpointer looks at the log's size (one stat
// system call).
const Interval = 100 * time.Millisecond

// WriterPragmas returns the DSN parameters (modernc.org/sqlite's
// "&_pragma=…" form) that writers of a database watched by a Checkpointer
// with threshold thresholdBytes and pages of pageSize bytes should use:
// journal_size_limit of a quarter of the threshold, and wal_autocheckpoint
// at twice the threshold, in pages, as the backstop.
func WriterPragmas(thresholdBytes int64, pageSize int) string {
	backstop := 2 * thresholdBytes / int64(pageSize+frameHeader)
	return fmt.Sprintf("&_pragma=journal_size_limit(%d)&_pragma=wal_autocheckpoint(%d)", thresholdBytes/4, backstop)
}

// Pages returns the log size, in bytes, of n frames of pageSize bytes
// (each frame is a 24-byte header and a page; https://sqlite.org/fileformat2.html#walformat).
func Pages(n, pageSize int) int64 { return int64(n) * int64(pageSize+frameHeader) }

const frameHeader = 24

// Checkpointer checkpoints one database's log in the background (see the
// package comment). Close stops it.
type Checkpointer struct {
	db        *sql.DB
	wal       string
	threshold int64
	log       *slog.Logger

	stop, done chan struct{}
	once       sync.Once
	runs       atomic.Int64 // checkpoints run
}

// Start opens a connection of its own to the SQLite database at path (in
// WAL mode already: the writers set it) and checkpoints its log whenever
// the log file (path + "-wal") is at least thresholdBytes long, looking
// every Interval. A failed checkpoint is logged (a warning, once until one
// works again) and tried again at the next look; the writers' automatic
// checkpoint remains the backstop. One transaction larger than the
// backstop (a rebuild) takes the log past it until it commits. Errors:
// opening the connection.
func Start(path string, thresholdBytes int64, log *slog.Logger) (*Checkpointer, error) {
	db, err := sql.Open("sqlite", FileURI(path)+"?_pragma=busy_timeout(5000)&_pragma=cache_size(-64)")
	if err != nil {
		return nil, fmt.Errorf("checkpointer %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Checkpointer{db: db, wal: path + "-wal", threshold: thresholdBytes, log: log,
		stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c, nil
}

func (c *Checkpointer) run() {
	defer close(c.done)
	t := time.NewTicker(Interval)
	defer t.Stop()
	failing := false // logged once until it works again
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		if st, err := os.Stat(c.wal); err != nil || st.Size() < c.threshold {
			continue
		}
		err := c.Checkpoint(context.Background())
		switch {
		case err != nil && !failing:
			c.log.Warn("background checkpoint failed; retrying every look (the writers' own checkpoint remains)", "wal", c.wal, "err", err)
			failing = true
		case err == nil && failing:
			c.log.Info("background checkpoint works again", "wal", c.wal)
			failing = false
		}
	}
}

// Checkpoint runs a PASSIVE checkpoint now, and again at once while
// writers appended frames during the last one (at most catchUp passes), so
// that the log is wholly copied at a moment between two commits and the
// next writer restarts it.
func (c *Checkpointer) Checkpoint(ctx context.Context) error {
	prev := int64(-1)
	for range catchUp {
		var busy, logFrames, done int64
		if err := c.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logFrames, &done); err != nil {
			return err
		}
		c.runs.Add(1)
		if done >= logFrames || done == prev { // all copied, or a reader holds the rest
			return nil
		}
		prev = done
	}
	return nil
}

// catchUp bounds the passes of one Checkpoint.
const catchUp = 8

// Runs returns how many checkpoints the Checkpointer has run.
func (c *Checkpointer) Runs() int64 { return c.runs.Load() }

// Close stops the Checkpointer and closes its connection. It is safe to
// call more than once.
func (c *Checkpointer) Close() error {
	if c == nil {
		return nil
	}
	var err error
	c.once.Do(func() {
		close(c.stop)
		<-c.done
		err = c.db.Close()
	})
	return err
}
