package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/internal/wire"
)

// GenerateStream sends one Messages request with "stream": true
// (https://docs.anthropic.com/en/docs/build-with-claude/streaming). The
// events message_start, content_block_start, content_block_delta
// (text_delta → onDelta; input_json_delta → the tool_use input),
// content_block_stop, message_delta (stop_reason, cumulative usage) and
// message_stop are folded with the SDK's Message.Accumulate into the message
// Generate would have returned; ping events are skipped.
//
// Errors: as Generate before the first event; afterwards a wrapped
// model.ErrBadResponse for an undecodable or out-of-order event or a stream
// that ends without message_stop, a *model.APIError for an in-stream error
// event (Retryable for overloaded_error, api_error and rate_limit_error), a
// retryable *model.APIError for a broken connection, and ctx errors wrapped.
func (p *Provider) GenerateStream(ctx context.Context, req *model.Request, onDelta func(string)) (*model.Response, error) {
	params, extra, err := toParams(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	var capt wire.Capture
	opts := append(extra, option.WithMiddleware(capt.Middleware))
	stream := p.client.Messages.NewStreaming(ctx, params, opts...)
	defer stream.Close()
	var msg anthropic.Message
	started, stopped := false, false
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "message_start":
			if started {
				return nil, fmt.Errorf("%w: %s: second message_start in one stream", model.ErrBadResponse, Name)
			}
			started = true
		case "":
			return nil, fmt.Errorf("%w: %s: stream event without a type", model.ErrBadResponse, Name)
		default:
			if !started {
				return nil, fmt.Errorf("%w: %s: stream event %q before message_start", model.ErrBadResponse, Name, ev.Type)
			}
		}
		if ev.Type == "content_block_stop" || ev.Type == "message_stop" {
			// Accumulate replaces a tool input that is not JSON by {} when
			// its block closes; a cut-off call must fail instead.
			for _, c := range msg.Content {
				if c.Type == "tool_use" && len(c.Input) > 0 && !json.Valid(c.Input) {
					return nil, fmt.Errorf("%w: %s: tool_use %s: streamed input is not valid JSON", model.ErrBadResponse, Name, c.ID)
				}
			}
		}
		if err := msg.Accumulate(ev); err != nil {
			return nil, fmt.Errorf("%w: %s: stream event %s: %v", model.ErrBadResponse, Name, ev.Type, err)
		}
		switch ev.Type {
		case "message_start":
			if len(msg.Content) > 0 {
				return nil, fmt.Errorf("%w: %s: message_start carries content", model.ErrBadResponse, Name)
			}
		case "content_block_start":
			// The API starts text blocks empty; text carried here anyway is
			// streamed so the deltas always add up to the answer.
			if c := msg.Content[len(msg.Content)-1]; c.Type == "text" && c.Text != "" && onDelta != nil {
				onDelta(c.Text)
			}
		case "content_block_delta":
			if ev.Delta.Type != "text_delta" {
				break
			}
			// Accumulate checked the index. Text into a block that is not
			// a text block would stream words the answer never holds.
			if typ := msg.Content[ev.Index].Type; typ != "text" {
				return nil, fmt.Errorf("%w: %s: text_delta for content block %d of type %q", model.ErrBadResponse, Name, ev.Index, typ)
			}
			for _, later := range msg.Content[ev.Index+1:] {
				if later.Type == "text" && later.Text != "" {
					return nil, fmt.Errorf("%w: %s: text_delta for content block %d after a later text block", model.ErrBadResponse, Name, ev.Index)
				}
			}
			if ev.Delta.Text != "" && onDelta != nil {
				onDelta(ev.Delta.Text)
			}
		case "message_stop":
			stopped = true
		}
	}
	if err := stream.Err(); err != nil {
		return nil, streamError(err, &capt)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", Name, ctx.Err())
	}
	if !stopped {
		return nil, fmt.Errorf("%w: %s: stream ended without message_stop", model.ErrBadResponse, Name)
	}
	return fromMessage(&msg)
}

// streamError classifies a failure of a streamed call: before the response
// (mapError), an in-stream error event, an undecodable event, or a broken
// connection.
func streamError(err error, capt *wire.Capture) error {
	if capt.Status == 0 || capt.Status >= 400 {
		return mapError(err, capt)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", Name, err)
	}
	var aerr *anthropic.Error
	if errors.As(err, &aerr) {
		typ, _, msg := wire.ErrorBody([]byte(aerr.RawJSON()))
		if typ != "" {
			msg = typ + ": " + msg
		}
		return &model.APIError{
			Provider: Name, StatusCode: capt.Status, Message: "error event in stream: " + msg,
			Retryable: typ == "overloaded_error" || typ == "api_error" || typ == "rate_limit_error",
		}
	}
	var syn *json.SyntaxError
	var ute *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &ute) {
		return fmt.Errorf("%w: %s: stream event: %v", model.ErrBadResponse, Name, err)
	}
	if terr := wire.TransportError(Name, err); terr != nil {
		return terr
	}
	return fmt.Errorf("%w: %s: stream: %v", model.ErrBadResponse, Name, err)
}
