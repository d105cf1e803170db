package assistant

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/model/providers"
	"github.com/tendrilai/tendril/internal/runtime"
)

// latencies runs n calls of f on c workers and returns the sorted
// latencies.
func latencies(n, c int, f func(i int) error) ([]time.Duration, error) {
	out := make([]time.Duration, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	next := make(chan int)
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t0 := time.Now()
				err := f(i)
				out[i] = time.Since(t0)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, firstErr
}

func pct(d []time.Duration, p float64) float64 {
	return float64(d[int(float64(len(d)-1)*p)].Microseconds()) / 1000
}

func newBenchRouter(b *testing.B, fake *modeltest.Server) *model.Router {
	r, err := providers.NewRouter(context.Background(), model.RouterOptions{TextRef: "openai/bench"},
		providers.Options{OpenAIBaseURL: fake.BaseURL(), OpenAIAPIKey: "k"})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

type invokerFunc func(ctx context.Context, req agent.Request) (*agent.Result, error)

func (f invokerFunc) Invoke(ctx context.Context, req agent.Request) (*agent.Result, error) {
	return f(ctx, req)
}

// BenchmarkInvocationsAddedLatency compares POST /invocations (runtime
// decoding, validation, JSON reply) whose invoker calls the fake model, with
// calling the fake model directly through the same Router, side by side at
// 1 and 64 concurrent clients. Reported: p50/p99 of each and the added p99.
func BenchmarkInvocationsAddedLatency(b *testing.B) {
	fake := modeltest.NewOpenAI(b)
	router := newBenchRouter(b, fake)
	gen := func(ctx context.Context, msg string) (*model.Response, error) {
		return router.Generate(ctx, &model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text(msg)}}}}, false)
	}
	srv, err := runtime.New(runtime.Options{Invoker: invokerFunc(func(ctx context.Context, req agent.Request) (*agent.Result, error) {
		resp, err := gen(ctx, req.Message)
		if err != nil {
			return nil, err
		}
		return &agent.Result{Text: resp.TextContent(), SessionID: req.ActorID, TurnID: "t"}, nil
	})})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	for _, c := range []int{1, 64} {
		b.Run(fmt.Sprintf("clients=%d", c), func(b *testing.B) {
			n := 2000
			direct, err := latencies(n, c, func(i int) error { _, err := gen(context.Background(), "hello"); return err })
			if err != nil {
				b.Fatal(err)
			}
			via, err := latencies(n, c, func(i int) error {
				resp, err := client.Post(ts.URL+"/invocations", "application/json", strings.NewReader(`{"message":"hello","actor_id":"api:bench"}`))
				if err != nil {
					return err
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					return fmt.Errorf("status %d", resp.StatusCode)
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(pct(direct, .5), "direct-p50-ms")
			b.ReportMetric(pct(direct, .99), "direct-p99-ms")
			b.ReportMetric(pct(via, .5), "invocations-p50-ms")
			b.ReportMetric(pct(via, .99), "invocations-p99-ms")
			b.ReportMetric(pct(via, .5)-pct(direct, .5), "added-p50-ms")
			b.ReportMetric(pct(via, .99)-pct(direct, .99), "added-p99-ms")
		})
	}
}

// BenchmarkFullTurnOverhead measures a whole turn (session load and durable
// append, memory retrieval over 10,000 records of the actor, state, gate,
// extraction queueing) against the bare model call it contains, at 1 and 64
// concurrent sessions.
func BenchmarkFullTurnOverhead(b *testing.B) {
	fake := modeltest.NewOpenAI(b)
	home := b.TempDir()
	b.Setenv("TENDRIL_HOME", home)
	b.Setenv("MODEL_ID", "openai/bench")
	b.Setenv("OPENAI_BASE_URL", fake.BaseURL())
	b.Setenv("OPENAI_API_KEY", "k")
	cfg, err := config.Load("")
	if err != nil {
		b.Fatal(err)
	}
	cfg.Memory.LLMExtraction = false
	a, err := Open(context.Background(), cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Owner: true})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	const actors = 64
	words := strings.Fields("tomato fig basil rose aphid compost mulch prune water frost bed soil seed sun shade leaf root pot balcony orchard")
	for act := 0; act < actors; act += 63 { // actor 0 and actor 63 carry 10k records each
		ns, _ := memory.Namespace(memory.DefaultLongTermTemplate, memory.NamespaceVars{AgentID: "main", ActorID: fmt.Sprintf("api:b%d", act)})
		recs := make([]memory.Record, 10000)
		for i := range recs {
			recs[i] = memory.Record{Namespace: ns, Strategy: memory.StrategySemantic, Status: memory.StatusActive,
				Content: fmt.Sprintf("note %d: the %s near the %s needs %s", i, words[i%len(words)], words[(i/7)%len(words)], words[(i/49)%len(words)])}
		}
		if _, err := a.memory.PutBatch(ctx, recs); err != nil {
			b.Fatal(err)
		}
	}
	router := newBenchRouter(b, fake)
	for _, c := range []int{1, 64} {
		b.Run(fmt.Sprintf("sessions=%d", c), func(b *testing.B) {
			n := 640
			direct, err := latencies(n, c, func(i int) error {
				_, err := router.Generate(ctx, &model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text("how do I water the fig tomato?")}}}}, false)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			turns, err := latencies(n, c, func(i int) error {
				actor := "api:b0" // both actors hold 10,000 records
				if i%2 == 1 {
					actor = "api:b63"
				}
				_, err := a.Invoke(ctx, agent.Request{Message: "how do I water the fig tomato?", ActorID: actor, SessionID: fmt.Sprintf("s%d-%s", i%c, actor)})
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(pct(direct, .5), "model-p50-ms")
			b.ReportMetric(pct(direct, .99), "model-p99-ms")
			b.ReportMetric(pct(turns, .5), "turn-p50-ms")
			b.ReportMetric(pct(turns, .99), "turn-p99-ms")
			b.ReportMetric(pct(turns, .99)-pct(direct, .99), "overhead-p99-ms")
		})
	}
}
