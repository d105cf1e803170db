package main

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
)

// TestE2EDefaultMemoryLimit: tendril serve, with neither GOMEMLIMIT nor
// AUTOMEMLIMIT set, gives the Go runtime the soft limit memoryLimitMB
// defaults to (4 × memory.cacheMB + 128 MiB), seen from outside in
// /metrics; TENDRIL_MEMORY_LIMIT_MB=-1 removes it.
func TestE2EDefaultMemoryLimit(t *testing.T) {
	limit := func(extra ...string) float64 {
		t.Helper()
		p := startServe(t, testHome(t), append([]string{"TENDRIL_MEMORY_CACHE_MB=16"}, extra...)...)
		defer p.kill()
		resp, err := http.Get(p.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := regexp.MustCompile(`(?m)^go_gc_gomemlimit_bytes (\S+)$`).FindSubmatch(body)
		if m == nil {
			t.Fatalf("/metrics lacks go_gc_gomemlimit_bytes:\n%s", body)
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	const want = (4*16 + 128) << 20
	if got := limit(); got < want || got > want+4096 {
		t.Errorf("default soft memory limit = %.0f bytes, want %d (192 MiB)", got, want)
	}
	if got := limit("TENDRIL_MEMORY_LIMIT_MB=-1"); got <= want+4096 {
		t.Errorf("TENDRIL_MEMORY_LIMIT_MB=-1: soft memory limit = %.0f bytes, want none (or the cgroup's share)", got)
	}
}
