// Package wire holds the HTTP plumbing the provider packages share: capture
// of error responses, error-body parsing and transport-error classification.
package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/tendrilai/tendril/internal/model"
)

// maxErrorBody caps how much of an error response is kept (bytes).
const maxErrorBody = 64 << 10

// Capture records the status and headers of the HTTP response and the
// (capped) body of an error response as it passes through an SDK middleware, so the provider can build
// a *model.APIError even when the SDK fails to parse the body itself.
type Capture struct {
	Status int
	Header http.Header
	Body   []byte
}

// Middleware has the shape of the Anthropic and OpenAI SDK middlewares. The
// body it reads is put back so the SDK still sees it.
func (c *Capture) Middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res == nil {
		return res, err
	}
	c.Status, c.Header = res.StatusCode, res.Header.Clone()
	if res.StatusCode < 400 {
		return res, nil
	}
	if res.Body != nil {
		b, rerr := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		res.Body.Close()
		if rerr == nil {
			c.Body = b
		}
		res.Body = io.NopCloser(bytes.NewReader(c.Body))
	}
	return res, nil
}

// ErrorBody extracts type, code and message from the common JSON error
// shapes: {"error":{"type","code","message"}} (Anthropic, OpenAI, vLLM,
// llama.cpp), {"error":"text"} (Ollama) and {"message","__type"} (AWS).
// A non-JSON body becomes the message, trimmed to 300 bytes.
func ErrorBody(body []byte) (typ, code, msg string) {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Type    string          `json:"__type"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		s := strings.TrimSpace(string(body))
		if len(s) > 300 {
			s = s[:300] + "…"
		}
		return "", "", s
	}
	var inner struct {
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
	}
	var str string
	switch {
	case len(v.Error) > 0 && json.Unmarshal(v.Error, &inner) == nil:
		typ, msg = inner.Type, inner.Message
		if len(inner.Code) > 0 {
			var s string
			if json.Unmarshal(inner.Code, &s) == nil {
				code = s
			} else if string(inner.Code) != "null" {
				code = string(inner.Code)
			}
		}
	case len(v.Error) > 0 && json.Unmarshal(v.Error, &str) == nil:
		msg = str
	default:
		typ, msg = v.Type, v.Message
	}
	return typ, code, msg
}

// TransportError turns a failure that produced no HTTP response into an
// error for the Router. Cancellation and deadlines pass through wrapped (the
// Router decides about timeouts); resets, refusals, unexpected EOFs and
// network timeouts become a retryable *model.APIError with status 0.
func TransportError(provider string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &model.APIError{Provider: provider, Message: err.Error(), Retryable: true}
	}
	return nil
}

// MaxIdleConnsPerHost is how many idle keep-alive connections a provider
// client keeps to one host. net/http's default is 2: with more turns than
// that in flight against one provider, every extra request's connection was
// closed after its response and the next request dialled (and, over TLS,
// handshook) a new one. 64 covers the concurrency one instance serves.
const MaxIdleConnsPerHost = 64

// HTTPClient returns c, or a client with a clone of the default transport
// when c is nil, keeping up to MaxIdleConnsPerHost idle connections per
// host. It has no overall timeout: the Router's per-attempt context bounds
// each call.
func HTTPClient(c *http.Client) *http.Client {
	if c != nil {
		return c
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 0
	t.IdleConnTimeout = 90 * time.Second
	t.MaxIdleConns = 4 * MaxIdleConnsPerHost
	t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	return &http.Client{Transport: t}
}

// ContainsAny reports whether s contains any of subs, ignoring case.
func ContainsAny(s string, subs ...string) bool {
	s = strings.ToLower(s)
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
