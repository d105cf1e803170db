package bedrock_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/bedrock"
	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// Explicit options, no AWS environment: endpoint and static credentials.
func TestExplicitOptionsAndErrorMapping(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	srv := modeltest.NewBedrock(t)
	p, err := bedrock.New(context.Background(), bedrock.Options{
		Region: "eu-central-1", Endpoint: srv.BaseURL(),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		reply     modeltest.Reply
		retryable bool
		overflow  bool
	}{
		{"not ready", modeltest.Reply{Status: 429, ErrorType: "ModelNotReadyException"}, true, false},
		{"model timeout", modeltest.Reply{Status: 408}, true, false},
		{"access denied", modeltest.Reply{Status: 403}, false, false},
		{"input too long", modeltest.Reply{Overflow: true}, false, true},
		{"claude via bedrock", modeltest.Reply{Status: 400, ErrorMessage: "The model returned the following errors: prompt is too long: 220000 tokens > 200000 maximum"}, false, true},
		{"other validation", modeltest.Reply{Status: 400, ErrorMessage: "messages.0.content: at least one block required"}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv.Push(c.reply)
			_, err := p.Generate(context.Background(), &model.Request{Model: "amazon.nova-lite-v1:0",
				Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text("x")}}}})
			var apiErr *model.APIError
			if !errors.As(err, &apiErr) || apiErr.Retryable != c.retryable || errors.Is(err, model.ErrContextOverflow) != c.overflow {
				t.Errorf("err = %v (%+v)", err, apiErr)
			}
		})
	}
	seen := srv.Requests()
	if len(seen) != len(cases) || seen[0].Model != "amazon.nova-lite-v1:0" {
		t.Fatalf("seen = %+v", seen)
	}
	if auth := seen[0].Header.Get("Authorization"); auth == "" || !contains(auth, "Credential=AKID/") || !contains(auth, "/eu-central-1/bedrock/") {
		t.Errorf("SigV4 header = %q", auth)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The request body net/http sends must not offer io.WriterTo: the SDK's
// body answers WriteTo with io.EOF once the SDK has closed it (right after
// the response headers), and net/http's write loop, still probing for bytes
// past Content-Length, then closes the connection a ConverseStream answer
// is being read from ("use of closed network connection" mid-stream, seen
// about once in 2,000 streams under load before the guard). The body must
// still carry the whole signed payload.
func TestRequestBodyHidesWriterTo(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	srv := modeltest.NewBedrock(t)
	var mu sync.Mutex
	var writerTo []bool
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		_, ok := r.Body.(io.WriterTo)
		mu.Lock()
		writerTo = append(writerTo, ok)
		mu.Unlock()
		return http.DefaultTransport.RoundTrip(r)
	})}
	p, err := bedrock.New(context.Background(), bedrock.Options{
		Region: "eu-central-1", Endpoint: srv.BaseURL(), HTTPClient: hc,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	req := &model.Request{Model: "amazon.nova-lite-v1:0",
		Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text("water the basil")}}}}
	srv.Push(modeltest.Reply{Text: "done"})
	if _, err := p.GenerateStream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	srv.Push(modeltest.Reply{Text: "done"})
	if _, err := p.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(writerTo) != 2 || writerTo[0] || writerTo[1] {
		t.Errorf("body offered io.WriterTo per request: %v", writerTo)
	}
	for _, s := range srv.Requests() {
		if s.LastUserText() != "water the basil" {
			t.Errorf("payload reached the server as %q", s.LastUserText())
		}
	}
}
