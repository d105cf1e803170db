package bedrock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/smithy-go"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/internal/wire"
)

// maxStreamBlocks caps the content blocks assembled from one stream, so a
// hostile endpoint cannot grow the block table without bound.
const maxStreamBlocks = 1024

// GenerateStream sends one ConverseStream request (POST
// /model/{modelId}/converse-stream,
// https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html),
// whose answer is an AWS event stream (application/vnd.amazon.eventstream):
// messageStart, contentBlockStart (toolUse id and name),
// contentBlockDelta (text → onDelta; toolUse.input → the tool input JSON,
// joined per contentBlockIndex), contentBlockStop, messageStop (stopReason)
// and metadata (usage).
//
// Errors: as Generate before the stream; afterwards an in-stream exception
// maps like a Converse error (*model.APIError, Retryable for throttling and
// service errors), a wrapped model.ErrBadResponse for a stream without
// messageStop or with tool input that is not JSON, and ctx errors wrapped.
func (p *Provider) GenerateStream(ctx context.Context, req *model.Request, onDelta func(string)) (*model.Response, error) {
	cin, err := toInput(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	in := &bedrockruntime.ConverseStreamInput{
		ModelId: cin.ModelId, Messages: cin.Messages, System: cin.System,
		InferenceConfig: cin.InferenceConfig, ToolConfig: cin.ToolConfig,
	}
	out, err := p.client.ConverseStream(ctx, in)
	if err != nil {
		return nil, mapError(err)
	}
	stream := out.GetStream()
	defer stream.Close()

	type block struct {
		text, id, name string
		input          strings.Builder
		tool           bool
	}
	blocks := map[int32]*block{}
	get := func(i *int32) (*block, error) {
		idx := aws.ToInt32(i)
		if idx < 0 {
			return nil, fmt.Errorf("%w: %s: contentBlockIndex %d", model.ErrBadResponse, Name, idx)
		}
		b, ok := blocks[idx]
		if !ok {
			if len(blocks) >= maxStreamBlocks {
				return nil, fmt.Errorf("%w: %s: more than %d content blocks", model.ErrBadResponse, Name, maxStreamBlocks)
			}
			b = &block{}
			blocks[idx] = b
		}
		return b, nil
	}
	resp := &model.Response{Model: req.Model}
	stopped := false
	var stop types.StopReason
	events := stream.Events()
loop:
	for {
		var ev types.ConverseStreamOutput
		var ok bool
		select {
		case ev, ok = <-events:
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: %w", Name, ctx.Err())
		}
		if !ok {
			break loop
		}
		switch v := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockStart:
			b, err := get(v.Value.ContentBlockIndex)
			if err != nil {
				return nil, err
			}
			if tu, ok := v.Value.Start.(*types.ContentBlockStartMemberToolUse); ok {
				if b.text != "" {
					return nil, fmt.Errorf("%w: %s: toolUse start for text block %d", model.ErrBadResponse, Name, aws.ToInt32(v.Value.ContentBlockIndex))
				}
				b.tool, b.id, b.name = true, aws.ToString(tu.Value.ToolUseId), aws.ToString(tu.Value.Name)
			}
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			b, err := get(v.Value.ContentBlockIndex)
			if err != nil {
				return nil, err
			}
			switch d := v.Value.Delta.(type) {
			case *types.ContentBlockDeltaMemberText:
				if b.tool {
					return nil, fmt.Errorf("%w: %s: text delta for toolUse block %d", model.ErrBadResponse, Name, aws.ToInt32(v.Value.ContentBlockIndex))
				}
				// Text must arrive in block order, or the deltas would not
				// add up to the answer.
				for i, o := range blocks {
					if i > aws.ToInt32(v.Value.ContentBlockIndex) && o.text != "" {
						return nil, fmt.Errorf("%w: %s: text delta for block %d after block %d", model.ErrBadResponse, Name, aws.ToInt32(v.Value.ContentBlockIndex), i)
					}
				}
				b.text += d.Value
				if d.Value != "" && onDelta != nil {
					onDelta(d.Value)
				}
			case *types.ContentBlockDeltaMemberToolUse:
				if b.text != "" {
					return nil, fmt.Errorf("%w: %s: toolUse delta for text block %d", model.ErrBadResponse, Name, aws.ToInt32(v.Value.ContentBlockIndex))
				}
				b.tool = true
				b.input.WriteString(aws.ToString(d.Value.Input))
			}
		case *types.ConverseStreamOutputMemberMessageStop:
			stopped, stop = true, v.Value.StopReason
		case *types.ConverseStreamOutputMemberMetadata:
			if u := v.Value.Usage; u != nil {
				resp.Usage.InputTokens = int(aws.ToInt32(u.InputTokens) + aws.ToInt32(u.CacheReadInputTokens) + aws.ToInt32(u.CacheWriteInputTokens))
				resp.Usage.OutputTokens = int(aws.ToInt32(u.OutputTokens))
			}
		}
	}
	// A read error after messageStop (the connection torn down while the
	// SDK's reader waited for more, seen under load) does not lose the
	// answer: the message is complete; only trailing usage may be missing.
	if err := stream.Err(); err != nil && !stopped {
		return nil, streamError(err)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", Name, ctx.Err())
	}
	if !stopped {
		return nil, fmt.Errorf("%w: %s: stream ended without messageStop", model.ErrBadResponse, Name)
	}
	idxs := make([]int32, 0, len(blocks))
	for i := range blocks {
		idxs = append(idxs, i)
	}
	sort.Slice(idxs, func(a, b int) bool { return idxs[a] < idxs[b] })
	for _, i := range idxs {
		b := blocks[i]
		if !b.tool {
			if b.text != "" {
				resp.Content = append(resp.Content, model.Text(b.text))
			}
			continue
		}
		input := json.RawMessage(strings.TrimSpace(b.input.String()))
		if len(input) == 0 {
			input = json.RawMessage(`{}`)
		}
		if !json.Valid(input) {
			return nil, fmt.Errorf("%w: %s: tool_use %s: streamed input is not valid JSON", model.ErrBadResponse, Name, b.id)
		}
		resp.Content = append(resp.Content, model.Block{Type: model.BlockToolUse, ID: b.id, Name: b.name, Input: input})
	}
	resp.StopReason = stopReason(stop)
	if len(resp.ToolUses()) > 0 {
		resp.StopReason = model.StopToolUse
	}
	return resp, nil
}

// streamError classifies a failure after the stream began: an exception
// event (ThrottlingException, ModelStreamErrorException, …) becomes a
// *model.APIError, Retryable as for Converse plus ModelStreamErrorException;
// an undecodable message a wrapped model.ErrBadResponse; a broken connection
// a retryable *model.APIError.
func streamError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", Name, err)
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code, msg := ae.ErrorCode(), ae.ErrorMessage()
		if code != "" {
			msg = code + ": " + msg
		}
		return &model.APIError{Provider: Name, StatusCode: 200, Message: "exception in stream: " + msg,
			Retryable: retryableCodes[code] || code == "ModelStreamErrorException"}
	}
	if terr := wire.TransportError(Name, err); terr != nil {
		return terr
	}
	return fmt.Errorf("%w: %s: stream: %v", model.ErrBadResponse, Name, err)
}
