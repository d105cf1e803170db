package main

import (
	"bytes"
	"context"
	"runtime/trace"
	"strings"
	"sync"
	"testing"
	"time"
)

// A trace of three turns, their regions run on the turn's goroutine and on
// another one of the same task, is read back: three turns, every region
// with its count, and a region of another goroutine counted in its turn.
func TestReadAndReport(t *testing.T) {
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("an execution trace is already running: %v", err)
	}
	for i := range 3 {
		ctx, task := trace.NewTask(context.Background(), "turn")
		trace.WithRegion(ctx, "model", func() { time.Sleep(time.Duration(i+1) * time.Millisecond) })
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			trace.WithRegion(ctx, "count turn", func() { time.Sleep(time.Millisecond) })
		}()
		trace.WithRegion(ctx, "append events", func() { wg.Wait() })
		task.End()
	}
	trace.Stop()

	turns, regions, err := read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 3 {
		t.Fatalf("%d turns, want 3", len(turns))
	}
	for _, name := range []string{"model", "count turn", "append events"} {
		if len(regions[name]) != 3 {
			t.Errorf("region %q seen %d times, want 3", name, len(regions[name]))
		}
	}
	for _, tr := range turns {
		if tr.regions["count turn"] < time.Millisecond {
			t.Errorf("a turn's region on another goroutine counted %v, want ≥ 1 ms", tr.regions["count turn"])
		}
		if tr.dur() < tr.regions["model"] {
			t.Errorf("turn %v shorter than its model region %v", tr.dur(), tr.regions["model"])
		}
	}
	var out bytes.Buffer
	report(&out, turns, regions, 0.02)
	for _, want := range []string{"3 turns", "| turn outside the model call |", "| count turn | 3 |", "the slowest 2 % (1 turns)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestReadRefusesWhatIsNotATrace(t *testing.T) {
	if _, _, err := read(strings.NewReader("not a trace")); err == nil {
		t.Fatal("read accepted text that is no trace")
	}
}

func TestQuantileIsNearestRank(t *testing.T) {
	v := []time.Duration{1, 2, 3}
	for q, want := range map[float64]time.Duration{0.5: 2, 0.9: 3, 0.99: 3, 0.01: 1} {
		if got := quantile(v, q); got != want {
			t.Errorf("quantile(%v, %v) = %v, want %v", v, q, got, want)
		}
	}
}
