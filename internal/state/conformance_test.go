package state_test

import (
	"testing"

	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/state/statetest"
)

func fileHarness(opts state.FileOptions) statetest.Harness {
	return statetest.Harness{
		Open: func(t *testing.T) state.Backend {
			b, err := state.NewFileBackend(t.TempDir(), opts)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		Reopen: func(t *testing.T, b state.Backend) state.Backend {
			nb, err := state.NewFileBackend(b.(*state.FileBackend).Dir(), opts)
			if err != nil {
				t.Fatal(err)
			}
			return nb
		},
	}
}

func TestFileBackendConformance(t *testing.T) {
	statetest.Exercise(t, fileHarness(state.FileOptions{NoSync: true}))
}

// Compacting after every other line exercises the snapshot path on every
// subtest.
func TestFileBackendConformanceCompacting(t *testing.T) {
	statetest.Exercise(t, fileHarness(state.FileOptions{NoSync: true, CompactEvery: 2}))
}

// With fsync, as an embedded install without NoSync runs.
func TestFileBackendConformanceSync(t *testing.T) {
	if testing.Short() {
		t.Skip("fsync per turn")
	}
	statetest.Exercise(t, fileHarness(state.FileOptions{}))
}
