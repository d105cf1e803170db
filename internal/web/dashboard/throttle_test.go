package dashboard

import (
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/config"
)

// TestSigninThrottleDelays: five failures are free, then each failure
// locks the IP out for 1 s, 2 s, 4 s, … up to 5 min; other IPs are not
// affected; success clears the record; a long quiet spell forgets it.
func TestSigninThrottleDelays(t *testing.T) {
	var th signinThrottle
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < signinFreeFails; i++ {
		th.fail("a", now)
		if w := th.wait("a", now); w != 0 {
			t.Fatalf("failure %d: locked %v", i+1, w)
		}
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		th.fail("a", now)
		if w := th.wait("a", now); w != want {
			t.Fatalf("failure %d: wait %v, want %v", signinFreeFails+i+1, w, want)
		}
		if w := th.wait("b", now); w != 0 {
			t.Fatalf("another IP locked %v", w)
		}
		now = now.Add(want) // the lock has passed
		if w := th.wait("a", now); w != 0 {
			t.Fatalf("after the delay: still locked %v", w)
		}
	}
	for i := 0; i < 40; i++ {
		th.fail("a", now)
	}
	if w := th.wait("a", now); w != signinMaxDelay {
		t.Fatalf("capped wait %v, want %v", w, signinMaxDelay)
	}
	th.ok("a")
	if w := th.wait("a", now); w != 0 {
		t.Fatalf("after success: %v", w)
	}
	for i := 0; i <= signinFreeFails; i++ {
		th.fail("c", now)
	}
	now = now.Add(signinForget + time.Minute)
	th.fail("c", now) // counted afresh: the first of five free failures
	if w := th.wait("c", now); w != 0 {
		t.Fatalf("old failures not forgotten: %v", w)
	}
	// Memory stays bounded.
	for i := 0; i < signinMaxTracked+10; i++ {
		th.fail(strings.Repeat("x", i%7)+string(rune('a'+i%26))+time.Duration(i).String(), now)
	}
	if n := len(th.m); n > signinMaxTracked {
		t.Fatalf("%d records tracked, bound %d", n, signinMaxTracked)
	}
}

type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *stepClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// TestSigninThrottled: over HTTP, the sixth wrong token locks the client
// out with 429 and Retry-After, even for the right token, until the delay
// passes; a blank or padded token is handled like TENDRIL_AUTH_TOKEN.
func TestSigninThrottled(t *testing.T) {
	const token = "s3cret-token-value"
	ap := newApp(t, func(cfg *config.Config) { cfg.AuthToken = token })
	clock := &stepClock{t: time.Now()}
	d, err := New(ap.a, Options{AuthToken: token, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	t.Cleanup(func() { srv.Close(); d.Close() })
	jar, _ := cookiejar.New(nil)
	c := noRedirect(jar)
	signin := func(tok string) *http.Response {
		resp, _ := postForm(t, c, srv.URL+"/signin", url.Values{"token": {tok}}, nil)
		return resp
	}
	if resp := signin("   "); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("blank token: %d", resp.StatusCode)
	}
	for i := 1; i < signinFreeFails; i++ {
		if resp := signin("wrong"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d", i, resp.StatusCode)
		}
	}
	if resp := signin("wrong"); resp.StatusCode != http.StatusUnauthorized { // the sixth failure: locks
		t.Fatalf("sixth wrong token: %d", resp.StatusCode)
	}
	resp := signin(token)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("while locked out: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	clock.add(time.Second)
	if resp := signin(" " + token + "\n"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("right token after the delay: %d", resp.StatusCode)
	}
	// Success cleared the record: five more free failures.
	for i := 0; i < signinFreeFails; i++ {
		if resp := signin("wrong"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("after success, wrong token %d: %d", i+1, resp.StatusCode)
		}
	}
}
