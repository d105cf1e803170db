package sqlitestore

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// writeBytes is this process's write_bytes of /proc/self/io: bytes it
// caused to reach the storage layer.
func writeBytes(tb testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		tb.Skip("no /proc/self/io")
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "write_bytes: "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	tb.Skip("no write_bytes")
	return 0
}

var soakTexts = []string{
	"I went to the LGBTQ support group yesterday and it was so powerful.",
	"That sounds amazing! What did you learn there about the adoption agencies?",
	"My kids love painting; we did a sunset over the lake last weekend.",
	"I'm thinking of running a charity race for mental health next month in Busan.",
}

// BenchmarkTurnWriteBytes appends one turn (a user and an assistant event)
// per iteration to one actor and reports the bytes that reach storage per
// turn (Markdown log, memory.db and its WAL).
func BenchmarkTurnWriteBytes(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	turn := func(i int) {
		ts := t0.Add(time.Duration(i) * time.Millisecond)
		evs := []memory.Event{
			{ActorID: "a", SessionID: "s", Role: "user", Text: soakTexts[i%len(soakTexts)] + " " + strconv.Itoa(i), Timestamp: ts},
			{ActorID: "a", SessionID: "s", Role: "assistant", Text: "echo: " + soakTexts[i%len(soakTexts)], Timestamp: ts.Add(time.Microsecond)},
		}
		if err := s.AppendEvents(ctx, evs); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 200; i++ {
		turn(i)
	}
	w0 := writeBytes(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		turn(200 + i)
	}
	b.StopTimer()
	b.ReportMetric(float64(writeBytes(b)-w0)/float64(b.N), "B-written/turn")
}

// BenchmarkActorHeap appends b.N turns (a user and an assistant event) to
// one actor, searches it, and reports the live heap after a GC: the
// memory one actor's history holds (events, ranking index).
// Run with -benchtime 10000x.
func BenchmarkActorHeap(b *testing.B) {
	s, err := Open(b.TempDir(), Options{NoFsync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	q := memory.Query{Text: "painting by the lake", NamespacePath: "/main/a/", TopK: 10}
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	t0 := time.Now().Add(-time.Hour)
	for i := 0; i < b.N; i++ {
		ts := t0.Add(time.Duration(i) * time.Millisecond)
		if err := s.AppendEvents(ctx, []memory.Event{
			{ActorID: "a", SessionID: "s", Role: "user", Text: soakTexts[i%len(soakTexts)] + " " + strconv.Itoa(i), Timestamp: ts},
			{ActorID: "a", SessionID: "s", Role: "assistant", Text: "echo: " + soakTexts[i%len(soakTexts)] + " " + strconv.Itoa(i), Timestamp: ts.Add(time.Microsecond)},
		}); err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			if _, err := s.Search(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := s.Search(ctx, q); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	runtime.GC()
	debug.FreeOSMemory()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(m1.HeapInuse-m0.HeapInuse)/(1<<20), "MiB-heap")
	if p := os.Getenv("HEAP_PROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		pprof.WriteHeapProfile(f)
		f.Close()
	}
}
