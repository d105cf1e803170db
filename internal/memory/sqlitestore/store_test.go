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
