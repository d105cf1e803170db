// Package metrics holds Tendril's Prometheus collectors (SPEC §10). One
// Registry per process; tests may create their own with New.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the collectors. Durations are in seconds.
type Metrics struct {
	Registry *prometheus.Registry

	TurnDuration      *prometheus.HistogramVec // labels: channel, outcome
	ModelDuration     *prometheus.HistogramVec // labels: provider, model, outcome
	Errors            *prometheus.CounterVec   // labels: code
	RetrievalDuration prometheus.Histogram
	RetrievalTimeouts prometheus.Counter     // timeouts and errors that fell back to no memory
	ExtractionLag     prometheus.Gauge       // seconds the oldest pending extraction job has waited
	QueueDepth        *prometheus.GaugeVec   // labels: queue
	Approvals         *prometheus.CounterVec // labels: outcome (requested|approved|denied|expired|refused)
	BreakerLevel      *prometheus.GaugeVec   // labels: actor-independent level name; 1 for the current max level
	InFlight          prometheus.Gauge
	ToolCalls         *prometheus.CounterVec // labels: tool, outcome
}

var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// New creates and registers every collector on a fresh registry, together
// with the Go runtime and process collectors.
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		TurnDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tendril_turn_duration_seconds", Help: "Latency of whole agent turns.", Buckets: latencyBuckets,
		}, []string{"channel", "outcome"}),
		ModelDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tendril_model_duration_seconds", Help: "Latency of model calls, per attempt.", Buckets: latencyBuckets,
		}, []string{"provider", "model", "outcome"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tendril_errors_total", Help: "Turn errors by error code.",
		}, []string{"code"}),
		RetrievalDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tendril_memory_retrieval_duration_seconds", Help: "Latency of pre-turn memory retrieval.", Buckets: latencyBuckets,
		}),
		RetrievalTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tendril_memory_retrieval_fallbacks_total", Help: "Turns that continued without memory after a retrieval timeout or error.",
		}),
		ExtractionLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tendril_memory_extraction_lag_seconds", Help: "Age of the oldest pending extraction job.",
		}),
		QueueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tendril_queue_depth", Help: "Pending items per background queue.",
		}, []string{"queue"}),
		Approvals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tendril_approvals_total", Help: "Approval gate outcomes.",
		}, []string{"outcome"}),
		BreakerLevel: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tendril_breaker_turns", Help: "Turns started per breaker level (NORMAL, WARNING, CRITICAL) in the last observation.",
		}, []string{"level"}),
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tendril_turns_in_flight", Help: "Turns currently running.",
		}),
		ToolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tendril_tool_calls_total", Help: "Tool calls by tool and outcome.",
		}, []string{"tool", "outcome"}),
	}
	r.MustRegister(m.TurnDuration, m.ModelDuration, m.Errors, m.RetrievalDuration, m.RetrievalTimeouts,
		m.ExtractionLag, m.QueueDepth, m.Approvals, m.BreakerLevel, m.InFlight, m.ToolCalls,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}
