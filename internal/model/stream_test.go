package model

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// streamer is a StreamProvider whose calls follow a script: each step
// emits its deltas, then fails with err or answers.
type streamer struct {
	name  string
	mu    sync.Mutex
	steps []streamStep
	calls []string // model names
}

type streamStep struct {
	deltas []string
	err    error
}

func (s *streamer) Name() string { return s.name }

func (s *streamer) Generate(ctx context.Context, req *Request) (*Response, error) {
	return s.GenerateStream(ctx, req, func(string) {})
}

func (s *streamer) GenerateStream(ctx context.Context, req *Request, onDelta func(string)) (*Response, error) {
	s.mu.Lock()
	s.calls = append(s.calls, req.Model)
	step := streamStep{deltas: []string{"ok ", "from ", req.Model}}
	if len(s.steps) > 0 {
		step, s.steps = s.steps[0], s.steps[1:]
	}
	s.mu.Unlock()
	for _, d := range step.deltas {
		onDelta(d)
	}
	if step.err != nil {
		return nil, step.err
	}
	return &Response{Content: []Block{Text(strings.Join(step.deltas, ""))}, StopReason: StopEndTurn}, nil
}

func newStreamRouter(t *testing.T, p Provider, o RouterOptions) (*Router, *rec) {
	t.Helper()
	rc := &rec{}
	o.Providers = map[string]Provider{p.Name(): p}
	o.Sleep = func(ctx context.Context, d time.Duration) error {
		rc.mu.Lock()
		rc.sleeps = append(rc.sleeps, d)
		rc.mu.Unlock()
		return ctx.Err()
	}
	o.Jitter = func() float64 { return 0 }
	r, err := NewRouter(o)
	if err != nil {
		t.Fatal(err)
	}
	return r, rc
}

func TestGenerateStreamRouter(t *testing.T) {
	retryable := &APIError{Provider: "s", StatusCode: 503, Message: "busy", Retryable: true}
	fatal := &APIError{Provider: "s", StatusCode: 400, Message: "bad"}
	cases := []struct {
		name        string
		steps       []streamStep
		wantDeltas  []string
		wantCalls   []string
		wantSleeps  int
		wantErr     error // errors.Is target; nil means success
		interrupted bool
	}{
		{"plain", nil, []string{"ok ", "from ", "a"}, []string{"a"}, 0, nil, false},
		{"retry before the first delta", []streamStep{{err: retryable}},
			[]string{"ok ", "from ", "a"}, []string{"a", "a"}, 1, nil, false},
		{"fallback before the first delta", []streamStep{{err: fatal}},
			[]string{"ok ", "from ", "b"}, []string{"a", "b"}, 0, nil, false},
		{"empty deltas do not count", []streamStep{{deltas: []string{"", ""}, err: retryable}},
			[]string{"ok ", "from ", "a"}, []string{"a", "a"}, 1, nil, false},
		{"retryable error after a delta is final", []streamStep{{deltas: []string{"half"}, err: retryable}},
			[]string{"half"}, []string{"a"}, 0, retryable, true},
		{"fatal error after a delta skips fallbacks", []streamStep{{deltas: []string{"half"}, err: fatal}},
			[]string{"half"}, []string{"a"}, 0, fatal, true},
		{"overflow before a delta is not retried", []streamStep{{err: ErrContextOverflow}},
			nil, []string{"a"}, 0, ErrContextOverflow, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &streamer{name: "s", steps: c.steps}
			r, rc := newStreamRouter(t, p, RouterOptions{TextRef: "s/a", Fallbacks: []string{"s/b"}, MaxRetries: 2})
			var got []string
			resp, err := r.GenerateStream(context.Background(), hello, false, func(s string) { got = append(got, s) })
			if c.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if resp.TextContent() != strings.Join(got, "") {
					t.Errorf("text %q, deltas %q", resp.TextContent(), got)
				}
			} else if !errors.Is(err, c.wantErr) || resp != nil {
				t.Errorf("resp %+v err %v, want %v", resp, err, c.wantErr)
			}
			if errors.Is(err, ErrStreamInterrupted) != c.interrupted {
				t.Errorf("err %v: interrupted = %v", err, !c.interrupted)
			}
			if !reflect.DeepEqual(got, c.wantDeltas) {
				t.Errorf("deltas = %q, want %q", got, c.wantDeltas)
			}
			if !reflect.DeepEqual(p.calls, c.wantCalls) {
				t.Errorf("calls = %q, want %q", p.calls, c.wantCalls)
			}
			if len(rc.sleeps) != c.wantSleeps {
				t.Errorf("sleeps = %v", rc.sleeps)
			}
		})
	}
}

// A Provider without streaming is called with Generate; its whole text is
// one delta, and its failures are retried as usual.
func TestGenerateStreamFallsBackToGenerate(t *testing.T) {
	p := &scripted{name: "p", errs: map[string][]error{"m": {&APIError{Provider: "p", StatusCode: 500, Retryable: true}}}}
	r, rc := newTestRouter(t, p, RouterOptions{TextRef: "p/m", MaxRetries: 1})
	var got []string
	resp, err := r.GenerateStream(context.Background(), hello, false, func(s string) { got = append(got, s) })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []string{"ok from m"}) || resp.TextContent() != "ok from m" || resp.Model != "m" {
		t.Errorf("deltas %q resp %+v", got, resp)
	}
	if !reflect.DeepEqual(p.models(), []string{"m", "m"}) || len(rc.sleeps) != 1 {
		t.Errorf("calls %q sleeps %v", p.models(), rc.sleeps)
	}
	// nil onDelta is allowed.
	if _, err := r.GenerateStream(context.Background(), hello, false, nil); err != nil {
		t.Fatal(err)
	}
}

func TestGenerateStreamNotConfigured(t *testing.T) {
	r, err := NewRouter(RouterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.GenerateStream(context.Background(), hello, false, nil); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("err = %v", err)
	}
}
