package pgstore_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/pgstore"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
	"github.com/tendrilai/tendril/internal/testenv"
)

var words = []string{"fig", "tomato", "organic", "fertiliser", "aphids", "basil", "water", "rust", "petunia", "rose",
	"pruning", "compost", "Busan", "balcony", "raised", "beds", "drainage", "비료", "토마토를", "물", "Caroline", "Melanie", "2023", "May", "yesterday"}

func sentence(rng *rand.Rand, n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = words[rng.Intn(len(words))]
	}
	return strings.Join(out, " ")
}

// corpus is a deterministic mix of records (every strategy and status,
// metadata, two actors, long-term and episodic namespaces) and events
// (three sessions, speakers, captions) with microsecond timestamps.
type corpus struct {
	recs []memory.Record
	evs  []memory.Event
}

func makeCorpus(seed int64, nRecs, nEvs int, base time.Time) corpus {
	rng := rand.New(rand.NewSource(seed))
	strategies := []memory.Strategy{memory.StrategyUserPreference, memory.StrategySemantic, memory.StrategySummary, memory.StrategyProcedural, memory.StrategyEpisodic}
	statuses := []memory.Status{memory.StatusActive, memory.StatusActive, memory.StatusActive, memory.StatusSuperseded, memory.StatusStaged}
	var c corpus
	for i := 0; i < nRecs; i++ {
		actor := []string{"u1", "u2"}[rng.Intn(2)]
		ns := fmt.Sprintf("/main/%s/long_term/", actor)
		if rng.Intn(4) == 0 {
			ns = fmt.Sprintf("/main/%s/episodic/s%d/", actor, rng.Intn(3))
		}
		md := map[string]any{"type": []string{"note", "fact"}[rng.Intn(2)]}
		if rng.Intn(2) == 0 {
			md["plants"] = []string{words[rng.Intn(4)], words[rng.Intn(10)]}
		}
		at := base.Add(time.Duration(rng.Int63n(int64(240 * time.Hour)))).Truncate(time.Microsecond)
		c.recs = append(c.recs, memory.Record{ID: fmt.Sprintf("rec-%04d", i), Namespace: ns, Strategy: strategies[rng.Intn(len(strategies))],
			Status: statuses[rng.Intn(len(statuses))], Content: sentence(rng, 3+rng.Intn(12)), Metadata: md,
			CreatedAt: at, UpdatedAt: at, Importance: float64(rng.Intn(100)) / 100, Sources: []string{fmt.Sprintf("ev-%d", rng.Intn(50))}})
	}
	for i := 0; i < nEvs; i++ {
		actor := []string{"u1", "u2"}[rng.Intn(2)]
		md := map[string]any{"speaker": []string{"Caroline", "Melanie"}[rng.Intn(2)]}
		if rng.Intn(5) == 0 {
			md["caption"] = "a photo of " + sentence(rng, 2)
		}
		at := base.Add(time.Duration(rng.Int63n(int64(240 * time.Hour)))).Truncate(time.Microsecond)
		c.evs = append(c.evs, memory.Event{ID: fmt.Sprintf("ev-%04d", i), ActorID: actor, SessionID: fmt.Sprintf("s%d", rng.Intn(3)),
			Role: []string{"user", "assistant"}[rng.Intn(2)], Text: sentence(rng, 4+rng.Intn(10)), Timestamp: at, Metadata: md})
	}
	return c
}

func queries() []memory.Query {
	var qs []memory.Query
	for _, text := range []string{"organic fertiliser", "fig tree rust", "When did Caroline water the basil?", "토마토 비료", "compost drainage raised beds",
		"what did Melanie say about petunia", "2023 May", "aphids"} {
		for _, actor := range []string{"u1", "u2"} {
			qs = append(qs,
				memory.Query{NamespacePath: "/main/" + actor + "/", Text: text},
				memory.Query{NamespacePath: "/main/" + actor + "/", Text: text, TopK: 5},
				memory.Query{Namespace: "/main/" + actor + "/long_term/", Text: text, Filters: []memory.Filter{{Key: "type", Op: memory.OpEquals, Value: "note"}}},
				memory.Query{NamespacePath: "/main/" + actor + "/episodic/", Text: text},
				memory.Query{NamespacePath: "/main/" + actor + "/", Text: text, Statuses: []memory.Status{memory.StatusSuperseded, memory.StatusStaged}},
				memory.Query{NamespacePath: "/main/" + actor + "/", Text: text, Strategies: []memory.Strategy{memory.StrategyUserPreference, memory.StrategyProcedural},
					Filters: []memory.Filter{{Key: "plants", Op: memory.OpExists}}},
			)
		}
		qs = append(qs, memory.Query{NamespacePath: "/main/", Text: text})
	}
	for _, actor := range []string{"u1", "u2"} {
		qs = append(qs, memory.Query{NamespacePath: "/main/" + actor + "/"},
			memory.Query{NamespacePath: "/main/" + actor + "/", Statuses: []memory.Status{memory.StatusStaged}},
			memory.Query{NamespacePath: "/main/" + actor + "/", TopK: 7, Filters: []memory.Filter{{Key: "plants", Op: memory.OpContains, Value: "fig"}}})
	}
	return qs
}

// sameHits compares the results of every query on the backends: IDs in
// order, scores within 1e-9, explanations and records equal.
func sameHits(t *testing.T, stage string, want memory.Store, gots ...memory.Store) {
	t.Helper()
	total := 0
	defer func() {
		if total < 200 {
			t.Fatalf("%s: only %d hits over all queries: the comparison proves little", stage, total)
		}
	}()
	for _, q := range queries() {
		w, err := want.Search(ctx, q)
		if err != nil {
			t.Fatalf("%s: sqlite %+v: %v", stage, q, err)
		}
		total += len(w)
		for gi, gs := range gots {
			g, err := gs.Search(ctx, q)
			if err != nil {
				t.Fatalf("%s: pg %+v: %v", stage, q, err)
			}
			if len(g) != len(w) {
				t.Fatalf("%s: pg#%d query %+v: %d hits, sqlite %d\npg     %v\nsqlite %v", stage, gi, q, len(g), len(w), hitIDs(g), hitIDs(w))
			}
			for i := range w {
				if g[i].Record.ID != w[i].Record.ID || math.Abs(g[i].Score-w[i].Score) > 1e-9 || g[i].Explain != w[i].Explain {
					t.Fatalf("%s: pg#%d query %+v hit %d:\npg     %s %.12f %s\nsqlite %s %.12f %s", stage, gi, q, i,
						g[i].Record.ID, g[i].Score, g[i].Explain, w[i].Record.ID, w[i].Score, w[i].Explain)
				}
				if fmt.Sprint(g[i].Record) != fmt.Sprint(w[i].Record) {
					t.Fatalf("%s: pg#%d query %+v hit %d record differs:\npg     %+v\nsqlite %+v", stage, gi, q, i, g[i].Record, w[i].Record)
				}
			}
		}
	}
}

func hitIDs(h []memory.Hit) []string {
	out := make([]string, len(h))
	for i, x := range h {
		out[i] = x.Record.ID
	}
	return out
}

func openSQLite(t testing.TB, opts sqlitestore.Options) *sqlitestore.Store {
	t.Helper()
	opts.SyncInterval = -1
	opts.NoFsync = true
	s, err := sqlitestore.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSameRankingAsSQLite puts identical data into both backends, in two
// rounds (so that the second round is applied in place to indexes built by
// the first: SQLite by its own writes, PostgreSQL by catching up), and
// compares every query; a third PostgreSQL instance that only ever reads
// loads everything at once and must agree as well.
func TestSameRankingAsSQLite(t *testing.T) {
	base := time.Now().UTC().Add(-12 * 24 * time.Hour)
	c := makeCorpus(7, 300, 400, base)
	url := testenv.PostgresSchema(t)
	lite := openSQLite(t, sqlitestore.Options{})
	pgA := newStore(t, openPool(t, url), pgstore.Options{})
	pgB := newStore(t, openPool(t, url), pgstore.Options{})
	half := func(n int) int { return n / 2 }
	for _, s := range []memory.Admin{lite, pgA} {
		if _, err := s.PutBatch(ctx, c.recs[:half(len(c.recs))]); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendEvents(ctx, c.evs[:half(len(c.evs))]); err != nil {
			t.Fatal(err)
		}
	}
	sameHits(t, "round 1", lite, pgA, pgB)
	rng := rand.New(rand.NewSource(9))
	var updates []memory.Record
	for i := 0; i < 40; i++ {
		r := c.recs[rng.Intn(half(len(c.recs)))]
		r.Content += " " + sentence(rng, 3)
		r.Status = []memory.Status{memory.StatusActive, memory.StatusSuperseded}[rng.Intn(2)]
		r.UpdatedAt = r.UpdatedAt.Add(time.Hour)
		updates = append(updates, r)
	}
	for _, s := range []memory.Admin{lite, pgA} {
		for _, r := range c.recs[half(len(c.recs)):] {
			if _, err := s.Put(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.PutBatch(ctx, updates); err != nil {
			t.Fatal(err)
		}
		rest := c.evs[half(len(c.evs)):]
		for i := 0; i < len(rest); i += 2 { // a turn at a time, as the pipeline writes them
			if err := s.AppendEvents(ctx, rest[i:min(i+2, len(rest))]); err != nil {
				t.Fatal(err)
			}
		}
	}
	sameHits(t, "round 2", lite, pgA, pgB)
	pgC := newStore(t, openPool(t, url), pgstore.Options{})
	sameHits(t, "fresh instance", lite, pgC)
	if err := pgA.Rebuild(ctx, nil); err != nil {
		t.Fatal(err)
	}
	sameHits(t, "after rebuild", lite, pgA)
}

// TestExportMatchesSQLite: for the same records, events and rejections,
// ExportMarkdown writes byte-identical files on both backends.
func TestExportMatchesSQLite(t *testing.T) {
	c := makeCorpus(11, 120, 150, time.Now().UTC().Add(-5*24*time.Hour))
	lite := openSQLite(t, sqlitestore.Options{})
	pgs := newStore(t, openPool(t, testenv.PostgresSchema(t)), pgstore.Options{})
	hostile := memory.Record{ID: "hostile", Namespace: "/main/" + memory.EscapeSegment("a/../b ü") + "/long_term/", Content: "line one\nline two with # and - marks", CreatedAt: time.Date(2026, 3, 1, 9, 30, 0, 123456000, time.UTC)}
	for _, s := range []memory.Admin{lite, pgs} {
		if _, err := s.PutBatch(ctx, append(c.recs, hostile)); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendEvents(ctx, c.evs); err != nil {
			t.Fatal(err)
		}
		for _, h := range []string{"likes plastic flowers", "might like mint"} {
			if err := s.MarkRejected(ctx, "u1", h); err != nil {
				t.Fatal(err)
			}
		}
	}
	dl, dp := t.TempDir(), t.TempDir()
	nl, err := lite.ExportMarkdown(ctx, dl)
	if err != nil {
		t.Fatal(err)
	}
	np, err := pgs.ExportMarkdown(ctx, dp)
	if err != nil {
		t.Fatal(err)
	}
	fl, fp := readTree(t, dl), readTree(t, dp)
	if nl != np || len(fl) != len(fp) || nl != len(fl) {
		t.Fatalf("files: sqlite %d (%d on disk), pg %d (%d on disk)", nl, len(fl), np, len(fp))
	}
	for rel, b := range fl {
		if !bytes.Equal(fp[rel], b) {
			t.Fatalf("%s differs:\n--- sqlite\n%s\n--- pg\n%s", rel, b, fp[rel])
		}
	}
	if _, ok := fl["u1/rejected.md"]; !ok {
		t.Fatalf("no rejected.md exported: %v", keys(fl))
	}
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// hashEmbedder is a deterministic bag-of-words embedder: each token adds 1
// to one of 16 dimensions.
type hashEmbedder struct{}

func (hashEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, 16)
		for _, w := range strings.Fields(strings.ToLower(t)) {
			h := 0
			for _, r := range w {
				h = h*31 + int(r)
			}
			v[(h%16+16)%16]++
		}
		out[i] = v
	}
	return out, nil
}

// TestSameHybridRankingAsSQLite: with an embedder, vectors (real[] in
// PostgreSQL) fuse with BM25F identically on both backends, across
// instances.
func TestSameHybridRankingAsSQLite(t *testing.T) {
	c := makeCorpus(5, 120, 160, time.Now().UTC().Add(-6*24*time.Hour))
	url := testenv.PostgresSchema(t)
	lite := openSQLite(t, sqlitestore.Options{Embedder: hashEmbedder{}})
	pgA := newStore(t, openPool(t, url), pgstore.Options{Embedder: hashEmbedder{}})
	pgB := newStore(t, openPool(t, url), pgstore.Options{Embedder: hashEmbedder{}})
	for _, s := range []memory.Admin{lite, pgA} {
		if _, err := s.PutBatch(ctx, c.recs[:60]); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendEvents(ctx, c.evs[:80]); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []interface{ WaitEmbedded(context.Context) error }{lite, pgA} { // both embed in the background
		if err := s.WaitEmbedded(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sameHits(t, "hybrid round 1", lite, pgA, pgB)
	for _, s := range []memory.Admin{lite, pgA} {
		if _, err := s.PutBatch(ctx, c.recs[60:]); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendEvents(ctx, c.evs[80:]); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []interface{ WaitEmbedded(context.Context) error }{lite, pgA} { // both embed in the background
		if err := s.WaitEmbedded(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sameHits(t, "hybrid round 2", lite, pgA, pgB)
	hits, err := pgB.Search(ctx, memory.Query{NamespacePath: "/main/u1/", Text: "fig"})
	if err != nil || len(hits) == 0 || !strings.Contains(hits[0].Explain, "cosine") {
		t.Fatalf("hybrid explain missing: %+v, %v", hits, err)
	}
}
