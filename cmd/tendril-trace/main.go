// Command tendril-trace reads a Go execution trace of `tendril serve`
// (GET /debug/pprof/trace?seconds=N on TENDRIL_PPROF_ADDR) and prints
// where the turns' time went: each turn is a trace task named "turn", and
// its waits and stages are regions (internal/assistant, internal/agent,
// internal/memory/pipeline, internal/memory/sqlitestore).
//
// It prints, in Markdown:
//
//   - the turns' time, and their time outside the model call, at p50, p90
//     and p99 (ms, nearest rank); only turns that began and ended inside
//     the trace's window are counted;
//   - every region: count, p50, p99, max and total, whichever goroutine
//     ran it (background work included);
//   - for all turns and for the slowest 2 %, the mean time per turn in
//     each region, and the turn goroutine's time in each scheduler state
//     (running, runnable, waiting and why, in a system call) by region.
//
// Usage:
//
//	TENDRIL_PPROF_ADDR=127.0.0.1:6060 tendril serve &
//	curl -o turn.trace 'http://127.0.0.1:6060/debug/pprof/trace?seconds=20'
//	go run ./cmd/tendril-trace turn.trace
//
// The trace format and reader are golang.org/x/exp/trace's
// (https://pkg.go.dev/golang.org/x/exp/trace).
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"time"

	"golang.org/x/exp/trace"
)

// turn is one "turn" task: its span, the time in each region that ran
// under it (on any goroutine), and its own goroutine's time by region and
// scheduler state ("region|state").
type turn struct {
	g          trace.GoID
	start, end trace.Time
	regions    map[string]time.Duration
	states     map[string]time.Duration
}

func (t *turn) dur() time.Duration { return time.Duration(t.end - t.start) }

func main() {
	slowShare := flag.Float64("slow", 0.02, "share of the slowest turns to break down on their own, in (0, 1]")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: tendril-trace [-slow 0.02] FILE")
		flag.PrintDefaults()
	}
	flag.Parse()
	if !(*slowShare > 0 && *slowShare <= 1) {
		fmt.Fprintf(os.Stderr, "tendril-trace: -slow %v: want a share in (0, 1], e.g. 0.02 for the slowest 2 %%\n", *slowShare)
		os.Exit(2)
	}
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "tendril-trace:", err)
		os.Exit(1)
	}
	defer f.Close()
	turns, regions, err := read(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tendril-trace:", err)
		os.Exit(1)
	}
	if len(turns) == 0 {
		fmt.Fprintln(os.Stderr, "tendril-trace: no complete turn in the trace (was it taken from tendril serve while turns ran?)")
		os.Exit(1)
	}
	report(os.Stdout, turns, regions, *slowShare)
}

// read collects the complete "turn" tasks of the trace and the durations
// of every region.
func read(r io.Reader) ([]*turn, map[string][]time.Duration, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, nil, fmt.Errorf("read trace: %w", err)
	}
	open := map[trace.TaskID]*turn{} // by task, until it ends
	all := map[trace.TaskID]*turn{}  // by task, every turn seen
	onG := map[trace.GoID]*turn{}    // the turn whose goroutine this is
	stack := map[trace.GoID][]string{}
	starts := map[trace.GoID][]trace.Time{}
	last := map[trace.GoID]trace.Time{}
	state := map[trace.GoID]string{}
	regions := map[string][]time.Duration{}
	var done []*turn
	account := func(g trace.GoID, now trace.Time) {
		t := onG[g]
		if t == nil {
			return
		}
		if at, ok := last[g]; ok {
			reg := "(none)"
			if st := stack[g]; len(st) > 0 {
				reg = st[len(st)-1]
			}
			t.states[reg+"|"+state[g]] += time.Duration(now - at)
		}
		last[g] = now
	}
	for {
		ev, err := tr.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read trace: %w", err)
		}
		switch ev.Kind() {
		case trace.EventTaskBegin:
			if task := ev.Task(); task.Type == "turn" {
				t := &turn{g: ev.Goroutine(), start: ev.Time(), regions: map[string]time.Duration{}, states: map[string]time.Duration{}}
				open[task.ID], all[task.ID], onG[t.g] = t, t, t
				last[t.g], state[t.g] = ev.Time(), "running"
			}
		case trace.EventTaskEnd:
			task := ev.Task()
			if t, ok := open[task.ID]; ok {
				account(t.g, ev.Time())
				t.end = ev.Time()
				done = append(done, t)
				delete(onG, t.g)
				delete(open, task.ID)
			}
		case trace.EventRegionBegin:
			g := ev.Goroutine()
			account(g, ev.Time())
			stack[g] = append(stack[g], ev.Region().Type)
			starts[g] = append(starts[g], ev.Time())
		case trace.EventRegionEnd:
			g := ev.Goroutine()
			account(g, ev.Time())
			st := stack[g]
			if len(st) == 0 { // began before the trace did
				continue
			}
			stack[g] = st[:len(st)-1]
			t0 := starts[g][len(starts[g])-1]
			starts[g] = starts[g][:len(starts[g])-1]
			d := time.Duration(ev.Time() - t0)
			regions[ev.Region().Type] = append(regions[ev.Region().Type], d)
			if t := all[ev.Region().Task]; t != nil {
				t.regions[ev.Region().Type] += d
			}
		case trace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			g := st.Resource.Goroutine()
			if onG[g] == nil {
				continue
			}
			account(g, ev.Time())
			_, to := st.Goroutine()
			name := to.String()
			if to == trace.GoWaiting && st.Reason != "" {
				name += ": " + st.Reason
			}
			state[g] = name
		}
	}
	return done, regions, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

// quantile is the nearest-rank q-quantile of sorted (the smallest value
// with at least q of the values at or below it): with fewer than 100
// values, p99 is the largest.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func sortedKeys(m map[string]time.Duration) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return m[ks[i]] > m[ks[j]] || m[ks[i]] == m[ks[j]] && ks[i] < ks[j] })
	return ks
}

func report(w io.Writer, turns []*turn, regions map[string][]time.Duration, slowShare float64) {
	sort.Slice(turns, func(i, j int) bool { return turns[i].dur() < turns[j].dur() })
	var total, outside []time.Duration
	for _, t := range turns {
		total = append(total, t.dur())
		outside = append(outside, t.dur()-t.regions["model"])
	}
	sort.Slice(outside, func(i, j int) bool { return outside[i] < outside[j] })
	fmt.Fprintf(w, "%d turns\n\n| ms | p50 | p90 | p99 |\n|---|---|---|---|\n", len(turns))
	for _, row := range []struct {
		name string
		v    []time.Duration
	}{{"turn", total}, {"turn outside the model call", outside}} {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", row.name, ms(quantile(row.v, .5)), ms(quantile(row.v, .9)), ms(quantile(row.v, .99)))
	}
	fmt.Fprintf(w, "\n### Every region (ms)\n\n| region | n | p50 | p99 | max | total |\n|---|---|---|---|---|---|\n")
	names := make([]string, 0, len(regions))
	for k := range regions {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := regions[k]
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		var sum time.Duration
		for _, d := range v {
			sum += d
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s |\n", k, len(v), ms(quantile(v, .5)), ms(quantile(v, .99)), ms(v[len(v)-1]), ms(sum))
	}
	slow := max(1, int(float64(len(turns))*slowShare))
	breakdown(w, "all turns", turns)
	breakdown(w, fmt.Sprintf("the slowest %g %% (%d turns)", slowShare*100, slow), turns[len(turns)-slow:])
}

// breakdown prints the mean time per turn of set in each region, and of
// the turn's goroutine in each region and scheduler state.
func breakdown(w io.Writer, name string, set []*turn) {
	reg, st := map[string]time.Duration{}, map[string]time.Duration{}
	var sum time.Duration
	for _, t := range set {
		sum += t.dur()
		for k, v := range t.regions {
			reg[k] += v
		}
		for k, v := range t.states {
			st[k] += v
		}
	}
	n := time.Duration(len(set))
	fmt.Fprintf(w, "\n### %s: mean per turn %s ms\n\n| region | ms |\n|---|---|\n", name, ms(sum/n))
	for _, k := range sortedKeys(reg) {
		fmt.Fprintf(w, "| %s | %s |\n", k, ms(reg[k]/n))
	}
	fmt.Fprintf(w, "\n| region, state of the turn's goroutine | ms |\n|---|---|\n")
	for i, k := range sortedKeys(st) {
		if i == 20 {
			break
		}
		fmt.Fprintf(w, "| %s | %s |\n", k, ms(st[k]/n))
	}
}
