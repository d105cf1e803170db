package dashboard

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Sign-in throttle: per client IP (the connection's address: behind a
// reverse proxy every client shares the proxy's), the first
// signinFreeFails wrong tokens are free; each further one locks the IP
// out of POST /signin for a delay doubling from one second up to
// signinMaxDelay. An attempt while locked out answers 429 with
// Retry-After and is not checked. A right token clears the IP's record;
// a record with no failure for signinForget is forgotten.
const (
	signinFreeFails  = 5
	signinMaxDelay   = 5 * time.Minute
	signinForget     = 15 * time.Minute
	signinMaxTracked = 10000 // IPs; past it expired records are dropped, then all
	signinFirstDelay = time.Second
)

type signinThrottle struct {
	mu sync.Mutex
	m  map[string]*signinFails
}

type signinFails struct {
	n     int       // failures in a row
	last  time.Time // the latest failure
	until time.Time // locked out before this
}

// wait returns how long ip is still locked out (0: it may try).
func (t *signinThrottle) wait(ip string, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.m[ip]
	if f == nil || !now.Before(f.until) {
		return 0
	}
	return f.until.Sub(now)
}

// fail records a wrong token from ip.
func (t *signinThrottle) fail(ip string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*signinFails{}
	}
	f := t.m[ip]
	if f != nil && now.Sub(f.last) > signinForget {
		f = nil
	}
	if f == nil {
		if len(t.m) >= signinMaxTracked {
			t.prune(now)
		}
		f = &signinFails{}
		t.m[ip] = f
	}
	f.n++
	f.last = now
	if over := f.n - signinFreeFails; over > 0 {
		d := signinMaxDelay
		if over <= 20 && signinFirstDelay<<(over-1) < signinMaxDelay {
			d = signinFirstDelay << (over - 1)
		}
		f.until = now.Add(d)
	}
}

// ok clears ip's record after a right token.
func (t *signinThrottle) ok(ip string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, ip)
}

// prune drops forgotten records, or every record when all are live
// (memory stays bounded; a flood of addresses only resets the counts).
func (t *signinThrottle) prune(now time.Time) {
	for ip, f := range t.m {
		if now.Sub(f.last) > signinForget && !now.Before(f.until) {
			delete(t.m, ip)
		}
	}
	if len(t.m) >= signinMaxTracked {
		clear(t.m)
	}
}

// clientIP is the connection's remote host.
func clientIP(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}
