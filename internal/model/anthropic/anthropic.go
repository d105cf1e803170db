// Package anthropic implements model.Provider on the Anthropic Messages API
// (POST /v1/messages, https://docs.anthropic.com/en/api/messages) through
// the official Go SDK github.com/anthropics/anthropic-sdk-go/v2.
package anthropic

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/internal/wire"
)

// Name is the provider prefix of model references.
const Name = "anthropic"

// DefaultBaseURL is the public API root; the SDK appends "v1/messages".
const DefaultBaseURL = "https://api.anthropic.com/"

// Options configures the provider. Nothing is read from the environment
// here: the caller maps ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL onto it.
type Options struct {
	APIKey     string       // sent by the SDK as a credential; may be empty for gateways and fakes
	BaseURL    string       // default DefaultBaseURL
	HTTPClient *http.Client // default: a client without overall timeout
}

// Provider is the Anthropic Messages backend.
type Provider struct {
	client anthropic.Client
}

// New returns a Provider. The SDK's own retries are off: the model.Router
// owns retries and fallbacks.
func New(o Options) *Provider {
	base := o.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base),
		option.WithHTTPClient(wire.HTTPClient(o.HTTPClient)),
		option.WithMaxRetries(0),
	}
	if o.APIKey != "" {
		opts = append(opts, option.WithAPIKey(o.APIKey))
	}
	return &Provider{client: anthropic.NewClient(opts...)}
}

// Name returns "anthropic".
func (p *Provider) Name() string { return Name }

// Generate sends one Messages request.
//
// Errors: *model.APIError for HTTP failures (Retryable for 408/409/429/5xx/
// 529 and overloaded_error), a wrapped model.ErrContextOverflow for "prompt
// is too long" and request_too_large, a wrapped model.ErrBadResponse for a
// 2xx body that is not a message, and ctx errors wrapped.
func (p *Provider) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	params, extra, err := toParams(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	var capt wire.Capture
	opts := append(extra, option.WithMiddleware(capt.Middleware))
	msg, err := p.client.Messages.New(ctx, params, opts...)
	if err != nil {
		return nil, mapError(err, &capt)
	}
	return fromMessage(msg)
}

func toParams(req *model.Request) (anthropic.MessageNewParams, []option.RequestOption, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(req.Model),
		MaxTokens: int64(req.MaxTokens),
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for i, m := range req.Messages {
		blocks, err := toBlocks(m.Content)
		if err != nil {
			return params, nil, fmt.Errorf("message %d: %w", i, err)
		}
		switch m.Role {
		case model.RoleUser:
			params.Messages = append(params.Messages, anthropic.NewUserMessage(blocks...))
		case model.RoleAssistant:
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(blocks...))
		default:
			return params, nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	for _, t := range req.Tools {
		schema, err := toSchema(t.InputSchema)
		if err != nil {
			return params, nil, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		tp := anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tp.Description = anthropic.String(t.Description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &tp})
	}
	var extra []option.RequestOption
	if req.Temperature != nil {
		// MessageNewParams has no temperature field in this SDK version;
		// the API still accepts it.
		extra = append(extra, option.WithJSONSet("temperature", *req.Temperature))
	}
	return params, extra, nil
}

func toBlocks(in []model.Block) ([]anthropic.ContentBlockParamUnion, error) {
	out := make([]anthropic.ContentBlockParamUnion, 0, len(in))
	for _, b := range in {
		switch b.Type {
		case model.BlockText:
			out = append(out, anthropic.NewTextBlock(b.Text))
		case model.BlockImage:
			if len(b.Data) == 0 {
				return nil, errors.New("image block without data")
			}
			out = append(out, anthropic.NewImageBlockBase64(b.MediaType, base64.StdEncoding.EncodeToString(b.Data)))
		case model.BlockToolUse:
			input := b.Input
			if len(input) == 0 {
				input = json.RawMessage(`{}`)
			}
			if !json.Valid(input) {
				return nil, fmt.Errorf("tool_use %s: input is not valid JSON", b.ID)
			}
			out = append(out, anthropic.NewToolUseBlock(b.ID, input, b.Name))
		case model.BlockToolResult:
			out = append(out, anthropic.NewToolResultBlock(b.ToolUseID, b.Text, b.IsError))
		default:
			return nil, fmt.Errorf("unknown block type %q", b.Type)
		}
	}
	return out, nil
}

// toSchema splits a JSON Schema object into the SDK's typed fields and
// ExtraFields, so every keyword reaches the wire unchanged.
func toSchema(raw json.RawMessage) (anthropic.ToolInputSchemaParam, error) {
	var s anthropic.ToolInputSchemaParam
	if len(raw) == 0 {
		return s, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return s, fmt.Errorf("input_schema is not a JSON object: %w", err)
	}
	if t, ok := m["type"]; ok && t != "object" {
		return s, fmt.Errorf("input_schema type must be \"object\", got %v", t)
	}
	delete(m, "type")
	if p, ok := m["properties"]; ok {
		s.Properties = p
		delete(m, "properties")
	}
	if r, ok := m["required"].([]any); ok {
		for _, x := range r {
			if name, ok := x.(string); ok {
				s.Required = append(s.Required, name)
			}
		}
		delete(m, "required")
	}
	if len(m) > 0 {
		s.ExtraFields = m
	}
	return s, nil
}

func fromMessage(msg *anthropic.Message) (*model.Response, error) {
	if msg == nil || msg.Type != "message" && len(msg.Content) == 0 && msg.StopReason == "" {
		return nil, fmt.Errorf("%w: %s: response is not a message", model.ErrBadResponse, Name)
	}
	resp := &model.Response{
		Model: string(msg.Model),
		Usage: model.Usage{
			InputTokens:  int(msg.Usage.InputTokens + msg.Usage.CacheCreationInputTokens + msg.Usage.CacheReadInputTokens),
			OutputTokens: int(msg.Usage.OutputTokens),
		},
	}
	for _, c := range msg.Content {
		switch c.Type {
		case "text":
			resp.Content = append(resp.Content, model.Text(c.Text))
		case "tool_use":
			input := c.Input
			if len(input) == 0 || string(input) == "null" {
				input = json.RawMessage(`{}`)
			}
			resp.Content = append(resp.Content, model.Block{Type: model.BlockToolUse, ID: c.ID, Name: c.Name, Input: append(json.RawMessage(nil), input...)})
		}
	}
	switch msg.StopReason {
	case anthropic.StopReasonEndTurn, anthropic.StopReasonPauseTurn:
		resp.StopReason = model.StopEndTurn
	case anthropic.StopReasonToolUse:
		resp.StopReason = model.StopToolUse
	case anthropic.StopReasonMaxTokens, anthropic.StopReasonModelContextWindowExceeded:
		resp.StopReason = model.StopMaxTokens
	case anthropic.StopReasonStopSequence:
		resp.StopReason = model.StopSequence
	case anthropic.StopReasonRefusal:
		resp.StopReason = model.StopRefusal
	default:
		resp.StopReason = model.StopOther
	}
	if len(resp.ToolUses()) > 0 {
		resp.StopReason = model.StopToolUse
	}
	return resp, nil
}

// mapError classifies an SDK error using what the middleware captured.
func mapError(err error, capt *wire.Capture) error {
	if capt.Status == 0 {
		var aerr *anthropic.Error
		if errors.As(err, &aerr) && aerr.Response != nil {
			capt.Status, capt.Header, capt.Body = aerr.StatusCode, aerr.Response.Header, []byte(aerr.RawJSON())
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", Name, err)
	}
	if capt.Status == 0 {
		if terr := wire.TransportError(Name, err); terr != nil {
			return terr
		}
		return fmt.Errorf("%s: %w", Name, err)
	}
	if capt.Status < 400 {
		return fmt.Errorf("%w: %s: status %d: %v", model.ErrBadResponse, Name, capt.Status, err)
	}
	typ, _, msg := wire.ErrorBody(capt.Body)
	if msg == "" {
		msg = http.StatusText(capt.Status)
	}
	if typ != "" {
		msg = typ + ": " + msg
	}
	apiErr := &model.APIError{
		Provider:   Name,
		StatusCode: capt.Status,
		RetryAfter: model.ParseRetryAfter(capt.Header, time.Now()),
		Message:    msg,
		Retryable:  model.RetryableStatus(capt.Status) || typ == "overloaded_error" || typ == "rate_limit_error",
	}
	if capt.Header.Get("X-Should-Retry") == "false" {
		apiErr.Retryable = false
	}
	if capt.Status == http.StatusRequestEntityTooLarge || typ == "request_too_large" ||
		capt.Status == http.StatusBadRequest && wire.ContainsAny(msg, "prompt is too long", "context window", "context length", "too many tokens") {
		return fmt.Errorf("%w: %w", model.ErrContextOverflow, apiErr)
	}
	return apiErr
}
