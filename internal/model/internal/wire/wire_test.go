package wire

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/tendrilai/tendril/internal/model"
)

func TestErrorBody(t *testing.T) {
	cases := []struct{ body, typ, code, msg string }{
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "overloaded_error", "", "Overloaded"},
		{`{"error":{"message":"too long","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, "invalid_request_error", "context_length_exceeded", "too long"},
		{`{"error":{"message":"x","type":"server_error","code":null}}`, "server_error", "", "x"},
		{`{"error":{"message":"x","code":500}}`, "", "500", "x"},
		{`{"error":"model \"llama9\" not found"}`, "", "", `model "llama9" not found`},
		{`{"message":"Input is too long for requested model."}`, "", "", "Input is too long for requested model."},
		{`<html>bad gateway</html>`, "", "", "<html>bad gateway</html>"},
		{``, "", "", ""},
	}
	for _, c := range cases {
		typ, code, msg := ErrorBody([]byte(c.body))
		if typ != c.typ || code != c.code || msg != c.msg {
			t.Errorf("ErrorBody(%s) = %q %q %q", c.body, typ, code, msg)
		}
	}
}

func FuzzErrorBody(f *testing.F) {
	f.Add([]byte(`{"error":{"type":"a","code":1,"message":"m"}}`))
	f.Add([]byte(`{"error":"s"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, msg := ErrorBody(b)
		if len(msg) > len(b)+len("…") && len(b) > 0 {
			// A message never invents text beyond the body (JSON unescaping
			// only shrinks it).
			t.Fatalf("message longer than body: %q from %q", msg, b)
		}
	})
}

func TestTransportError(t *testing.T) {
	timeout := &net.OpError{Op: "read", Err: &timeoutErr{}}
	cases := []struct {
		err       error
		retryable bool
	}{
		{fmt.Errorf("post: %w", syscall.ECONNREFUSED), true},
		{fmt.Errorf("post: %w", syscall.ECONNRESET), true},
		{io.ErrUnexpectedEOF, true},
		{timeout, true},
		{errors.New("tls: bad certificate"), false},
	}
	for _, c := range cases {
		err := TransportError("p", c.err)
		var apiErr *model.APIError
		if got := errors.As(err, &apiErr) && apiErr.Retryable; got != c.retryable {
			t.Errorf("TransportError(%v) = %v", c.err, err)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }
