package main

import (
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/runtime"
)

// TestServerAdded reads back what the server writes (runtime.ServerTiming)
// and refuses headers without a usable "tendril" duration.
func TestServerAdded(t *testing.T) {
	h := runtime.ServerTiming(100*time.Millisecond, 103250*time.Microsecond)
	if d, ok := serverAdded(h); !ok || d != 3250*time.Microsecond {
		t.Fatalf("serverAdded(%q) = %v, %v; want 3.25ms", h, d, ok)
	}
	for _, bad := range []string{"", "model;dur=3", "tendril", "tendril;dur=x", "tendril;dur=-1", "total;dur=5, tendrils;dur=2"} {
		if d, ok := serverAdded(bad); ok {
			t.Errorf("serverAdded(%q) = %v, want none", bad, d)
		}
	}
}
