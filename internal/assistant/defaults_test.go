package assistant

import (
	"testing"

	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
)

// The defaults config stores for a 0 (so that doctor shows them) are the
// ones the stores and the retriever would take for a 0.
func TestConfigDefaultsMatchTheStores(t *testing.T) {
	if config.DefaultEventWindow != sqlitestore.DefaultEventWindow {
		t.Errorf("config.DefaultEventWindow %d, sqlitestore's %d", config.DefaultEventWindow, sqlitestore.DefaultEventWindow)
	}
	d := config.Default().Memory
	if d.TopK != memory.DefaultTopK || d.RetrieveTimeout.D() != memory.DefaultRetrieveTimeout {
		t.Errorf("config topK %d, retrieveTimeout %v; memory's %d, %v", d.TopK, d.RetrieveTimeout.D(), memory.DefaultTopK, memory.DefaultRetrieveTimeout)
	}
}
