package runtime

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/model"
)

type recInvoker struct {
	mu   sync.Mutex
	reqs []agent.Request
	err  error
	wait chan struct{}
}

func (r *recInvoker) Invoke(ctx context.Context, req agent.Request) (*agent.Result, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	if r.wait != nil {
		<-r.wait
	}
	if r.err != nil {
		return nil, r.err
	}
	return &agent.Result{Text: strings.Repeat("reply to "+req.Message+" ", 40), SessionID: req.SessionID, TurnID: "turn_1", MemoriesUsed: 2}, nil
}

func newTestServer(t *testing.T, inv agent.Invoker, opt Options) *httptest.Server {
	t.Helper()
	opt.Invoker = inv
	s, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func post(t *testing.T, url, body string, hdr map[string]string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/invocations", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp, out
}

func TestInvocationsContract(t *testing.T) {
	inv := &recInvoker{}
	ts := newTestServer(t, inv, Options{MaxBodyBytes: 1024})
	cases := []struct {
		name   string
		body   string
		hdr    map[string]string
		status int
		code   string
	}{
		{"ok", `{"message":"hi","actor_id":"telegram:1"}`, nil, 200, ""},
		{"user_id alias", `{"message":"hi","user_id":"u2"}`, nil, 200, ""},
		{"bad json", `{"message":`, nil, 400, "INVALID_REQUEST"},
		{"not an object", `[1,2]`, nil, 400, "INVALID_REQUEST"},
		{"missing message", `{"actor_id":"a"}`, nil, 400, "INVALID_REQUEST"},
		{"missing actor", `{"message":"hi"}`, nil, 400, "INVALID_ACTOR_ID"},
		{"control chars in actor", `{"message":"hi","actor_id":"a\u0000b"}`, nil, 400, "INVALID_ACTOR_ID"},
		{"bad base64", `{"message":"hi","actor_id":"a","images":[{"data":"!!","media_type":"image/png"}]}`, nil, 400, "INVALID_REQUEST"},
		{"too large", `{"message":"` + strings.Repeat("x", 2000) + `","actor_id":"a"}`, nil, 413, "INVALID_REQUEST"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, out := post(t, ts.URL, tc.body, tc.hdr)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (%v)", resp.StatusCode, tc.status, out)
			}
			if tc.code == "" {
				if out["ok"] != true || out["text"] == "" {
					t.Fatalf("body %v", out)
				}
				meta := out["metadata"].(map[string]any)
				if meta["turn_id"] != "turn_1" || meta["memories_used"] != float64(2) {
					t.Fatalf("metadata %v", meta)
				}
				return
			}
			if out["ok"] != false || out["error"] != tc.code || out["message"] == "" {
				t.Fatalf("error body %v, want code %s", out, tc.code)
			}
		})
	}
	if got := inv.reqs[1].ActorID; got != "u2" {
		t.Fatalf("user_id alias gave actor %q", got)
	}
}

func TestSessionHeader(t *testing.T) {
	inv := &recInvoker{}
	ts := newTestServer(t, inv, Options{})
	post(t, ts.URL, `{"message":"hi","actor_id":"a"}`, map[string]string{SessionHeader: "sess-9"})
	post(t, ts.URL, `{"message":"hi","actor_id":"a","session_id":"body"}`, map[string]string{SessionHeader: "sess-9"})
	if inv.reqs[0].SessionID != "sess-9" || inv.reqs[1].SessionID != "body" {
		t.Fatalf("session ids %q %q", inv.reqs[0].SessionID, inv.reqs[1].SessionID)
	}
}

func TestErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{model.ErrNotConfigured, 503, "MODEL_NOT_CONFIGURED"},
		{fmt.Errorf("x: %w", &model.APIError{Provider: "openai", StatusCode: 500}), 502, "MODEL_ERROR"},
		{errors.New("disk full"), 500, "INTERNAL_ERROR"},
		{fmt.Errorf("session busy: %w", agent.ErrApprovalPending), 409, "APPROVAL_PENDING"},
		{fmt.Errorf("%w: shutting down", agent.ErrNotReady), 503, "NOT_READY"},
	} {
		ts := newTestServer(t, &recInvoker{err: tc.err}, Options{})
		resp, out := post(t, ts.URL, `{"message":"hi","actor_id":"a"}`, nil)
		if resp.StatusCode != tc.status || out["error"] != tc.code {
			t.Errorf("%v: %d %v", tc.err, resp.StatusCode, out)
		}
	}
}

func TestSSE(t *testing.T) {
	ts := newTestServer(t, &recInvoker{}, Options{})
	req, _ := http.NewRequest("POST", ts.URL+"/invocations", strings.NewReader(`{"message":"hi","actor_id":"a"}`))
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var frames []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "data: ") {
			t.Fatalf("bad SSE line %q", line)
		}
		var f map[string]any
		if err := json.Unmarshal([]byte(line[6:]), &f); err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f)
	}
	if len(frames) < 3 || frames[0]["type"] != "start" || frames[len(frames)-1]["type"] != "final" {
		t.Fatalf("frames %v", frames)
	}
	var text string
	for _, f := range frames[1 : len(frames)-1] {
		text += f["text"].(string)
	}
	if text != frames[len(frames)-1]["text"] || frames[len(frames)-1]["ok"] != true {
		t.Fatal("deltas do not add up to the final text")
	}
}

func TestPingStatusAndLastUpdate(t *testing.T) {
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	tr := NewTracker(clock)
	inv := &recInvoker{wait: make(chan struct{})}
	ts := newTestServer(t, agentTracked{inv, tr}, Options{Tracker: tr})
	ping := func() (string, int64) {
		resp, err := http.Get(ts.URL + "/ping")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Status string `json:"status"`
			T      int64  `json:"time_of_last_update"`
		}
		json.NewDecoder(resp.Body).Decode(&out)
		return out.Status, out.T
	}
	if s, ts0 := ping(); s != "Healthy" || ts0 != 1000 {
		t.Fatalf("idle ping %s %d", s, ts0)
	}
	mu.Lock()
	now = time.Unix(2000, 0)
	mu.Unlock()
	if _, t1 := ping(); t1 != 1000 {
		t.Fatal("time_of_last_update changed without a status change")
	}
	done := make(chan struct{})
	go func() { post(t, ts.URL, `{"message":"hi","actor_id":"a"}`, nil); close(done) }()
	for {
		if s, t2 := ping(); s == "HealthyBusy" {
			if t2 != 2000 {
				t.Fatalf("busy since %d", t2)
			}
			break
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	now = time.Unix(3000, 0)
	mu.Unlock()
	close(inv.wait)
	<-done
	if s, t3 := ping(); s != "Healthy" || t3 != 3000 {
		t.Fatalf("after turn %s %d", s, t3)
	}
}

type agentTracked struct {
	inv agent.Invoker
	tr  *Tracker
}

func (a agentTracked) Invoke(ctx context.Context, req agent.Request) (*agent.Result, error) {
	defer a.tr.Begin()()
	return a.inv.Invoke(ctx, req)
}

func TestNonLoopbackNeedsToken(t *testing.T) {
	for _, tc := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:8080", "", true},
		{"localhost:8080", "", true},
		{"[::1]:8080", "", true},
		{"0.0.0.0:8080", "", false},
		{":8080", "", false},
		{"example.com:8080", "", false},
		{"0.0.0.0:8080", "secret", true},
	} {
		_, err := New(Options{Addr: tc.addr, AuthToken: tc.token, Invoker: &recInvoker{}})
		if (err == nil) != tc.ok {
			t.Errorf("%s token=%q: err=%v", tc.addr, tc.token, err)
		}
	}
}

func TestAuthToken(t *testing.T) {
	ts := newTestServer(t, &recInvoker{}, Options{AuthToken: "s3cret"})
	resp, _ := post(t, ts.URL, `{"message":"hi","actor_id":"a"}`, nil)
	if resp.StatusCode != 401 {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
	resp, _ = post(t, ts.URL, `{"message":"hi","actor_id":"a"}`, map[string]string{"Authorization": "Bearer s3cret"})
	if resp.StatusCode != 200 {
		t.Fatalf("with token: %d", resp.StatusCode)
	}
	resp, _ = post(t, ts.URL, `{"message":"hi","actor_id":"a"}`, map[string]string{"Authorization": "bearer s3cret"})
	if resp.StatusCode != 200 {
		t.Fatalf("lower-case scheme: %d", resp.StatusCode)
	}
	resp, _ = post(t, ts.URL, `{"message":"hi","actor_id":"a"}`, map[string]string{"Authorization": "Bearer s3cre"})
	if resp.StatusCode != 401 {
		t.Fatalf("wrong token: %d", resp.StatusCode)
	}
	if r, _ := http.Get(ts.URL + "/ping"); r.StatusCode != 200 {
		t.Fatal("ping must stay open")
	}
}

func TestClientDisconnectDoesNotCancelTheTurn(t *testing.T) {
	inv := &ctxInvoker{done: make(chan error, 1)}
	ts := newTestServer(t, inv, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/invocations", strings.NewReader(`{"message":"hi","actor_id":"a"}`))
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("request should have been cancelled by the client")
	}
	if err := <-inv.done; err != nil {
		t.Fatalf("turn context ended with the client: %v", err)
	}
}

type ctxInvoker struct{ done chan error }

func (c *ctxInvoker) Invoke(ctx context.Context, req agent.Request) (*agent.Result, error) {
	select {
	case <-ctx.Done():
		c.done <- ctx.Err()
		return nil, ctx.Err()
	case <-time.After(300 * time.Millisecond):
		c.done <- nil
		return &agent.Result{Text: "done"}, nil
	}
}

func TestLoopbackModeRefusesForeignHostsAndOrigins(t *testing.T) {
	ts := newTestServer(t, &recInvoker{}, Options{})
	for _, tc := range []struct {
		host, origin string
		status       int
	}{
		{"", "", 200},
		{"localhost:8080", "http://localhost:8080", 200},
		{"evil.example", "", 403},
		{"", "https://evil.example", 403},
		{"", "null", 403},
	} {
		req, _ := http.NewRequest("POST", ts.URL+"/invocations", strings.NewReader(`{"message":"hi","actor_id":"a"}`))
		if tc.host != "" {
			req.Host = tc.host
		}
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("host %q origin %q: %d, want %d", tc.host, tc.origin, resp.StatusCode, tc.status)
		}
	}
}

type timedInvoker struct{ model time.Duration }

func (ti timedInvoker) Invoke(ctx context.Context, req agent.Request) (*agent.Result, error) {
	time.Sleep(ti.model)
	return &agent.Result{Text: "ok", SessionID: "s", TurnID: "turn_1", ModelTime: ti.model}, nil
}

// TestServerTiming: a turn's reply carries Server-Timing (W3C) with the
// model's share, Tendril's and the total, in milliseconds, and they add up;
// an error reply carries none.
func TestServerTiming(t *testing.T) {
	ts := newTestServer(t, timedInvoker{model: 20 * time.Millisecond}, Options{})
	resp, _ := post(t, ts.URL, `{"message":"hi","actor_id":"a"}`, nil)
	h := resp.Header.Get("Server-Timing")
	dur := map[string]float64{}
	for _, m := range strings.Split(h, ",") {
		parts := strings.Split(strings.TrimSpace(m), ";")
		for _, p := range parts[1:] {
			if v, ok := strings.CutPrefix(p, "dur="); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("Server-Timing %q: %v", h, err)
				}
				dur[parts[0]] = f
			}
		}
	}
	if len(dur) != 3 || dur["model"] != 20 || dur["total"] < dur["model"] || math.Abs(dur["model"]+dur["tendril"]-dur["total"]) > 0.002 {
		t.Fatalf("Server-Timing %q: durations %v", h, dur)
	}
	bad, _ := post(t, ts.URL, `{"message":`, nil)
	if h := bad.Header.Get("Server-Timing"); h != "" {
		t.Fatalf("error reply has Server-Timing %q", h)
	}
	if got := ServerTiming(5*time.Millisecond, 3*time.Millisecond); !strings.HasPrefix(got, "model;dur=3.000;") {
		t.Fatalf("model time past the total: %q", got)
	}
}
