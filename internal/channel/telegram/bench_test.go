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

// paced runs op b.N times at rate per second and reports p50/p99 latency.
func paced(b *testing.B, rate int, op func(i int)) {
	interval := time.Second / time.Duration(rate)
	lat := make([]time.Duration, 0, b.N)
	next := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		start := time.Now()
		op(i)
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkWebhookAck measures the webhook's acknowledgement latency
// (verify secret, parse, commit to SQLite with synchronous=FULL, answer 200)
// at 100 updates/s while the chat workers process and reply, against a bare
// append+fsync of the same bodies to a file. Run with -benchtime=500x.
func BenchmarkWebhookAck(b *testing.B) {
	bodies := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = textUpdate(int64(1_000_000+i), 70001+int64(i%20), 70001+int64(i%20), fmt.Sprintf("message %d: water the petunias at seven, please", i))
		}
		return out
	}
	for _, workers := range []bool{true, false} {
		name := "webhook"
		if !workers {
			name = "webhook-no-workers"
		}
		b.Run(name, func(b *testing.B) {
			h := newHarness(b, func(o *Options) {
				o.Clock = nil
				o.AllowedChatIDs = nil
				for i := range 20 {
					o.AllowedChatIDs = append(o.AllowedChatIDs, 70001+int64(i))
				}
			})
			if workers {
				h.start()
			}
			bs := bodies(b.N)
			paced(b, 100, func(i int) {
				req := httptest.NewRequest(http.MethodPost, WebhookPath, strings.NewReader(bs[i]))
				req.Header.Set(SecretHeader, testSecret)
				rec := httptest.NewRecorder()
				h.ch.Handler().ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d", rec.Code)
				}
			})
		})
	}
	b.Run("fsync-append", func(b *testing.B) {
		f, err := os.OpenFile(filepath.Join(b.TempDir(), "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		bs := bodies(b.N)
		paced(b, 100, func(i int) {
			if _, err := f.WriteString(bs[i] + "\n"); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		})
	})
}
