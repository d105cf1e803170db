package mcp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/tool/mcp/mcptest"
)

// A server that cannot be reached is retried after a doubling backoff,
// and used again as soon as it is back and the window has passed.
func TestConnectBackoff(t *testing.T) {
	var mu sync.Mutex
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "starting up", http.StatusServiceUnavailable)
	})
	attempts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		cur := h
		attempts++
		mu.Unlock()
		cur.ServeHTTP(w, r)
	}))
	defer srv.Close()

	m := NewManager(map[string]ServerConfig{"s": {URL: srv.URL}}, nil)
	defer m.Close()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	m.servers[0].now = func() time.Time { return now }
	ctx := context.Background()

	if _, err := m.Tools(ctx); err == nil || errors.Is(err, ErrBackoff) {
		t.Fatalf("first: err = %v, want a connect error", err)
	}
	mu.Lock()
	h = mcptest.NewHTTPHandler()
	before := attempts
	mu.Unlock()
	if _, err := m.Tools(ctx); !errors.Is(err, ErrBackoff) {
		t.Fatalf("inside the window: err = %v, want ErrBackoff", err)
	}
	mu.Lock()
	if attempts != before {
		t.Fatalf("a request was sent inside the backoff window")
	}
	mu.Unlock()
	now = now.Add(1100 * time.Millisecond)
	tools, err := m.Tools(ctx)
	if err != nil || len(tools) != 7 {
		t.Fatalf("after the window: %d tools, %v", len(tools), err)
	}
	if m.servers[0].failures != 0 {
		t.Fatal("failures not reset after success")
	}
}
