package sqlitestore

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/embed"
	"github.com/tendrilai/tendril/internal/memory/memindex"
)

// fakeOpenAI speaks POST /v1/embeddings; slow makes every call wait until
// the client gives up, fail answers 500.
func fakeOpenAI(t *testing.T, mode string) *httptest.Server {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode {
		case "slow":
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		case "fail":
			http.Error(w, `{"error":{"message":"boom","type":"server_error"}}`, http.StatusInternalServerError)
			return
		}
		var req struct{ Input []string }
		json.NewDecoder(r.Body).Decode(&req)
		var data []map[string]any
		for i := range req.Input {
			data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": []float32{1, 0}})
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": "m"})
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first: releases slow handlers
	return srv
}

// A slow or failing embedder never costs the turn its memory: the query's
// embedding call gets part of the retrieval budget, then BM25F answers.
func TestRecallWithinBudgetWhenEmbedderSlowOrFails(t *testing.T) {
	for _, mode := range []string{"ok", "slow", "fail"} {
		t.Run(mode, func(t *testing.T) {
			srv := fakeOpenAI(t, mode)
			e, err := embed.New(context.Background(), "openai/text-embedding-3-small", embed.Options{OpenAIBaseURL: srv.URL + "/v1"})
			if err != nil {
				t.Fatal(err)
			}
			s, err := Open(t.TempDir(), Options{Embedder: e, SyncInterval: -1, NoFsync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Put(bg, memory.Record{Namespace: "/main/u/long_term/", Strategy: memory.StrategySemantic, Content: "has a fig tree in the back garden"}); err != nil {
				t.Fatal(err)
			}
			var st memory.RetrieveStats
			r := memory.NewRetriever(s, memory.RetrieveOptions{Timeout: 400 * time.Millisecond, NoStanding: true, Metrics: func(x memory.RetrieveStats) { st = x }})
			hits, err := r.Recall(bg, "main", "u", "how is my fig tree")
			if err != nil || st.Failed || len(hits) == 0 || !strings.Contains(hits[0].Record.Content, "fig") {
				t.Fatalf("recall with a %s embedder: hits %+v, stats %+v, err %v", mode, hits, st, err)
			}
		})
	}
}

// fakeVectors speaks POST /v1/embeddings with bag-of-words vectors of dim
// dimensions; hold, when set, keeps each request until it is closed.
func fakeVectors(t *testing.T, dim int, calls *atomic.Int64, started chan<- struct{}, hold <-chan struct{}) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if started != nil {
			select {
			case started <- struct{}{}:
			default:
			}
		}
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		var req struct{ Input []string }
		json.NewDecoder(r.Body).Decode(&req)
		calls.Add(1)
		var data []map[string]any
		for i, s := range req.Input {
			v := make([]float32, dim)
			for _, w := range strings.Fields(strings.ToLower(s)) {
				h := 0
				for _, c := range strings.Trim(w, ".,?!:()") {
					h = h*31 + int(c)
				}
				v[(h%dim+dim)%dim]++
			}
			data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": v})
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": "m"})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func openEmbedded(t *testing.T, home, ref, url string) *Store {
	t.Helper()
	e, err := embed.New(bg, ref, embed.Options{OpenAIBaseURL: url + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(home, Options{Embedder: e, SyncInterval: -1, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func vectorModels(t *testing.T, s *Store) map[string]int {
	t.Helper()
	rows, err := s.db.Query(`SELECT model || '/' || (length(vec)/4) FROM vectors`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var m string
		rows.Scan(&m)
		out[m]++
	}
	return out
}

// While the worker waits on an embedding call, writes of the same actor
// go through: the worker holds none of the actor's locks during a call.
func TestWriteDuringEmbeddingCall(t *testing.T) {
	var calls atomic.Int64
	started, hold := make(chan struct{}, 100), make(chan struct{})
	srv := fakeVectors(t, 8, &calls, started, hold)
	t.Cleanup(func() { close(hold) }) // before the server closes
	s := openEmbedded(t, t.TempDir(), "openai/m", srv.URL)
	ns := "/main/u/long_term/"
	if _, err := s.Put(bg, memory.Record{Namespace: ns, Content: "has a fig tree"}); err != nil {
		t.Fatal(err)
	}
	<-started // the worker is inside the embedding call for u
	done := make(chan error, 1)
	go func() {
		_, err := s.Put(bg, memory.Record{Namespace: ns, Content: "grows basil too"})
		if err == nil {
			err = s.AppendEvents(bg, []memory.Event{{ActorID: "u", SessionID: "s", Role: "user", Text: "the figs are ripe"}})
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // a guard: the held call never returns before the end of the test
		t.Fatal("a write waited for the embedding call")
	}
	if calls.Load() != 0 {
		t.Fatalf("%d embedding calls answered while held", calls.Load())
	}
}

// memory rebuild drops the vectors and the worker recomputes them; a
// different model (or dimension) is never mixed with stored vectors: its
// first index build re-embeds every document.
func TestRebuildAndModelChangeReembed(t *testing.T) {
	var calls atomic.Int64
	home := t.TempDir()
	s := openEmbedded(t, home, "openai/small", fakeVectors(t, 8, &calls, nil, nil).URL)
	ns := "/main/u/long_term/"
	for _, c := range []string{"has a fig tree in the back garden", "waters the lawn on sundays"} {
		if _, err := s.Put(bg, memory.Record{Namespace: ns, Content: c}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WaitEmbedded(bg); err != nil {
		t.Fatal(err)
	}
	if m := vectorModels(t, s); m["openai/small/8"] != 2 || len(m) != 1 {
		t.Fatalf("vectors before rebuild: %v", m)
	}
	n := calls.Load()
	if err := s.Rebuild(bg, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitEmbedded(bg); err != nil {
		t.Fatal(err)
	}
	if m := vectorModels(t, s); m["openai/small/8"] != 2 || calls.Load() == n {
		t.Fatalf("after rebuild: vectors %v, embedding calls %d → %d", m, n, calls.Load())
	}
	hits, err := s.Search(bg, memory.Query{NamespacePath: ns, Text: "fig tree"})
	if err != nil || len(hits) == 0 || !strings.Contains(hits[0].Explain, "vector: cosine") || !strings.Contains(hits[0].Explain, "bm25f") {
		t.Fatalf("explain after rebuild: %+v %v", hits, err)
	}
	s.Close()

	s = openEmbedded(t, home, "openai/large", fakeVectors(t, 12, &calls, nil, nil).URL)
	hits, err = s.Search(bg, memory.Query{NamespacePath: ns, Text: "fig tree"})
	if err != nil || len(hits) == 0 || strings.Contains(hits[0].Explain, "vector: cosine") {
		t.Fatalf("first search on another model ranked with the old vectors: %+v %v", hits, err)
	}
	if err := s.WaitEmbedded(bg); err != nil {
		t.Fatal(err)
	}
	if m := vectorModels(t, s); m["openai/large/12"] != 2 || len(m) != 1 {
		t.Fatalf("vectors after the model change: %v", m)
	}
	hits, err = s.Search(bg, memory.Query{NamespacePath: ns, Text: "fig tree"})
	if err != nil || len(hits) == 0 || !strings.Contains(hits[0].Explain, "vector: cosine") {
		t.Fatalf("after re-embedding: %+v %v", hits, err)
	}
	// A changed record is re-embedded.
	r := hits[0].Record
	var h0 string
	s.db.QueryRow(`SELECT hash FROM vectors WHERE id=?`, r.ID).Scan(&h0)
	r.Content = "has two fig trees and a quince"
	if _, err := s.Put(bg, r); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitEmbedded(bg); err != nil {
		t.Fatal(err)
	}
	var h1 string
	s.db.QueryRow(`SELECT hash FROM vectors WHERE id=?`, r.ID).Scan(&h1)
	if h1 == h0 || h1 != textHash(r.Content) {
		t.Fatalf("changed record's vector hash %q → %q", h0, h1)
	}
}

// With an embedder configured but no query vector (failing embedder),
// the explanation says the answer is BM25F only.
func TestExplainWithoutQueryVector(t *testing.T) {
	srv := fakeOpenAI(t, "fail")
	s := openEmbedded(t, t.TempDir(), "openai/m", srv.URL)
	if _, err := s.Put(bg, memory.Record{Namespace: "/main/u/long_term/", Content: "has a fig tree"}); err != nil {
		t.Fatal(err)
	}
	s.WaitEmbedded(bg)
	hits, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "fig"})
	if err != nil || len(hits) != 1 || !strings.HasSuffix(hits[0].Explain, memindex.NoQueryVectorExplain) {
		t.Fatalf("%+v %v", hits, err)
	}
}

// An embedder outage does not leave documents BM25F-only: the worker
// retries the actor with back-off, and once the embedder answers again the
// documents get vectors without any further write (before, they waited for
// the actor's next write or load).
func TestEmbedRetryAfterOutage(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	var calls atomic.Int64
	ok := fakeVectors(t, 8, &calls, nil, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, `{"error":{"message":"down","type":"server_error"}}`, http.StatusServiceUnavailable)
			return
		}
		ok.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s := openEmbedded(t, t.TempDir(), "openai/small", srv.URL)
	s.emb.retry.Base, s.emb.retry.Max = 20*time.Millisecond, 40*time.Millisecond
	if _, err := s.Put(bg, memory.Record{Namespace: "/main/u/long_term/", Content: "my lemon tree drops its flowers"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.emb.retry.Failures() < 2 { // failed, retried, failed again
		if time.Now().After(deadline) {
			t.Fatalf("no retry after a failed embedding call (failures %d)", s.emb.retry.Failures())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if m := vectorModels(t, s); len(m) != 0 {
		t.Fatalf("vectors while the embedder is down: %v", m)
	}
	down.Store(false)
	for len(vectorModels(t, s)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the document got no vector after the embedder recovered")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if m := vectorModels(t, s); m["openai/small/8"] != 1 {
		t.Fatalf("vectors %v", m)
	}
}

// A document only the vectors found says that BM25F matched none of the
// query's words, not that it fell out of BM25F's top 50 (it was one of
// two documents).
func TestExplainVectorOnlyHit(t *testing.T) {
	var calls atomic.Int64
	s := openEmbedded(t, t.TempDir(), "openai/small", fakeVectors(t, 8, &calls, nil, nil).URL)
	ns := "/main/u/long_term/"
	for _, c := range []string{"has a fig tree in the back garden", "waters the lawn on sundays"} {
		if _, err := s.Put(bg, memory.Record{Namespace: ns, Content: c}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WaitEmbedded(bg); err != nil {
		t.Fatal(err)
	}
	hits, err := s.Search(bg, memory.Query{NamespacePath: ns, Text: "fig tree"})
	if err != nil {
		t.Fatal(err)
	}
	var lawn string
	for _, h := range hits {
		if strings.Contains(h.Record.Content, "lawn") {
			lawn = h.Explain
		}
	}
	if !strings.Contains(lawn, "bm25f: no match for the query") || !strings.Contains(lawn, "vector: cosine") {
		t.Fatalf("explain of the vector-only hit: %q (hits %+v)", lawn, hits)
	}
}
