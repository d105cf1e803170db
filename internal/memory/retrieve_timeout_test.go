package memory_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// blockingStore's Search waits for its context: a store that hangs.
type blockingStore struct {
	memory.Store
	mu      sync.Mutex
	queries []string
}

func (b *blockingStore) Search(ctx context.Context, q memory.Query) ([]memory.Hit, error) {
	b.mu.Lock()
	b.queries = append(b.queries, q.Text)
	b.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

// Retrieval owns the timeout and the never-fail rule: a hanging store
// gives no memory and no error once the timeout passes, and the metrics
// callback sees the failure. A blank message searches the fallback query.
func TestRecallTimeoutAndFallbackQuery(t *testing.T) {
	st := &blockingStore{}
	var stats []memory.RetrieveStats
	r := memory.NewRetriever(st, memory.RetrieveOptions{Timeout: 30 * time.Millisecond, NoStanding: true,
		Metrics: func(s memory.RetrieveStats) { stats = append(stats, s) }})
	hits, err := r.Recall(context.Background(), "main", "api:u", "   ")
	if err != nil || hits != nil {
		t.Fatalf("Recall = %v, %v; want no hits and no error", hits, err)
	}
	if len(stats) != 1 || !stats[0].Failed || r.Failures() != 1 {
		t.Fatalf("stats %+v failures %d", stats, r.Failures())
	}
	// Each scope is searched on its own goroutine; wait until both asked.
	var qs []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		st.mu.Lock()
		qs = append([]string(nil), st.queries...)
		st.mu.Unlock()
		if len(qs) == 2 {
			break
		}
	}
	if len(qs) != 2 {
		t.Fatalf("searched %d scopes, want 2", len(qs))
	}
	for _, q := range qs {
		if q != memory.DefaultFallbackQuery {
			t.Fatalf("searched %q for a blank message, want the fallback query", q)
		}
	}
}
