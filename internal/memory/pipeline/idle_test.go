package pipeline

import (
	"bytes"
	"database/sql"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/tendrilai/tendril/internal/memory"
)

// The memory.idle job, not a poll, queues a quiet session's idle
// extraction and summary; a turn meanwhile makes it wait again.
func TestIdleJobQueuesSummary(t *testing.T) {
	for _, kind := range []string{"mem", "mem@pg"} {
		t.Run(kind, func(t *testing.T) {
			f := &fixture{t: t, store: newMemStore(), clk: newClock(), path: filepath.Join(t.TempDir(), "index", "jobs.db")}
			if onPG(kind) {
				f.pool = pgPool(t)
			}
			o := f.options()
			o.Now, o.IdleAfter = time.Now, 500*time.Millisecond
			p, err := New(f.store, o)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			f.p = p
			startJobs(t, p)
			defer stopJobs(t, p)
			for _, s := range []string{"My tomatoes have yellow leaves", "what should I do?", "I have a fig tree"} {
				if err := p.RecordTurn(ctx, "main", "u1", "s1", []memory.Event{{Role: "user", Text: s}}); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(time.Minute)
			for len(f.active("u1", memory.StrategySummary)) == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("no summary after a minute; records %q", contents(f.all("u1")))
				}
				time.Sleep(20 * time.Millisecond)
			}
			if got := f.active("u1", memory.StrategySemantic); len(got) != 2 {
				t.Fatalf("the idle job did not extract the pending turn: %q", contents(f.all("u1")))
			}
		})
	}
}

// A home with the old hand-written queue (<home>/memory/jobs.db) keeps its
// rejections, cursors and waiting jobs.
func TestImportLegacyQueue(t *testing.T) {
	home := t.TempDir()
	old := filepath.Join(home, "memory", "jobs.db")
	if err := os.MkdirAll(filepath.Dir(old), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+old)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, agent_id TEXT NOT NULL, actor_id TEXT NOT NULL, session_id TEXT NOT NULL, reason TEXT NOT NULL,
			created_at INTEGER NOT NULL, run_after INTEGER NOT NULL, leased_until INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0,
			last_error TEXT NOT NULL DEFAULT '', dead INTEGER NOT NULL DEFAULT 0)`,
		`CREATE TABLE sessions (agent_id TEXT NOT NULL, actor_id TEXT NOT NULL, session_id TEXT NOT NULL, pending_turns INTEGER NOT NULL DEFAULT 0,
			last_turn_at INTEGER NOT NULL DEFAULT 0, idle_done INTEGER NOT NULL DEFAULT 0, cursor_id TEXT NOT NULL DEFAULT '', cursor_ts INTEGER NOT NULL DEFAULT 0,
			PRIMARY KEY (agent_id, actor_id, session_id))`,
		`CREATE TABLE harvest (agent_id TEXT NOT NULL, actor_id TEXT NOT NULL, cursor_ts INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (agent_id, actor_id))`,
		`CREATE TABLE forgotten (actor_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL)`,
		`CREATE TABLE rejections (actor_id TEXT NOT NULL, hash TEXT NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (actor_id, hash))`,
		`INSERT INTO jobs(agent_id, actor_id, session_id, reason, created_at, run_after) VALUES('main','u1','s1','turns',1000,1000)`,
		`INSERT INTO jobs(agent_id, actor_id, session_id, reason, created_at, run_after, dead) VALUES('main','u1','s0','turns',1000,1000,1)`,
		`INSERT INTO sessions(agent_id, actor_id, session_id, last_turn_at, idle_done, cursor_id, cursor_ts) VALUES('main','u1','s1',1000,1,'ev1',5)`,
		`INSERT INTO forgotten VALUES('u9', 3)`,
		`INSERT INTO rejections VALUES('u1', '` + memory.ContentHash("I like jazz") + `', 1000)`,
	} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	var logs bytes.Buffer
	var mu sync.Mutex
	p, err := New(newMemStore(), Options{Home: home, Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if rej, err := p.rejected(ctx, "u1", "I like jazz"); err != nil || !rej {
		t.Fatalf("rejection lost: %v %v", rej, err)
	}
	if cur, err := p.q.cursor(ctx, "main", "u1", "s1"); err != nil || cur.CursorID != "ev1" {
		t.Fatalf("cursor %+v %v", cur, err)
	}
	if e, err := p.q.epoch(ctx, "u9"); err != nil || e != 3 {
		t.Fatalf("epoch %d %v", e, err)
	}
	if n, _, err := p.Depth(ctx); err != nil || n != 1 {
		t.Fatalf("Depth %d %v; want the one live job imported", n, err)
	}
	if _, err := os.Stat(old + ".imported"); err != nil {
		t.Fatalf("old database not set aside: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "imported the old extraction queue") {
		t.Fatalf("logs: %s", logs.String())
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
