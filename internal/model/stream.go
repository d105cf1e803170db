package model

import (
	"context"
	"errors"
)

// StreamProvider is a Provider that can stream its answer.
//
// GenerateStream sends req like Generate and calls onDelta with each piece of
// answer text as the provider produces it, in order, from the calling
// goroutine, never with "". Tool-call arguments, usage and the stop reason
// are not passed to onDelta; they arrive in the returned Response, which is
// the same complete Response Generate would give (text blocks, tool_use
// blocks with their whole input JSON, StopReason, Usage). The texts passed to
// onDelta concatenate to the Response's TextContent.
//
// Errors follow Generate (an *APIError for HTTP failures, wrapped
// ErrContextOverflow, ErrBadResponse, ctx errors). A stream that breaks or is
// malformed after the HTTP 200 gives a wrapped ErrBadResponse (malformed or
// truncated events) or a retryable *APIError (the server's in-stream error
// event, a reset connection).
type StreamProvider interface {
	Provider
	GenerateStream(ctx context.Context, req *Request, onDelta func(text string)) (*Response, error)
}

// ErrStreamInterrupted is wrapped by Router.GenerateStream when a call fails
// after at least one delta reached the caller. Such a failure is neither
// retried nor sent to a fallback (the caller already showed part of the
// answer); the caller decides whether to report or to discard the partial
// text.
var ErrStreamInterrupted = errors.New("model stream failed after text was streamed")

// GenerateStream is Generate with streaming: onDelta receives answer text as
// the model produces it (see StreamProvider), in order, from the calling
// goroutine. A provider that is not a StreamProvider is called with Generate
// and its whole text is passed to onDelta once, before GenerateStream
// returns.
//
// Retries, backoff and fallbacks work as in Generate, but only while no
// delta has been passed to onDelta. Once one has, the first failure ends
// the call: the error wraps ErrStreamInterrupted and the provider's error
// (errors.As still finds the *APIError). RouterOptions.Timeout bounds each
// whole streamed attempt, not the gap between deltas. A nil onDelta is
// allowed (the call then only differs from Generate in its wire format).
func (r *Router) GenerateStream(ctx context.Context, req *Request, vision bool, onDelta func(text string)) (*Response, error) {
	started := false
	emit := func(s string) {
		if s == "" {
			return
		}
		started = true
		if onDelta != nil {
			onDelta(s)
		}
	}
	call := func(ctx context.Context, p Provider, req *Request) (*Response, error) {
		if sp, ok := p.(StreamProvider); ok {
			return sp.GenerateStream(ctx, req, emit)
		}
		resp, err := p.Generate(ctx, req)
		if err == nil && resp != nil {
			emit(resp.TextContent())
		}
		return resp, err
	}
	return r.generate(ctx, req, vision, call, func() bool { return started })
}
