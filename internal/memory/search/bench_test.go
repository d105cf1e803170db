package search

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// locomoConv is the part of a LoCoMo conversation the benchmarks use.
type locomoConv struct {
	ID    string
	Turns [][]locomoTurn // per session
	Dates []string       // per session, "8 May 2023"
	Qs    []string
}

type locomoTurn struct {
	Speaker, Text, Caption string
}

var sessionKey = regexp.MustCompile(`^session_(\d+)$`)

// loadLocomo reads the LoCoMo conversations of LOCOMO_DATA (default
// /work/shared/data/locomo/locomo-dev.json), skipping tb when absent.
func loadLocomo(tb testing.TB) []locomoConv {
	tb.Helper()
	path := os.Getenv("LOCOMO_DATA")
	if path == "" {
		path = "/work/shared/data/locomo/locomo-dev.json"
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Skipf("LoCoMo data not readable (set LOCOMO_DATA): %v", err)
	}
	var samples []struct {
		SampleID     string                     `json:"sample_id"`
		Conversation map[string]json.RawMessage `json:"conversation"`
		QA           []struct {
			Question string `json:"question"`
		} `json:"qa"`
	}
	if err := json.Unmarshal(raw, &samples); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	var out []locomoConv
	for _, s := range samples {
		c := locomoConv{ID: s.SampleID}
		var nums []int
		for k := range s.Conversation {
			if m := sessionKey.FindStringSubmatch(k); m != nil {
				var n int
				fmt.Sscan(m[1], &n)
				nums = append(nums, n)
			}
		}
		sort.Ints(nums)
		for _, n := range nums {
			var turns []struct {
				Speaker string `json:"speaker"`
				Text    string `json:"text"`
				Caption string `json:"blip_caption"`
			}
			if err := json.Unmarshal(s.Conversation[fmt.Sprintf("session_%d", n)], &turns); err != nil {
				tb.Fatalf("%s session %d: %v", s.SampleID, n, err)
			}
			var date string
			json.Unmarshal(s.Conversation[fmt.Sprintf("session_%d_date_time", n)], &date)
			if i := strings.Index(date, " on "); i >= 0 {
				date = strings.ReplaceAll(date[i+4:], ",", "")
			}
			var ts []locomoTurn
			for _, t := range turns {
				ts = append(ts, locomoTurn{t.Speaker, t.Text, t.Caption})
			}
			c.Turns = append(c.Turns, ts)
			c.Dates = append(c.Dates, date)
		}
		for _, q := range s.QA {
			c.Qs = append(c.Qs, q.Question)
		}
		out = append(out, c)
	}
	return out
}

// locomoDocs is the event documents of the conversations, repeated copies
// times (each copy its own sessions and keys), built as the stores build
// them: text plus caption, the previous and next turn of the session as
// context, speaker, date words, session as group.
func locomoDocs(convs []locomoConv, copies int) []Doc {
	var docs []Doc
	eachLocomoDoc(convs, copies, func(d Doc) { docs = append(docs, d) })
	return docs
}

// eachLocomoDoc calls add with each document of locomoDocs, made just
// before (its key a new string, as the stores make them).
func eachLocomoDoc(convs []locomoConv, copies int, add func(Doc)) {
	for c := 0; c < copies; c++ {
		for _, conv := range convs {
			for s, turns := range conv.Turns {
				for i, t := range turns {
					text := t.Text
					if t.Caption != "" {
						text += " " + t.Caption
					}
					var ctx []string
					if i > 0 {
						ctx = append(ctx, turns[i-1].Text)
					}
					if i+1 < len(turns) {
						ctx = append(ctx, turns[i+1].Text)
					}
					add(Doc{Text: text, Context: strings.Join(ctx, "\n"), Speaker: t.Speaker,
						Date: conv.Dates[s], Group: fmt.Sprintf("%d/%s/%d", c, conv.ID, s),
						// as memindex.EventKey: "1", timestamp, event ID
						Key: fmt.Sprintf("1%s.%09d%s-%d-%04d-%04d", "2023-05-08T13:56:00", i, conv.ID, c, s, i)})
				}
			}
		}
	}
}

func heapAlloc() uint64 {
	var ms runtime.MemStats
	for i := 0; i < 2; i++ {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkIndexMemory indexes about 20,000 LoCoMo turns (the dev
// conversations repeated 8 times, each turn with its neighbours as
// context) with DefaultParams and reports the heap the index holds after
// GC: MiB-heap in all and B/doc per document. Each document is made just
// before its Add and dropped after, so what the index keeps of it (its key)
// counts, as in the stores. Run with -benchtime 1x.
func BenchmarkIndexMemory(b *testing.B) {
	convs := loadLocomo(b)
	var ix *Index
	var before, after uint64
	n := 0
	for i := 0; i < b.N; i++ {
		ix, n = nil, 0
		before = heapAlloc()
		ix = NewIndex(DefaultParams())
		eachLocomoDoc(convs, 8, func(d Doc) { ix.Add(d); n++ })
		after = heapAlloc()
	}
	b.StopTimer()
	held := float64(after) - float64(before)
	b.ReportMetric(float64(n), "docs")
	b.ReportMetric(held/(1<<20), "MiB-heap")
	b.ReportMetric(held/float64(n), "B/doc")
	runtime.KeepAlive(ix)
}

// benchWords and benchSentence mirror the records of the pgstore
// retrieval benchmark: a 25-word vocabulary, 6–19 words per record.
var benchWords = []string{"fig", "tomato", "organic", "fertiliser", "aphids", "basil", "water", "rust", "petunia", "rose",
	"pruning", "compost", "Busan", "balcony", "raised", "beds", "drainage", "비료", "토마토를", "물", "Caroline", "Melanie", "2023", "May", "yesterday"}

func benchSentence(rng *rand.Rand, n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = benchWords[rng.Intn(len(benchWords))]
	}
	return strings.Join(out, " ")
}

// syntheticIndex is n record documents like the pgstore benchmark's.
func syntheticIndex(n int) *Index {
	rng := rand.New(rand.NewSource(1))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ix := NewIndex(DefaultParams())
	for i := 0; i < n; i++ {
		t := base.Add(time.Duration(i) * time.Minute)
		ix.Add(Doc{Text: benchSentence(rng, 6+rng.Intn(14)), Date: t.Format("2 January 2006 Monday"), Key: fmt.Sprintf("0%s%06d", t.Format("20060102150405.000000000"), i)})
	}
	return ix
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportLatency adds p50 and p99 of lat and the p99 of min3 (ms).
func reportLatency(b *testing.B, lat, min3 []time.Duration) {
	pct := func(lat []time.Duration, p float64) float64 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Nanoseconds()) / 1e6
	}
	b.ReportMetric(pct(lat, 0.50), "p50-ms")
	b.ReportMetric(pct(lat, 0.99), "p99-ms")
	b.ReportMetric(pct(min3, 0.99), "p99-min3-ms")
}

// BenchmarkSearch times SearchScope (top 50) over 100,000 synthetic
// records (the pgstore benchmark's records and queries, index only) and
// over the LoCoMo turns of BenchmarkIndexMemory with their questions. Each
// query runs 3 times: the first timing is the latency (p50-ms, p99-ms); the
// fastest of the 3 (p99-min3-ms) filters out preemption by other processes
// on a shared machine, and cpu-ms/search (the process's CPU time, GC
// included, per search) does not count waiting for a core.
func BenchmarkSearch(b *testing.B) {
	run := func(b *testing.B, ix *Index, qs []string) {
		sc := ix.NewScope(nil)
		cpu0 := cpuTime()
		lat, min3 := timeSearches(b, func(i int) { ix.SearchScope(qs[i%len(qs)], sc, 50) })
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/1e6/float64(3*b.N), "cpu-ms/search")
		reportLatency(b, lat, min3)
	}
	b.Run("synthetic/n=100000", func(b *testing.B) {
		run(b, syntheticIndex(100_000), []string{"organic fertiliser for the fig tree", "When did Caroline water the basil?", "토마토 비료", "compost drainage"})
	})
	b.Run("locomo", func(b *testing.B) {
		convs := loadLocomo(b)
		ix := NewIndex(DefaultParams())
		for _, d := range locomoDocs(convs, 8) {
			ix.Add(d)
		}
		var qs []string
		for _, c := range convs {
			qs = append(qs, c.Qs...)
		}
		rand.New(rand.NewSource(1)).Shuffle(len(qs), func(i, j int) { qs[i], qs[j] = qs[j], qs[i] })
		run(b, ix, qs)
	})
}

// timeSearches runs search(i) three times for each of b.N iterations
// between ResetTimer and StopTimer: lat holds each first run's time, min3
// the fastest of the three (see BenchmarkSearch).
func timeSearches(b *testing.B, search func(i int)) (lat, min3 []time.Duration) {
	lat = make([]time.Duration, 0, b.N)
	min3 = make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var best time.Duration
		for r := range 3 {
			t0 := time.Now()
			search(i)
			d := time.Since(t0)
			if r == 0 {
				lat = append(lat, d)
			}
			if r == 0 || d < best {
				best = d
			}
		}
		min3 = append(min3, best)
	}
	b.StopTimer()
	return lat, min3
}
