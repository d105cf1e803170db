package runtime

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
)

// ReadinessChecker is implemented by an Invoker that can tell whether a
// turn could run now (*assistant.Assistant): GET /readyz asks it.
type ReadinessChecker interface {
	// CheckReady returns nil when a turn could run now, else why not
	// (wrapping agent.ErrNotReady). ctx bounds it.
	CheckReady(ctx context.Context) error
}

const (
	// readyTTL is how long GET /readyz reuses an answer, so that probes
	// (or anyone, it needs no token) cannot hammer the database.
	readyTTL = time.Second
	// readyTimeout bounds one check: a database that does not answer
	// within it is not ready.
	readyTimeout = 2 * time.Second
)

// readiness runs a check at most once per readyTTL; callers that arrive
// while it runs wait for its answer instead of starting their own.
type readiness struct {
	check func(ctx context.Context) error
	now   func() time.Time
	log   *slog.Logger

	mu      sync.Mutex
	checked bool
	at      time.Time
	err     error
	running chan struct{} // closed when the check in flight ends; nil when none
}

func newReadiness(check func(ctx context.Context) error, log *slog.Logger) *readiness {
	return &readiness{check: check, now: time.Now, log: log}
}

// get returns the last answer when younger than readyTTL, else checks.
func (r *readiness) get(ctx context.Context) error {
	r.mu.Lock()
	for {
		if r.checked && r.now().Sub(r.at) < readyTTL {
			err := r.err
			r.mu.Unlock()
			return err
		}
		if r.running == nil {
			break
		}
		ch := r.running
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		r.mu.Lock()
	}
	ch := make(chan struct{})
	r.running = ch
	r.mu.Unlock()

	var err error
	defer func() {
		r.mu.Lock()
		was := !r.checked || r.err == nil
		r.checked, r.at, r.err, r.running = true, r.now(), err, nil
		r.mu.Unlock()
		close(ch)
		switch {
		case was && err != nil:
			r.log.Warn("not ready", "err", err)
		case !was && err == nil:
			r.log.Info("ready again")
		}
	}()
	// A probe that hangs up does not cut short the check others wait for.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readyTimeout)
	defer cancel()
	err = r.check(cctx)
	return err
}

// handleReady serves GET /readyz: 200 {"status":"ready"} when a turn
// could run now, else 503 {"status":"not_ready","reason"} with a short
// reason that names the dependency but not how it is reached.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if s.shutting.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not_ready", "reason": "shutting down"})
		return
	}
	if err := s.ready.get(r.Context()); err != nil {
		reason := strings.TrimPrefix(SafeMessage(err), agent.ErrNotReady.Error()+": ")
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not_ready", "reason": reason})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
}
