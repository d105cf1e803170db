package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/schedule/pgstore"
)

func benchJobs(b *testing.B) (string, *pgstore.Store, []schedule.Job) {
	url := freshSchemaTB(b)
	s, err := pgstore.Open(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	var js []schedule.Job
	for i := 0; i < 100; i++ {
		j, _ := schedule.NewJob(schedule.JobSpec{Name: fmt.Sprint(i), Every: "1h", Task: "t", ActorID: "a"}, time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
		if err := s.Create(context.Background(), j); err != nil {
			b.Fatal(err)
		}
		js = append(js, j)
	}
	return url, s, js
}

// BenchmarkClaimFinish is one run's store work on Postgres: claim + finish.
func BenchmarkClaimFinish(b *testing.B) {
	_, s, js := benchJobs(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := &js[i%len(js)]
		now := j.NextRun
		if ok, err := s.Claim(ctx, schedule.Claim{ID: j.ID, NextRun: j.NextRun, Owner: "a", Now: now, Until: now.Add(time.Minute)}); err != nil || !ok {
			b.Fatalf("claim %v %v", ok, err)
		}
		j.NextRun = j.NextRun.Add(time.Hour)
		if err := s.Finish(ctx, j.ID, "a", schedule.Outcome{NextRun: j.NextRun, LastRun: now, Status: schedule.StatusActive}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareUpdates is the baseline: two unconditional primary-key
// UPDATEs on the same table through the same kind of pool.
func BenchmarkBareUpdates(b *testing.B) {
	url, _, js := benchJobs(b)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := 0; k < 2; k++ {
			if _, err := pool.Exec(ctx, `UPDATE schedule_jobs SET attempts = attempts + 1 WHERE id = $1`, js[i%len(js)].ID); err != nil {
				b.Fatal(err)
			}
		}
	}
}
