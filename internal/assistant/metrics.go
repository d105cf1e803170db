package assistant

import (
	"context"
	"time"
)

// registerMetricSources feeds the scrape-time gauges: queue depth per
// queue, extraction lag and actors per breaker level.
func (a *Assistant) registerMetricSources() {
	m := a.metrics
	m.SetQueueSource("extraction", func(ctx context.Context) (int, error) {
		n, _ := a.pipeline.Lag()
		return n, nil
	})
	m.SetExtractionLagSource(func(ctx context.Context) (time.Duration, error) {
		_, oldest := a.pipeline.Lag()
		return oldest, nil
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
}
