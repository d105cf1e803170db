package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/memorytest"
)

// openMarkdownCopy opens a store over a copy of home's Markdown only (no
// index database), so its index, FTS5 table included, is built from the
// files as `tendril memory rebuild` does.
func openMarkdownCopy(t testing.TB, home string, opts Options) *Store {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(filepath.Join(dst, "memory"), os.DirFS(filepath.Join(home, "memory"))); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dst, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFTS5ModuleAvailable checks that the linked SQLite has FTS5 with the
// porter and unicode61 tokenizers (modernc.org/sqlite builds it in).
func TestFTS5ModuleAvailable(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61 remove_diacritics 2'); INSERT INTO t(x) VALUES('Watering the café figs')`); err != nil {
		t.Fatalf("fts5 unavailable: %v", err)
	}
	for _, q := range []string{`"watered"`, `"cafe"`, `"fig"`} {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM t WHERE t MATCH ?`, q).Scan(&n); err != nil || n != 1 {
			t.Errorf("MATCH %s: %d rows, %v; want 1 (stemming and diacritic folding)", q, n, err)
		}
	}
}

func TestConformanceFTS5(t *testing.T) {
	memorytest.Exercise(t, func(t *testing.T) memory.Store {
		s, err := Open(t.TempDir(), Options{Engine: EngineFTS5})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// ftsState returns the full-text index's (actor, namespace, content) rows
// by ID and fails unless FTS5's integrity check (index against content)
// passes.
func ftsState(t *testing.T, s *Store) map[string]string {
	t.Helper()
	// Event rows are owed until an FTS5 search (ftsCatchUp); write them.
	actors, err := s.actorIDs(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range actors {
		if _, err := s.ftsCount(bg, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.db.Exec(`INSERT INTO memory_fts(memory_fts, rank) VALUES('integrity-check', 1)`); err != nil {
		t.Fatalf("fts5 integrity-check: %v", err)
	}
	rows, err := s.db.Query(`SELECT d.id, f.actor, f.namespace, f.content FROM memory_fts f JOIN fts_docs d ON d.rowid=f.rowid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, actor, ns, content string
		if err := rows.Scan(&id, &actor, &ns, &content); err != nil {
			t.Fatal(err)
		}
		out[id] = actor + " " + ns + " " + content
	}
	return out
}

func ftsIDs(t *testing.T, s *Store, engine Engine, q memory.Query) []string {
	t.Helper()
	hits, err := s.SearchEngine(bg, q, engine)
	if err != nil {
		t.Fatalf("search %+v: %v", q, err)
	}
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.Record.ID)
	}
	return ids
}

// TestFTS5FollowsEveryWrite walks insert, update, status change, events,
// expiry, hand edit, forget and rebuild, and after each checks the FTS5
// rows (and its integrity) and an fts5 search.
func TestFTS5FollowsEveryWrite(t *testing.T) {
	home := t.TempDir()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	opts := Options{NoFsync: true, SyncInterval: -1, Now: func() time.Time { return now }, EventExpiryDays: 30}
	s, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lt := "/main/u/long_term/"
	all := []memory.Status{memory.StatusActive, memory.StatusSuperseded, memory.StatusStaged}
	steps := []struct {
		name  string
		do    func() error
		rows  map[string]string // expected FTS rows by ID (full text)
		query memory.Query
		want  []string
	}{
		{"insert", func() error {
			_, err := s.PutBatch(bg, []memory.Record{{ID: "r1", Namespace: lt, Content: "the fig tree needs water"}, {ID: "r2", Namespace: lt, Content: "tomato aphids"}})
			return err
		}, map[string]string{"r1": "u " + lt + " the fig tree needs water", "r2": "u " + lt + " tomato aphids"},
			memory.Query{NamespacePath: "/main/u/", Text: "watering figs"}, []string{"r1"}},
		{"update", func() error {
			_, err := s.Put(bg, memory.Record{ID: "r1", Namespace: lt, Content: "the rose bush needs pruning"})
			return err
		}, map[string]string{"r1": "u " + lt + " the rose bush needs pruning", "r2": "u " + lt + " tomato aphids"},
			memory.Query{NamespacePath: "/main/u/", Text: "fig rose"}, []string{"r1"}},
		{"status change", func() error {
			_, err := s.Put(bg, memory.Record{ID: "r2", Namespace: lt, Content: "tomato aphids", Status: memory.StatusSuperseded})
			return err
		}, map[string]string{"r1": "u " + lt + " the rose bush needs pruning", "r2": "u " + lt + " tomato aphids"},
			memory.Query{NamespacePath: "/main/u/", Text: "tomato"}, nil},
		{"status change, statuses asked", func() error { return nil },
			map[string]string{"r1": "u " + lt + " the rose bush needs pruning", "r2": "u " + lt + " tomato aphids"},
			memory.Query{NamespacePath: "/main/u/", Text: "tomato", Statuses: all}, []string{"r2"}},
		{"events", func() error {
			return s.AppendEvents(bg, []memory.Event{
				{ID: "e1", ActorID: "u", SessionID: "s1", Role: "user", Text: "Mulch for the tomatoes?", Timestamp: now.Add(-40 * 24 * time.Hour)},
				{ID: "e2", ActorID: "u", SessionID: "s1", Role: "user", Text: "Mulch the roses", Timestamp: now.Add(-time.Hour), Metadata: map[string]any{"caption": "a photo of straw"}},
			})
		}, map[string]string{"r1": "u " + lt + " the rose bush needs pruning", "r2": "u " + lt + " tomato aphids",
			"e1": "u /main/u/episodic/s1/ (2026-04-22) user: Mulch for the tomatoes?", // stored until ExpireEvents
			"e2": "u /main/u/episodic/s1/ (2026-06-01) user: Mulch the roses a photo of straw"},
			memory.Query{NamespacePath: "/main/u/", Text: "mulch straw"}, []string{"e2"}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := ftsState(t, s); !reflect.DeepEqual(got, st.rows) {
			t.Fatalf("%s: fts rows\n got %v\nwant %v", st.name, got, st.rows)
		}
		if got := ftsIDs(t, s, EngineFTS5, st.query); !reflect.DeepEqual(got, st.want) {
			t.Fatalf("%s: fts5 search %+v = %v, want %v", st.name, st.query, got, st.want)
		}
	}
	// An event that expired while stored is never returned, and ExpireEvents
	// drops its full-text row.
	if got := ftsIDs(t, s, EngineFTS5, memory.Query{NamespacePath: "/main/u/", Text: "tomatoes"}); len(got) != 0 {
		t.Fatalf("expired event searchable: %v", got)
	}
	if _, err := s.ExpireEvents(bg); err != nil {
		t.Fatal(err)
	}
	if _, ok := ftsState(t, s)["e1"]; ok {
		t.Fatal("expired event kept in the full-text index")
	}
	// A hand edit of the Markdown reaches the full-text index on Sync.
	f := filepath.Join(home, "memory", "u", "semantic.md")
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "rose bush") {
		t.Fatalf("semantic.md lacks the record:\n%s", b)
	}
	if err := os.WriteFile(f, []byte(strings.ReplaceAll(string(b), "rose bush", "olive grove")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(bg); err != nil {
		t.Fatal(err)
	}
	if got := ftsIDs(t, s, EngineFTS5, memory.Query{NamespacePath: "/main/u/", Text: "olive"}); !reflect.DeepEqual(got, []string{"r1"}) {
		t.Fatalf("hand edit not indexed: %v", got)
	}
	before := ftsState(t, s)
	if err := s.Rebuild(bg, nil); err != nil {
		t.Fatal(err)
	}
	if after := ftsState(t, s); !reflect.DeepEqual(before, after) {
		t.Fatalf("rebuild changed the full-text rows:\n%v\n%v", before, after)
	}
	if err := s.Forget(bg, "main", "u"); err != nil {
		t.Fatal(err)
	}
	if got := ftsState(t, s); len(got) != 0 {
		t.Fatalf("forget left full-text rows: %v", got)
	}
}

// TestFTS5Isolation: an fts5 search of one actor never returns another's
// rows, whatever the query, and a search across actors merges each
// actor's own matches.
func TestFTS5Isolation(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoFsync: true, SyncInterval: -1, Engine: EngineFTS5})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, actor := range []string{"a", "b", "a*", "b\"x"} {
		if _, err := s.Put(bg, memory.Record{ID: "rec-" + actor, Namespace: memory.MustNamespace(memory.DefaultLongTermTemplate, memory.NamespaceVars{AgentID: "main", ActorID: actor}), Content: "secret fig recipe of " + actor}); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendEvents(bg, []memory.Event{{ID: "ev-" + actor, ActorID: actor, SessionID: "s", Role: "user", Text: "my secret fig", Timestamp: time.Now()}}); err != nil {
			t.Fatal(err)
		}
	}
	queries := []string{"secret fig", "b", `actor:b`, `"b\"x"`, "recipe OR b", "*", `fig" OR actor:"b`}
	for _, actor := range []string{"a", "b", "a*", "b\"x"} {
		for _, text := range queries {
			hits, err := s.Search(bg, memory.Query{NamespacePath: "/main/" + actor + "/", Text: text})
			if err != nil {
				t.Fatalf("actor %q query %q: %v", actor, text, err)
			}
			for _, h := range hits {
				if h.Record.ID != "rec-"+actor && h.Record.ID != "ev-"+actor {
					t.Fatalf("actor %q query %q returned %s", actor, text, h.Record.ID)
				}
				if !strings.HasPrefix(h.Explain, "fts5 bm25=") {
					t.Fatalf("explain %q", h.Explain)
				}
			}
			if text == "secret fig" && len(hits) != 2 {
				t.Fatalf("actor %q: %d hits, want its record and event", actor, len(hits))
			}
		}
	}
	hits, err := s.Search(bg, memory.Query{NamespacePath: "/main/", Text: "secret"})
	if err != nil || len(hits) != 8 {
		t.Fatalf("search across actors: %d hits, %v", len(hits), err)
	}
}

var hostileQueries = []string{
	`"`, `""`, `"fig`, `fig"`, `fig*`, `*`, `NEAR(fig tree`, `NEAR(fig tree, 2)`, `-fig`, `fig -tree`, `content:fig`,
	`actor:u`, `{content actor}: fig`, `fig AND`, `OR`, `NOT fig`, `AND OR NOT`, `(fig`, `fig)`, `^fig`, `fig + tree`,
	`'; DROP TABLE records; --`, `fig' OR '1'='1`, "\x00fig", `\"fig\"`, `:`, `-`, `fig:`, `"a" "b`, "💥 fig",
	"Café wátering", "무화과 나무", strings.Repeat("fig ", 500), strings.Repeat(`"`, 101),
}

// TestFTS5HostileQueries: FTS5 syntax in query text never errors, never
// widens the search beyond the actor and still finds plain words.
func TestFTS5HostileQueries(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoFsync: true, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.PutBatch(bg, []memory.Record{
		{ID: "u1", Namespace: "/main/u/long_term/", Content: "the fig tree by the wall"},
		{ID: "u2", Namespace: "/main/u/long_term/", Content: "café watering schedule, 무화과 나무"},
		{ID: "v1", Namespace: "/main/v/long_term/", Content: "fig tree actor u content"},
	}); err != nil {
		t.Fatal(err)
	}
	for _, text := range hostileQueries {
		hits, err := s.SearchEngine(bg, memory.Query{NamespacePath: "/main/u/", Text: text}, EngineFTS5)
		if err != nil {
			t.Fatalf("query %q: %v", text, err)
		}
		for _, h := range hits {
			if h.Record.ID == "v1" {
				t.Fatalf("query %q returned another actor's row", text)
			}
		}
		if strings.Contains(strings.ToLower(text), "fig") && !strings.Contains(text, "\x00") && (len(hits) == 0 || hits[0].Record.ID != "u1") {
			t.Errorf("query %q: %v, want u1 first", text, hits)
		}
	}
	for _, text := range []string{"Café wátering", "cafe watered", "무화과"} {
		if got := ftsIDs(t, s, EngineFTS5, memory.Query{NamespacePath: "/main/u/", Text: text}); !reflect.DeepEqual(got, []string{"u2"}) {
			t.Errorf("query %q = %v, want [u2] (diacritics, stemming, Hangul)", text, got)
		}
	}
	if n, err := s.ftsCount(bg, "u"); err != nil || n != 2 {
		t.Fatalf("rows of u: %d, %v", n, err)
	}
}

func TestFTSQuery(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"fig tree", `"fig" OR "tree"`},
		{`NEAR(fig "tree"*) -x`, `"near" OR "fig" OR "tree" OR "x"`},
		{`content:fig fig FIG`, `"content" OR "fig"`},
		{`" * - : ( )`, ``},
		{"café", `"café"`},
	} {
		if got := ftsQuery(c.in); got != c.want {
			t.Errorf("ftsQuery(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	if n := strings.Count(ftsQuery(strings.Repeat("a b c d e f g h i j ", 1)+strings.Repeat("x", 3)+" "+randomWords(200)), " OR "); n != maxFTSTerms-1 {
		t.Errorf("%d terms, want at most %d", n+1, maxFTSTerms)
	}
}

func randomWords(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString("w")
		b.WriteString(strings.Repeat("z", i%7))
		b.WriteString(string(rune('a' + i%26)))
		b.WriteString(string(rune('a' + i/26)))
		b.WriteString(" ")
	}
	return b.String()
}

// FuzzFTSQuery: any text becomes a query FTS5 accepts.
func FuzzFTSQuery(f *testing.F) {
	for _, q := range hostileQueries {
		f.Add(q)
	}
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE VIRTUAL TABLE t USING fts5(content, tokenize='porter unicode61 remove_diacritics 2'); INSERT INTO t(content) VALUES('fig tree')`); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		q := ftsQuery(text)
		if q == "" {
			return
		}
		rows, err := db.QueryContext(context.Background(), `SELECT rowid, bm25(t) FROM t WHERE t MATCH ?`, q)
		if err != nil {
			t.Fatalf("text %q → %s: %v", text, q, err)
		}
		for rows.Next() {
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("text %q → %s: %v", text, q, err)
		}
		rows.Close()
	})
}

// TestFTSBackfillsOldIndex: an index written before the full-text tables
// existed gets them filled on Open.
func TestFTSBackfillsOldIndex(t *testing.T) {
	home := t.TempDir()
	opts := Options{NoFsync: true, SyncInterval: -1}
	s, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(bg, memory.Record{ID: "r1", Namespace: "/main/u/long_term/", Content: "fig tree"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(bg, []memory.Event{{ID: "e1", ActorID: "u", SessionID: "s", Role: "user", Text: "fig jam", Timestamp: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TABLE memory_fts`, `DROP TABLE fts_docs`} {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s, err = Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := ftsIDs(t, s, EngineFTS5, memory.Query{NamespacePath: "/main/u/", Text: "fig"}); len(got) != 2 {
		t.Fatalf("after backfill: %v", got)
	}
	ftsState(t, s)
}

func TestParseEngine(t *testing.T) {
	for in, want := range map[string]Engine{"": EngineBM25F, "bm25f": EngineBM25F, "FTS5": EngineFTS5, " fts5 ": EngineFTS5} {
		if got, err := ParseEngine(in); err != nil || got != want {
			t.Errorf("ParseEngine(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseEngine("bm25"); err == nil {
		t.Error("unknown engine accepted")
	}
	s, err := Open(t.TempDir(), Options{SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.SearchEngine(bg, memory.Query{NamespacePath: "/main/u/", Text: "x"}, "lucene"); err == nil {
		t.Error("unknown engine searched")
	}
	if _, err := Open(t.TempDir(), Options{Engine: "lucene"}); err == nil {
		t.Error("Open accepted an unknown engine")
	}
}

// TestFTSBatchSizes writes batches around the prepared-statement and chunk
// sizes, with an ID repeated inside one batch (the last version wins).
func TestFTSBatchSizes(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoFsync: true, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	total := 0
	for _, n := range []int{1, ftsCached, ftsCached + 1, ftsChunk, 2*ftsChunk + 3} {
		recs := make([]memory.Record, n)
		for i := range recs {
			recs[i] = memory.Record{ID: "b" + strconv.Itoa(n) + "-" + strconv.Itoa(i), Namespace: "/main/u/long_term/", Content: "batch word" + strconv.Itoa(i%7)}
		}
		if n > 1 {
			recs[n-1] = memory.Record{ID: recs[0].ID, Namespace: "/main/u/long_term/", Content: "batch replaced"}
			total--
		}
		if _, err := s.PutBatch(bg, recs); err != nil {
			t.Fatalf("batch of %d: %v", n, err)
		}
		total += n
		rows := ftsState(t, s)
		if len(rows) != total {
			t.Fatalf("batch of %d: %d full-text rows, want %d", n, len(rows), total)
		}
		if n > 1 && rows[recs[0].ID] != "u /main/u/long_term/ batch replaced" {
			t.Fatalf("batch of %d: repeated ID indexed as %q", n, rows[recs[0].ID])
		}
	}
	if got := ftsIDs(t, s, EngineFTS5, memory.Query{NamespacePath: "/main/u/", Text: "replaced", TopK: 100}); len(got) != 4 {
		t.Fatalf("replaced rows found: %v", got)
	}
}

// BenchmarkAppendTurn times the write of one turn (two events, one
// transaction, no fsync): the cost the full-text index adds to a turn.
func BenchmarkAppendTurn(b *testing.B) {
	s, err := Open(b.TempDir(), Options{SyncInterval: -1, NoFsync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	t0 := time.Now().Add(-time.Hour)
	for i := 0; b.Loop(); i++ {
		evs := []memory.Event{
			{ActorID: "a", SessionID: fmt.Sprint("s", i%8), Role: "user", Text: "I went to the garden centre and bought organic fertiliser for the figs", Timestamp: t0.Add(time.Duration(2*i) * time.Millisecond)},
			{ActorID: "a", SessionID: fmt.Sprint("s", i%8), Role: "assistant", Text: "Great, organic fertiliser suits figs; feed them in spring", Timestamp: t0.Add(time.Duration(2*i+1) * time.Millisecond)},
		}
		if err := s.AppendEvents(bg, evs); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFTS5EventRowsDeferred: with the default engine a turn's events get
// no full-text rows on the write path; the first FTS5 search writes them,
// also for events appended before a restart. With EngineFTS5 configured
// they are written with the events.
func TestFTS5EventRowsDeferred(t *testing.T) {
	home := t.TempDir()
	opts := Options{NoFsync: true, SyncInterval: -1}
	s, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	rows := func(s *Store) int {
		var n int
		if err := s.db.QueryRow(`SELECT count(*) FROM fts_docs`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	ev := func(id, text string) memory.Event {
		return memory.Event{ID: id, ActorID: "u", SessionID: "s", Role: "user", Text: text, Timestamp: time.Now().Add(-time.Minute)}
	}
	if err := s.AppendEvents(bg, []memory.Event{ev("e1", "the fig tree by the wall")}); err != nil {
		t.Fatal(err)
	}
	if n := rows(s); n != 0 {
		t.Fatalf("%d full-text rows written on the turn path, want 0", n)
	}
	if got := ftsIDs(t, s, EngineFTS5, memory.Query{NamespacePath: "/main/u/", Text: "fig"}); !reflect.DeepEqual(got, []string{"e1"}) {
		t.Fatalf("fts5 search = %v, want [e1]", got)
	}
	if err := s.AppendEvents(bg, []memory.Event{ev("e2", "olive harvest in autumn")}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(home, opts) // e2's row is owed across the restart
	if err != nil {
		t.Fatal(err)
	}
	if got := ftsIDs(t, s, EngineFTS5, memory.Query{NamespacePath: "/main/u/", Text: "olive"}); !reflect.DeepEqual(got, []string{"e2"}) {
		t.Fatalf("after restart fts5 search = %v, want [e2]", got)
	}
	s.Close()

	opts.Engine = EngineFTS5
	s, err = Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.AppendEvents(bg, []memory.Event{ev("e3", "basil on the balcony")}); err != nil {
		t.Fatal(err)
	}
	if n := rows(s); n != 1 {
		t.Fatalf("EngineFTS5: %d full-text rows after one event, want 1", n)
	}
}
