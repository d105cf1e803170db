package sqlitewal

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// openWriter opens path as the writers do, with WriterPragmas for a
// threshold of threshold bytes and 1 KiB pages.
func openWriter(t *testing.T, path string, threshold int64) *sql.DB {
	t.Helper()
	// 1 KiB pages, as Tendril's databases have; the page size must be set
	// before the switch to WAL.
	init, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := init.Exec(`PRAGMA page_size=1024; PRAGMA journal_mode=WAL`); err != nil {
		t.Fatal(err)
	}
	init.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"+WriterPragmas(threshold, 1024))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)`); err != nil {
		t.Fatal(err)
	}
	return db
}

func walSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestWriterPragmas(t *testing.T) {
	got := WriterPragmas(Pages(4096, 1024), 1024)
	want := fmt.Sprintf("&_pragma=journal_size_limit(%d)&_pragma=wal_autocheckpoint(8192)", Pages(4096, 1024)/4)
	if got != want {
		t.Fatalf("WriterPragmas = %q, want %q", got, want)
	}
}

// The log of a database whose writers commit on and on stays near the
// threshold: the Checkpointer copies it, the next writer restarts it and
// journal_size_limit truncates the file, and every row survives.
func TestCheckpointerKeepsTheLogNearItsThreshold(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	const threshold = 256 << 10
	db := openWriter(t, path, threshold)
	c, err := Start(path, threshold, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	row := strings.Repeat("x", 900)
	var largest int64
	const rows = 1200 // about 3 MB of log: eleven thresholds
	for i := range rows {
		if _, err := db.Exec(`INSERT INTO t(v) VALUES(?)`, row); err != nil {
			t.Fatal(err)
		}
		largest = max(largest, walSize(t, path))
		if i%25 == 24 {
			// Writers pause now and then: let it look. A burst of 25
			// rows adds about 65 KiB to the log.
			time.Sleep(Interval + Interval/2)
		}
	}
	t.Logf("largest log %d bytes, %d checkpoints", largest, c.Runs())
	if c.Runs() == 0 {
		t.Fatal("no background checkpoint ran")
	}
	// The backstop is 2 × threshold: without the Checkpointer the log
	// grows to it before the writers' own checkpoint. With it, the log
	// passes the threshold by at most what a burst adds before the next
	// look.
	if largest >= threshold+threshold/2 {
		t.Fatalf("largest log %d bytes, want below the backstop %d", largest, 2*threshold)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil || n != rows {
		t.Fatalf("rows = %d (%v), want %d", n, err, rows)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// Below its threshold the Checkpointer does nothing, so a quiet log keeps
// the writes it would otherwise copy again and again.
func TestCheckpointerLeavesASmallLogAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db := openWriter(t, path, 1<<20)
	c, err := Start(path, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 20 {
		if _, err := db.Exec(`INSERT INTO t(v) VALUES('a')`); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * Interval)
	if n := c.Runs(); n != 0 {
		t.Fatalf("%d checkpoints of a %d-byte log", n, walSize(t, path))
	}
	// An explicit one still works.
	if err := c.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestStartOnAMissingDirectory(t *testing.T) {
	c, err := Start(filepath.Join(t.TempDir(), "no", "such", "x.db"), 1<<20, nil)
	if err != nil {
		t.Fatal(err) // sql.Open is lazy: the error comes with the first checkpoint
	}
	defer c.Close()
	if err := c.Checkpoint(context.Background()); err == nil {
		t.Fatal("checkpoint of a database in a missing directory succeeded")
	}
}

// A '?', '#' or '%' in a directory name stays part of the path: the
// database is where it was asked for, and nothing is created at the path
// cut at that character.
func TestFileURIKeepsOddCharacters(t *testing.T) {
	for _, dir := range []string{"h#1", "h?x=1", "h%231", "a b"} {
		t.Run(dir, func(t *testing.T) {
			root := t.TempDir()
			d := filepath.Join(root, dir)
			if err := os.Mkdir(d, 0o700); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(d, "x.db")
			db, err := sql.Open("sqlite", FileURI(path)+"?_pragma=journal_mode(WAL)")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(`CREATE TABLE t(v)`); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("no database at %s: %v", path, err)
			}
			entries, _ := os.ReadDir(root)
			if len(entries) != 1 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Fatalf("%s holds %q, want only %q", root, names, dir)
			}
		})
	}
}
