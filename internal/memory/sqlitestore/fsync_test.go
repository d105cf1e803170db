package sqlitestore

import (
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// With FsyncEvery (session.fsync "batch") an append is not fsynced on the
// turn's path: the flusher does it later, each file once however many
// appends it got, and Close flushes what is left. Without it every append
// is fsynced before it returns.
func TestFsyncEvery(t *testing.T) {
	var mu sync.Mutex
	synced := map[string]int{}
	old := syncFile
	syncFile = func(path string) { mu.Lock(); synced[path]++; mu.Unlock() }
	t.Cleanup(func() { syncFile = old })
	count := func() (files, calls int) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range synced {
			files++
			calls += n
		}
		return
	}
	appendThree := func(s *Store) {
		t.Helper()
		for i := range 3 {
			if err := s.AppendEvents(bg, []memory.Event{{ActorID: "api:f", SessionID: "s", Role: "user", Text: "fig " + string(rune('a'+i)), Timestamp: time.Now()}}); err != nil {
				t.Fatal(err)
			}
		}
	}

	s, err := Open(t.TempDir(), Options{SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	appendThree(s)
	if _, calls := count(); calls < 3 {
		t.Fatalf("default policy: %d fsyncs for 3 appends, want one each", calls)
	}
	s.Close()

	synced = map[string]int{}
	s, err = Open(t.TempDir(), Options{SyncInterval: -1, FsyncEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	appendThree(s)
	if _, calls := count(); calls != 0 {
		t.Fatalf("batch policy: %d fsyncs on the appends' path, want none", calls)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if files, calls := count(); files == 0 || calls != files {
		t.Fatalf("after Close: %d fsyncs of %d files, want each appended file once", calls, files)
	}
}
