package assistant

import (
	"context"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/metrics"
)

// registerMetricSources feeds the scrape-time gauges: queue depth per
// queue, extraction lag, actors per breaker level and, for a memory store
// that caches actors, its cache.
func (a *Assistant) registerMetricSources() {
	m := a.metrics
	// A failed read is skipped and counted in
	// tendril_metrics_source_errors_total, not reported as an empty queue.
	m.SetQueueSource("extraction", func(ctx context.Context) (int, error) {
		n, _, err := a.pipeline.Depth(ctx)
		return n, err
	})
	m.SetExtractionLagSource(func(ctx context.Context) (time.Duration, error) {
		_, oldest, err := a.pipeline.Depth(ctx)
		return oldest, err
	})
	m.SetQueueSource("resume", func(ctx context.Context) (int, error) {
		pend, err := a.gate.Pending(ctx)
		return len(pend), err
	})
	m.SetQueueSource("schedule", func(ctx context.Context) (int, error) {
		return a.scheduler.Due(ctx)
	})
	if a.tgStore != nil {
		m.SetQueueSource("telegram", a.tgStore.Pending)
	}
	m.SetBreakerSource(func(ctx context.Context) (map[string]int, error) {
		counts, err := a.state.LevelCounts(ctx)
		out := map[string]int{}
		for l, n := range counts {
			out[l.String()] = n
		}
		return out, err
	})
	if cr, ok := a.memory.(memory.CacheReporter); ok {
		m.SetMemoryCacheSource(func(ctx context.Context) (metrics.MemoryCache, error) {
			c := cr.CacheStats()
			return metrics.MemoryCache{Actors: c.Actors, Bytes: c.Bytes, BudgetBytes: c.BudgetBytes, Loads: c.Loads, Evictions: c.Evictions}, nil
		})
	}
	if er, ok := a.memory.(memory.EmbedReporter); ok {
		if _, on := er.EmbedStats(); on {
			m.SetMemoryEmbedSource(func(ctx context.Context) (metrics.MemoryEmbed, error) {
				e, _ := er.EmbedStats()
				return metrics.MemoryEmbed{Failures: e.Failures, Retrying: e.Retrying}, nil
			})
		}
	}
}
