// Package awsbody guards AWS SDK for Go v2 clients against a race between
// smithy-go and net/http that tears down a response while it is being read
// ("read tcp …: use of closed network connection"; the symptom reported in
// aws/aws-sdk-go-v2#1825 and #2737).
//
// The race: smithy-go's ClientHandler closes the request body as soon as
// Do returns the response headers, and its safe body then answers WriteTo
// with io.EOF. net/http's write loop, still probing the body for bytes past
// Content-Length with io.Copy (which prefers WriterTo), takes that io.EOF
// for a body read error and closes the connection the response body, or a
// ConverseStream event stream, is still being read from. Hiding WriterTo
// makes io.Copy call Read, whose io.EOF after close is the ordinary end of
// the body; nothing else about the request changes.
package awsbody

import (
	"io"
	"net/http"
)

// Doer is the SDKs' HTTPClient interface (bedrockruntime.HTTPClient,
// bedrockagentcore.HTTPClient, …).
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// Guard returns next wrapped so that every request body it sends hides
// io.WriterTo.
func Guard(next Doer) Doer { return guard{next} }

type guard struct{ next Doer }

type readOnlyBody struct{ io.ReadCloser }

// Do sends req through the wrapped client, its body stripped of
// io.WriterTo.
func (g guard) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		if _, ok := req.Body.(io.WriterTo); ok {
			req.Body = readOnlyBody{req.Body}
		}
	}
	return g.next.Do(req)
}
