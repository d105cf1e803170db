package sqlitestore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// TestColdSearchScopedToActor: in an index that other actors' rows
// dominate, a cold search names its actor inside FTS5 (ftsScope) and
// still finds the actor's own cold events first, never another actor's,
// although every actor holds the same words, unique markers included.
// With a wrong actor key it finds nothing cold, so the key is what the
// query is scoped by.
func TestColdSearchScopedToActor(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoFsync: true, SyncInterval: -1, EventWindow: 8, EventExpiryDays: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, actor := range []string{"o1", "o2", "o3", "o4", "u"} {
		for i := 0; i < 40; i += 2 {
			var batch []memory.Event
			for j := i; j < i+2; j++ {
				e := tierEvent(j, "s")
				e.ID, e.ActorID = actor+"-"+e.ID, actor
				batch = append(batch, e)
			}
			if err := s.AppendEvents(bg, batch); err != nil {
				t.Fatal(err)
			}
			s.waitDemotion(actor)
		}
	}
	s.mu.Lock()
	a := s.actors["u"]
	s.mu.Unlock()
	a.mu.RLock()
	coldN := a.coldN
	a.mu.RUnlock()
	if !s.ftsScope(coldN) || coldN < 20 {
		t.Fatalf("ftsScope(%d) over %d rows: not scoped", coldN, s.ftsRows.Load())
	}
	search := func(i int) []memory.Hit {
		t.Helper()
		hits, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: fmt.Sprintf("marker%d", i), TopK: 5})
		if err != nil {
			t.Fatal(err)
		}
		return hits
	}
	for _, i := range []int{0, 1, 7, 19} { // cold: the window holds the newest 8 or so
		hits := search(i)
		if want := fmt.Sprintf("u-ev-%03d", i); len(hits) == 0 || hits[0].Record.ID != want || !strings.HasPrefix(hits[0].Explain, coldExplain) {
			t.Fatalf("marker%d: want cold %s first, got %v", i, want, hitIDs(hits))
		}
		for _, h := range hits {
			if !strings.HasPrefix(h.Record.ID, "u-") {
				t.Fatalf("marker%d: another actor's event %s", i, h.Record.ID)
			}
		}
	}
	// The same search with the key of an actor that has no rows.
	q := ftsScoped("nobody", `"marker1"`)
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ?`, q).Scan(&n); err != nil || n != 0 {
		t.Fatalf("a scoped query of an actor with no rows matched %d rows (%v)", n, err)
	}
	if err := s.db.QueryRow(`SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ?`, ftsScoped("u", `"marker1"`)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the scoped query matched %d rows (%v), want u's one", n, err)
	}
}

// TestFTSScopeAlone: an actor alone in the index, or holding half of it,
// is not scoped (the key would only add work).
func TestFTSScopeAlone(t *testing.T) {
	s := &Store{}
	s.ftsRows.Store(1000)
	for rows, want := range map[int]bool{1000: false, 600: false, 500: false, 499: true, 10: true, 2000: false} {
		if got := s.ftsScope(rows); got != want {
			t.Errorf("ftsScope(%d) over 1000 = %v, want %v", rows, got, want)
		}
	}
}

// oldFTSSchema is the full-text schema before the actor key (stop 14).
const oldFTSSchema = `
CREATE TABLE IF NOT EXISTS fts_docs(
  rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, actor TEXT NOT NULL,
  namespace TEXT NOT NULL, content TEXT NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(
  content, actor UNINDEXED, namespace UNINDEXED,
  content='fts_docs', content_rowid='rowid',
  tokenize='porter unicode61 remove_diacritics 2');
CREATE TRIGGER IF NOT EXISTS fts_docs_ai AFTER INSERT ON fts_docs BEGIN
  INSERT INTO memory_fts(rowid,content,actor,namespace) VALUES(new.rowid,new.content,new.actor,new.namespace);
END;
CREATE TRIGGER IF NOT EXISTS fts_docs_ad AFTER DELETE ON fts_docs BEGIN
  INSERT INTO memory_fts(memory_fts,rowid,content,actor,namespace) VALUES('delete',old.rowid,old.content,old.actor,old.namespace);
END;
CREATE TRIGGER IF NOT EXISTS fts_docs_au AFTER UPDATE ON fts_docs BEGIN
  INSERT INTO memory_fts(memory_fts,rowid,content,actor,namespace) VALUES('delete',old.rowid,old.content,old.actor,old.namespace);
  INSERT INTO memory_fts(rowid,content,actor,namespace) VALUES(new.rowid,new.content,new.actor,new.namespace);
END;
`

// TestFTSMigratesToActorKey: an index written before the actor key (its
// full-text tables as they were, rows and cold events in them) gains the
// key on Open, keeps every row, passes FTS5's integrity check, answers
// the same searches, and is left alone by the next Open.
func TestFTSMigratesToActorKey(t *testing.T) {
	home := t.TempDir()
	opts := Options{NoFsync: true, SyncInterval: -1, EventWindow: 8, EventExpiryDays: -1}
	s, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(bg, memory.Record{ID: "r1", Namespace: "/main/u/long_term/", Content: "fig tree in the garden"}); err != nil {
		t.Fatal(err)
	}
	tierFill(t, s, 40)
	before := ftsState(t, s)
	// Back to the old tables, with the same rows.
	for _, q := range []string{`DROP TRIGGER fts_docs_ai`, `DROP TRIGGER fts_docs_ad`, `DROP TRIGGER fts_docs_au`, `DROP TABLE memory_fts`,
		`ALTER TABLE fts_docs DROP COLUMN akey`, oldFTSSchema, `INSERT INTO memory_fts(memory_fts) VALUES('rebuild')`} {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var def string
	if err := s.db.QueryRow(`SELECT sql FROM sqlite_master WHERE name='memory_fts'`).Scan(&def); err != nil || strings.Contains(def, "akey") {
		t.Fatalf("old table not made: %q %v", def, err)
	}
	s.Close()
	for reopen := 0; reopen < 2; reopen++ {
		s, err = Open(home, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"fts_docs", "memory_fts", "fts_docs_ai", "fts_docs_ad", "fts_docs_au"} {
			if err := s.db.QueryRow(`SELECT sql FROM sqlite_master WHERE name=?`, name).Scan(&def); err != nil || !strings.Contains(def, "akey") {
				t.Fatalf("open %d: %s without the actor key: %q %v", reopen, name, def, err)
			}
		}
		after := ftsState(t, s)
		if len(after) != len(before) {
			t.Fatalf("open %d: %d full-text rows, want %d", reopen, len(after), len(before))
		}
		for id, v := range before {
			if after[id] != v {
				t.Fatalf("open %d: row %s = %q, want %q", reopen, id, after[id], v)
			}
		}
		tierFinds(t, s, 0, 3, 20, 39)
		if got := ftsIDs(t, s, EngineFTS5, memory.Query{NamespacePath: "/main/u/", Text: "fig tree"}); len(got) == 0 || got[0] != "r1" {
			t.Fatalf("open %d: fts5 search: %v", reopen, got)
		}
		if reopen == 0 { // a write after the migration reaches the new table
			if err := s.AppendEvents(bg, []memory.Event{{ID: "late", ActorID: "u", SessionID: "s", Role: "user", Text: "quince", Timestamp: tierT0.Add(time.Hour * 100)}}); err != nil {
				t.Fatal(err)
			}
			if got := ftsIDs(t, s, EngineFTS5, memory.Query{NamespacePath: "/main/u/", Text: "quince"}); len(got) != 1 || got[0] != "late" {
				t.Fatalf("after the migration, a new event: %v", got)
			}
			before = ftsState(t, s)
		}
		s.Close()
	}
}
