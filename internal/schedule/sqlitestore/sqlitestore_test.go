package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/schedule/scheduletest"
	"github.com/tendrilai/tendril/internal/schedule/sqlitestore"
)

func TestConformance(t *testing.T) {
	scheduletest.Exercise(t, func(t *testing.T) schedule.Store {
		s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "schedule", "jobs.db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
