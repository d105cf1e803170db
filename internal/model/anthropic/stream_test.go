package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/anthropic"
)

var _ model.StreamProvider = (*anthropic.Provider)(nil)

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
// return a response or an error, never panic; a response's text is exactly
// the deltas it streamed and every tool input is JSON.
func FuzzStream(f *testing.F) {
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"x\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"
	text := "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	tool := "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":1}\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
	end := "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":3}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	f.Add(start + text + end)
	f.Add(start + text + tool + end)
	f.Add(start + text)
	f.Add(start + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
	f.Add("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":-1,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n")
	f.Add("data: {nope\n\n")
	f.Fuzz(func(t *testing.T, body string) {
		p := anthropic.New(anthropic.Options{BaseURL: "http://fuzz.invalid/", APIKey: "k", HTTPClient: &http.Client{Transport: bodyTransport(body)}})
		var got strings.Builder
		resp, err := p.GenerateStream(context.Background(), &model.Request{Model: "m", MaxTokens: 10,
			Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text("x")}}}}, func(s string) { got.WriteString(s) })
		if err != nil {
			var apiErr *model.APIError
			if resp != nil || !errors.Is(err, model.ErrBadResponse) && !errors.As(err, &apiErr) {
				t.Fatalf("resp %+v err %v", resp, err)
			}
			return
		}
		if resp.TextContent() != got.String() {
			t.Fatalf("text %q, deltas %q", resp.TextContent(), got.String())
		}
		for _, u := range resp.ToolUses() {
			if !json.Valid(u.Input) {
				t.Fatalf("tool input %q", u.Input)
			}
		}
	})
}
