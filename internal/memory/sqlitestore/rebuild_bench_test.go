package sqlitestore

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// appendTurns appends n turns (a user and an assistant event) of one
// actor, one session, starting at t0.
func appendTurns(tb testing.TB, s *Store, actor string, t0 time.Time, n int) {
	tb.Helper()
	ctx := context.Background()
	for i := 0; i < n; i += 50 {
		var evs []memory.Event
		for j := i; j < min(i+50, n); j++ {
			ts := t0.Add(time.Duration(j) * time.Millisecond)
			evs = append(evs,
				memory.Event{ActorID: actor, SessionID: "s" + strconv.Itoa(j/100), Role: "user", Text: soakTexts[j%len(soakTexts)] + " " + strconv.Itoa(j), Timestamp: ts},
				memory.Event{ActorID: actor, SessionID: "s" + strconv.Itoa(j/100), Role: "assistant", Text: "echo: " + soakTexts[(j+1)%len(soakTexts)], Timestamp: ts.Add(time.Microsecond)})
		}
		if err := s.AppendEvents(ctx, evs); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkActorRebuild is what the next turn of an evicted actor pays:
// each iteration drops the actor from the cache, then searches it (load
// from the index, build of the ranking index, search). Compare with
// BenchmarkWarmSearch.
func BenchmarkActorRebuild(b *testing.B) {
	for _, turns := range []int{1000, 10000} {
		b.Run("events="+strconv.Itoa(2*turns), func(b *testing.B) {
			s := rebuildStore(b, turns)
			defer s.Close()
			q := memory.Query{Text: "painting by the lake", NamespacePath: "/main/a/", TopK: 10}
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				s.mu.Lock()
				delete(s.actors, "a")
				s.mu.Unlock()
				if _, err := s.Search(context.Background(), q); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "ms-cpu/op")
		})
	}
}

// BenchmarkWarmSearch is one search of a cached actor, for comparison with
// BenchmarkActorRebuild.
func BenchmarkWarmSearch(b *testing.B) {
	for _, turns := range []int{1000, 10000} {
		b.Run("events="+strconv.Itoa(2*turns), func(b *testing.B) {
			s := rebuildStore(b, turns)
			defer s.Close()
			q := memory.Query{Text: "painting by the lake", NamespacePath: "/main/a/", TopK: 10}
			if _, err := s.Search(context.Background(), q); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if _, err := s.Search(context.Background(), q); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "ms-cpu/op")
		})
	}
}

func rebuildStore(b *testing.B, turns int) *Store {
	s, err := Open(b.TempDir(), Options{NoFsync: true, SyncInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	appendTurns(b, s, "a", time.Now().Add(-time.Hour), turns)
	return s
}

// cpuTime is the process's user+system CPU time in nanoseconds (every
// goroutine, the collector's included): steadier than wall time on a
// shared machine.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
