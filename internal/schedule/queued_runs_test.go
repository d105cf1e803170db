package schedule_test

import (
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/schedule/scheduletest"
)

// Removing or pausing a job deletes its queued River run (SQLite).
func TestRemovedAndPausedJobsLeaveNoQueuedRun(t *testing.T) {
	e := newEnv(t, time.Now())
	scheduletest.ExerciseQueuedRuns(t, e.store)
}
