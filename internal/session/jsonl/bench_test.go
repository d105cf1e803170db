package jsonl_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/jsonl"
)

// turn returns a typical turn: a user message and an assistant reply.
func turn(i int, parent string) []session.Node {
	u := fmt.Sprintf("u%08d", i)
	return []session.Node{
		{ID: u, ParentID: parent, Role: "user", Text: strings.Repeat("how should I water the fig tree? ", 3), Timestamp: 1710000000},
		{ID: fmt.Sprintf("a%08d", i), ParentID: u, Role: "assistant", Text: strings.Repeat("Water deeply once a week and let the top soil dry. ", 10), Timestamp: 1710000001},
	}
}

// BenchmarkAppendTurn compares a durable (FsyncAlways) Append of one turn
// with the floor: a bare write(2)+fsync(2) of the same bytes to an
// O_APPEND file.
func BenchmarkAppendTurn(b *testing.B) {
	b.Run("store=jsonl-always", func(b *testing.B) {
		st, _ := jsonl.Open(b.TempDir(), jsonl.Options{})
		defer st.Close()
		parent := ""
		i := 0
		for b.Loop() {
			nodes := turn(i, parent)
			if err := st.Append(ctx, key, nodes...); err != nil {
				b.Fatal(err)
			}
			parent = nodes[1].ID
			i++
		}
	})
	b.Run("baseline=write+fsync", func(b *testing.B) {
		f, err := os.OpenFile(filepath.Join(b.TempDir(), "x.jsonl"), os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		parent := ""
		i := 0
		for b.Loop() {
			nodes := turn(i, parent)
			var buf []byte
			for _, n := range nodes {
				line, _ := json.Marshal(n)
				buf = append(append(buf, line...), '\n')
			}
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			parent = nodes[1].ID
			i++
		}
	})
}

var (
	bigMu   sync.Mutex
	bigDirs = map[int]string{}
)

// branchySession builds (once per size) a session of n nodes: a main chain
// with a 4-node side branch off an earlier node every 100 nodes; the
// active leaf ends the main chain.
func branchySession(b *testing.B, n int) string {
	bigMu.Lock()
	defer bigMu.Unlock()
	if d, ok := bigDirs[n]; ok {
		return d
	}
	dir, err := os.MkdirTemp("", "tendril-bench-")
	if err != nil {
		b.Fatal(err)
	}
	st, _ := jsonl.Open(dir, jsonl.Options{Fsync: jsonl.FsyncNever})
	batch := make([]session.Node, 0, 1000)
	parent, made := "", 0
	flush := func() {
		// The batch may end on a side branch: Append takes the first
		// node's parent to be the active leaf.
		if leaf, _ := st.Leaf(ctx, key); leaf != "" && leaf != batch[0].ParentID {
			if err := st.SetLeaf(ctx, key, batch[0].ParentID); err != nil {
				b.Fatal(err)
			}
		}
		if err := st.Append(ctx, key, batch...); err != nil {
			b.Fatal(err)
		}
		batch = batch[:0]
	}
	for made < n {
		id := fmt.Sprintf("m%08d", made)
		batch = append(batch, session.Node{ID: id, ParentID: parent, Role: []string{"user", "assistant"}[made%2], Text: "a short chat message of about sixty characters, give or take", Timestamp: 1710000000})
		made++
		if made%100 == 0 && made+4 < n {
			side := id
			for j := 0; j < 4; j++ {
				sid := fmt.Sprintf("s%08d-%d", made, j)
				batch = append(batch, session.Node{ID: sid, ParentID: side, Role: "user", Text: "a sibling branch that must not leak", Timestamp: 1710000000})
				side = sid
				made++
			}
		}
		parent = id
		if len(batch) >= 900 {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
	if err := st.SetLeaf(ctx, key, parent); err != nil {
		b.Fatal(err)
	}
	st.Close()
	bigDirs[n] = dir
	return dir
}

// BenchmarkContext50 builds a 50-message context from sessions of 10k and
// 1M nodes with branches; the time should not depend on the size.
func BenchmarkContext50(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			dir := branchySession(b, n)
			st, _ := jsonl.Open(dir, jsonl.Options{})
			defer st.Close()
			if _, err := st.Leaf(ctx, key); err != nil { // load outside the timer
				b.Fatal(err)
			}
			lim := session.Limits{MaxHistoryMessages: 50}
			defer reportCPU(b)()
			for b.Loop() {
				got, err := session.BuildContext(ctx, st, key, lim)
				if err != nil || len(got) != 50 {
					b.Fatalf("%d nodes, %v", len(got), err)
				}
			}
		})
	}
}

// BenchmarkLoad100MB loads (indexes) a ~100 MB session file from the page
// cache; MB/s is the load throughput.
func BenchmarkLoad100MB(b *testing.B) {
	dir, err := os.MkdirTemp("", "tendril-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, _ := jsonl.Open(dir, jsonl.Options{Fsync: jsonl.FsyncNever})
	parent := ""
	for i := 0; ; i++ {
		var batch []session.Node
		for j := 0; j < 500; j++ {
			nodes := turn(i*500+j, parent)
			parent = nodes[1].ID
			batch = append(batch, nodes...)
		}
		if err := st.Append(ctx, key, batch...); err != nil {
			b.Fatal(err)
		}
		if fi, _ := os.Stat(jsonl.PathFor(dir, key)); fi.Size() >= 100<<20 {
			b.SetBytes(fi.Size())
			break
		}
	}
	st.Close()
	defer reportCPU(b)()
	for b.Loop() {
		st, _ := jsonl.Open(dir, jsonl.Options{})
		if leaf, err := st.Leaf(ctx, key); err != nil || leaf != parent {
			b.Fatalf("leaf %q, %v", leaf, err)
		}
		st.Close()
	}
}

// reportCPU adds cpu-ns/op (user+system CPU time of the process per op)
// and, when SetBytes was called, cpu-MB/s: on a shared, oversubscribed
// machine CPU time is steadier than wall time.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		cpu := cpuTime() - start
		if b.N == 0 || cpu <= 0 {
			return
		}
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAppendTurnPaired interleaves the two sides of BenchmarkAppendTurn
// in every iteration, so disk and CPU noise hit both alike; it reports
// store-ns/op, baseline-ns/op and their ratio.
func BenchmarkAppendTurnPaired(b *testing.B) {
	dir := b.TempDir()
	st, _ := jsonl.Open(dir, jsonl.Options{})
	defer st.Close()
	f, err := os.OpenFile(filepath.Join(dir, "baseline.jsonl"), os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var storeT, baseT time.Duration
	parent, i := "", 0
	for b.Loop() {
		nodes := turn(i, parent)
		t0 := time.Now()
		if err := st.Append(ctx, key, nodes...); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		var buf []byte
		for _, n := range nodes {
			line, _ := json.Marshal(n)
			buf = append(append(buf, line...), '\n')
		}
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		storeT += t1.Sub(t0)
		baseT += time.Since(t1)
		parent = nodes[1].ID
		i++
	}
	b.ReportMetric(float64(storeT.Nanoseconds())/float64(b.N), "store-ns/op")
	b.ReportMetric(float64(baseT.Nanoseconds())/float64(b.N), "baseline-ns/op")
	b.ReportMetric(float64(storeT)/float64(baseT), "ratio")
}

// BenchmarkLoadedIndexHeap reports the heap a loaded session's index holds
// per node (heap-B/node: live heap after loading, less before, over the
// nodes), for IDs as session.NewNodeID makes them and for hand-written
// ones. Every loaded session keeps this index, so it is what a session's
// history costs in memory while the session is open.
func BenchmarkLoadedIndexHeap(b *testing.B) {
	for _, v := range []struct {
		name string
		id   func(i int) string
	}{
		{"generated", func(int) string { return session.NewNodeID() }},
		{"hand", func(i int) string { return fmt.Sprintf("node-%08d", i) }},
	} {
		b.Run(v.name, func(b *testing.B) {
			const turns = 20000
			dir := b.TempDir()
			st, _ := jsonl.Open(dir, jsonl.Options{Fsync: jsonl.FsyncNever})
			parent := ""
			var batch []session.Node
			for i := 0; i < turns; i++ {
				u, a := v.id(2*i), v.id(2*i+1)
				batch = append(batch,
					session.Node{ID: u, ParentID: parent, Role: "user", Text: "how should I water the fig tree?", Timestamp: 1710000000},
					session.Node{ID: a, ParentID: u, Role: "assistant", Text: "Water deeply once a week.", Timestamp: 1710000001})
				parent = a
				if len(batch) == 1000 {
					if err := st.Append(ctx, key, batch...); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			st.Close()
			var perNode float64
			var load time.Duration
			for b.Loop() {
				before := liveHeap()
				t0 := time.Now()
				st, _ := jsonl.Open(dir, jsonl.Options{})
				if leaf, err := st.Leaf(ctx, key); err != nil || leaf != parent {
					b.Fatalf("leaf %q, %v", leaf, err)
				}
				load += time.Since(t0)
				perNode = float64(liveHeap()-before) / (2 * turns)
				st.Close()
			}
			b.ReportMetric(perNode, "heap-B/node")
			b.ReportMetric(float64(load.Microseconds())/1000/float64(b.N), "load-ms")
		})
	}
}

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
