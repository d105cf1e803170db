package search

import (
	"testing"
	"time"
)

// BenchmarkResolveRelative is the relative-time pass an index build runs
// on every document (convDoc), over the LoCoMo turns: one op resolves
// every turn of the conversations.
func BenchmarkResolveRelative(b *testing.B) {
	var texts []string
	for _, c := range loadLocomo(b) {
		for _, sess := range c.Turns {
			for _, t := range sess {
				texts = append(texts, t.Text)
			}
		}
	}
	ref := time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC)
	found := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		found = 0
		for _, t := range texts {
			found += len(ResolveRelative(t, ref))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(texts)), "ns/text")
	b.ReportMetric(float64(found), "resolved")
}
