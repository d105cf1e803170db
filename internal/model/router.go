package model

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Router defaults, used when the matching RouterOptions field is zero.
const (
	DefaultBaseDelay     = 500 * time.Millisecond
	DefaultMaxDelay      = 30 * time.Second
	DefaultMaxRetryAfter = 60 * time.Second
	DefaultMaxTokens     = 4096
)

// RouterOptions configures a Router. Refs have the form "provider/model"
// (see ParseRef); every provider they name must be a key of Providers.
type RouterOptions struct {
	// TextRef serves turns without images (MODEL_ID). Empty means no model
	// is configured: Generate returns ErrNotConfigured.
	TextRef string
	// VisionRef serves turns that carry images (VISION_MODEL_ID); empty
	// means TextRef.
	VisionRef string
	// Fallbacks are tried in order when the primary fails with an error
	// other than ErrContextOverflow and cancellation (model.fallbacks).
	Fallbacks []string

	// Timeout bounds one attempt; 0 means only the caller's context does.
	Timeout time.Duration
	// MaxRetries is how many times one model is retried after its first
	// attempt on a retryable failure (429, 5xx, overload, timeout). Negative
	// means 0.
	MaxRetries int
	// MaxTokens is used when Request.MaxTokens is 0; default 4096.
	MaxTokens int
	// BaseDelay and MaxDelay shape the backoff: attempt n (from 0) waits a
	// uniformly random duration in [0, min(MaxDelay, BaseDelay·2ⁿ)] ("full
	// jitter"), but never less than the server's retry-after.
	BaseDelay, MaxDelay time.Duration
	// MaxRetryAfter caps the retry-after the Router is willing to wait; a
	// longer one moves on to the next fallback instead. Default 60 s.
	MaxRetryAfter time.Duration

	// Providers maps a provider prefix ("anthropic", "bedrock", "openai",
	// "ollama") to its implementation. Package providers builds it.
	Providers map[string]Provider

	// Observe, if set, is called after every attempt with the provider
	// prefix, the model name, the attempt's duration and its error (nil on
	// success). Use it for metrics; it must not block.
	Observe func(provider, model string, d time.Duration, err error)

	// Sleep waits d or until ctx is done (returning ctx.Err()). Tests inject
	// one that records d and returns at once. Default: a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a number in [0, 1) for the backoff. Default math/rand/v2.
	Jitter func() float64
	// Now is the clock for deadlines and retry-after dates. Default time.Now.
	Now func() time.Time
}

// target is one resolved "provider/model" reference.
type target struct {
	ref, provider, name string
	p                   Provider
}

// Router sends a Request to the text or vision model, retrying with backoff
// and falling back through an ordered list. It is safe for concurrent use.
type Router struct {
	o         RouterOptions
	text      *target
	vision    *target
	fallbacks []*target
}

// ParseRef splits a model reference "provider/model" at its first '/'. The
// provider is lower-case letters, digits, '-', '_' or '.'; the model part may
// itself contain '/' and ':' ("openai/meta-llama/Llama-3.1-8B",
// "bedrock/us.anthropic.claude-haiku-4-5-20251001-v1:0"). Whitespace and
// control characters are rejected.
func ParseRef(ref string) (provider, name string, err error) {
	i := strings.IndexByte(ref, '/')
	if i <= 0 || i == len(ref)-1 {
		return "", "", fmt.Errorf("model reference %q: want provider/model, e.g. anthropic/claude-haiku-4-5", ref)
	}
	provider, name = ref[:i], ref[i+1:]
	for _, c := range provider {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return "", "", fmt.Errorf("model reference %q: provider %q must be lower-case letters, digits, '-', '_' or '.'", ref, provider)
		}
	}
	if !utf8.ValidString(name) {
		return "", "", fmt.Errorf("model reference %q: model name is not valid UTF-8", ref)
	}
	for _, c := range name {
		if c <= ' ' || c == 0x7f || c == '\u00a0' || c == '\u2028' || c == '\u2029' || c == '\ufeff' {
			return "", "", fmt.Errorf("model reference %q: model name contains whitespace or a control character", ref)
		}
	}
	return provider, name, nil
}

// NewRouter checks every reference and that its provider is in
// opts.Providers. An empty TextRef is allowed: the Router then reports
// Configured() == false and every Generate returns ErrNotConfigured.
func NewRouter(opts RouterOptions) (*Router, error) {
	if opts.BaseDelay <= 0 {
		opts.BaseDelay = DefaultBaseDelay
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = DefaultMaxDelay
	}
	if opts.MaxRetryAfter <= 0 {
		opts.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if opts.MaxTokens <= 0 {
		opts.MaxTokens = DefaultMaxTokens
	}
	if opts.MaxRetries < 0 {
		opts.MaxRetries = 0
	}
	if opts.Sleep == nil {
		opts.Sleep = sleep
	}
	if opts.Jitter == nil {
		opts.Jitter = rand.Float64
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Router{o: opts}
	if opts.TextRef == "" {
		return r, nil
	}
	var err error
	if r.text, err = r.resolve(opts.TextRef); err != nil {
		return nil, err
	}
	r.vision = r.text
	if opts.VisionRef != "" && opts.VisionRef != opts.TextRef {
		if r.vision, err = r.resolve(opts.VisionRef); err != nil {
			return nil, err
		}
	}
	for _, ref := range opts.Fallbacks {
		t, err := r.resolve(ref)
		if err != nil {
			return nil, fmt.Errorf("model.fallbacks: %w", err)
		}
		r.fallbacks = append(r.fallbacks, t)
	}
	return r, nil
}

func (r *Router) resolve(ref string) (*target, error) {
	prov, name, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	p, ok := r.o.Providers[prov]
	if !ok || p == nil {
		known := make([]string, 0, len(r.o.Providers))
		for k := range r.o.Providers {
			known = append(known, k)
		}
		sort.Strings(known)
		return nil, fmt.Errorf("model reference %q: unknown provider %q (known: %s)", ref, prov, strings.Join(known, ", "))
	}
	return &target{ref: ref, provider: prov, name: name, p: p}, nil
}

// Configured reports whether a text model is set.
func (r *Router) Configured() bool { return r != nil && r.text != nil }

// TextRef and VisionRef return the effective references ("" when unset).
func (r *Router) TextRef() string {
	if !r.Configured() {
		return ""
	}
	return r.text.ref
}

// VisionRef returns the reference used for turns with images.
func (r *Router) VisionRef() string {
	if !r.Configured() {
		return ""
	}
	return r.vision.ref
}

// Generate sends req to the vision model when vision is true, otherwise to
// the text model, then to each fallback in order. req is not modified; the
// copy sent gets Model set and MaxTokens defaulted.
//
// Errors:
//   - ErrNotConfigured when no text model is set;
//   - a wrapped ErrContextOverflow at once, without retries or fallbacks
//     (the caller compacts and retries once);
//   - the caller's ctx.Err() (wrapped) once ctx is done;
//   - otherwise an error naming every model tried, wrapping each failure
//     (errors.As finds the *APIError, errors.Is finds ErrTimeout or
//     ErrBadResponse).
func (r *Router) Generate(ctx context.Context, req *Request, vision bool) (*Response, error) {
	return r.generate(ctx, req, vision, func(ctx context.Context, p Provider, req *Request) (*Response, error) {
		return p.Generate(ctx, req)
	}, func() bool { return false })
}

// callFunc makes one provider call (Generate, or GenerateStream with the
// Router's delta hook).
type callFunc func(ctx context.Context, p Provider, req *Request) (*Response, error)

// generate runs the model chain. streamed reports whether output already
// reached the caller; once it does, the first error ends the call without
// retry or fallback, wrapped with ErrStreamInterrupted.
func (r *Router) generate(ctx context.Context, req *Request, vision bool, call callFunc, streamed func() bool) (*Response, error) {
	if !r.Configured() {
		return nil, ErrNotConfigured
	}
	if req == nil {
		return nil, errors.New("model: nil request")
	}
	primary := r.text
	if vision {
		primary = r.vision
	}
	chain := []*target{primary}
	for _, f := range r.fallbacks {
		if f.ref != primary.ref {
			chain = append(chain, f)
		}
	}
	var errs []error
	for _, t := range chain {
		resp, err := r.try(ctx, t, req, call, streamed)
		if err == nil {
			return resp, nil
		}
		if streamed() {
			return nil, fmt.Errorf("%s: %w: %w", t.ref, ErrStreamInterrupted, err)
		}
		if errors.Is(err, ErrContextOverflow) {
			return nil, fmt.Errorf("%s: %w", t.ref, err)
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("%s: %w", t.ref, ctxErr)
		}
		errs = append(errs, fmt.Errorf("%s: %w", t.ref, err))
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, chainError(errs)
}

// chainError reports every model tried on one line; errors.Is and
// errors.As see each failure.
type chainError []error

func (e chainError) Error() string {
	parts := make([]string, len(e))
	for i, err := range e {
		parts[i] = err.Error()
	}
	return fmt.Sprintf("all %d models failed: %s", len(e), strings.Join(parts, "; "))
}

func (e chainError) Unwrap() []error { return e }

// try runs the attempts of one model.
func (r *Router) try(ctx context.Context, t *target, req *Request, call callFunc, streamed func() bool) (*Response, error) {
	c := *req
	c.Model = t.name
	if c.MaxTokens <= 0 {
		c.MaxTokens = r.o.MaxTokens
	}
	for attempt := 0; ; attempt++ {
		resp, err := r.attempt(ctx, t, &c, call)
		if err == nil {
			if resp.Model == "" {
				resp.Model = t.name
			}
			return resp, nil
		}
		if streamed() || errors.Is(err, ErrContextOverflow) || ctx.Err() != nil || attempt >= r.o.MaxRetries {
			return nil, err
		}
		var retryAfter time.Duration
		var apiErr *APIError
		switch {
		case errors.Is(err, ErrTimeout):
		case errors.As(err, &apiErr) && apiErr.Retryable:
			retryAfter = apiErr.RetryAfter
		default:
			return nil, err
		}
		if retryAfter > r.o.MaxRetryAfter {
			return nil, fmt.Errorf("%w (retry-after %s exceeds the %s cap)", err, retryAfter, r.o.MaxRetryAfter)
		}
		d := r.backoff(attempt, retryAfter)
		if dl, ok := ctx.Deadline(); ok && r.o.Now().Add(d).After(dl) {
			return nil, err
		}
		if serr := r.o.Sleep(ctx, d); serr != nil {
			return nil, err
		}
	}
}

// attempt makes one call under the per-attempt timeout.
func (r *Router) attempt(ctx context.Context, t *target, req *Request, call callFunc) (*Response, error) {
	actx, cancel := ctx, context.CancelFunc(func() {})
	if r.o.Timeout > 0 {
		actx, cancel = context.WithTimeout(ctx, r.o.Timeout)
	}
	defer cancel()
	start := r.o.Now()
	resp, err := call(actx, t.p, req)
	if err == nil && resp == nil {
		err = fmt.Errorf("%w: %s returned no response and no error", ErrBadResponse, t.provider)
	}
	if err != nil && ctx.Err() == nil && actx.Err() != nil {
		err = fmt.Errorf("%w after %s: %w", ErrTimeout, r.o.Timeout, err)
	}
	if r.o.Observe != nil {
		r.o.Observe(t.provider, t.name, r.o.Now().Sub(start), err)
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// backoff is full jitter (AWS Architecture Blog, "Exponential Backoff And
// Jitter", 2015) with the server's retry-after as a floor.
func (r *Router) backoff(attempt int, retryAfter time.Duration) time.Duration {
	ceil := r.o.MaxDelay
	if attempt < 30 {
		if c := r.o.BaseDelay << attempt; c > 0 && c < ceil {
			ceil = c
		}
	}
	d := time.Duration(r.o.Jitter() * float64(ceil))
	if d < retryAfter {
		d = retryAfter
	}
	return d
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
