package main

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/testenv"
)

// BenchmarkInstances measures turn throughput through /invocations with
// 1 and with 3 `tendril serve` instances on one PostgreSQL database (issue
// 12), side by side in one run: 32 sessions, each sending its turns one
// after another at instances in rotation, against an echoing fake model.
// Run with
//
//	go test -run '^$' -bench Instances -benchtime 640x ./cmd/tendril
func BenchmarkInstances(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			db := testenv.PostgresSchema(b) + "&pool_max_conns=8"
			fake := modeltest.NewOpenAI(b)
			fake.Otherwise(func(s modeltest.Seen) modeltest.Reply { return modeltest.Reply{Text: "ok " + s.LastUserText()} })
			env := append(openAIEnv(fake), "TENDRIL_DATABASE_URL="+db)
			var procs []*proc
			for range n {
				home := b.TempDir()
				procs = append(procs, startServe(b, home, env...))
			}
			const sessions = 32
			per := (b.N + sessions - 1) / sessions
			lat := make([]time.Duration, 0, sessions*per)
			var mu sync.Mutex
			var wg sync.WaitGroup
			b.ResetTimer()
			t0 := time.Now()
			for s := range sessions {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := range per {
						p := procs[(s+k)%n]
						t := time.Now()
						st, out, err := tryInvoke(p.URL, map[string]any{"message": fmt.Sprint("turn ", k), "user_id": fmt.Sprint("api:b", s), "session_id": "s"})
						d := time.Since(t)
						if err != nil || st != 200 || out["ok"] != true {
							b.Errorf("turn: %d %v %v", st, out, err)
							return
						}
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(t0)
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			if len(lat) == 0 {
				return
			}
			b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "turns/s")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
