package sqlitestore

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// brkCheckAll checks that every one of ids (tierEvent numbers) is found by
// its unique word first, Get-able, and that Events lists exactly want
// (no duplicates, none missing).
func brkCheckAll(t *testing.T, s *Store, want []int) {
	t.Helper()
	tierFinds(t, s, want...)
	for _, i := range want {
		id := fmt.Sprintf("ev-%03d", i)
		if r, err := s.Get(bg, id); err != nil || !strings.Contains(r.Content, fmt.Sprintf("marker%d ", i)) {
			t.Fatalf("Get %s: %+v %v", id, r, err)
		}
	}
	evs, err := s.Events(bg, "u", "")
	if err != nil {
		t.Fatal(err)
	}
	got := eventIDs(evs)
	var exp []string
	for _, i := range want {
		exp = append(exp, fmt.Sprintf("ev-%03d", i))
	}
	sort.Strings(got)
	sort.Strings(exp)
	if strings.Join(got, ",") != strings.Join(exp, ",") {
		t.Fatalf("Events:\n got %v\nwant %v", got, exp)
	}
}

// brkMarkdownCount counts the event entries of ev-NNN in the memory dir.
func brkMarkdownIDs(t *testing.T, dir string) map[string]int {
	t.Helper()
	out := map[string]int{}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && strings.HasSuffix(p, ".md") {
			b, _ := os.ReadFile(p)
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "<!-- tendril:event ") {
					if i := strings.Index(l, `"id":"`); i >= 0 {
						rest := l[i+6:]
						out[rest[:strings.Index(rest, `"`)]]++
					}
				}
			}
		}
		return nil
	})
	return out
}

func brkSeq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestBreakCrashReopen: a store dropped without Close after its demotions
// committed (the on-disk state of a crash between demote's commit and
// its in-memory removal, or any later point), then reopened: every event
// is found, Get-able, listed once, and once in the Markdown after Rebuild.
func TestBreakCrashReopen(t *testing.T) {
	for _, w := range []int{2, 4, 16} {
		t.Run(fmt.Sprint("w", w), func(t *testing.T) {
			home := t.TempDir()
			opts := Options{EventWindow: w, SyncInterval: -1, EventExpiryDays: -1}
			s, err := Open(home, opts)
			if err != nil {
				t.Fatal(err)
			}
			const n = 60
			tierFill(t, s, n)
			s.waitDemotion("u")
			if s.warmCount("u") >= n {
				t.Fatalf("no demotion: %d warm", s.warmCount("u"))
			}
			// "crash": s is never closed; a new process opens the home.
			s2, err := Open(home, opts)
			if err != nil {
				t.Fatal(err)
			}
			brkCheckAll(t, s2, brkSeq(n))
			// more writes after the crash, then a clean restart
			for i := n; i < n+10; i += 2 {
				if err := s2.AppendEvents(bg, []memory.Event{tierEvent(i, "s0"), tierEvent(i+1, "s1")}); err != nil {
					t.Fatal(err)
				}
			}
			s2.waitDemotion("u")
			s2.Close()
			s3, err := Open(home, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s3.Close()
			brkCheckAll(t, s3, brkSeq(n+10))
			if err := s3.Rebuild(bg, nil); err != nil {
				t.Fatal(err)
			}
			brkCheckAll(t, s3, brkSeq(n+10))
			ids := brkMarkdownIDs(t, s3.MemoryDir())
			for i := 0; i < n+10; i++ {
				if c := ids[fmt.Sprintf("ev-%03d", i)]; c != 1 {
					t.Fatalf("ev-%03d in Markdown %d times", i, c)
				}
			}
			s.Close()
		})
	}
}

// TestBreakCrashBeforeMemoryRemoval: demote's transaction committed (FTS
// rows and boundary), the in-memory removal did not happen (simulated by
// writing the boundary row by hand as demote would, with no demotion in
// memory), then a restart.
func TestBreakCrashBeforeMemoryRemoval(t *testing.T) {
	home := t.TempDir()
	opts := Options{EventWindow: -1, SyncInterval: -1, EventExpiryDays: -1}
	s, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	const n = 30
	tierFill(t, s, n)
	// demote as a window of 4 would, in the DB only
	s.mu.Lock()
	a := s.actors["u"]
	s.mu.Unlock()
	a.wmu.Lock()
	var fts ftsBatch
	for i := 0; i < n-4; i++ {
		s.ftsEvent(&fts, "u", a.events[fmt.Sprintf("ev-%03d", i)])
	}
	tx, _ := s.db.Begin()
	if err := fts.write(bg, s, tx); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO event_tiers(actor,last_cold) VALUES('u',?)`, fmt.Sprintf("ev-%03d", n-5)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	a.wmu.Unlock()
	var got string
	s.db.QueryRow(`SELECT last_cold FROM event_tiers WHERE actor='u'`).Scan(&got)
	t.Logf("boundary row: %q", got)
	// the crashed store stays open and untouched
	s2, err := Open(home, Options{EventWindow: 4, SyncInterval: -1, EventExpiryDays: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var after string
	s2.db.QueryRow(`SELECT last_cold FROM event_tiers WHERE actor='u'`).Scan(&after)
	brkCheckAll(t, s2, brkSeq(n))
	if got := s2.warmCount("u"); got != 4 {
		// Not a loss: the crashed store's owed files rows (oweFiles) were
		// never written, so Open's sync takes the Markdown for a hand
		// edit and reloads the actor, dropping its boundary.
		t.Logf("after restart %d warm (boundary row after Open: %q), want 4", got, after)
	}
	// the next write demotes again
	if err := s2.AppendEvents(bg, []memory.Event{tierEvent(n, "s0"), tierEvent(n+1, "s1")}); err != nil {
		t.Fatal(err)
	}
	s2.waitDemotion("u")
	if got := s2.warmCount("u"); got > 5 {
		t.Fatalf("after a write %d warm, want ≤ 5", got)
	}
	brkCheckAll(t, s2, brkSeq(n+2))
	s.Close()
}

// brkEditFile rewrites the episodic file holding ev: apply f to each
// entry (a chunk starting at "## "); f returns the new chunk ("" drops it).
func brkEditFile(t *testing.T, s *Store, ev memory.Event, f func(chunk string) string) {
	t.Helper()
	path := filepath.Join(s.MemoryDir(), "u", filepath.FromSlash(filepath.ToSlash(filepathEventFile(ev))))
	b, err := os.ReadFile(path)
	if err != nil {
		// actor dir may be encoded differently: search for it
		matches, _ := filepath.Glob(filepath.Join(s.MemoryDir(), "*", filepathEventFile(ev)))
		if len(matches) != 1 {
			t.Fatalf("episodic file of %s: %v %v", ev.ID, err, matches)
		}
		path = matches[0]
		if b, err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	parts := strings.Split(string(b), "\n## ")
	out := parts[0]
	for _, p := range parts[1:] {
		if np := f("## " + p); np != "" {
			out += "\n" + np
		}
	}
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	// make sure size/mtime differ
	future := time.Now().Add(2 * time.Second)
	os.Chtimes(path, future, future)
}

func filepathEventFile(ev memory.Event) string {
	return filepath.Join("episodic", ev.Timestamp.UTC().Format("2006-01-02")+".md")
}

// brkHandEdit edits cold ev-003 (text marker3 → zebra3) and deletes cold
// ev-005.
func brkHandEdit(t *testing.T, s *Store) {
	brkEditFile(t, s, tierEvent(3, "s1"), func(c string) string {
		if strings.Contains(c, `"id":"ev-005"`) {
			return ""
		}
		if strings.Contains(c, `"id":"ev-003"`) {
			return strings.Replace(c, "marker3 ", "zebra3 ", 1)
		}
		return c
	})
}

func brkCheckHandEdit(t *testing.T, s *Store, n int) {
	t.Helper()
	var rest []int
	for i := 0; i < n; i++ {
		if i != 3 && i != 5 {
			rest = append(rest, i)
		}
	}
	tierFinds(t, s, rest...)
	hits, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "zebra3", TopK: 5})
	if err != nil || len(hits) == 0 || hits[0].Record.ID != "ev-003" {
		t.Fatalf("zebra3: %v %v", hitIDs(hits), err)
	}
	for _, q := range []string{"marker3", "marker5"} {
		hits, _ := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: q, TopK: 50})
		for _, h := range hits {
			if h.Record.ID == "ev-003" && strings.Contains(h.Record.Content, "marker3") || h.Record.ID == "ev-005" {
				t.Fatalf("%s: old text still found: %v", q, hitIDs(hits))
			}
		}
	}
	if _, err := s.Get(bg, "ev-005"); err == nil {
		t.Fatal("deleted ev-005 still Get-able")
	}
	if r, err := s.Get(bg, "ev-003"); err != nil || !strings.Contains(r.Content, "zebra3") {
		t.Fatalf("Get ev-003: %+v %v", r, err)
	}
	evs, _ := s.Events(bg, "u", "")
	seen := map[string]bool{}
	for _, e := range evs {
		if seen[e.ID] {
			t.Fatalf("duplicate %s", e.ID)
		}
		seen[e.ID] = true
	}
	if len(evs) != n-1 || seen["ev-005"] {
		t.Fatalf("Events after edit: %d (want %d) %v", len(evs), n-1, eventIDs(evs))
	}
	listed, _ := s.Search(bg, memory.Query{NamespacePath: "/main/u/"})
	if len(listed) != n-1 {
		t.Fatalf("listing after edit: %d want %d", len(listed), n-1)
	}
	// then more writes (demotion again) and a check of the edited events
	for i := n; i < n+20; i += 2 {
		if err := s.AppendEvents(bg, []memory.Event{tierEvent(i, "s0"), tierEvent(i+1, "s1")}); err != nil {
			t.Fatal(err)
		}
		s.waitDemotion("u")
	}
	hits, _ = s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "zebra3", TopK: 5})
	if len(hits) == 0 || hits[0].Record.ID != "ev-003" {
		t.Fatalf("zebra3 after re-demotion: %v", hitIDs(hits))
	}
	hits, _ = s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "marker5", TopK: 50})
	for _, h := range hits {
		if h.Record.ID == "ev-005" {
			t.Fatalf("deleted ev-005 found after re-demotion: %v", hitIDs(hits))
		}
	}
	tierFinds(t, s, 0, 1, 2, 4, 6, n+19)
}

// TestBreakHandEditOpen: a hand edit of cold events while the store is
// open (SyncInterval 1ns: every search checks).
func TestBreakHandEditOpen(t *testing.T) {
	s, err := Open(t.TempDir(), Options{EventWindow: 4, SyncInterval: time.Nanosecond, EventExpiryDays: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 40
	tierFill(t, s, n)
	s.waitDemotion("u")
	tierFinds(t, s, 3, 5) // cold, indexed
	brkHandEdit(t, s)
	brkCheckHandEdit(t, s, n)
}

// TestBreakHandEditClosed: the same edit while the store is closed.
func TestBreakHandEditClosed(t *testing.T) {
	home := t.TempDir()
	opts := Options{EventWindow: 4, SyncInterval: time.Nanosecond, EventExpiryDays: -1}
	s, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	tierFill(t, s, n)
	s.waitDemotion("u")
	tierFinds(t, s, 3, 5)
	s.Close()
	s, err = Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	brkHandEdit(t, s) // store open but untouched since: the edit is like an offline edit
	s.Close()
	s, err = Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	brkCheckHandEdit(t, s, n)
}

// TestBreakRetries: a retried batch mixing cold, warm and new IDs writes
// only the new ones; an ID that is a cold event of another actor fails
// with the ID named and writes nothing of that batch.
func TestBreakRetries(t *testing.T) {
	home := t.TempDir()
	opts := Options{EventWindow: 4, SyncInterval: -1, EventExpiryDays: -1}
	s, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	tierFill(t, s, n)
	s.waitDemotion("u")
	batch := []memory.Event{tierEvent(1, "s0"), tierEvent(n-1, "s1"), tierEvent(n, "s0"), tierEvent(2, "s0"), tierEvent(n+1, "s1"), tierEvent(n, "s0")}
	if err := s.AppendEvents(bg, batch); err != nil {
		t.Fatalf("mixed retry: %v", err)
	}
	s.waitDemotion("u")
	brkCheckAll(t, s, brkSeq(n+2))
	// a cold event of u with a changed text is still skipped: the stored text wins
	e := tierEvent(0, "s0")
	e.Text = "rewritten quux0"
	if err := s.AppendEvents(bg, []memory.Event{e}); err != nil {
		t.Fatal(err)
	}
	if hits, _ := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "quux0"}); len(hits) > 0 {
		t.Fatalf("retry with changed text was written: %v", hitIDs(hits))
	}
	// another actor claims u's cold ev-003 in a batch with a fresh event
	v1 := memory.Event{ID: "v-1", ActorID: "v", SessionID: "s", Role: "user", Text: "vee fresh plum", Timestamp: tierT0}
	steal := tierEvent(3, "s0")
	steal.ActorID = "v"
	err = s.AppendEvents(bg, []memory.Event{v1, steal})
	if err == nil || !strings.Contains(err.Error(), "ev-003") {
		t.Fatalf("cross-actor cold ID: err %v, want one naming ev-003", err)
	}
	if evs, _ := s.Events(bg, "v", ""); len(evs) != 0 {
		t.Fatalf("v got %v", eventIDs(evs))
	}
	if r, err := s.Get(bg, "v-1"); err == nil {
		t.Fatalf("v-1 written: %+v", r)
	}
	// also a warm one of u (the last appended)
	steal2 := tierEvent(n+1, "s1")
	steal2.ActorID = "v"
	if err := s.AppendEvents(bg, []memory.Event{steal2}); err == nil || !strings.Contains(err.Error(), steal2.ID) {
		t.Fatalf("cross-actor warm ID: %v", err)
	}
	s.Close()
	s, err = Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	brkCheckAll(t, s, brkSeq(n+2))
	ids := brkMarkdownIDs(t, s.MemoryDir())
	for id, c := range ids {
		if c != 1 {
			t.Fatalf("%s in Markdown %d times", id, c)
		}
	}
	if ids["v-1"] != 0 || len(ids) != n+2 {
		t.Fatalf("Markdown holds %d events (v-1: %d)", len(ids), ids["v-1"])
	}
}

// TestBreakExpiryBoundary: expiry up to and including the boundary event
// (the newest cold one), then a restart: the rest are all there, none
// resurrected. Then an expiry that takes the boundary but not older-rowid
// events (out-of-order timestamps).
func TestBreakExpiryBoundary(t *testing.T) {
	home := t.TempDir()
	now := tierT0.Add(100 * time.Hour)
	var mu sync.Mutex
	opts := Options{EventWindow: 4, SyncInterval: -1, EventExpiryDays: 1, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}
	s, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	// expiry 1 day with now = t0+100h: nothing expired yet (events at t0..t0+39h)
	mu.Lock()
	now = tierT0.Add(24 * time.Hour)
	mu.Unlock()
	tierFill(t, s, n)
	s.waitDemotion("u")
	var last string
	s.db.QueryRow(`SELECT last_cold FROM event_tiers WHERE actor='u'`).Scan(&last)
	var b int
	fmt.Sscanf(last, "ev-%d", &b)
	if b == 0 {
		t.Fatalf("boundary %q", last)
	}
	// expire 0..b inclusive
	mu.Lock()
	now = tierT0.Add(time.Duration(b)*time.Hour + 24*time.Hour + 30*time.Minute)
	mu.Unlock()
	gone, err := s.ExpireEvents(bg)
	if err != nil || gone != b+1 {
		t.Fatalf("expired %d, %v; want %d (boundary %s)", gone, err, b+1, last)
	}
	var rest []int
	for i := b + 1; i < n; i++ {
		rest = append(rest, i)
	}
	brkCheckAll(t, s, rest)
	s.Close()
	s, err = Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	brkCheckAll(t, s, rest)
	if c, _ := s.ftsCount(bg, "u"); c < 0 {
		t.Fatal(c)
	}
	// writes demote again
	for i := n; i < n+10; i += 2 {
		if err := s.AppendEvents(bg, []memory.Event{tierEvent(i, "s0"), tierEvent(i+1, "s1")}); err != nil {
			t.Fatal(err)
		}
		s.waitDemotion("u")
	}
	for i := n; i < n+10; i++ {
		rest = append(rest, i)
	}
	brkCheckAll(t, s, rest)
	s.Close()
	s, err = Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	brkCheckAll(t, s, rest)
	if ids := brkMarkdownIDs(t, s.MemoryDir()); len(ids) != len(rest) {
		t.Fatalf("Markdown holds %d events, want %d", len(ids), len(rest))
	}
}

// TestBreakExpiryOutOfOrder: all timestamps shifted 5h past their turn
// (so the expiry moment is not aligned with rowids); expiry takes only the
// oldest cold event, not the boundary; then a restart: the rest are all
// found, Get-able and listed once.
func TestBreakExpiryOutOfOrder(t *testing.T) {
	home := t.TempDir()
	var mu sync.Mutex
	now := tierT0.Add(24 * time.Hour)
	opts := Options{EventWindow: 4, SyncInterval: -1, EventExpiryDays: 1, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}
	s, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	const n = 30
	mk := func(i int) memory.Event {
		e := tierEvent(i, fmt.Sprint("s", i%2))
		e.Timestamp = e.Timestamp.Add(5 * time.Hour)
		return e
	}
	for i := 0; i < n; i += 2 {
		if err := s.AppendEvents(bg, []memory.Event{mk(i), mk(i + 1)}); err != nil {
			t.Fatal(err)
		}
		s.waitDemotion("u")
	}
	mu.Lock()
	now = tierT0.Add(5*time.Hour + 24*time.Hour + 30*time.Minute)
	mu.Unlock()
	if gone, err := s.ExpireEvents(bg); err != nil || gone != 1 {
		t.Fatalf("expired %d %v", gone, err)
	}
	rest := brkSeq(n)[1:]
	brkCheckAll(t, s, rest)
	s.Close()
	s, err = Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	brkCheckAll(t, s, rest)
}

// brkPair builds two stores from the same events: window w and all in
// memory.
func brkPair(t *testing.T, w int, evs []memory.Event) (win, all *Store) {
	t.Helper()
	var err error
	win, err = Open(t.TempDir(), Options{EventWindow: w, SyncInterval: -1, EventExpiryDays: -1})
	if err != nil {
		t.Fatal(err)
	}
	all, err = Open(t.TempDir(), Options{EventWindow: -1, SyncInterval: -1, EventExpiryDays: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { win.Close(); all.Close() })
	for i := 0; i < len(evs); i += 2 {
		b := evs[i:min(i+2, len(evs))]
		for _, s := range []*Store{win, all} {
			if err := s.AppendEvents(bg, b); err != nil {
				t.Fatal(err)
			}
			s.waitDemotion("u")
		}
	}
	return win, all
}

func brkEquivEvents(n int) []memory.Event {
	var evs []memory.Event
	types := []string{"note", "plan", "chat"}
	for i := 0; i < n; i++ {
		e := tierEvent(i, fmt.Sprint("s", i%3))
		e.Metadata = map[string]any{"type": types[i%3], "section": fmt.Sprint("sec", i%2)}
		if i%5 == 0 {
			e.Metadata["plants"] = []any{"fig", "olive"}
		}
		if i%7 == 0 {
			e.Metadata["agentId"] = "other"
		}
		evs = append(evs, e)
	}
	return evs
}

func brkSet(hits []memory.Hit) string {
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.Record.ID)
	}
	sort.Strings(ids)
	return strings.Join(ids, ",")
}

// TestBreakSearchEquivalence: each query's hit set (and, for unique
// words, top hit) is the same with window 4 and with everything in memory.
func TestBreakSearchEquivalence(t *testing.T) {
	const n = 60
	win, all := brkPair(t, 4, brkEquivEvents(n))
	if win.warmCount("u") >= n/2 {
		t.Fatalf("window store has %d warm", win.warmCount("u"))
	}
	sessNS := func(sess string) string {
		hits, _ := all.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "marker1", TopK: 1})
		if len(hits) == 0 {
			t.Fatal("no hit")
		}
		return strings.Replace(hits[0].Record.Namespace, "s1", sess, 1)
	}
	type qc struct {
		name string
		q    memory.Query
	}
	var qs []qc
	words := []string{"marker3", "marker10", "marker14", "marker21", "marker35", "marker50", "garden", "figs garden", "turn", "marker3 marker40 marker55"}
	conds := []struct {
		name string
		f    func(q *memory.Query)
	}{
		{"path", func(q *memory.Query) { q.NamespacePath = "/main/u/" }},
		{"all-agents", func(q *memory.Query) { q.NamespacePath = "/" }},
		{"other-agent", func(q *memory.Query) { q.NamespacePath = "/other/u/" }},
		{"exact-s0", func(q *memory.Query) { q.Namespace = sessNS("s0") }},
		{"exact-s1", func(q *memory.Query) { q.Namespace = sessNS("s1") }},
		{"type=note", func(q *memory.Query) {
			q.NamespacePath = "/main/u/"
			q.Filters = []memory.Filter{{Key: "type", Op: memory.OpEquals, Value: "note"}}
		}},
		{"plants∋fig", func(q *memory.Query) {
			q.NamespacePath = "/"
			q.Filters = []memory.Filter{{Key: "plants", Op: memory.OpContains, Value: "fig"}}
		}},
		{"section-exists+type", func(q *memory.Query) {
			q.NamespacePath = "/main/u/"
			q.Filters = []memory.Filter{{Key: "section", Op: memory.OpEquals, Value: "sec1"}, {Key: "type", Op: memory.OpEquals, Value: "plan"}}
		}},
		{"episodic", func(q *memory.Query) {
			q.NamespacePath = "/main/u/"
			q.Strategies = []memory.Strategy{memory.StrategyEpisodic}
		}},
		{"semantic-only", func(q *memory.Query) {
			q.NamespacePath = "/main/u/"
			q.Strategies = []memory.Strategy{memory.StrategySemantic}
		}},
		{"archived-only", func(q *memory.Query) {
			q.NamespacePath = "/main/u/"
			q.Statuses = []memory.Status{memory.StatusSuperseded}
		}},
	}
	for _, c := range conds {
		for _, w := range append(words, "") {
			q := memory.Query{Text: w, TopK: 100}
			c.f(&q)
			qs = append(qs, qc{c.name + "/" + w, q})
		}
	}
	var fails []string
	for _, c := range qs {
		hw, errW := win.Search(bg, c.q)
		ha, errA := all.Search(bg, c.q)
		if (errW == nil) != (errA == nil) {
			fails = append(fails, fmt.Sprintf("%s: errors differ: %v vs %v", c.name, errW, errA))
			continue
		}
		// The in-memory index also matches an event through its
		// neighbours' text (turn context); FTS5 rows hold the event's own
		// text only. So compare: window hits ⊆ all hits, and every hit of
		// the all-in-memory store whose own text holds a query word is
		// a window hit too. Listings (no text) must be equal.
		inAll := map[string]bool{}
		for _, h := range ha {
			inAll[h.Record.ID] = true
		}
		inWin := map[string]bool{}
		for _, h := range hw {
			inWin[h.Record.ID] = true
			if !inAll[h.Record.ID] {
				fails = append(fails, fmt.Sprintf("%s: extra window hit %s", c.name, h.Record.ID))
			}
		}
		var missing []string
		for _, h := range ha {
			own := c.q.Text == ""
			for _, w := range strings.Fields(c.q.Text) {
				if strings.Contains(h.Record.Content+" ", " "+w+" ") {
					own = true
				}
			}
			if own && !inWin[h.Record.ID] {
				missing = append(missing, h.Record.ID)
			}
		}
		if len(missing) > 0 {
			fails = append(fails, fmt.Sprintf("%s: window lacks own-text hits %v (window %d hits, all %d)", c.name, missing, len(hw), len(ha)))
			continue
		}
		if strings.HasPrefix(c.q.Text, "marker") && !strings.Contains(c.q.Text, " ") && len(ha) > 0 && strings.Contains(ha[0].Record.Content+" ", " "+c.q.Text+" ") && (len(hw) == 0 || hw[0].Record.ID != ha[0].Record.ID) {
			fails = append(fails, fmt.Sprintf("%s: top hit differs: win=%v all=%v", c.name, hitIDs(hw[:min(1, len(hw))]), hitIDs(ha[:1])))
		}
	}
	if len(fails) > 0 {
		t.Fatalf("%d of %d queries differ:\n%s", len(fails), len(qs), strings.Join(fails, "\n"))
	}
}

// TestBreakEventsSinceEquivalence: EventsSince with cursors at cold, warm
// and missing events and with afterTS only equals the all-in-memory
// store's answer, including with out-of-order timestamps.
func TestBreakEventsSinceEquivalence(t *testing.T) {
	const n = 50
	evs := brkEquivEvents(n)
	// out of order: a few early events carry late timestamps
	for _, i := range []int{1, 4, 7} {
		evs[i].Timestamp = tierT0.Add(time.Duration(n+10+i) * time.Hour)
	}
	win, all := brkPair(t, 4, evs)
	var fails []string
	for _, sess := range []string{"s0", "s1", "s2", "nope"} {
		cursors := []string{"", "missing", "ev-000", "ev-001", "ev-003", "ev-004", "ev-010", "ev-020", "ev-045", "ev-048", "ev-049"}
		tss := []time.Time{{}, tierT0.Add(5 * time.Hour), tierT0.Add(30 * time.Hour), tierT0.Add(47*time.Hour + 30*time.Minute), tierT0.Add(58 * time.Hour)}
		for _, cur := range cursors {
			for _, ts := range tss {
				gw, err1 := win.EventsSince(bg, "u", sess, cur, ts)
				ga, err2 := all.EventsSince(bg, "u", sess, cur, ts)
				if err1 != nil || err2 != nil {
					t.Fatal(err1, err2)
				}
				if a, b := strings.Join(eventIDs(gw), ","), strings.Join(eventIDs(ga), ","); a != b {
					fails = append(fails, fmt.Sprintf("%s after %q/%s:\n  win=%s\n  all=%s", sess, cur, ts.Format("15:04"), a, b))
				}
			}
		}
		gw, _ := win.Events(bg, "u", sess)
		ga, _ := all.Events(bg, "u", sess)
		if a, b := strings.Join(eventIDs(gw), ","), strings.Join(eventIDs(ga), ","); a != b {
			fails = append(fails, fmt.Sprintf("Events %s:\n  win=%s\n  all=%s", sess, a, b))
		}
	}
	if len(fails) > 0 {
		t.Fatalf("%d differ:\n%s", len(fails), strings.Join(fails, "\n"))
	}
}

// TestBreakManyActorsForget: actors demoting concurrently while one is
// forgotten (and then re-created with the same IDs); the export holds
// every remaining event exactly once, each found.
func TestBreakManyActorsForget(t *testing.T) {
	s, err := Open(t.TempDir(), Options{EventWindow: 2, SyncInterval: -1, EventExpiryDays: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const actors, n = 6, 40
	mk := func(a, i int) memory.Event {
		return memory.Event{ID: fmt.Sprintf("a%d-%03d", a, i), ActorID: fmt.Sprint("a", a), SessionID: "s", Role: "user",
			Text: fmt.Sprintf("turn a%dmark%d figs", a, i), Timestamp: tierT0.Add(time.Duration(i) * time.Minute)}
	}
	var wg sync.WaitGroup
	errs := make(chan error, actors+1)
	for a := 0; a < actors; a++ {
		wg.Add(1)
		go func(a int) {
			defer wg.Done()
			for i := 0; i < n; i += 2 {
				if err := s.AppendEvents(bg, []memory.Event{mk(a, i), mk(a, i+1)}); err != nil {
					errs <- err
					return
				}
			}
		}(a)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := 0; k < 5; k++ {
			time.Sleep(time.Millisecond)
			if err := s.Forget(bg, "main", "a0"); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for a := 0; a < actors; a++ {
		s.waitDemotion(fmt.Sprint("a", a))
	}
	// a0 forgotten at some point: now forget for good, then re-create with the same IDs
	if err := s.Forget(bg, "main", "a0"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 2 {
		if err := s.AppendEvents(bg, []memory.Event{mk(0, i), mk(0, i+1)}); err != nil {
			t.Fatal(err)
		}
		s.waitDemotion("a0")
	}
	for a := 0; a < actors; a++ {
		for i := 0; i < n; i++ {
			hits, err := s.Search(bg, memory.Query{NamespacePath: fmt.Sprintf("/main/a%d/", a), Text: fmt.Sprintf("a%dmark%d", a, i), TopK: 3})
			if err != nil || len(hits) == 0 || hits[0].Record.ID != fmt.Sprintf("a%d-%03d", a, i) {
				t.Fatalf("a%dmark%d: %v %v", a, i, hitIDs(hits), err)
			}
		}
		if evs, _ := s.Events(bg, fmt.Sprint("a", a), ""); len(evs) != n {
			t.Fatalf("a%d: %d events", a, len(evs))
		}
	}
	out := t.TempDir()
	if _, err := s.ExportMarkdown(bg, out); err != nil {
		t.Fatal(err)
	}
	ids := brkMarkdownIDs(t, out)
	if len(ids) != actors*n {
		t.Fatalf("export holds %d distinct events, want %d", len(ids), actors*n)
	}
	for id, c := range ids {
		if c != 1 {
			t.Fatalf("%s exported %d times", id, c)
		}
	}
}

// TestBreakRecordIDCollision: a record Put with the ID of an event (cold
// in one store, warm in the other) behaves the same in both stores: the
// same error, or the same Get / search / Events answers after.
func TestBreakRecordIDCollision(t *testing.T) {
	const n = 40
	evs := brkEquivEvents(n)
	win, all := brkPair(t, 4, evs)
	var res []string
	for _, s := range []*Store{win, all} {
		_, err := s.Put(bg, memory.Record{ID: "ev-003", Namespace: "/main/u/semantic/", Strategy: memory.StrategySemantic, Content: "record colliding quince"})
		if err == nil || !strings.Contains(err.Error(), "belongs to an event") {
			t.Fatalf("Put with an event's ID: err = %v, want one naming the event", err)
		}
		r, gerr := s.Get(bg, "ev-003")
		es, _ := s.Events(bg, "u", "")
		hits, _ := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "marker3", TopK: 3})
		res = append(res, fmt.Sprintf("put err=%v; get=%q %v; events=%d; marker3 top=%v", err, r.Content, gerr, len(es), brkSet(hits[:min(1, len(hits))])))
	}
	if res[0] != res[1] {
		t.Fatalf("window vs all-in-memory differ:\n win: %s\n all: %s", res[0], res[1])
	}
}

// TestBreakEvictionWhileDemoting: with one cached actor, two actors
// alternate writes and searches (each write may evict the other while
// its demotion runs); every event is found and listed once.
func TestBreakEvictionWhileDemoting(t *testing.T) {
	s, err := Open(t.TempDir(), Options{EventWindow: 2, MaxCachedActors: 1, SyncInterval: -1, EventExpiryDays: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 40
	mk := func(a, i int) memory.Event {
		return memory.Event{ID: fmt.Sprintf("b%d-%03d", a, i), ActorID: fmt.Sprint("b", a), SessionID: "s", Role: "user",
			Text: fmt.Sprintf("turn b%dmark%d figs", a, i), Timestamp: tierT0.Add(time.Duration(i) * time.Minute)}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for a := 0; a < 2; a++ {
		wg.Add(1)
		go func(a int) {
			defer wg.Done()
			for i := 0; i < n; i += 2 {
				if err := s.AppendEvents(bg, []memory.Event{mk(a, i), mk(a, i+1)}); err != nil {
					errs <- err
					return
				}
				want := i / 2
				hits, err := s.Search(bg, memory.Query{NamespacePath: fmt.Sprintf("/main/b%d/", a), Text: fmt.Sprintf("b%dmark%d", a, want), TopK: 3})
				if err != nil || len(hits) == 0 || hits[0].Record.ID != fmt.Sprintf("b%d-%03d", a, want) {
					errs <- fmt.Errorf("b%dmark%d after %d appended: %v %v", a, want, i+2, hitIDs(hits), err)
					return
				}
			}
		}(a)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for a := 0; a < 2; a++ {
		evs, _ := s.Events(bg, fmt.Sprint("b", a), "")
		if len(evs) != n {
			t.Fatalf("b%d: %d events", a, len(evs))
		}
		for i := 0; i < n; i++ {
			hits, _ := s.Search(bg, memory.Query{NamespacePath: fmt.Sprintf("/main/b%d/", a), Text: fmt.Sprintf("b%dmark%d", a, i), TopK: 3})
			if len(hits) == 0 || hits[0].Record.ID != fmt.Sprintf("b%d-%03d", a, i) {
				t.Fatalf("b%dmark%d: %v", a, i, hitIDs(hits))
			}
		}
	}
}

// TestBreakListingTopK: listings (no text) cut at TopK return the same
// records, in the same order, with window 4 and all in memory.
func TestBreakListingTopK(t *testing.T) {
	win, all := brkPair(t, 4, brkEquivEvents(60))
	for _, k := range []int{1, 3, 10, 30} {
		for _, path := range []string{"/main/u/", "/", "/other/u/"} {
			q := memory.Query{NamespacePath: path, TopK: k}
			hw, err1 := win.Search(bg, q)
			ha, err2 := all.Search(bg, q)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			var a, b []string
			for _, h := range hw {
				a = append(a, h.Record.ID)
			}
			for _, h := range ha {
				b = append(b, h.Record.ID)
			}
			if strings.Join(a, ",") != strings.Join(b, ",") {
				t.Errorf("listing %s k=%d:\n win=%v\n all=%v", path, k, a, b)
			}
		}
	}
}

// TestBreakExpireAllThenAppend: every event of the (only) actor expires,
// cold and warm, so the events table is empty and SQLite reuses rowids
// from 1; new events appended in the same process must be listed once
// each and found (the in-memory boundary rowid must not claim them).
func TestBreakExpireAllThenAppend(t *testing.T) {
	var mu sync.Mutex
	now := tierT0.Add(48 * time.Hour)
	s, err := Open(t.TempDir(), Options{EventWindow: 4, SyncInterval: -1, EventExpiryDays: 30,
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 40
	tierFill(t, s, n)
	s.waitDemotion("u")
	mu.Lock()
	now = tierT0.Add(100 * 24 * time.Hour)
	mu.Unlock()
	if gone, err := s.ExpireEvents(bg); err != nil || gone != n {
		t.Fatalf("expired %d %v", gone, err)
	}
	// new events, recent
	var fresh []int
	for i := 100; i < 110; i += 2 {
		a, b := tierEvent(i, "s0"), tierEvent(i+1, "s0")
		a.Timestamp = now.Add(-time.Duration(110-i) * time.Minute)
		b.Timestamp = a.Timestamp.Add(time.Second)
		if err := s.AppendEvents(bg, []memory.Event{a, b}); err != nil {
			t.Fatal(err)
		}
		s.waitDemotion("u")
		fresh = append(fresh, i, i+1)
	}
	evs, err := s.Events(bg, "u", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(fresh) {
		t.Errorf("Events after expire-all + append: %d, want %d: %v", len(evs), len(fresh), eventIDs(evs))
	}
	since, _ := s.EventsSince(bg, "u", "s0", "", time.Time{})
	if len(since) != len(fresh) {
		t.Errorf("EventsSince: %d, want %d: %v", len(since), len(fresh), eventIDs(since))
	}
	listed, _ := s.Search(bg, memory.Query{NamespacePath: "/main/u/"})
	if len(listed) != len(fresh) {
		t.Errorf("listing: %d, want %d", len(listed), len(fresh))
	}
	tierFinds(t, s, fresh...)
}

// TestBreakHandEditDuringWrites: a hand edit of a cold event lands while
// appends (and their demotions) and searches run; after it settles every
// event is listed once, the edited one with its new text only.
func TestBreakHandEditDuringWrites(t *testing.T) {
	s, err := Open(t.TempDir(), Options{EventWindow: 4, SyncInterval: time.Nanosecond, EventExpiryDays: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 40
	tierFill(t, s, n)
	s.waitDemotion("u")
	done := make(chan error, 1)
	go func() {
		for i := n; i < n+60; i += 2 {
			// later days: never the edited file
			a, b := tierEvent(i, "s0"), tierEvent(i+1, "s1")
			a.Timestamp, b.Timestamp = a.Timestamp.Add(72*time.Hour), b.Timestamp.Add(72*time.Hour)
			if err := s.AppendEvents(bg, []memory.Event{a, b}); err != nil {
				done <- err
				return
			}
			if _, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: fmt.Sprintf("marker%d", i), TopK: 3}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	time.Sleep(5 * time.Millisecond)
	brkEditFile(t, s, tierEvent(3, "s1"), func(c string) string {
		if strings.Contains(c, `"id":"ev-003"`) {
			return strings.Replace(c, "marker3 ", "zebra3 ", 1)
		}
		return c
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.waitDemotion("u")
	// force the sync check
	time.Sleep(time.Millisecond)
	s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "anything", TopK: 1})
	s.waitDemotion("u")
	evs, _ := s.Events(bg, "u", "")
	seen := map[string]int{}
	for _, e := range evs {
		seen[e.ID]++
		if seen[e.ID] > 1 {
			t.Fatalf("duplicate %s", e.ID)
		}
	}
	if len(evs) != n+60 {
		t.Fatalf("%d events, want %d", len(evs), n+60)
	}
	hits, _ := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "zebra3", TopK: 3})
	if len(hits) == 0 || hits[0].Record.ID != "ev-003" {
		t.Fatalf("zebra3: %v", hitIDs(hits))
	}
	if r, _ := s.Get(bg, "ev-003"); !strings.Contains(r.Content, "zebra3") {
		t.Fatalf("Get ev-003: %q", r.Content)
	}
	var want []int
	for i := 0; i < n+60; i++ {
		if i != 3 {
			want = append(want, i)
		}
	}
	tierFinds(t, s, want...)
}

// brkMissedUniqueWords searches each of the first n events' unique words
// and lists those whose event does not come first.
func brkMissedUniqueWords(t *testing.T, s *Store, n int) []string {
	t.Helper()
	var missed []string
	for i := 0; i < n; i++ {
		hits, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: fmt.Sprintf("marker%d", i), TopK: 5})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 || hits[0].Record.ID != fmt.Sprintf("ev-%03d", i) {
			missed = append(missed, fmt.Sprintf("marker%d→[%s]", i, brkSet(hits)))
		}
	}
	return missed
}

// TestBreakUniqueWordsLongHistory: plain appends (no edits), window 4
// and 16, a few hundred events: every event is found first by its unique
// word, as TestEventWindow checks for 40.
func TestBreakUniqueWordsLongHistory(t *testing.T) {
	for _, w := range []int{4, 16} {
		t.Run(fmt.Sprint("w", w), func(t *testing.T) {
			s, err := Open(t.TempDir(), Options{EventWindow: w, SyncInterval: -1, EventExpiryDays: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			const n = 300
			tierFill(t, s, n)
			s.waitDemotion("u")
			if missed := brkMissedUniqueWords(t, s, n); len(missed) > 0 {
				t.Fatalf("%d of %d events not found first by their unique word: %v", len(missed), n, missed[:min(10, len(missed))])
			}
		})
	}
}

// TestBreakUniqueWordsAfterRebuild: Rebuild makes every event warm; the
// index is built; the next write demotes nearly all of them at once
// (retired documents stay in the index until compaction, which needs
// more than 256). Every event must still be found by its unique word.
func TestBreakUniqueWordsAfterRebuild(t *testing.T) {
	for _, w := range []int{2, 4} {
		t.Run(fmt.Sprint("w", w), func(t *testing.T) {
			s, err := Open(t.TempDir(), Options{EventWindow: w, SyncInterval: -1, EventExpiryDays: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			const n = 120
			tierFill(t, s, n)
			if err := s.Rebuild(bg, nil); err != nil {
				t.Fatal(err)
			}
			tierFinds(t, s, 0, 60, n-1) // builds the index over all n
			if err := s.AppendEvents(bg, []memory.Event{tierEvent(n, "s0"), tierEvent(n+1, "s1")}); err != nil {
				t.Fatal(err)
			}
			s.waitDemotion("u")
			if missed := brkMissedUniqueWords(t, s, n+2); len(missed) > 0 {
				t.Fatalf("warm %d: %d of %d events not found first by their unique word: %v", s.warmCount("u"), len(missed), n+2, missed[:min(10, len(missed))])
			}
		})
	}
}
