package sqlitestore

import (
	"testing"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/memorytest"
)

func TestConformance(t *testing.T) {
	memorytest.Exercise(t, func(t *testing.T) memory.Store {
		s, err := Open(t.TempDir(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestConformanceTinyWindow runs the suite with an event window of 2, so
// that nearly every event the suite writes goes cold (tier.go) and is
// read back through SQLite and FTS5.
func TestConformanceTinyWindow(t *testing.T) {
	memorytest.Exercise(t, func(t *testing.T) memory.Store {
		s, err := Open(t.TempDir(), Options{EventWindow: 2})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestConformanceTinyRecordWindow runs the suite with a record window of 1
// and an event window of 2, so that nearly every record and event the
// suite writes goes cold (rtier.go, tier.go) and is read back, listed,
// changed and searched through SQLite and FTS5.
func TestConformanceTinyRecordWindow(t *testing.T) {
	memorytest.Exercise(t, func(t *testing.T) memory.Store {
		s, err := Open(t.TempDir(), Options{RecordWindow: 1, EventWindow: 2})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
