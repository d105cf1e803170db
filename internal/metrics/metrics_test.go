package metrics

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// scrape GETs the handler and returns the exposition text.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: HTTP %d: %s", resp.StatusCode, b)
	}
	return string(b)
}

func wantLines(t *testing.T, text string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !hasLine(text, l) {
			t.Errorf("exposition lacks %q", l)
		}
	}
}

func hasLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

func sourceErrors(t *testing.T, m *Metrics, source string) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.SourceErrors.WithLabelValues(source).Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}

func TestTurnsInFlight(t *testing.T) {
	m := New()
	wantLines(t, scrape(t, m), "tendril_turns_in_flight 0")
	m.TurnsInFlight.Inc()
	m.TurnsInFlight.Inc()
	m.TurnsInFlight.Inc()
	m.TurnsInFlight.Dec()
	wantLines(t, scrape(t, m), "tendril_turns_in_flight 2")
}

func TestScrapeTimeSources(t *testing.T) {
	m := New()
	// Nothing registered: the sampled families are absent, not zero.
	text := scrape(t, m)
	for _, name := range []string{"tendril_queue_depth", "tendril_memory_extraction_lag_seconds", "tendril_breaker_actors"} {
		if strings.Contains(text, name+"{") || strings.Contains(text, name+" ") {
			t.Errorf("%s exposed without a source", name)
		}
	}
	if strings.Contains(text, "tendril_breaker_turns") {
		t.Error("old tendril_breaker_turns still exposed")
	}

	var mu sync.Mutex
	depth := map[string]int{"extraction": 3, "telegram": 0, "schedule": 7, "resume": 1}
	for q := range depth {
		m.SetQueueSource(q, func(context.Context) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return depth[q], nil
		})
	}
	m.SetExtractionLagSource(func(context.Context) (time.Duration, error) { return 1500 * time.Millisecond, nil })
	m.SetBreakerSource(func(context.Context) (map[string]int, error) {
		return map[string]int{"NORMAL": 5, "CRITICAL": 2, "bogus": 9}, nil
	})
	text = scrape(t, m)
	wantLines(t, text,
		`tendril_queue_depth{queue="extraction"} 3`,
		`tendril_queue_depth{queue="telegram"} 0`,
		`tendril_queue_depth{queue="schedule"} 7`,
		`tendril_queue_depth{queue="resume"} 1`,
		"# TYPE tendril_queue_depth gauge",
		"tendril_memory_extraction_lag_seconds 1.5",
		"# TYPE tendril_memory_extraction_lag_seconds gauge",
		`tendril_breaker_actors{level="NORMAL"} 5`,
		`tendril_breaker_actors{level="WARNING"} 0`,
		`tendril_breaker_actors{level="CRITICAL"} 2`,
		"# TYPE tendril_breaker_actors gauge",
	)
	if strings.Contains(text, "bogus") {
		t.Error("unknown breaker level exposed")
	}

	// Values are read at scrape time, not at registration.
	mu.Lock()
	depth["extraction"] = 0
	mu.Unlock()
	m.SetExtractionLagSource(func(context.Context) (time.Duration, error) { return -time.Second, nil }) // clock skew → 0
	m.SetQueueSource("resume", nil)                                                                     // removed
	text = scrape(t, m)
	wantLines(t, text, `tendril_queue_depth{queue="extraction"} 0`, "tendril_memory_extraction_lag_seconds 0")
	if strings.Contains(text, `queue="resume"`) {
		t.Error("removed queue source still exposed")
	}
}

func TestFailingSourcesDoNotBreakScrape(t *testing.T) {
	m := New()
	m.sampler.setTimeout(100 * time.Millisecond)
	block := make(chan struct{})
	defer close(block)
	m.SetQueueSource("ok", func(context.Context) (int, error) { return 4, nil })
	m.SetQueueSource("err", func(context.Context) (int, error) { return 0, errors.New("db down") })
	m.SetQueueSource("neg", func(context.Context) (int, error) { return -1, nil })
	m.SetQueueSource("panic", func(context.Context) (int, error) { panic("boom") })
	m.SetQueueSource("hang", func(context.Context) (int, error) { <-block; return 1, nil }) // ignores ctx
	m.SetQueueSource("slow", func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
	m.SetExtractionLagSource(func(context.Context) (time.Duration, error) { return 0, errors.New("no table") })
	m.SetBreakerSource(func(context.Context) (map[string]int, error) {
		return map[string]int{"NORMAL": 1}, errors.New("scan failed")
	})

	start := time.Now()
	text := scrape(t, m)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("scrape took %v despite a 100ms source timeout", d)
	}
	wantLines(t, text, `tendril_queue_depth{queue="ok"} 4`, "tendril_turns_in_flight 0")
	for _, bad := range []string{`queue="err"`, `queue="neg"`, `queue="panic"`, `queue="hang"`, `queue="slow"`,
		"tendril_memory_extraction_lag_seconds ", "tendril_breaker_actors{"} {
		if strings.Contains(text, bad) {
			t.Errorf("failed sample %q exposed", bad)
		}
	}
	for _, src := range []string{"queue:err", "queue:neg", "queue:panic", "queue:hang", "queue:slow", "extraction_lag", "breaker"} {
		if got := sourceErrors(t, m, src); got != 1 {
			t.Errorf("source errors for %s = %v, want 1", src, got)
		}
	}
	if got := sourceErrors(t, m, "queue:ok"); got != 0 {
		t.Errorf("source errors for queue:ok = %v, want 0", got)
	}
	// The counter is itself exposed. The registry gathers collectors
	// concurrently, so this scrape's own failure may or may not be in it yet.
	text = scrape(t, m)
	if !hasLine(text, `tendril_metrics_source_errors_total{source="queue:err"} 1`) &&
		!hasLine(text, `tendril_metrics_source_errors_total{source="queue:err"} 2`) {
		t.Errorf("source error counter not exposed:\n%s", text)
	}
}

func TestConcurrentRegistrationAndScrape(t *testing.T) {
	m := New()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				q := []string{"extraction", "telegram", "schedule", "resume"}[(i+j)%4]
				m.SetQueueSource(q, func(context.Context) (int, error) { return j, nil })
				m.SetExtractionLagSource(func(context.Context) (time.Duration, error) { return time.Duration(j) * time.Second, nil })
				m.SetBreakerSource(func(context.Context) (map[string]int, error) { return map[string]int{"WARNING": j}, nil })
				m.TurnsInFlight.Inc()
				m.TurnsInFlight.Dec()
			}
		}()
	}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				resp, err := srv.Client().Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("HTTP %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	wantLines(t, scrape(t, m), "tendril_turns_in_flight 0")
}

func TestNilMetricsSettersAreNoOps(t *testing.T) {
	var m *Metrics
	m.SetQueueSource("x", func(context.Context) (int, error) { return 1, nil })
	m.SetExtractionLagSource(nil)
	m.SetBreakerSource(nil)
}

func TestMemoryCacheSource(t *testing.T) {
	m := New()
	if text := scrape(t, m); strings.Contains(text, "tendril_memory_cache_actors ") {
		t.Fatal("memory cache exposed without a source")
	}
	c := MemoryCache{Actors: 3, Bytes: 1 << 20, BudgetBytes: 32 << 20, Loads: 7, Evictions: 4}
	m.SetMemoryCacheSource(func(context.Context) (MemoryCache, error) { return c, nil })
	wantLines(t, scrape(t, m),
		"tendril_memory_cache_actors 3",
		"tendril_memory_cache_bytes 1.048576e+06",
		"tendril_memory_cache_budget_bytes 3.3554432e+07",
		"tendril_memory_cache_loads_total 7",
		"# TYPE tendril_memory_cache_loads_total counter",
		"tendril_memory_cache_evictions_total 4",
		"# TYPE tendril_memory_cache_evictions_total counter",
		"# TYPE tendril_memory_cache_actors gauge",
	)
	c.Actors = -1
	text := scrape(t, m)
	if strings.Contains(text, "tendril_memory_cache_actors ") {
		t.Error("negative sample exposed")
	}
	if got := sourceErrors(t, m, "memory_cache"); got != 1 {
		t.Errorf("source errors for memory_cache = %v, want 1", got)
	}
	m.SetMemoryCacheSource(nil)
	if text := scrape(t, m); strings.Contains(text, "tendril_memory_cache_loads_total ") {
		t.Error("removed source still exposed")
	}
}
