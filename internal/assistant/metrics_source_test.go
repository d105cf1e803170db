package assistant

import (
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"

	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// When the extraction queue cannot be read (its database gone), the
// extraction depth and lag are left out of /metrics and the failure is
// counted, as the other sampled gauges are: not reported as an empty
// queue with no lag during an outage.
func TestExtractionGaugesSkippedWhenUnreadable(t *testing.T) {
	a := openTestApp(t, modeltest.NewOpenAI(t))
	scrape := func() string {
		t.Helper()
		mfs, err := a.metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, mf := range mfs {
			if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
				t.Fatal(err)
			}
		}
		return b.String()
	}
	if text := scrape(); !strings.Contains(text, `tendril_queue_depth{queue="extraction"} 0`) || !strings.Contains(text, "tendril_memory_extraction_lag_seconds 0") {
		t.Fatalf("a readable queue is not reported:\n%s", text)
	}
	a.jobs.Close() // the queue's database is gone
	text := scrape()
	for _, gone := range []string{`tendril_queue_depth{queue="extraction"}`, "tendril_memory_extraction_lag_seconds "} {
		if strings.Contains(text, gone) {
			t.Errorf("%s reported while its source fails", gone)
		}
	}
	// A scrape counts its own skipped samples as it collects them, so the
	// count shows from the next scrape on.
	text = scrape()
	for _, src := range []string{"queue:extraction", "extraction_lag"} {
		if !strings.Contains(text, `tendril_metrics_source_errors_total{source="`+src+`"}`) {
			t.Errorf("the failure of %s is not counted:\n%s", src, text)
		}
	}
}
