package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/internal/wire"
)

// maxStreamToolCalls caps the tool calls assembled from one stream, so a
// hostile server cannot grow the index table without bound.
const maxStreamToolCalls = 1024

// GenerateStream sends one Chat Completions request with "stream": true and
// "stream_options": {"include_usage": true}
// (https://platform.openai.com/docs/api-reference/chat-streaming). Each
// chunk's choices[0].delta.content goes to onDelta; delta.tool_calls
// fragments are joined by their index (the first fragment of a call carries
// id, type and function.name, later ones more function.arguments); the
// usage-only last chunk fills Usage (servers that ignore include_usage
// leave it zero). The stream must carry a finish_reason.
//
// Errors: as Generate before the first chunk; afterwards a wrapped
// model.ErrBadResponse for an undecodable chunk or a stream that ends
// without finish_reason, a retryable *model.APIError for an in-stream
// {"error": ...} event or a broken connection, and ctx errors wrapped.
func (p *Provider) GenerateStream(ctx context.Context, req *model.Request, onDelta func(string)) (*model.Response, error) {
	params, err := toParams(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	var capt wire.Capture
	stream := p.svc.NewStreaming(ctx, params, option.WithMiddleware(capt.Middleware))
	defer stream.Close()
	var acc chunkAccumulator
	for stream.Next() {
		if err := acc.add(stream.Current(), onDelta); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", model.ErrBadResponse, p.name, err)
		}
	}
	if err := stream.Err(); err != nil {
		return nil, p.streamError(err, &capt)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", p.name, ctx.Err())
	}
	if !acc.finished {
		return nil, fmt.Errorf("%w: %s: stream ended without a finish_reason (%d chunks)", model.ErrBadResponse, p.name, acc.chunks)
	}
	return acc.a.response(), nil
}

// chunkAccumulator assembles the first choice of a chunk stream.
type chunkAccumulator struct {
	a        answer
	byIndex  map[int64]int // tool_calls[].index → position in a.calls
	finished bool
	chunks   int
}

func (c *chunkAccumulator) add(ch openai.ChatCompletionChunk, onDelta func(string)) error {
	c.chunks++
	if ch.Model != "" {
		c.a.model = ch.Model
	}
	if ch.JSON.Usage.Valid() {
		c.a.usage = model.Usage{InputTokens: int(ch.Usage.PromptTokens), OutputTokens: int(ch.Usage.CompletionTokens)}
	}
	for _, choice := range ch.Choices {
		if choice.Index != 0 {
			continue
		}
		d := choice.Delta
		if d.Content != "" {
			c.a.content += d.Content
			if onDelta != nil {
				onDelta(d.Content)
			}
		}
		c.a.refusal += d.Refusal
		for _, tc := range d.ToolCalls {
			if tc.Index < 0 {
				return fmt.Errorf("tool_calls index %d", tc.Index)
			}
			pos, ok := c.byIndex[tc.Index]
			// A fragment with a new id at a known index starts a new call:
			// some servers number every call 0.
			if ok && tc.ID != "" && c.a.calls[pos].id != "" && tc.ID != c.a.calls[pos].id {
				ok = false
			}
			if !ok {
				if len(c.a.calls) >= maxStreamToolCalls {
					return fmt.Errorf("more than %d tool calls", maxStreamToolCalls)
				}
				if c.byIndex == nil {
					c.byIndex = map[int64]int{}
				}
				pos = len(c.a.calls)
				c.byIndex[tc.Index] = pos
				c.a.calls = append(c.a.calls, toolCall{})
			}
			call := &c.a.calls[pos]
			if tc.ID != "" {
				call.id = tc.ID
			}
			if tc.Type != "" {
				call.typ = tc.Type
			}
			call.name += tc.Function.Name
			call.args += tc.Function.Arguments
		}
		if choice.FinishReason != "" {
			c.a.finish = choice.FinishReason
			c.finished = true
		}
	}
	return nil
}

// streamError classifies a failure of a streamed call: before the response
// (mapError), an in-stream error event, an undecodable chunk, or a broken
// connection.
func (p *Provider) streamError(err error, capt *wire.Capture) error {
	if capt.Status == 0 || capt.Status >= 400 {
		return p.mapError(err, capt)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	var serr *ssestream.StreamError
	if errors.As(err, &serr) {
		typ, code, msg := wire.ErrorBody(serr.Event.Data)
		if code != "" {
			msg = code + ": " + msg
		} else if typ != "" {
			msg = typ + ": " + msg
		}
		return &model.APIError{Provider: p.name, StatusCode: capt.Status, Message: "error event in stream: " + msg, Retryable: true}
	}
	var syn *json.SyntaxError
	var ute *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &ute) {
		return fmt.Errorf("%w: %s: stream chunk: %v", model.ErrBadResponse, p.name, err)
	}
	if terr := wire.TransportError(p.name, err); terr != nil {
		return terr
	}
	return fmt.Errorf("%w: %s: stream: %v", model.ErrBadResponse, p.name, err)
}
