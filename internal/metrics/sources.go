package metrics

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BreakerLevels are the level label values of tendril_breaker_actors, in
// increasing severity. Every one is exposed on each successful sample.
var BreakerLevels = []string{"NORMAL", "WARNING", "CRITICAL"}

// SetQueueSource registers depth as the source of
// tendril_queue_depth{queue=queue}: the number of items waiting in that
// background queue (e.g. "extraction", "telegram", "schedule", "resume").
// depth is called on every scrape with a context that expires after the
// scrape timeout (DefaultSourceTimeout); it must be safe for concurrent use.
// An error, a panic, a negative count or a timeout skips that queue's sample
// for the scrape and increments tendril_metrics_source_errors_total{source="queue:<queue>"}.
// Registering the same queue again replaces its source; a nil depth removes
// it. Safe to call concurrently with scrapes; a no-op on a nil *Metrics.
func (m *Metrics) SetQueueSource(queue string, depth func(ctx context.Context) (int, error)) {
	if m == nil || m.sampler == nil {
		return
	}
	s := m.sampler
	s.mu.Lock()
	defer s.mu.Unlock()
	if depth == nil {
		delete(s.queues, queue)
		return
	}
	s.queues[queue] = depth
}

// SetExtractionLagSource registers f as the source of
// tendril_memory_extraction_lag_seconds: how long the oldest extraction job
// still waiting has waited, 0 when none is waiting. A negative duration is
// exposed as 0. Errors, panics and timeouts are handled as for
// SetQueueSource (source="extraction_lag"). A nil f removes the source.
func (m *Metrics) SetExtractionLagSource(f func(ctx context.Context) (time.Duration, error)) {
	if m == nil || m.sampler == nil {
		return
	}
	m.sampler.mu.Lock()
	m.sampler.lag = f
	m.sampler.mu.Unlock()
}

// SetBreakerSource registers f as the source of
// tendril_breaker_actors{level}: the number of actors currently at each
// breaker level. f returns counts keyed by level name ("NORMAL", "WARNING",
// "CRITICAL"); a level missing from the map is exposed as 0, so every level
// in BreakerLevels is always present, and other keys are ignored. Errors,
// panics, timeouts and negative counts skip the whole sample and are
// counted as for SetQueueSource (source="breaker"). A nil f removes the
// source.
func (m *Metrics) SetBreakerSource(f func(ctx context.Context) (map[string]int, error)) {
	if m == nil || m.sampler == nil {
		return
	}
	m.sampler.mu.Lock()
	m.sampler.breaker = f
	m.sampler.mu.Unlock()
}

// MemoryCache is one sample of a memory store's in-memory cache of actors
// (sqlitestore: each cached actor's records, warm events and search index).
type MemoryCache struct {
	Actors      int    // actors held in memory
	Bytes       int64  // their estimated heap, in bytes
	BudgetBytes int64  // memory.cacheMB in bytes; 0 or less: no bound
	Loads       uint64 // actors read from disk into the cache since start
	Evictions   uint64 // actors dropped from the cache since start
}

// SetMemoryCacheSource registers f as the source of
// tendril_memory_cache_actors, tendril_memory_cache_bytes,
// tendril_memory_cache_budget_bytes and the counters
// tendril_memory_cache_loads_total and tendril_memory_cache_evictions_total.
// Loads that keep pace with turns mean the cache is too small for the
// actors in use (every turn then reads and indexes an actor again).
// Errors, panics and timeouts are handled as for SetQueueSource
// (source="memory_cache"). A nil f removes the source.
func (m *Metrics) SetMemoryCacheSource(f func(ctx context.Context) (MemoryCache, error)) {
	if m == nil || m.sampler == nil {
		return
	}
	m.sampler.mu.Lock()
	m.sampler.cache = f
	m.sampler.mu.Unlock()
}

// MemoryEmbed is one sample of a memory store's background embedding
// (hybrid search): failed passes since start and actors waiting for a
// retry (memindex.EmbedRetry).
type MemoryEmbed struct {
	Failures uint64
	Retrying int
}

// SetMemoryEmbedSource registers f as the source of the counter
// tendril_memory_embed_failures_total and the gauge
// tendril_memory_embed_retrying_actors: failures that keep rising mean
// hybrid search has fallen back to BM25F alone for new documents.
// Errors, panics and timeouts are handled as for SetQueueSource
// (source="memory_embed"). A nil f removes the source.
func (m *Metrics) SetMemoryEmbedSource(f func(ctx context.Context) (MemoryEmbed, error)) {
	if m == nil || m.sampler == nil {
		return
	}
	m.sampler.mu.Lock()
	m.sampler.embed = f
	m.sampler.mu.Unlock()
}

// sampler is the prometheus.Collector that calls the scrape-time sources.
type sampler struct {
	errs *prometheus.CounterVec

	mu      sync.RWMutex
	timeout time.Duration
	queues  map[string]func(context.Context) (int, error)
	lag     func(context.Context) (time.Duration, error)
	breaker func(context.Context) (map[string]int, error)
	cache   func(context.Context) (MemoryCache, error)
	embed   func(context.Context) (MemoryEmbed, error)

	queueDesc, lagDesc, breakerDesc *prometheus.Desc
	cacheDescs                      [5]*prometheus.Desc // actors, bytes, budget, loads, evictions
	embedDescs                      [2]*prometheus.Desc // failures, retrying
}

func newSampler(errs *prometheus.CounterVec, timeout time.Duration) *sampler {
	return &sampler{
		errs:    errs,
		timeout: timeout,
		queues:  map[string]func(context.Context) (int, error){},
		queueDesc: prometheus.NewDesc("tendril_queue_depth",
			"Items waiting per background queue, sampled at scrape time.", []string{"queue"}, nil),
		lagDesc: prometheus.NewDesc("tendril_memory_extraction_lag_seconds",
			"Age of the oldest waiting extraction job in seconds (0 when none), sampled at scrape time.", nil, nil),
		breakerDesc: prometheus.NewDesc("tendril_breaker_actors",
			"Actors currently at each circuit-breaker level, sampled at scrape time.", []string{"level"}, nil),
		cacheDescs: [5]*prometheus.Desc{
			prometheus.NewDesc("tendril_memory_cache_actors", "Actors the memory store holds in memory, sampled at scrape time.", nil, nil),
			prometheus.NewDesc("tendril_memory_cache_bytes", "Estimated heap of the actors the memory store holds in memory, in bytes.", nil, nil),
			prometheus.NewDesc("tendril_memory_cache_budget_bytes", "The memory store's cache budget (memory.cacheMB) in bytes; 0 or less: no bound.", nil, nil),
			prometheus.NewDesc("tendril_memory_cache_loads_total", "Actors read from disk into the memory store's cache since start.", nil, nil),
			prometheus.NewDesc("tendril_memory_cache_evictions_total", "Actors dropped from the memory store's cache since start.", nil, nil),
		},
		embedDescs: [2]*prometheus.Desc{
			prometheus.NewDesc("tendril_memory_embed_failures_total", "Background embedding passes (hybrid search) whose embedding call failed, since start; the actor is retried with back-off.", nil, nil),
			prometheus.NewDesc("tendril_memory_embed_retrying_actors", "Actors whose documents wait for an embedding retry, sampled at scrape time.", nil, nil),
		},
	}
}

func (s *sampler) setTimeout(d time.Duration) {
	s.mu.Lock()
	s.timeout = d
	s.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (s *sampler) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.queueDesc
	ch <- s.lagDesc
	ch <- s.breakerDesc
	for _, d := range s.cacheDescs {
		ch <- d
	}
	for _, d := range s.embedDescs {
		ch <- d
	}
}

type sample struct {
	source  string
	metrics []prometheus.Metric
	err     error
}

// Collect implements prometheus.Collector. All sources run concurrently
// under one deadline; a source still running at the deadline is abandoned
// (its goroutine finishes on its own) and counted as an error.
func (s *sampler) Collect(ch chan<- prometheus.Metric) {
	s.mu.RLock()
	queues := maps.Clone(s.queues)
	lag, breaker, cache, embed, timeout := s.lag, s.breaker, s.cache, s.embed, s.timeout
	s.mu.RUnlock()

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	results := make(chan sample, len(queues)+4) // buffered: abandoned sources never block
	pending := map[string]bool{}
	launch := func(source string, f func(context.Context) ([]prometheus.Metric, error)) {
		pending[source] = true
		go func() {
			defer func() {
				if r := recover(); r != nil {
					results <- sample{source: source, err: fmt.Errorf("metrics source %s panicked: %v", source, r)}
				}
			}()
			ms, err := f(ctx)
			results <- sample{source: source, metrics: ms, err: err}
		}()
	}

	for name, depth := range queues {
		launch("queue:"+name, func(ctx context.Context) ([]prometheus.Metric, error) {
			n, err := depth(ctx)
			if err != nil {
				return nil, err
			}
			if n < 0 {
				return nil, fmt.Errorf("queue %s: negative depth %d", name, n)
			}
			return []prometheus.Metric{prometheus.MustNewConstMetric(s.queueDesc, prometheus.GaugeValue, float64(n), name)}, nil
		})
	}
	if lag != nil {
		launch("extraction_lag", func(ctx context.Context) ([]prometheus.Metric, error) {
			d, err := lag(ctx)
			if err != nil {
				return nil, err
			}
			return []prometheus.Metric{prometheus.MustNewConstMetric(s.lagDesc, prometheus.GaugeValue, max(d, 0).Seconds())}, nil
		})
	}
	if breaker != nil {
		launch("breaker", func(ctx context.Context) ([]prometheus.Metric, error) {
			counts, err := breaker(ctx)
			if err != nil {
				return nil, err
			}
			out := make([]prometheus.Metric, 0, len(BreakerLevels))
			for _, lv := range BreakerLevels {
				n := counts[lv]
				if n < 0 {
					return nil, fmt.Errorf("breaker level %s: negative count %d", lv, n)
				}
				out = append(out, prometheus.MustNewConstMetric(s.breakerDesc, prometheus.GaugeValue, float64(n), lv))
			}
			return out, nil
		})
	}
	if cache != nil {
		launch("memory_cache", func(ctx context.Context) ([]prometheus.Metric, error) {
			c, err := cache(ctx)
			if err != nil {
				return nil, err
			}
			if c.Actors < 0 || c.Bytes < 0 {
				return nil, fmt.Errorf("memory cache: negative sample %+v", c)
			}
			d := s.cacheDescs
			return []prometheus.Metric{
				prometheus.MustNewConstMetric(d[0], prometheus.GaugeValue, float64(c.Actors)),
				prometheus.MustNewConstMetric(d[1], prometheus.GaugeValue, float64(c.Bytes)),
				prometheus.MustNewConstMetric(d[2], prometheus.GaugeValue, float64(c.BudgetBytes)),
				prometheus.MustNewConstMetric(d[3], prometheus.CounterValue, float64(c.Loads)),
				prometheus.MustNewConstMetric(d[4], prometheus.CounterValue, float64(c.Evictions)),
			}, nil
		})
	}
	if embed != nil {
		launch("memory_embed", func(ctx context.Context) ([]prometheus.Metric, error) {
			e, err := embed(ctx)
			if err != nil {
				return nil, err
			}
			if e.Retrying < 0 {
				return nil, fmt.Errorf("memory embed: negative sample %+v", e)
			}
			return []prometheus.Metric{
				prometheus.MustNewConstMetric(s.embedDescs[0], prometheus.CounterValue, float64(e.Failures)),
				prometheus.MustNewConstMetric(s.embedDescs[1], prometheus.GaugeValue, float64(e.Retrying)),
			}, nil
		})
	}

	for len(pending) > 0 {
		select {
		case r := <-results:
			delete(pending, r.source)
			if r.err != nil {
				s.errs.WithLabelValues(r.source).Inc()
				continue
			}
			for _, m := range r.metrics {
				ch <- m
			}
		case <-ctx.Done():
			for source := range pending {
				s.errs.WithLabelValues(source).Inc()
			}
			return
		}
	}
}
