package model

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrBadResponse is returned (wrapped) when a provider answers 2xx with a
// body that is not the JSON shape its API documents: a syntax error, no
// choices, no output message. Callers see the provider name and the decode
// error in the message.
var ErrBadResponse = errors.New("malformed model response")

// ErrTimeout is returned (wrapped) by the Router when one attempt exceeds
// RouterOptions.Timeout while the caller's context is still live.
var ErrTimeout = errors.New("model request timed out")

// RetryableStatus reports whether an HTTP status is worth retrying: 408,
// 409 (Anthropic lock contention), 429, every 5xx and Anthropic's 529
// "overloaded".
func RetryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusConflict ||
		code == http.StatusTooManyRequests || code >= 500
}

// ParseRetryAfter reads the delay a server asked for, from "retry-after-ms"
// (milliseconds, the Anthropic and OpenAI extension) or "retry-after"
// (RFC 9110 §10.2.3: delay-seconds or an HTTP-date, relative to now).
// It returns 0 when neither is present, parseable or positive.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 || s > 1e9 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
