package sqlitestore

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/schedule"
)

func benchStore(b *testing.B, n int) (*Store, []schedule.Job) {
	b.Helper()
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "jobs.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	var js []schedule.Job
	for i := 0; i < n; i++ {
		j, err := schedule.NewJob(schedule.JobSpec{Name: fmt.Sprint(i), Every: "1h", Task: "t", ActorID: "a"}, t0)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Create(context.Background(), j); err != nil {
			b.Fatal(err)
		}
		js = append(js, j)
	}
	return s, js
}

// BenchmarkClaimFinish is one run's store work: claim the slot, then record
// the outcome (two conditional UPDATEs).
func BenchmarkClaimFinish(b *testing.B) {
	s, js := benchStore(b, 100)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := &js[i%len(js)]
		now := j.NextRun
		ok, err := s.Claim(ctx, schedule.Claim{ID: j.ID, NextRun: j.NextRun, Owner: "a", Now: now, Until: now.Add(time.Minute)})
		if err != nil || !ok {
			b.Fatalf("claim %v %v", ok, err)
		}
		j.NextRun = j.NextRun.Add(time.Hour)
		if err := s.Finish(ctx, j.ID, "a", schedule.Outcome{NextRun: j.NextRun, LastRun: now, Status: schedule.StatusActive}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareUpdates is the baseline: two unconditional single-row
// UPDATEs by primary key on the same table.
func BenchmarkBareUpdates(b *testing.B) {
	s, js := benchStore(b, 100)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := js[i%len(js)].ID
		for k := 0; k < 2; k++ {
			if _, err := s.db.ExecContext(ctx, `UPDATE jobs SET attempts = attempts + 1 WHERE id = ?`, id); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkContendedClaim: two store handles on one file (two
// "instances") race for the same job's runs. Each op is one attempt: read
// the slot, claim it, and if won finish it. wins/op shows the share won.
func BenchmarkContendedClaim(b *testing.B) {
	path := filepath.Join(b.TempDir(), "jobs.db")
	ctx := context.Background()
	var stores []*Store
	for k := 0; k < 2; k++ {
		s, err := Open(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	j, _ := schedule.NewJob(schedule.JobSpec{Every: "1h", Task: "t", ActorID: "a"}, time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	if err := stores[0].Create(ctx, j); err != nil {
		b.Fatal(err)
	}
	var wins atomic.Int64
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		st := stores[next.Add(1)%2]
		owner := fmt.Sprint("o", next.Add(1))
		for pb.Next() {
			cur, err := st.Get(ctx, j.ID)
			if err != nil {
				b.Fatal(err)
			}
			ok, err := st.Claim(ctx, schedule.Claim{ID: j.ID, NextRun: cur.NextRun, Owner: owner, Now: cur.NextRun, Until: cur.NextRun.Add(time.Minute)})
			if err != nil {
				b.Fatal(err)
			}
			if ok {
				wins.Add(1)
				if err := st.Finish(ctx, j.ID, owner, schedule.Outcome{NextRun: cur.NextRun.Add(time.Hour), Status: schedule.StatusActive}); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.ReportMetric(float64(wins.Load())/float64(b.N), "wins/op")
	got, _ := stores[0].Get(ctx, j.ID)
	if slots := got.NextRun.Sub(j.NextRun) / time.Hour; int64(slots) != wins.Load() {
		b.Fatalf("%d wins but %d slots advanced: a slot was won twice", wins.Load(), slots)
	}
}
