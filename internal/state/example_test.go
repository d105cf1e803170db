package state_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/tendrilai/tendril/internal/state"
)

func Example() {
	dir, _ := os.MkdirTemp("", "state")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	e, _ := state.Open(dir, state.Options{Now: func() time.Time { return now }})
	ctx := context.Background()

	ev, _ := e.Observe(ctx, "telegram:1", 1, "this is useless, it failed again!!")
	fmt.Println(ev.Stimulus.Category, ev.Level)
	ev, _ = e.Observe(ctx, "telegram:1", 2, "고마워, 덕분에 해결했어")
	fmt.Println(ev.Stimulus.Category, ev.Level)

	now = now.Add(2 * time.Hour) // lazy decay toward baseline, computed on read
	s, _ := e.Snapshot(ctx, "telegram:1")
	fmt.Printf("stability %.2f (baseline %.2f), %d changes recorded\n", s.Values[state.Stability], s.Baseline[state.Stability], len(s.History))
	// Output:
	// frustration NORMAL
	// connection NORMAL
	// stability 0.75 (baseline 0.75), 2 changes recorded
}
