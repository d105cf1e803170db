package runtime

import (
	"sync"
	"time"
)

// Status values of GET /ping (AgentCore Runtime contract).
const (
	StatusHealthy     = "Healthy"
	StatusHealthyBusy = "HealthyBusy"
)

// Tracker counts in-flight work (turns and background jobs) and remembers
// when the /ping status last changed. time_of_last_update changes only when
// the status flips between Healthy and HealthyBusy.
type Tracker struct {
	mu       sync.Mutex
	inFlight int
	changed  time.Time
	now      func() time.Time
}

// NewTracker returns an idle tracker; now defaults to time.Now.
func NewTracker(now func() time.Time) *Tracker {
	if now == nil {
		now = time.Now
	}
	return &Tracker{changed: now(), now: now}
}

// Begin marks one unit of work in flight; call the returned func when it
// ends. The func is idempotent.
func (t *Tracker) Begin() func() {
	t.mu.Lock()
	t.inFlight++
	if t.inFlight == 1 {
		t.changed = t.now()
	}
	t.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			t.inFlight--
			if t.inFlight == 0 {
				t.changed = t.now()
			}
			t.mu.Unlock()
		})
	}
}

// Status returns the /ping status and the unix second it last changed.
func (t *Tracker) Status() (string, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inFlight > 0 {
		return StatusHealthyBusy, t.changed.Unix()
	}
	return StatusHealthy, t.changed.Unix()
}
