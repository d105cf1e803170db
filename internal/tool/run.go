package tool

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
	"unicode/utf8"
)

// MaxResultBytes caps a tool result handed back to the model (64 KiB).
// Run truncates longer results on a UTF-8 boundary and says so.
const MaxResultBytes = 64 << 10

// Errors that Run's errors wrap, so callers can branch with errors.Is.
var (
	ErrPanicked = errors.New("tool panicked")
	ErrTimedOut = errors.New("tool timed out")
)

// runError keeps the human message exact ("tool X panicked: ...") while
// still unwrapping to the sentinel.
type runError struct {
	msg  string
	kind error
}

func (e *runError) Error() string { return e.msg }
func (e *runError) Unwrap() error { return e.kind }

// Run executes t for call with a deadline of timeout (no deadline when
// timeout <= 0) and turns every failure into an error the agent can send
// back as an error tool_result:
//
//   - a panic becomes "tool X panicked: <value>" (wraps ErrPanicked; the
//     stack is not included, it goes to the caller's logs via PanicStack);
//   - an overrun becomes "tool X timed out after 30s" (wraps ErrTimedOut);
//   - cancellation of ctx itself returns ctx.Err() wrapped.
//
// A tool that ignores ctx keeps running in its goroutine after Run returns;
// its result is discarded. Results longer than MaxResultBytes are truncated.
func Run(ctx context.Context, t Tool, call Call, timeout time.Duration) (string, error) {
	name := t.Name()
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()

	type outcome struct {
		out string
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- outcome{err: &panicError{runError: runError{
					msg:  fmt.Sprintf("tool %s panicked: %v", name, v),
					kind: ErrPanicked,
				}, stack: debug.Stack()}}
			}
		}()
		out, err := t.Run(runCtx, call)
		done <- outcome{out, err}
	}()

	select {
	case o := <-done:
		if o.err != nil {
			// A tool that returns ctx's deadline error is a timeout too.
			if timeout > 0 && errors.Is(o.err, context.DeadlineExceeded) && ctx.Err() == nil {
				return "", timeoutError(name, timeout)
			}
			return truncate(o.out), o.err
		}
		return truncate(o.out), nil
	case <-runCtx.Done():
		if ctx.Err() != nil {
			return "", fmt.Errorf("tool %s: %w", name, ctx.Err())
		}
		return "", timeoutError(name, timeout)
	}
}

func timeoutError(name string, d time.Duration) error {
	return &runError{msg: fmt.Sprintf("tool %s timed out after %s", name, d), kind: ErrTimedOut}
}

type panicError struct {
	runError
	stack []byte
}

// PanicStack returns the goroutine stack captured when a tool run by Run
// panicked, or nil when err is not such a panic. It is meant for logs, never
// for the model.
func PanicStack(err error) []byte {
	var pe *panicError
	if errors.As(err, &pe) {
		return pe.stack
	}
	return nil
}

func truncate(s string) string {
	if len(s) <= MaxResultBytes {
		return s
	}
	cut := MaxResultBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[truncated: result was %d bytes, limit %d]", len(s), MaxResultBytes)
}
