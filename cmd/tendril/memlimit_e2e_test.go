package main

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// serveGauges starts tendril serve with env and returns the named gauges
// of its /metrics.
func serveGauges(t *testing.T, names []string, env ...string) []float64 {
	t.Helper()
	p := startServe(t, testHome(t), env...)
	defer p.kill()
	resp, err := http.Get(p.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	out := make([]float64, len(names))
	for i, name := range names {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(body)
		if m == nil {
			t.Fatalf("/metrics lacks %s:\n%s", name, body)
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = v
	}
	return out
}

// TestE2EDefaultMemoryLimit: tendril serve, with neither GOMEMLIMIT nor
// AUTOMEMLIMIT set, gives the Go runtime the soft limit memoryLimitMB
// defaults to (4 × memory.cacheMB + 128 MiB), seen from outside in
// /metrics; TENDRIL_MEMORY_LIMIT_MB=-1 removes it. Without GOGC the
// collector's target adapts to the live heap: 100 for an idle server's
// small heap, minGCPercent once the heap passes twice the headroom (a
// headroom of 1 MiB here); GOGC wins.
func TestE2EDefaultMemoryLimit(t *testing.T) {
	names := []string{"go_gc_gomemlimit_bytes", "go_gc_gogc_percent"}
	const want = (4*16 + 128) << 20
	g := serveGauges(t, names, "TENDRIL_MEMORY_CACHE_MB=16", "GOGC=", gcHeadroomEnv+"=")
	if got := g[0]; got < want || got > want+4096 {
		t.Errorf("default soft memory limit = %.0f bytes, want %d (192 MiB)", got, want)
	}
	if g[1] != 100 {
		t.Errorf("default GOGC of an idle server = %v, want 100 (its live heap is far below %d MiB)", g[1], gcHeadroomBytes>>20)
	}
	g = serveGauges(t, names, "GOGC=", gcHeadroomEnv+"=1")
	if g[1] != minGCPercent {
		t.Errorf("GOGC with a headroom of 1 MiB = %v, want %d", g[1], minGCPercent)
	}
	g = serveGauges(t, names, "TENDRIL_MEMORY_CACHE_MB=16", "TENDRIL_MEMORY_LIMIT_MB=-1", "GOGC=120")
	if got := g[0]; got <= want+4096 {
		t.Errorf("TENDRIL_MEMORY_LIMIT_MB=-1: soft memory limit = %.0f bytes, want none (or the cgroup's share)", got)
	}
	if g[1] != 120 {
		t.Errorf("GOGC=120: collector target = %v, want 120", g[1])
	}
	_, stderr, code := runCLI(t, testHome(t), []string{"GOGC=", gcHeadroomEnv + "=0"}, "serve", "--addr", "127.0.0.1:0")
	if code == 0 || !strings.Contains(stderr, gcHeadroomEnv+`="0": want a whole number`) {
		t.Errorf("%s=0: exit %d, stderr %q; want a refusal naming it", gcHeadroomEnv, code, stderr)
	}
	// A GOGC the runtime would silently read as 100 stops serve instead.
	_, stderr, code = runCLI(t, testHome(t), []string{"GOGC=abc"}, "serve", "--addr", "127.0.0.1:0")
	if code == 0 || !strings.Contains(stderr, `GOGC="abc": want off or a whole number`) {
		t.Errorf("GOGC=abc: exit %d, stderr %q; want a refusal naming it", code, stderr)
	}
}
