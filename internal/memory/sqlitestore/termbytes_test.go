package sqlitestore

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// TestEstimateCountsUniqueTerms: text made of words never seen before
// (pasted logs, random identifiers, a hostile client) grows the ranking
// index's term dictionary by each new word, not only its postings. The
// store's estimate (what Options.CacheBytes bounds) must follow the live
// heap for such text as it does for conversation. It used to count an
// eighth of it here (8.1 MB for 66.7 MB): the term dictionary was not
// counted at all, and the process-wide stem cache (search.stem) held
// 200,000 words, about 28 MB, outside any budget.
func TestEstimateCountsUniqueTerms(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap of about 30 MB of index")
	}
	s, err := Open(t.TempDir(), Options{NoFsync: true, SyncInterval: -1, CacheBytes: -1, EventWindow: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		b := make([]byte, 6+rng.IntN(6))
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
		}
		return string(b)
	}
	t0 := time.Now().Add(-time.Hour)
	appendTurns := func(from, n int) {
		for i := from; i < from+n; i++ {
			words := make([]string, 2000)
			for j := range words {
				words[j] = word()
			}
			if err := s.AppendEvents(bg, []memory.Event{{ActorID: "u", SessionID: "s", Role: "user", Text: strings.Join(words, " "), Timestamp: t0.Add(time.Duration(i) * time.Second)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendTurns(0, 1)
	if _, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "anything"}); err != nil { // builds the index
		t.Fatal(err)
	}
	s.waitCompaction("u")
	runtime.GC()
	runtime.GC()
	live0, est0 := liveHeap(), s.cachedBytes()
	appendTurns(1, 120)
	s.waitCompaction("u")
	if _, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "anything"}); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC()
	live, est := liveHeap()-live0, s.cachedBytes()-est0

	ratio := float64(est) / float64(live)
	t.Logf("240,000 unique words: live heap +%.1f MB, estimate +%.1f MB (%.2f×)", float64(live)/1e6, float64(est)/1e6, ratio)
	if ratio < 0.7 || ratio > 1.5 {
		t.Fatalf("estimate %.1f MB for %.1f MB of live heap (%.2f×): want within 0.7–1.5×", float64(est)/1e6, float64(live)/1e6, ratio)
	}
	runtime.KeepAlive(s)
}
