package model

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// scripted is a Provider that returns queued errors, then a text reply.
// Wire-level behaviour is tested against the modeltest fakes in package
// providers; this one exercises the Router's own decisions.
type scripted struct {
	name  string
	mu    sync.Mutex
	errs  map[string][]error // by model name
	calls []Request
}

func (s *scripted) Name() string { return s.name }

func (s *scripted) Generate(ctx context.Context, req *Request) (*Response, error) {
	s.mu.Lock()
	s.calls = append(s.calls, *req)
	var err error
	if q := s.errs[req.Model]; len(q) > 0 {
		err, s.errs[req.Model] = q[0], q[1:]
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return &Response{Content: []Block{Text("ok from " + req.Model)}, StopReason: StopEndTurn}, nil
}

func (s *scripted) models() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.calls {
		out = append(out, c.Model)
	}
	return out
}

type rec struct {
	mu     sync.Mutex
	sleeps []time.Duration
	obs    []string
}

func newTestRouter(t *testing.T, p *scripted, o RouterOptions) (*Router, *rec) {
	t.Helper()
	rc := &rec{}
	o.Providers = map[string]Provider{p.name: p}
	o.Sleep = func(ctx context.Context, d time.Duration) error {
		rc.mu.Lock()
		rc.sleeps = append(rc.sleeps, d)
		rc.mu.Unlock()
		return ctx.Err()
	}
	if o.Jitter == nil {
		o.Jitter = func() float64 { return 1 }
	}
	o.Observe = func(provider, model string, d time.Duration, err error) {
		rc.mu.Lock()
		rc.obs = append(rc.obs, fmt.Sprintf("%s/%s:%v", provider, model, err != nil))
		rc.mu.Unlock()
	}
	r, err := NewRouter(o)
	if err != nil {
		t.Fatal(err)
	}
	return r, rc
}

var hello = &Request{Messages: []Message{{Role: RoleUser, Content: []Block{Text("hi")}}}}

func TestParseRef(t *testing.T) {
	cases := []struct {
		ref, provider, name string
		ok                  bool
	}{
		{"anthropic/claude-haiku-4-5", "anthropic", "claude-haiku-4-5", true},
		{"bedrock/us.anthropic.claude-haiku-4-5-20251001-v1:0", "bedrock", "us.anthropic.claude-haiku-4-5-20251001-v1:0", true},
		{"openai/meta-llama/Llama-3.1-8B-Instruct", "openai", "meta-llama/Llama-3.1-8B-Instruct", true},
		{"ollama/llama3.2:latest", "ollama", "llama3.2:latest", true},
		{"", "", "", false},
		{"gpt-4o", "", "", false},
		{"/gpt-4o", "", "", false},
		{"openai/", "", "", false},
		{"OpenAI/gpt-4o", "", "", false},
		{"openai/gpt 4o", "", "", false},
		{"openai/gpt-4o\n", "", "", false},
		{"openai/gpt-\xff", "", "", false},
	}
	for _, c := range cases {
		p, n, err := ParseRef(c.ref)
		if (err == nil) != c.ok || p != c.provider || n != c.name {
			t.Errorf("ParseRef(%q) = %q, %q, %v", c.ref, p, n, err)
		}
	}
}

func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"anthropic/claude", "openai/a/b:c", "", "/", "x/\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		p, n, err := ParseRef(ref)
		if err != nil {
			return
		}
		if p == "" || n == "" || p+"/"+n != ref || strings.ContainsAny(n, " \t\r\n") {
			t.Fatalf("ParseRef(%q) = %q, %q", ref, p, n)
		}
	})
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		h    map[string]string
		want time.Duration
	}{
		{nil, 0},
		{map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{map[string]string{"Retry-After": now.Add(30 * time.Second).Format(http.TimeFormat)}, 30 * time.Second},
		{map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{map[string]string{"Retry-After": "soon"}, 0},
		{map[string]string{"Retry-After": "-3"}, 0},
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond},
		{map[string]string{"Retry-After-Ms": "junk", "Retry-After": "9"}, 9 * time.Second},
	}
	for _, c := range cases {
		h := http.Header{}
		for k, v := range c.h {
			h.Set(k, v)
		}
		if got := ParseRetryAfter(h, now); got != c.want {
			t.Errorf("ParseRetryAfter(%v) = %v, want %v", c.h, got, c.want)
		}
	}
}

func TestBackoffFullJitter(t *testing.T) {
	r, _ := newTestRouter(t, &scripted{name: "p"}, RouterOptions{TextRef: "p/m", BaseDelay: time.Second, MaxDelay: 10 * time.Second})
	cases := []struct {
		jitter     float64
		attempt    int
		retryAfter time.Duration
		want       time.Duration
	}{
		{1, 0, 0, time.Second},
		{1, 2, 0, 4 * time.Second},
		{1, 10, 0, 10 * time.Second},
		{1, 200, 0, 10 * time.Second},
		{0.5, 1, 0, time.Second},
		{0, 3, 0, 0},
		{0, 3, 5 * time.Second, 5 * time.Second},
		{1, 0, 5 * time.Second, 5 * time.Second},
	}
	for _, c := range cases {
		r.o.Jitter = func() float64 { return c.jitter }
		if got := r.backoff(c.attempt, c.retryAfter); got != c.want {
			t.Errorf("backoff(jitter %v, attempt %d, retry-after %v) = %v, want %v", c.jitter, c.attempt, c.retryAfter, got, c.want)
		}
	}
}

func TestRetriesThenFallback(t *testing.T) {
	busy := &APIError{Provider: "p", StatusCode: 529, Message: "overloaded", Retryable: true}
	p := &scripted{name: "p", errs: map[string][]error{"main": {busy, busy, busy}}}
	r, rc := newTestRouter(t, p, RouterOptions{TextRef: "p/main", Fallbacks: []string{"p/main", "p/backup"}, MaxRetries: 2, BaseDelay: time.Second})
	resp, err := r.Generate(context.Background(), hello, false)
	if err != nil {
		t.Fatal(err)
	}
	if resp.TextContent() != "ok from backup" || resp.Model != "backup" {
		t.Errorf("resp = %+v", resp)
	}
	if want := []string{"main", "main", "main", "backup"}; !reflect.DeepEqual(p.models(), want) {
		t.Errorf("calls = %v, want %v (a fallback equal to the primary is skipped)", p.models(), want)
	}
	if want := []time.Duration{time.Second, 2 * time.Second}; !reflect.DeepEqual(rc.sleeps, want) {
		t.Errorf("sleeps = %v, want %v", rc.sleeps, want)
	}
	if want := []string{"p/main:true", "p/main:true", "p/main:true", "p/backup:false"}; !reflect.DeepEqual(rc.obs, want) {
		t.Errorf("observed = %v", rc.obs)
	}
}

func TestRetryAfterBeyondCapFallsBack(t *testing.T) {
	limited := &APIError{Provider: "p", StatusCode: 429, RetryAfter: time.Hour, Retryable: true}
	p := &scripted{name: "p", errs: map[string][]error{"main": {limited}}}
	r, rc := newTestRouter(t, p, RouterOptions{TextRef: "p/main", Fallbacks: []string{"p/backup"}, MaxRetries: 3})
	if _, err := r.Generate(context.Background(), hello, false); err != nil {
		t.Fatal(err)
	}
	if len(rc.sleeps) != 0 || !reflect.DeepEqual(p.models(), []string{"main", "backup"}) {
		t.Errorf("sleeps = %v, calls = %v", rc.sleeps, p.models())
	}
}

func TestBackoffPastDeadlineFallsBack(t *testing.T) {
	busy := &APIError{Provider: "p", StatusCode: 503, RetryAfter: 20 * time.Second, Retryable: true}
	p := &scripted{name: "p", errs: map[string][]error{"main": {busy}}}
	r, rc := newTestRouter(t, p, RouterOptions{TextRef: "p/main", Fallbacks: []string{"p/backup"}, MaxRetries: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.Generate(ctx, hello, false); err != nil {
		t.Fatal(err)
	}
	if len(rc.sleeps) != 0 || !reflect.DeepEqual(p.models(), []string{"main", "backup"}) {
		t.Errorf("sleeps = %v, calls = %v", rc.sleeps, p.models())
	}
}

func TestOverflowReturnsAtOnce(t *testing.T) {
	over := fmt.Errorf("%w: %w", ErrContextOverflow, &APIError{Provider: "p", StatusCode: 400})
	p := &scripted{name: "p", errs: map[string][]error{"main": {over}}}
	r, rc := newTestRouter(t, p, RouterOptions{TextRef: "p/main", Fallbacks: []string{"p/backup"}, MaxRetries: 3})
	_, err := r.Generate(context.Background(), hello, false)
	if !errors.Is(err, ErrContextOverflow) || !strings.Contains(err.Error(), "p/main") {
		t.Fatalf("err = %v", err)
	}
	if len(rc.sleeps) != 0 || len(p.models()) != 1 {
		t.Errorf("sleeps = %v, calls = %v", rc.sleeps, p.models())
	}
}

func TestAllFailErrorChain(t *testing.T) {
	e1 := &APIError{Provider: "p", StatusCode: 401, Message: "bad key"}
	e2 := fmt.Errorf("%w: p: no choices", ErrBadResponse)
	p := &scripted{name: "p", errs: map[string][]error{"main": {e1}, "backup": {e2}}}
	r, _ := newTestRouter(t, p, RouterOptions{TextRef: "p/main", Fallbacks: []string{"p/backup"}})
	_, err := r.Generate(context.Background(), hello, false)
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || !errors.Is(err, ErrBadResponse) {
		t.Fatalf("err = %v", err)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "p/main") || !strings.Contains(msg, "p/backup") {
		t.Errorf("message = %q, want one line naming both models", msg)
	}
}

func TestRouting(t *testing.T) {
	p := &scripted{name: "p"}
	r, _ := newTestRouter(t, p, RouterOptions{TextRef: "p/text", MaxTokens: 99})
	req := &Request{Messages: hello.Messages}
	if _, err := r.Generate(context.Background(), req, true); err != nil {
		t.Fatal(err)
	}
	if req.Model != "" || req.MaxTokens != 0 {
		t.Errorf("caller's request modified: %+v", req)
	}
	if p.calls[0].Model != "text" || p.calls[0].MaxTokens != 99 {
		t.Errorf("vision without VisionRef: call = %+v", p.calls[0])
	}
	if r.VisionRef() != "p/text" || r.TextRef() != "p/text" {
		t.Errorf("refs = %q %q", r.TextRef(), r.VisionRef())
	}
}

func TestNotConfigured(t *testing.T) {
	r, err := NewRouter(RouterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Configured() {
		t.Fatal("Configured() with no TextRef")
	}
	if _, err := r.Generate(context.Background(), hello, true); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("err = %v", err)
	}
	if _, err := NewRouter(RouterOptions{TextRef: "nope/x", Providers: map[string]Provider{"p": &scripted{name: "p"}}}); err == nil || !strings.Contains(err.Error(), "unknown provider") {
		t.Errorf("unknown provider: err = %v", err)
	}
	if _, err := NewRouter(RouterOptions{TextRef: "p/x", Fallbacks: []string{"bad"}, Providers: map[string]Provider{"p": &scripted{name: "p"}}}); err == nil || !strings.Contains(err.Error(), "model.fallbacks") {
		t.Errorf("bad fallback: err = %v", err)
	}
}
