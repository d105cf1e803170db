package assistant

import (
	"testing"

	"github.com/tendrilai/tendril/internal/config"
)

// TestMemoryStoreOptionsCarryTheConfig: memory.cacheMB and
// memory.eventWindow reach the embedded store's options.
func TestMemoryStoreOptionsCarryTheConfig(t *testing.T) {
	t.Setenv("TENDRIL_HOME", t.TempDir())
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Memory.CacheMB, cfg.Memory.EventWindow = 7, 300
	o := MemoryStoreOptions(cfg)
	if o.CacheBytes != 7<<20 || o.EventWindow != 300 {
		t.Fatalf("options: cache %d, window %d; want %d, 300", o.CacheBytes, o.EventWindow, 7<<20)
	}
}
