package pgstore_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/embed"
	"github.com/tendrilai/tendril/internal/memory/memindex"
	"github.com/tendrilai/tendril/internal/memory/pgstore"
	"github.com/tendrilai/tendril/internal/memory/search"
	"github.com/tendrilai/tendril/internal/testenv"
)

// fakeEmbeddings is one server speaking the three embedding wire formats
// (OpenAI POST /v1/embeddings, Ollama POST /api/embed, Bedrock Titan
// POST /model/{id}/invoke). Vectors are bags of words hashed into dim
// dimensions. Mode "slow" holds every request until release is closed
// (or the client gives up); "fail" answers 500.
type fakeEmbeddings struct {
	*httptest.Server
	dim     int
	mode    string
	calls   atomic.Int64 // requests answered with vectors
	started chan struct{}
	release chan struct{}
}

func newFakeEmbeddings(t *testing.T, mode string, dim int) *fakeEmbeddings {
	f := &fakeEmbeddings{dim: dim, mode: mode, started: make(chan struct{}, 1000), release: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	t.Cleanup(func() { // runs first: releases slow handlers
		select {
		case <-f.release:
		default:
			close(f.release)
		}
	})
	return f
}

func (f *fakeEmbeddings) vec(text string) []float32 {
	v := make([]float32, f.dim)
	for _, w := range strings.Fields(strings.ToLower(text)) {
		h := 0
		for _, r := range strings.Trim(w, ".,?!:()") {
			h = h*31 + int(r)
		}
		v[(h%f.dim+f.dim)%f.dim]++
	}
	return v
}

func (f *fakeEmbeddings) serve(w http.ResponseWriter, r *http.Request) {
	select {
	case f.started <- struct{}{}:
	default:
	}
	switch f.mode {
	case "slow":
		select {
		case <-r.Context().Done():
			return
		case <-f.release:
		}
	case "fail":
		http.Error(w, `{"error":{"message":"boom","type":"server_error"}}`, http.StatusInternalServerError)
		return
	}
	var body struct {
		Input     []string `json:"input"`
		InputText string   `json:"inputText"`
	}
	json.NewDecoder(r.Body).Decode(&body)
	for _, in := range append(body.Input, body.InputText) {
		if len(in) > 8000 { // as real models reject inputs past their context
			http.Error(w, `{"error":{"message":"input too long","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
	}
	f.calls.Add(1)
	switch {
	case r.URL.Path == "/v1/embeddings":
		var data []map[string]any
		for i, s := range body.Input {
			data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": f.vec(s)})
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": "m"})
	case r.URL.Path == "/api/embed":
		var embs [][]float32
		for _, s := range body.Input {
			embs = append(embs, f.vec(s))
		}
		json.NewEncoder(w).Encode(map[string]any{"model": "m", "embeddings": embs})
	case strings.HasPrefix(r.URL.Path, "/model/"):
		json.NewEncoder(w).Encode(map[string]any{"embedding": f.vec(body.InputText), "inputTextTokenCount": 1})
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeEmbeddings) embedder(t *testing.T, ref string) search.Embedder {
	t.Helper()
	e, err := embed.New(ctx, ref, embed.Options{OpenAIBaseURL: f.URL + "/v1", OllamaBaseURL: f.URL, AWSRegion: "us-east-1",
		BedrockEndpoint: f.URL, AWSCredentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func vectorRows(t *testing.T, pool *pgxpool.Pool, actor string) (n int, models []string) {
	t.Helper()
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM memory_vectors WHERE actor = $1`, actor).Scan(&n); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT DISTINCT model FROM memory_vectors WHERE actor = $1 ORDER BY 1`, actor)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var m string
		rows.Scan(&m)
		models = append(models, m)
	}
	return n, models
}

func putFig(t *testing.T, s *pgstore.Store, actor string) {
	t.Helper()
	ns := "/main/" + actor + "/long_term/"
	for _, c := range []string{"has a fig tree in the back garden", "waters the lawn on sundays"} {
		if _, err := s.Put(ctx, memory.Record{Namespace: ns, Strategy: memory.StrategySemantic, Content: c}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendEvents(ctx, []memory.Event{{ActorID: actor, SessionID: "s1", Role: "user", Text: "the fig leaves are turning yellow"}}); err != nil {
		t.Fatal(err)
	}
}

// Each provider's embedder, against its fake wire server, turns on
// hybrid search on PostgreSQL: vectors are stored in the background with
// their model, reach a second instance, and the explanation shows the
// vector part (cosine and rank) beside BM25F.
func TestHybridProvidersOnPostgres(t *testing.T) {
	for _, ref := range []string{"openai/text-embedding-3-small", "ollama/nomic-embed-text", "bedrock/amazon.titan-embed-text-v2:0"} {
		t.Run(strings.Split(ref, "/")[0], func(t *testing.T) {
			f := newFakeEmbeddings(t, "ok", 32)
			url := testenv.PostgresSchema(t)
			pool := openPool(t, url)
			a := newStore(t, pool, pgstore.Options{Embedder: f.embedder(t, ref)})
			b := newStore(t, openPool(t, url), pgstore.Options{Embedder: f.embedder(t, ref)})
			putFig(t, a, "u1")
			if err := a.WaitEmbedded(ctx); err != nil {
				t.Fatal(err)
			}
			if n, models := vectorRows(t, pool, "u1"); n != 3 || len(models) != 1 || models[0] != ref {
				t.Fatalf("vectors: %d rows, models %v (want 3, [%s])", n, models, ref)
			}
			for name, s := range map[string]*pgstore.Store{"writer": a, "other instance": b} {
				hits, err := s.Search(ctx, memory.Query{NamespacePath: "/main/u1/", Text: "fig tree"})
				if err != nil || len(hits) == 0 {
					t.Fatalf("%s: %v %v", name, hits, err)
				}
				ex := hits[0].Explain
				if !strings.HasPrefix(ex, "hybrid rrf") || !strings.Contains(ex, "bm25f") || !strings.Contains(ex, "vector: cosine") || !strings.Contains(ex, ", rank ") {
					t.Fatalf("%s: explain without the vector part: %s", name, ex)
				}
			}
		})
	}
}

// A write returns while the embedding call is still outstanding, and a
// search whose query cannot be embedded within its share of the
// retrieval budget answers with BM25F; once the embedder answers, the
// vectors arrive.
func TestSlowEmbedderNeverHoldsAWrite(t *testing.T) {
	f := newFakeEmbeddings(t, "slow", 16)
	pool := openPool(t, testenv.PostgresSchema(t))
	s := newStore(t, pool, pgstore.Options{Embedder: f.embedder(t, "openai/m")})
	done := make(chan struct{})
	go func() { defer close(done); putFig(t, s, "u1") }()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a guard, not a measurement: the embedder never answers before release
		t.Fatal("the write waited for the embedding call")
	}
	select {
	case <-f.started: // the worker did call the embedder
	case <-time.After(30 * time.Second):
		t.Fatal("no embedding call")
	}
	var st memory.RetrieveStats
	r := memory.NewRetriever(s, memory.RetrieveOptions{Timeout: 2 * time.Second, NoStanding: true, Metrics: func(x memory.RetrieveStats) { st = x }})
	hits, err := r.Recall(ctx, "main", "u1", "how is my fig tree")
	if err != nil || st.Failed || len(hits) == 0 || !strings.Contains(hits[0].Record.Content, "fig") {
		t.Fatalf("recall with a slow embedder: hits %+v, stats %+v, err %v", hits, st, err)
	}
	q, err := s.Search(ctx, memory.Query{NamespacePath: "/main/u1/", Text: "fig"})
	if err != nil || len(q) == 0 || !strings.HasSuffix(q[0].Explain, memindex.NoQueryVectorExplain) {
		t.Fatalf("fallback explain: %+v %v", q, err)
	}
	if n, _ := vectorRows(t, pool, "u1"); n != 0 || f.calls.Load() != 0 {
		t.Fatalf("%d vectors, %d answered calls before the embedder answered", n, f.calls.Load())
	}
	close(f.release)
	if err := s.WaitEmbedded(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := vectorRows(t, pool, "u1"); n != 3 {
		t.Fatalf("%d vectors after the embedder answered, want 3", n)
	}
}

// A failing embedder costs nothing but the vectors: writes and searches
// succeed on BM25F, and nothing half-made is stored.
func TestFailingEmbedderFallsBackToBM25F(t *testing.T) {
	f := newFakeEmbeddings(t, "fail", 16)
	pool := openPool(t, testenv.PostgresSchema(t))
	s := newStore(t, pool, pgstore.Options{Embedder: f.embedder(t, "ollama/m")})
	putFig(t, s, "u1")
	if err := s.WaitEmbedded(ctx); err != nil {
		t.Fatal(err)
	}
	var st memory.RetrieveStats
	r := memory.NewRetriever(s, memory.RetrieveOptions{Timeout: 2 * time.Second, NoStanding: true, Metrics: func(x memory.RetrieveStats) { st = x }})
	hits, err := r.Recall(ctx, "main", "u1", "how is my fig tree")
	if err != nil || st.Failed || len(hits) == 0 || !strings.Contains(hits[0].Record.Content, "fig") {
		t.Fatalf("recall with a failing embedder: hits %+v, stats %+v, err %v", hits, st, err)
	}
	if n, _ := vectorRows(t, pool, "u1"); n != 0 {
		t.Fatalf("%d vectors stored by a failing embedder", n)
	}
}

// Rebuild drops the vectors and the worker recomputes them; a second
// instance drops its cached vectors too and sees the new ones.
func TestRebuildReembeds(t *testing.T) {
	f := newFakeEmbeddings(t, "ok", 16)
	url := testenv.PostgresSchema(t)
	pool := openPool(t, url)
	a := newStore(t, pool, pgstore.Options{Embedder: f.embedder(t, "openai/m")})
	b := newStore(t, openPool(t, url), pgstore.Options{Embedder: f.embedder(t, "openai/m")})
	putFig(t, a, "u1")
	putFig(t, a, "u2")
	if err := a.WaitEmbedded(ctx); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"u1", "u2"} { // b caches both actors with their vectors
		if hits, err := b.Search(ctx, memory.Query{NamespacePath: "/main/" + u + "/", Text: "fig"}); err != nil || len(hits) == 0 || !strings.Contains(hits[0].Explain, "vector: cosine") {
			t.Fatalf("before rebuild: %+v %v", hits, err)
		}
	}
	var before int64
	pool.QueryRow(ctx, `SELECT max(version) FROM memory_vectors`).Scan(&before)
	calls := f.calls.Load()
	if err := a.Rebuild(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitEmbedded(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	var after int64
	pool.QueryRow(ctx, `SELECT count(*), min(version) FROM memory_vectors`).Scan(&n, &after)
	if n != 6 || after <= before || f.calls.Load() == calls {
		t.Fatalf("after rebuild: %d vectors (want 6), oldest version %d (before %d), embedding calls %d → %d", n, after, before, calls, f.calls.Load())
	}
	hits, err := b.Search(ctx, memory.Query{NamespacePath: "/main/u2/", Text: "fig tree"})
	if err != nil || len(hits) == 0 || !strings.Contains(hits[0].Explain, "vector: cosine") {
		t.Fatalf("other instance after rebuild: %+v %v", hits, err)
	}
}

// Another model (or dimension) never mixes with stored vectors: the new
// store ranks without them and re-embeds every document on its first
// load; a changed record is re-embedded too.
func TestModelChangeReembeds(t *testing.T) {
	f16 := newFakeEmbeddings(t, "ok", 16)
	f24 := newFakeEmbeddings(t, "ok", 24)
	url := testenv.PostgresSchema(t)
	pool := openPool(t, url)
	old := newStore(t, pool, pgstore.Options{Embedder: f16.embedder(t, "openai/small")})
	putFig(t, old, "u1")
	if err := old.WaitEmbedded(ctx); err != nil {
		t.Fatal(err)
	}
	old.Close()
	s := newStore(t, openPool(t, url), pgstore.Options{Embedder: f24.embedder(t, "openai/large")})
	hits, err := s.Search(ctx, memory.Query{NamespacePath: "/main/u1/", Text: "fig tree"})
	if err != nil || len(hits) == 0 || strings.Contains(hits[0].Explain, "vector: cosine") {
		t.Fatalf("first search on the new model used the old vectors: %+v %v", hits, err)
	}
	if err := s.WaitEmbedded(ctx); err != nil {
		t.Fatal(err)
	}
	var n, dims int
	var model string
	pool.QueryRow(ctx, `SELECT count(*), min(model), min(cardinality(vec)) FROM memory_vectors WHERE actor = 'u1'`).Scan(&n, &model, &dims)
	if n != 3 || model != "openai/large" || dims != 24 {
		t.Fatalf("after the model change: %d vectors of %q with %d dimensions", n, model, dims)
	}
	hits, err = s.Search(ctx, memory.Query{NamespacePath: "/main/u1/", Text: "fig tree"})
	if err != nil || len(hits) == 0 || !strings.Contains(hits[0].Explain, "vector: cosine") {
		t.Fatalf("after re-embedding: %+v %v", hits, err)
	}
	// A record whose content changes gets a new vector.
	r := hits[0].Record
	for _, h := range hits {
		if h.Record.Strategy == memory.StrategySemantic {
			r = h.Record
			break
		}
	}
	var hash0 string
	pool.QueryRow(ctx, `SELECT hash FROM memory_vectors WHERE id = $1`, r.ID).Scan(&hash0)
	r.Content = "has two fig trees and a quince"
	if _, err := s.Put(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitEmbedded(ctx); err != nil {
		t.Fatal(err)
	}
	var hash1 string
	var same bool
	pool.QueryRow(ctx, `SELECT hash, hash = md5($2::text) FROM memory_vectors WHERE id = $1`, r.ID, r.Content).Scan(&hash1, &same)
	if hash1 == hash0 || !same {
		t.Fatalf("changed record's vector hash %q → %q (matches new content: %v)", hash0, hash1, same)
	}
}

// Forgetting an actor while its vectors are being computed leaves
// nothing: the late vectors are not stored and the actor is not
// recreated.
func TestForgetDuringEmbedding(t *testing.T) {
	f := newFakeEmbeddings(t, "slow", 16)
	pool := openPool(t, testenv.PostgresSchema(t))
	s := newStore(t, pool, pgstore.Options{Embedder: f.embedder(t, "openai/m")})
	putFig(t, s, "u1")
	<-f.started
	if err := s.Forget(ctx, "main", "u1"); err != nil {
		t.Fatal(err)
	}
	close(f.release)
	if err := s.WaitEmbedded(ctx); err != nil {
		t.Fatal(err)
	}
	var vecs, actors int
	pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM memory_vectors), (SELECT count(*) FROM memory_actors)`).Scan(&vecs, &actors)
	if vecs != 0 || actors != 0 {
		t.Fatalf("after forget: %d vectors, %d actor rows", vecs, actors)
	}
}

// A document longer than an embedder takes is embedded cut
// (memindex.EmbedText) rather than failing its batch, and its vector
// stays current: the hash is over the whole text.
func TestLongDocumentIsEmbeddedCut(t *testing.T) {
	f := newFakeEmbeddings(t, "ok", 16)
	pool := openPool(t, testenv.PostgresSchema(t))
	s := newStore(t, pool, pgstore.Options{Embedder: f.embedder(t, "openai/m")})
	long := strings.Repeat("무화과 나무가 잘 자라요. ", 1500) // about 40 KB
	r, err := s.Put(ctx, memory.Record{Namespace: "/main/u1/long_term/", Content: long})
	if err != nil {
		t.Fatal(err)
	}
	putFig(t, s, "u1")
	if err := s.WaitEmbedded(ctx); err != nil {
		t.Fatal(err)
	}
	var current bool
	if err := pool.QueryRow(ctx, `SELECT hash = md5(content) FROM memory_vectors v JOIN memory_records r USING (id) WHERE id = $1`, r.ID).Scan(&current); err != nil || !current {
		t.Fatalf("long record's vector: current %v, err %v", current, err)
	}
	if n, _ := vectorRows(t, pool, "u1"); n != 4 {
		t.Fatalf("%d vectors, want 4", n)
	}
	calls := f.calls.Load()
	putFig(t, s, "u1") // new documents only: the long one is not embedded again
	if err := s.WaitEmbedded(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := vectorRows(t, pool, "u1"); n != 7 || f.calls.Load()-calls > 3 {
		t.Fatalf("%d vectors (want 7), %d more calls", n, f.calls.Load()-calls)
	}
}

// An embedder outage does not leave documents BM25F-only: the worker
// retries the actor with back-off (memindex.EmbedRetry, first after 2 s),
// and the documents get vectors once the embedder answers again, with no
// further write.
func TestEmbedRetryAfterOutage(t *testing.T) {
	f := newFakeEmbeddings(t, "ok", 16)
	var down atomic.Bool
	down.Store(true)
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, `{"error":{"message":"down","type":"server_error"}}`, http.StatusServiceUnavailable)
			return
		}
		f.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(flaky.Close)
	e, err := embed.New(ctx, "ollama/m", embed.Options{OllamaBaseURL: flaky.URL})
	if err != nil {
		t.Fatal(err)
	}
	pool := openPool(t, testenv.PostgresSchema(t))
	s := newStore(t, pool, pgstore.Options{Embedder: e})
	putFig(t, s, "u1")
	if err := s.WaitEmbedded(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := vectorRows(t, pool, "u1"); n != 0 {
		t.Fatalf("%d vectors while the embedder is down", n)
	}
	down.Store(false)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if n, _ := vectorRows(t, pool, "u1"); n == 3 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%d of 3 documents embedded 20 s after the embedder recovered", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
