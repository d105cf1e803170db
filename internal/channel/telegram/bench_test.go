package telegram

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func quantileMS(lat []time.Duration, p float64) float64 {
	s := slices.Clone(lat)
	slices.Sort(s)
	return float64(s[int(p*float64(len(s)-1))].Microseconds()) / 1000
}

// BenchmarkWebhookAck measures the webhook's acknowledgement latency
// (verify the secret, parse, commit to SQLite with synchronous=FULL, answer
// 200) at 100 updates/s while the chat workers process and reply through
// the fake Bot API. Side by side, in the same ticks (alternating which goes
// first), it measures a bare append+fsync of the same body to a file: the
// floor for any "persist before 200" design. Run with -benchtime=1000x.
func BenchmarkWebhookAck(b *testing.B) {
	h := newHarness(b, func(o *Options) {
		o.Clock = nil
		o.AllowedChatIDs = nil
		for i := range 20 {
			o.AllowedChatIDs = append(o.AllowedChatIDs, 70001+int64(i))
		}
	})
	h.start()
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	bodies := make([]string, b.N)
	for i := range bodies {
		chat := 70001 + int64(i%20)
		bodies[i] = textUpdate(int64(1_000_000+i), chat, chat, fmt.Sprintf("message %d: water the petunias at seven, please", i))
	}
	webhook := func(i int) time.Duration {
		start := time.Now()
		req := httptest.NewRequest(http.MethodPost, WebhookPath, strings.NewReader(bodies[i]))
		req.Header.Set(SecretHeader, testSecret)
		rec := httptest.NewRecorder()
		h.ch.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
		return time.Since(start)
	}
	appendSync := func(i int) time.Duration {
		start := time.Now()
		if _, err := f.WriteString(bodies[i] + "\n"); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var wl, fl []time.Duration
	interval := time.Second / 100
	next := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		if i%2 == 0 {
			wl = append(wl, webhook(i))
			fl = append(fl, appendSync(i))
		} else {
			fl = append(fl, appendSync(i))
			wl = append(wl, webhook(i))
		}
	}
	b.StopTimer()
	b.ReportMetric(quantileMS(wl, 0.50), "webhook-p50-ms")
	b.ReportMetric(quantileMS(wl, 0.99), "webhook-p99-ms")
	b.ReportMetric(quantileMS(fl, 0.50), "fsync-p50-ms")
	b.ReportMetric(quantileMS(fl, 0.99), "fsync-p99-ms")
	b.ReportMetric(0, "ns/op")
}
