package providers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// streams reports whether the kit's provider streams on the wire; the
// others go through the Router's one-delta fallback.
func (k kit) streams() bool { return true }

// deltas collects what GenerateStream passes to onDelta.
type deltas []string

func (d *deltas) add(s string) { *d = append(*d, s) }

func TestStreamText(t *testing.T) {
	const text = "Tomatoes want full sun, deep watering and warm nights — 토마토."
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, _ := router(t, k, model.RouterOptions{})
			reply := modeltest.Reply{Text: text, InputTokens: 42, OutputTokens: 17}
			k.srv.Push(reply, reply)
			var got deltas
			resp, err := r.GenerateStream(context.Background(), &model.Request{System: system, Messages: userText("tomatoes?")}, false, got.add)
			if err != nil {
				t.Fatal(err)
			}
			want, err := r.Generate(context.Background(), &model.Request{System: system, Messages: userText("tomatoes?")}, false)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(resp, want) {
				t.Errorf("streamed response %+v\n  differs from Generate's %+v", resp, want)
			}
			if strings.Join(got, "") != text || resp.TextContent() != text {
				t.Errorf("deltas %q join to %q, text %q", got, strings.Join(got, ""), resp.TextContent())
			}
			if k.streams() && len(got) != modeltest.DefaultStreamChunks || !k.streams() && len(got) != 1 {
				t.Errorf("%d deltas: %q", len(got), got)
			}
			if resp.Usage != (model.Usage{InputTokens: 42, OutputTokens: 17}) || resp.StopReason != model.StopEndTurn {
				t.Errorf("usage %+v stop %q", resp.Usage, resp.StopReason)
			}
			seen := k.srv.Requests()
			if len(seen) != 2 || seen[0].Stream != k.streams() || seen[1].Stream || seen[0].LastUserText() != "tomatoes?" || seen[0].System != system {
				t.Errorf("seen = %+v", seen)
			}
			if k.name == "bedrock" && !strings.HasSuffix(seen[0].Path, "/converse-stream") {
				t.Errorf("path %s", seen[0].Path)
			} else if k.name != "bedrock" && !strings.Contains(string(seen[0].Body), `"stream":true`) {
				t.Errorf("request body %s", seen[0].Body)
			}
			if k.name == "openai" && !strings.Contains(string(seen[0].Body), `"include_usage":true`) {
				t.Errorf("request body %s", seen[0].Body)
			}
		})
	}
}

func TestStreamToolCalls(t *testing.T) {
	calls := []modeltest.ToolCall{
		{ID: "call_a", Name: "weather", Args: `{"city":"Seoul","days":3,"units":"metric"}`},
		{ID: "call_b", Name: "watering_schedule", Args: `{"plant":"basil","note":"잎이 노래요"}`},
	}
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, _ := router(t, k, model.RouterOptions{})
			for _, text := range []string{"Let me check both.", ""} {
				k.srv.Push(modeltest.Reply{Text: text, ToolCalls: calls, StreamChunks: 5, InputTokens: 9, OutputTokens: 8})
				var got deltas
				resp, err := r.GenerateStream(context.Background(), &model.Request{Messages: userText("weather and basil?")}, false, got.add)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Join(got, "") != text || resp.TextContent() != text {
					t.Errorf("deltas %q, text %q", got, resp.TextContent())
				}
				if text == "" && len(got) != 0 {
					t.Errorf("deltas for a tool-only answer: %q", got)
				}
				uses := resp.ToolUses()
				if len(uses) != len(calls) {
					t.Fatalf("tool uses = %+v", uses)
				}
				for i, u := range uses {
					if u.ID != calls[i].ID || u.Name != calls[i].Name || !jsonEqual(t, u.Input, json.RawMessage(calls[i].Args)) {
						t.Errorf("tool use %d = %s %s %s", i, u.ID, u.Name, u.Input)
					}
				}
				if resp.StopReason != model.StopToolUse || resp.Usage != (model.Usage{InputTokens: 9, OutputTokens: 8}) {
					t.Errorf("stop %q usage %+v", resp.StopReason, resp.Usage)
				}
			}
		})
	}
}

func TestStreamStopReasons(t *testing.T) {
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, _ := router(t, k, model.RouterOptions{})
			for _, stop := range []model.StopReason{model.StopEndTurn, model.StopMaxTokens, model.StopRefusal} {
				k.srv.Push(modeltest.Reply{Text: "cut short here", StopReason: stop})
				resp, err := r.GenerateStream(context.Background(), &model.Request{Messages: userText("hi")}, false, nil)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StopReason != stop || resp.TextContent() != "cut short here" {
					t.Errorf("stop %q text %q; want %q", resp.StopReason, resp.TextContent(), stop)
				}
			}
		})
	}
}

// Before the first delta a stream fails like a plain call: retried with
// backoff, then the next fallback.
func TestStreamRetryAndFallbackBeforeFirstDelta(t *testing.T) {
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, sl := router(t, k, model.RouterOptions{MaxRetries: 1, Fallbacks: []string{k.ref(k.backup)}})
			k.srv.Push(
				modeltest.Reply{Model: k.text, Status: 503},
				modeltest.Reply{Model: k.text, Status: 429, Header: map[string]string{"Retry-After": "3"}},
				modeltest.Reply{Model: k.backup, Text: "from the backup model"},
			)
			var got deltas
			resp, err := r.GenerateStream(context.Background(), &model.Request{Messages: userText("hi")}, false, got.add)
			if err != nil {
				t.Fatal(err)
			}
			if resp.TextContent() != "from the backup model" || strings.Join(got, "") != "from the backup model" {
				t.Errorf("text %q deltas %q", resp.TextContent(), got)
			}
			var models []string
			for _, s := range k.srv.Requests() {
				models = append(models, s.Model)
			}
			if !reflect.DeepEqual(models, []string{k.text, k.text, k.backup}) {
				t.Errorf("models tried = %q", models)
			}
			if d := sl.got(); len(d) != 1 {
				t.Errorf("sleeps = %v", d)
			}
		})
	}
}

// After a delta reached the caller, a failure is final: no retry, no
// fallback, and ErrStreamInterrupted says why.
func TestStreamMidStreamErrorNotRetried(t *testing.T) {
	cases := []struct {
		name      string
		reply     modeltest.Reply
		retryable bool
	}{
		{"connection dropped", modeltest.Reply{StreamCut: 2}, true},
		// Bedrock gets a throttlingException instead.
		{"error event", modeltest.Reply{StreamCut: 1, StreamErrorType: "overloaded_error", ErrorMessage: "Overloaded"}, true},
	}
	for _, k := range kits(t) {
		if !k.streams() {
			continue
		}
		for _, c := range cases {
			t.Run(k.name+"/"+c.name, func(t *testing.T) {
				k.srv.Reset()
				r, sl := router(t, k, model.RouterOptions{MaxRetries: 3, Fallbacks: []string{k.ref(k.backup)}})
				reply := c.reply
				if k.name == "bedrock" && reply.StreamErrorType != "" {
					reply.StreamErrorType = "throttlingException"
				}
				reply.Text, reply.StreamChunks = "one two three four", 4
				k.srv.Push(reply)
				var got deltas
				resp, err := r.GenerateStream(context.Background(), &model.Request{Messages: userText("hi")}, false, got.add)
				if err == nil || resp != nil {
					t.Fatalf("resp %+v err %v", resp, err)
				}
				if !errors.Is(err, model.ErrStreamInterrupted) {
					t.Errorf("err = %v, want ErrStreamInterrupted", err)
				}
				var apiErr *model.APIError
				switch {
				case k.name == "bedrock" && c.reply.StreamErrorType == "":
					// The AWS event-stream reader ends quietly on a dropped
					// connection; the missing messageStop tells.
					if !errors.Is(err, model.ErrBadResponse) {
						t.Errorf("err = %v, want ErrBadResponse", err)
					}
				case !errors.As(err, &apiErr) || apiErr.Retryable != c.retryable:
					t.Errorf("err = %v (%+v)", err, apiErr)
				}
				if c.reply.StreamErrorType != "" && !strings.Contains(err.Error(), "Overloaded") {
					t.Errorf("err = %v lacks the server's message", err)
				}
				if len(got) != c.reply.StreamCut || !strings.HasPrefix("one two three four", strings.Join(got, "")) {
					t.Errorf("deltas = %q", got)
				}
				if n := len(k.srv.Requests()); n != 1 {
					t.Errorf("requests = %d, want 1 (no retry, no fallback)", n)
				}
				if d := sl.got(); len(d) != 0 {
					t.Errorf("sleeps = %v", d)
				}
			})
		}
	}
}

// Malformed or truncated streams end in a wrapped ErrBadResponse, never a
// panic or a silent partial answer.
func TestStreamMalformed(t *testing.T) {
	sseHeader := map[string]string{"Content-Type": "text/event-stream"}
	oaiChunk := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"par"},"finish_reason":null}]}` + "\n\n"
	antStart := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"x\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"
	antText := "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"par\"}}\n\n"
	cases := []struct {
		kit, name, body string
	}{
		{"openai", "not JSON", "data: {nope\n\n"},
		{"openai", "truncated without finish_reason", oaiChunk},
		{"openai", "truncated after a chunk", oaiChunk + "data: {\"id\":\"c\",\"choi"},
		{"openai", "not SSE at all", `{"id":"x","object":"chat.completion","choices":[]}`},
		{"openai", "negative tool index", `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":-1,"id":"x","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}` + "\n\n"},
		{"anthropic", "not JSON", "event: message_start\ndata: {nope\n\n"},
		{"anthropic", "delta before message_start", "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n"},
		{"anthropic", "delta for a block never started", antStart + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n"},
		{"anthropic", "truncated without message_stop", antStart + antText},
		{"anthropic", "broken tool input", antStart +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\"}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":3}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
	}
	bedrockHeader := map[string]string{"Content-Type": "application/vnd.amazon.eventstream"}
	brStart := awsEvent(t, "messageStart", `{"role":"assistant"}`)
	brText := awsEvent(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"par"}}`)
	bedrockCases := []struct{ name, body string }{
		{"not an event stream", "this is not a binary event stream at all, just text"},
		{"truncated without messageStop", brStart + brText},
		{"cut inside a message", brStart + brText[:len(brText)-5]},
		{"negative block index", brStart + awsEvent(t, "contentBlockDelta", `{"contentBlockIndex":-2,"delta":{"text":"x"}}`)},
		{"text after a later block", brStart + awsEvent(t, "contentBlockDelta", `{"contentBlockIndex":2,"delta":{"text":"b"}}`) + brText +
			awsEvent(t, "messageStop", `{"stopReason":"end_turn"}`)},
		{"tool input into a text block", brStart + brText + awsEvent(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{}"}}}`) +
			awsEvent(t, "messageStop", `{"stopReason":"end_turn"}`)},
		{"broken tool input", brStart +
			awsEvent(t, "contentBlockStart", `{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"t","name":"f"}}}`) +
			awsEvent(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{\"a\":"}}}`) +
			awsEvent(t, "messageStop", `{"stopReason":"tool_use"}`)},
	}
	for _, c := range bedrockCases {
		cases = append(cases, struct{ kit, name, body string }{"bedrock", c.name, c.body})
	}
	byName := map[string]kit{}
	for _, k := range kits(t) {
		byName[k.name] = k
	}
	for _, c := range cases {
		t.Run(c.kit+"/"+c.name, func(t *testing.T) {
			k := byName[c.kit]
			k.srv.Reset()
			r, _ := router(t, k, model.RouterOptions{})
			h := sseHeader
			if c.kit == "bedrock" {
				h = bedrockHeader
			}
			k.srv.Push(modeltest.Reply{Body: c.body, Header: h})
			resp, err := r.GenerateStream(context.Background(), &model.Request{Messages: userText("hi")}, false, nil)
			if !errors.Is(err, model.ErrBadResponse) || resp != nil {
				t.Errorf("resp %+v err %v; want ErrBadResponse", resp, err)
			}
			if err != nil && !strings.Contains(err.Error(), k.name) {
				t.Errorf("err %q does not name the provider", err)
			}
		})
	}
}

// Cancelling the caller's context mid-stream stops reading at once.
func TestStreamCancel(t *testing.T) {
	for _, k := range kits(t) {
		if !k.streams() {
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			r, _ := router(t, k, model.RouterOptions{MaxRetries: 3, Fallbacks: []string{k.ref(k.backup)}})
			// The server waits a minute between events: only the
			// cancellation can end the call early.
			k.srv.Push(modeltest.Reply{Text: "a long answer that never ends", StreamChunks: 6, ChunkDelay: time.Minute})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var got deltas
			resp, err := r.GenerateStream(ctx, &model.Request{Messages: userText("hi")}, false, func(s string) {
				got.add(s)
				cancel()
			})
			if !errors.Is(err, context.Canceled) || resp != nil {
				t.Errorf("resp %+v err %v", resp, err)
			}
			if len(got) != 1 || len(k.srv.Requests()) != 1 {
				t.Errorf("deltas %q, requests %d", got, len(k.srv.Requests()))
			}
		})
	}
}

// awsEvent encodes one AWS event-stream event message.
func awsEvent(t *testing.T, event, payload string) string {
	t.Helper()
	var msg eventstream.Message
	msg.Headers.Set(":message-type", eventstream.StringValue("event"))
	msg.Headers.Set(":event-type", eventstream.StringValue(event))
	msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	msg.Payload = []byte(payload)
	var b bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&b, msg); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
