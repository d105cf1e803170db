package modeltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/tendrilai/tendril/internal/model"
)

// DefaultStreamChunks is how many pieces a streamed Text or tool-call Args
// is split into when Reply.StreamChunks is 0 (fewer for shorter strings).
const DefaultStreamChunks = 3

// wantsStream reports whether a request body asks for streaming
// ("stream": true, OpenAI and Anthropic).
func wantsStream(body []byte) bool {
	var v struct {
		Stream bool `json:"stream"`
	}
	return json.Unmarshal(body, &v) == nil && v.Stream
}

// split cuts s into at most n non-empty pieces on rune boundaries.
func split(s string, n int) []string {
	if s == "" {
		return nil
	}
	runes := utf8.RuneCountInString(s)
	if n <= 0 {
		n = DefaultStreamChunks
	}
	if n > runes {
		n = runes
	}
	out := make([]string, 0, n)
	size := (runes + n - 1) / n
	for s != "" {
		i, k := 0, 0
		for i < len(s) && k < size {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
			k++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// sse writes Server-Sent Events (https://html.spec.whatwg.org/multipage/server-sent-events.html)
// one at a time, flushing each; every event after the first text piece
// waits Reply.ChunkDelay first.
type sse struct {
	w     http.ResponseWriter
	r     *http.Request
	delay time.Duration
	text  bool // a text piece was sent: later events wait delay
	gone  bool
}

func newSSE(w http.ResponseWriter, r *http.Request, reply Reply) *sse {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, r: r, delay: reply.ChunkDelay}
}

// send writes one event; typ "" omits the event: line. It returns false
// once the client went away.
func (s *sse) send(typ string, data any) bool {
	var b []byte
	if raw, ok := data.(string); ok {
		b = []byte(raw)
	} else {
		var err error
		if b, err = json.Marshal(data); err != nil {
			panic(err) // our own maps; unreachable
		}
	}
	return s.sendRaw(func() error {
		if typ != "" {
			fmt.Fprintf(s.w, "event: %s\n", typ)
		}
		_, err := fmt.Fprintf(s.w, "data: %s\n\n", b)
		return err
	})
}

// sendRaw waits ChunkDelay when due, runs write and flushes. It returns
// false once the client went away.
func (s *sse) sendRaw(write func() error) bool {
	if s.gone {
		return false
	}
	if s.text && s.delay > 0 {
		t := time.NewTimer(s.delay)
		select {
		case <-t.C:
		case <-s.r.Context().Done():
			t.Stop()
			s.gone = true
			return false
		}
	}
	if write() != nil {
		s.gone = true
		return false
	}
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
	return s.r.Context().Err() == nil
}

// cut ends a stream early after n text deltas (Reply.StreamCut): with the
// provider's in-stream error event when StreamErrorType is set, else by
// dropping the connection mid-body.
func (s *sse) cut(kind Kind, reply Reply) {
	if reply.StreamErrorType == "" {
		panic(http.ErrAbortHandler)
	}
	msg := reply.ErrorMessage
	if msg == "" {
		msg = "stream failed: " + reply.StreamErrorType
	}
	if kind == Anthropic {
		s.send("error", map[string]any{"type": "error", "error": map[string]any{"type": reply.StreamErrorType, "message": msg}})
		return
	}
	s.send("", map[string]any{"error": map[string]any{"message": msg, "type": reply.StreamErrorType, "param": nil, "code": nil}})
}

// writeOpenAIStream answers in the Chat Completions streaming format
// (https://platform.openai.com/docs/api-reference/chat-streaming): a role
// chunk, content chunks, tool_calls fragments by index (id, type and name
// first, then arguments), a finish_reason chunk, a usage chunk with empty
// choices when stream_options.include_usage is set, then "data: [DONE]".
func writeOpenAIStream(w http.ResponseWriter, r *http.Request, n int, modelName string, body []byte, reply Reply) {
	var opts struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(body, &opts)
	s := newSSE(w, r, reply)
	id := fmt.Sprintf("chatcmpl-fake-%d", n)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": 1764460800, "model": modelName,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
		}
	}
	if !s.send("", chunk(map[string]any{"role": "assistant", "content": ""}, nil)) {
		return
	}
	for i, piece := range split(reply.Text, reply.StreamChunks) {
		if reply.StreamCut > 0 && i == reply.StreamCut {
			s.cut(OpenAI, reply)
			return
		}
		if !s.send("", chunk(map[string]any{"content": piece}, nil)) {
			return
		}
		s.text = true
	}
	for i, tc := range reply.ToolCalls {
		first := map[string]any{"index": i, "id": tc.ID, "type": "function", "function": map[string]any{"name": tc.Name, "arguments": ""}}
		if !s.send("", chunk(map[string]any{"tool_calls": []any{first}}, nil)) {
			return
		}
		for _, piece := range split(tc.Args, reply.StreamChunks) {
			frag := map[string]any{"index": i, "function": map[string]any{"arguments": piece}}
			if !s.send("", chunk(map[string]any{"tool_calls": []any{frag}}, nil)) {
				return
			}
		}
	}
	if !s.send("", chunk(map[string]any{}, openAIFinish(reply.StopReason))) {
		return
	}
	if opts.StreamOptions.IncludeUsage {
		if !s.send("", map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": 1764460800, "model": modelName, "choices": []any{},
			"usage": map[string]any{"prompt_tokens": reply.InputTokens, "completion_tokens": reply.OutputTokens, "total_tokens": reply.InputTokens + reply.OutputTokens},
		}) {
			return
		}
	}
	s.send("", "[DONE]")
}

// writeAnthropicStream answers in the Messages streaming format
// (https://docs.anthropic.com/en/docs/build-with-claude/streaming):
// message_start, a ping, per block content_block_start / content_block_delta
// (text_delta or input_json_delta) / content_block_stop, message_delta with
// the stop reason and usage, message_stop.
func writeAnthropicStream(w http.ResponseWriter, r *http.Request, n int, modelName string, reply Reply) {
	s := newSSE(w, r, reply)
	ok := s.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_fake_%d", n), "type": "message", "role": "assistant", "model": modelName,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": reply.InputTokens, "output_tokens": 1},
	}}) && s.send("ping", map[string]any{"type": "ping"})
	if !ok {
		return
	}
	idx := 0
	if reply.Text != "" || len(reply.ToolCalls) == 0 {
		if !s.send("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}}) {
			return
		}
		for i, piece := range split(reply.Text, reply.StreamChunks) {
			if reply.StreamCut > 0 && i == reply.StreamCut {
				s.cut(Anthropic, reply)
				return
			}
			if !s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": piece}}) {
				return
			}
			s.text = true
		}
		if !s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx}) {
			return
		}
		idx++
	}
	for _, tc := range reply.ToolCalls {
		if !s.send("content_block_start", map[string]any{"type": "content_block_start", "index": idx,
			"content_block": map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": map[string]any{}}}) {
			return
		}
		for _, piece := range split(tc.Args, reply.StreamChunks) {
			if !s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": piece}}) {
				return
			}
		}
		if !s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx}) {
			return
		}
		idx++
	}
	if !s.send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": anthropicStop(reply.StopReason), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": reply.OutputTokens}}) {
		return
	}
	s.send("message_stop", map[string]any{"type": "message_stop"})
}

func openAIFinish(r model.StopReason) string {
	finish := map[model.StopReason]string{
		model.StopEndTurn: "stop", model.StopToolUse: "tool_calls", model.StopMaxTokens: "length",
		model.StopSequence: "stop", model.StopRefusal: "content_filter",
	}[r]
	if finish == "" {
		finish = string(r)
	}
	return finish
}

func anthropicStop(r model.StopReason) string {
	stop := map[model.StopReason]string{
		model.StopEndTurn: "end_turn", model.StopToolUse: "tool_use", model.StopMaxTokens: "max_tokens",
		model.StopSequence: "stop_sequence", model.StopRefusal: "refusal",
	}[r]
	if stop == "" {
		stop = string(r)
	}
	return stop
}
