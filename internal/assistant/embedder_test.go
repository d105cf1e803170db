package assistant

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// fakeEmbeddings speaks OpenAI's POST /v1/embeddings: each input becomes
// a 4-dimensional vector of letter counts, so similar texts are close.
func fakeEmbeddings(t *testing.T, calls *atomic.Int64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/embeddings" {
			http.NotFound(w, r)
			return
		}
		calls.Add(1)
		var req struct {
			Input []string `json:"input"`
			Model string   `json:"model"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		type datum struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		}
		var data []datum
		for i, in := range req.Input {
			v := make([]float64, 4)
			for _, r := range strings.ToLower(in) {
				switch r {
				case 'f':
					v[0]++
				case 'g':
					v[1]++
				case 'o':
					v[2]++
				default:
					v[3] += 0.01
				}
			}
			data = append(data, datum{Object: "embedding", Index: i, Embedding: v})
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model,
			"usage": map[string]int{"prompt_tokens": 1, "total_tokens": 1}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// memory.embedder (EMBEDDING_MODEL_ID) turns hybrid search on end to end:
// records are embedded in the background and searches fuse the vector
// ranking, which the explanation shows.
func TestEmbedderSwitch(t *testing.T) {
	var calls atomic.Int64
	emb := fakeEmbeddings(t, &calls)
	fake := modeltest.NewOpenAI(t)
	t.Setenv("EMBEDDING_MODEL_ID", "openai/text-embedding-3-small")
	a := openTestAppWith(t, fake, func() { t.Setenv("OPENAI_BASE_URL", emb.URL+"/v1") })
	ctx := context.Background()
	ns, _ := memory.Namespace(memory.DefaultLongTermTemplate, memory.NamespaceVars{AgentID: "main", ActorID: "api:emb"})
	if _, err := a.memory.Put(ctx, memory.Record{Namespace: ns, Strategy: memory.StrategySemantic, Content: "grows figs on the balcony"}); err != nil {
		t.Fatal(err)
	}
	if err := a.memory.(*sqlitestore.Store).WaitEmbedded(ctx); err != nil {
		t.Fatal(err)
	}
	hits, err := a.Search(ctx, SearchQuery{ActorID: "api:emb", Text: "figs", Explain: true})
	if err != nil || len(hits) == 0 {
		t.Fatalf("search: %v %v", hits, err)
	}
	if ex := hits[0].Explain; !strings.Contains(ex, "bm25f") || !strings.Contains(ex, "vector: cosine") || !strings.Contains(ex, ", rank ") || calls.Load() == 0 {
		t.Fatalf("no vector ranking (embedding calls %d): %s", calls.Load(), hits[0].Explain)
	}
}

// With no embedder configured nothing is embedded.
func TestNoEmbedderNoVectors(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	a := openTestApp(t, fake)
	ctx := context.Background()
	ns, _ := memory.Namespace(memory.DefaultLongTermTemplate, memory.NamespaceVars{AgentID: "main", ActorID: "api:emb"})
	if _, err := a.memory.Put(ctx, memory.Record{Namespace: ns, Strategy: memory.StrategySemantic, Content: "grows figs"}); err != nil {
		t.Fatal(err)
	}
	hits, err := a.Search(ctx, SearchQuery{ActorID: "api:emb", Text: "figs", Explain: true})
	if err != nil || len(hits) == 0 || strings.Contains(hits[0].Explain, "vector") {
		t.Fatalf("search: %+v %v", hits, err)
	}
}
