package awsbody_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/awsbody"
)

type doFunc func(*http.Request) (*http.Response, error)

func (f doFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

func TestGuardHidesWriterToAndKeepsThePayload(t *testing.T) {
	cases := []struct {
		name string
		body io.ReadCloser
		want string
	}{
		{"writer-to body", io.NopCloser(bytes.NewReader([]byte(`{"messages":[]}`))), `{"messages":[]}`},
		{"plain body", io.NopCloser(strings.NewReader("abc")), "abc"},
		{"no body", http.NoBody, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/x", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Body = c.body
			var got string
			var writerTo bool
			_, err = awsbody.Guard(doFunc(func(r *http.Request) (*http.Response, error) {
				_, writerTo = r.Body.(io.WriterTo)
				b, err := io.ReadAll(r.Body)
				got = string(b)
				return &http.Response{StatusCode: 200, Body: http.NoBody}, err
			})).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if c.body != http.NoBody && writerTo {
				t.Error("body still offers io.WriterTo")
			}
			if got != c.want {
				t.Errorf("payload %q, want %q", got, c.want)
			}
		})
	}
}
