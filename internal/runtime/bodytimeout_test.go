package runtime

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
)

// TestStalledBodyTimesOut: a client that declares a body and stops
// sending gets 408 once BodyReadTimeout passes, instead of holding the
// connection open.
func TestStalledBodyTimesOut(t *testing.T) {
	old := BodyReadTimeout
	BodyReadTimeout = 200 * time.Millisecond
	t.Cleanup(func() { BodyReadTimeout = old })
	ts := newTestServer(t, &recInvoker{}, Options{})
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second)) // the test's own bound, far above the server's
	if _, err := c.Write([]byte("POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"mess")); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response to a stalled body: %v", err)
	}
	if res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", res.StatusCode)
	}
}

// slowInvoker waits d, then fails if the turn's context was cancelled.
type slowInvoker struct{ d time.Duration }

func (c slowInvoker) Invoke(ctx context.Context, req agent.Request) (*agent.Result, error) {
	select {
	case <-time.After(c.d):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &agent.Result{Text: "done", SessionID: req.SessionID}, nil
}

// TestTurnOutlivesBodyDeadline: the body deadline covers only the body;
// a turn that runs ten times longer still answers.
func TestTurnOutlivesBodyDeadline(t *testing.T) {
	old := BodyReadTimeout
	BodyReadTimeout = 100 * time.Millisecond
	t.Cleanup(func() { BodyReadTimeout = old })
	ts := newTestServer(t, slowInvoker{d: 10 * BodyReadTimeout}, Options{})
	res, out := post(t, ts.URL, `{"message":"slow","user_id":"api:u"}`, nil)
	if res.StatusCode != http.StatusOK || out["text"] != "done" {
		t.Fatalf("%d %v, want 200 done", res.StatusCode, out)
	}
}
