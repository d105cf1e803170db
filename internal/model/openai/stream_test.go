package openai_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/openai"
)

var _ model.StreamProvider = (*openai.Provider)(nil)

// bodyTransport answers every request with 200, an SSE content type and
// the given body, so the fuzzer needs no server.
type bodyTransport string

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/event-stream"}},
		Body:    io.NopCloser(strings.NewReader(string(b))),
		Request: r,
	}, nil
}

// FuzzStream feeds arbitrary bytes as the SSE answer: the provider must
// return a response or an error, never panic, and a response's text is
// exactly the deltas it streamed.
func FuzzStream(f *testing.F) {
	chunk := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}` + "\n\n"
	f.Add(chunk + `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
	f.Add(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\""}}]}}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}` + "\n\n")
	f.Add(chunk)
	f.Add("data: {nope\n\n")
	f.Add(`data: {"error":{"message":"boom","type":"server_error"}}` + "\n\n")
	f.Add(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":99999999999,"function":{"arguments":"x"}}]},"finish_reason":"stop"}]}` + "\n\n")
	f.Fuzz(func(t *testing.T, body string) {
		p := openai.New(openai.Options{BaseURL: "http://fuzz.invalid/v1", APIKey: "k", HTTPClient: &http.Client{Transport: bodyTransport(body)}})
		var got strings.Builder
		resp, err := p.GenerateStream(context.Background(), &model.Request{Model: "m",
			Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text("x")}}}}, func(s string) { got.WriteString(s) })
		if err != nil {
			var apiErr *model.APIError
			if resp != nil || !errors.Is(err, model.ErrBadResponse) && !errors.As(err, &apiErr) {
				t.Fatalf("resp %+v err %v", resp, err)
			}
			return
		}
		// A refusal is appended after the streamed content.
		if !strings.HasPrefix(resp.TextContent(), got.String()) || resp.StopReason != model.StopRefusal && resp.TextContent() != got.String() {
			t.Fatalf("text %q, deltas %q", resp.TextContent(), got.String())
		}
		for _, u := range resp.ToolUses() {
			if len(u.Input) == 0 || u.ID == "" {
				t.Fatalf("tool use %+v", u)
			}
		}
	})
}
