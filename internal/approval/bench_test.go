package approval

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool"
)

// benchDir is on the same disk as the repo unless TENDRIL_BENCH_DIR says
// otherwise (t.TempDir may be tmpfs, where fsync is free).
func benchDir(b *testing.B) string {
	base := os.Getenv("TENDRIL_BENCH_DIR")
	if base == "" {
		base = filepath.Join("testdata", "bench-tmp")
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		b.Fatal(err)
	}
	d, err := os.MkdirTemp(base, "b")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(d); os.Remove(base) })
	return d
}

var benchCall = Call{AgentID: "main", ActorID: "telegram:12345", SessionID: "telegram:12345:main", Channel: "telegram",
	Tool: "weather", Class: tool.ClassRead, Args: json.RawMessage(`{"city":"Seoul","days":3,"units":"metric"}`)}

// BenchmarkGateCheckAppend: one tool call through the gate — canonical args
// hash, effective rule, and a fsynced, hash-chained ledger append under the
// cross-process lock.
func BenchmarkGateCheckAppend(b *testing.B) {
	g, err := Open(benchDir(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	ctx := b.Context()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, err := g.Check(ctx, benchCall, state.Normal)
		if err != nil || d.Verdict != Allow {
			b.Fatal(d, err)
		}
	}
}

// BenchmarkBareFsyncAppend is the baseline: append a line of the same size
// as a ledger execute entry to a file and fsync it.
func BenchmarkBareFsyncAppend(b *testing.B) {
	dir := benchDir(b)
	g, _ := Open(filepath.Join(dir, "probe"), Options{})
	g.Check(b.Context(), benchCall, state.Normal)
	line, _ := os.ReadFile(g.Path())
	g.Close()
	f, err := os.OpenFile(filepath.Join(dir, "bare.jsonl"), os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.Write(line); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGateVsBare interleaves the two on the same disk, one gate call
// then one bare append per iteration, so disk noise hits both alike; it
// reports each mean and their ratio (the target is ≤ 1.5).
func BenchmarkGateVsBare(b *testing.B) {
	dir := benchDir(b)
	g, err := Open(filepath.Join(dir, "gate"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	ctx := b.Context()
	g.Check(ctx, benchCall, state.Normal)
	line, _ := os.ReadFile(g.Path())
	f, err := os.OpenFile(filepath.Join(dir, "bare.jsonl"), os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var gateT, bareT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if d, err := g.Check(ctx, benchCall, state.Normal); err != nil || d.Verdict != Allow {
			b.Fatal(d, err)
		}
		t1 := time.Now()
		if _, err := f.Write(line); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		gateT += t1.Sub(t0)
		bareT += t2.Sub(t1)
	}
	b.ReportMetric(float64(gateT.Nanoseconds())/float64(b.N), "gate-ns/call")
	b.ReportMetric(float64(bareT.Nanoseconds())/float64(b.N), "bare-ns/append")
	b.ReportMetric(float64(gateT)/float64(bareT), "ratio")
}

// BenchmarkGateCPU is the gate's own work without fsync: what it adds on
// top of the disk.
func BenchmarkGateCPU(b *testing.B) {
	g, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	g.noSync = true
	defer g.Close()
	ctx := b.Context()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d, err := g.Check(ctx, benchCall, state.Normal); err != nil || d.Verdict != Allow {
			b.Fatal(d, err)
		}
	}
}

// BenchmarkVerify measures full ledger verification (parse, canonical
// check, hash, chain, semantics) in entries per second, over a ledger of
// mixed entries (execute, result, request, decision).
func BenchmarkVerify(b *testing.B) {
	dir := b.TempDir()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	g, err := Open(dir, Options{Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	g.noSync = true
	ctx := b.Context()
	write := benchCall
	write.Tool, write.Class = "notes_write", tool.ClassWrite
	const n = 2000
	for i := 0; i < n/4; i++ {
		d, _ := g.Check(ctx, benchCall, state.Normal)
		g.RecordResult(ctx, *d.Exec, "sunny", nil)
		a, _ := g.Check(ctx, write, state.Normal)
		g.Decide(ctx, a.Request.ID, true, "cli")
	}
	g.Close()
	data, _ := os.ReadFile(filepath.Join(dir, "ledger.jsonl"))
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep := VerifyBytes(data, "bench")
		if !rep.OK || rep.Entries != n {
			b.Fatalf("%+v", rep)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "entries/s")
}
