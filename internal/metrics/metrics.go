// Package metrics holds Tendril's Prometheus collectors (SPEC §10). One
// Registry per process; tests may create their own with New.
//
// Most collectors are moved by the code that does the work (turn latency,
// model calls, tool calls, TurnsInFlight). Queue depth, extraction lag and
// actors per breaker level are instead sampled when /metrics is scraped,
// from sources registered with SetQueueSource, SetExtractionLagSource and
// SetBreakerSource (see sources.go).
package metrics

import (
	"net/http"
	"time"

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
	ToolCalls         *prometheus.CounterVec // labels: tool, outcome

	// Approvals (tendril_approvals_total, label outcome) counts approval
	// requests: "requested" when a tool call pauses for approval, then once
	// more by how it ended, counted by the instance that resumes or closes
	// the paused turn (whichever process recorded the decision):
	// "approved" or "denied" by an operator ("denied" also when forgetting
	// the actor denies it), "expired" when it expired undecided, "refused"
	// when a rule change or a broken ledger voided it first.
	Approvals *prometheus.CounterVec

	// TurnsInFlight (tendril_turns_in_flight) is the number of turns
	// currently running. The application layer calls Inc when a turn starts
	// and Dec when it ends, whatever the outcome.
	TurnsInFlight prometheus.Gauge

	// SourceErrors (tendril_metrics_source_errors_total, label source:
	// "queue:<name>", "extraction_lag" or "breaker") counts scrape-time
	// samples that were skipped because their source returned an error,
	// timed out, panicked or returned an out-of-range value.
	SourceErrors *prometheus.CounterVec

	sampler *sampler
}

var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// DefaultSourceTimeout bounds how long one scrape waits for the
// scrape-time sources (all of them run concurrently under one deadline).
const DefaultSourceTimeout = 2 * time.Second

// New creates and registers every collector on a fresh registry, together
// with the Go runtime and process collectors. No scrape-time source is
// registered yet, so tendril_queue_depth, tendril_memory_extraction_lag_seconds
// and tendril_breaker_actors are absent until their Set*Source is called.
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
		Approvals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tendril_approvals_total", Help: "Approval gate outcomes.",
		}, []string{"outcome"}),
		ToolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tendril_tool_calls_total", Help: "Tool calls by tool and outcome.",
		}, []string{"tool", "outcome"}),
		TurnsInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tendril_turns_in_flight", Help: "Turns currently running.",
		}),
		SourceErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tendril_metrics_source_errors_total", Help: "Scrape-time samples skipped because their source failed, timed out or returned an invalid value.",
		}, []string{"source"}),
	}
	m.sampler = newSampler(m.SourceErrors, DefaultSourceTimeout)
	r.MustRegister(m.TurnDuration, m.ModelDuration, m.Errors, m.RetrievalDuration, m.RetrievalTimeouts,
		m.Approvals, m.ToolCalls, m.TurnsInFlight, m.SourceErrors, m.sampler,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}
