package sqlitestore

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/embed"
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
