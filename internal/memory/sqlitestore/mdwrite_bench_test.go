package sqlitestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// procWriteBytes is this process's write_bytes of /proc/self/io: bytes it
// caused to reach the storage layer (Markdown files, memory.db and its
// WAL).
func procWriteBytes(tb testing.TB) int64 {
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

// BenchmarkMergeWriteBytes holds one actor with 1,000 or 4,000 semantic
// records and merges into an existing record per iteration, as
// consolidation does for a duplicate (a new source, statedAt and
// UpdatedAt). It reports the bytes that reach storage per merge
// (B-written/op, /proc/self/io, fsync on as by default: Markdown, memory.db
// and its WAL) and the size of semantic.md at the end (KiB-semantic.md).
func BenchmarkMergeWriteBytes(b *testing.B) {
	for _, n := range []int{1000, 4000} {
		b.Run("records="+strconv.Itoa(n), func(b *testing.B) { benchRecordWrites(b, n, true) })
	}
}

// BenchmarkInsertWriteBytes is BenchmarkMergeWriteBytes with a new record
// per iteration instead of a merge: what a merge is compared with.
func BenchmarkInsertWriteBytes(b *testing.B) {
	benchRecordWrites(b, 1000, false)
}

func benchRecordWrites(b *testing.B, n int, merge bool) {
	dir := b.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	ns := "/main/a/long_term/"
	t0 := time.Now().Add(-time.Hour).UTC()
	fact := func(i int) memory.Record {
		return memory.Record{Namespace: ns, Strategy: memory.StrategySemantic,
			Content:   fmt.Sprintf("%s (fact %d about the user's garden, pets and weekend plans)", soakTexts[i%len(soakTexts)], i),
			Metadata:  map[string]any{"topic": "topic-" + strconv.Itoa(i%97), "statedAt": t0},
			CreatedAt: t0.Add(time.Duration(i) * time.Millisecond), Sources: []string{"ev_" + strconv.Itoa(i)}}
	}
	batch := make([]memory.Record, 0, n)
	for i := 0; i < n; i++ {
		batch = append(batch, fact(i))
	}
	recs, err := s.PutBatch(ctx, batch)
	if err != nil {
		b.Fatal(err)
	}
	w0 := procWriteBytes(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !merge {
			if _, err := s.Put(ctx, fact(n+i)); err != nil {
				b.Fatal(err)
			}
			continue
		}
		j := (i * 7919) % n
		r := recs[j]
		r.Sources = append(append([]string(nil), r.Sources...), "ev_m"+strconv.Itoa(i))
		if len(r.Sources) > 8 {
			r.Sources = r.Sources[len(r.Sources)-8:]
		}
		md := map[string]any{}
		for k, v := range r.Metadata {
			md[k] = v
		}
		md["statedAt"] = t0.Add(time.Duration(i) * time.Second)
		r.Metadata = md
		r.UpdatedAt = time.Time{}
		put, err := s.Put(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		recs[j] = put
	}
	b.StopTimer()
	b.ReportMetric(float64(procWriteBytes(b)-w0)/float64(b.N), "B-written/op")
	if st, err := os.Stat(filepath.Join(dir, "memory", "a", "semantic.md")); err == nil {
		b.ReportMetric(float64(st.Size())/1024, "KiB-semantic.md")
	}
}
