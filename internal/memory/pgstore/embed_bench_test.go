package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/embed"
	"github.com/tendrilai/tendril/internal/memory/pgstore"
	"github.com/tendrilai/tendril/internal/testenv"
)

// BenchmarkWriteWithSlowEmbedder measures a turn's memory writes (one
// AppendEvents of two events, one Put) and a Recall (default 3 s budget)
// against an OpenAI-compatible embedder that answers every call after
// MEMORY_BENCH_EMBED_DELAY (2s). Reports p50 and max per write and per
// recall in ms.
//
//	go test ./internal/memory/pgstore/ -run '^$' -bench WriteWithSlowEmbedder -benchtime 5x
func BenchmarkWriteWithSlowEmbedder(b *testing.B) {
	delay := 2 * time.Second
	if v := os.Getenv("MEMORY_BENCH_EMBED_DELAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		delay = d
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		var req struct{ Input []string }
		json.NewDecoder(r.Body).Decode(&req)
		var data []map[string]any
		for i := range req.Input {
			data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": []float32{1, float32(i), 0.5}})
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": "m"})
	}))
	defer srv.Close()
	e, err := embed.New(context.Background(), "openai/m", embed.Options{OpenAIBaseURL: srv.URL + "/v1"})
	if err != nil {
		b.Fatal(err)
	}
	s := newStore(b, openPool(b, testenv.PostgresSchema(b)), pgstore.Options{Embedder: e})
	var writes, recalls []time.Duration
	r := memory.NewRetriever(s, memory.RetrieveOptions{NoStanding: true})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := s.AppendEvents(ctx, []memory.Event{{ActorID: "u", SessionID: "s", Role: "user", Text: fmt.Sprintf("turn %d about the fig tree", i)},
			{ActorID: "u", SessionID: "s", Role: "assistant", Text: "noted"}}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Put(ctx, memory.Record{Namespace: "/main/u/long_term/", Content: fmt.Sprintf("fact %d about figs", i)}); err != nil {
			b.Fatal(err)
		}
		writes = append(writes, time.Since(t0))
		t0 = time.Now()
		if _, err := r.Recall(ctx, "main", "u", "how is the fig tree"); err != nil {
			b.Fatal(err)
		}
		recalls = append(recalls, time.Since(t0))
	}
	b.StopTimer()
	report := func(name string, d []time.Duration) {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, name+"-p50-ms")
		b.ReportMetric(float64(d[len(d)-1].Microseconds())/1000, name+"-max-ms")
	}
	report("write", writes)
	report("recall", recalls)
}
