// Package openai implements model.Provider on OpenAI-compatible Chat
// Completions (POST {base}/chat/completions,
// https://platform.openai.com/docs/api-reference/chat/create) through the
// official SDK github.com/openai/openai-go/v3. The same code serves OpenAI,
// Ollama, vLLM, LM Studio and llama.cpp server.
package openai

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/internal/wire"
)

// Provider prefixes and default endpoints.
const (
	Name             = "openai"
	OllamaName       = "ollama"
	DefaultBaseURL   = "https://api.openai.com/v1"
	DefaultOllamaURL = "http://127.0.0.1:11434/v1"
)

// Options configures the provider. Nothing is read from the environment
// here: the caller maps OPENAI_API_KEY and OPENAI_BASE_URL onto it.
type Options struct {
	// Name is the provider prefix reported by Name() and in errors:
	// "openai" (default) or "ollama".
	Name string
	// APIKey is sent as "Authorization: Bearer"; empty sends none (Ollama).
	APIKey string
	// BaseURL includes the version path, e.g. "http://127.0.0.1:11434/v1";
	// default DefaultBaseURL ("ollama": DefaultOllamaURL).
	BaseURL    string
	HTTPClient *http.Client
}

// Provider is the Chat Completions backend.
type Provider struct {
	name string
	svc  openai.ChatCompletionService
}

// New returns a Provider. It does not read OPENAI_* variables (the SDK's
// NewClient would), and the SDK's own retries are off: the model.Router
// owns retries and fallbacks.
func New(o Options) *Provider {
	name := o.Name
	if name == "" {
		name = Name
	}
	base := o.BaseURL
	if base == "" {
		base = DefaultBaseURL
		if name == OllamaName {
			base = DefaultOllamaURL
		}
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithHTTPClient(wire.HTTPClient(o.HTTPClient)),
		option.WithMaxRetries(0),
	}
	if o.APIKey != "" {
		opts = append(opts, option.WithAPIKey(o.APIKey))
	}
	return &Provider{name: name, svc: openai.NewChatCompletionService(opts...)}
}

// Name returns the provider prefix ("openai" or "ollama").
func (p *Provider) Name() string { return p.name }

// Generate sends one Chat Completions request.
//
// Errors: *model.APIError for HTTP failures (Retryable for 408/409/429/5xx),
// a wrapped model.ErrContextOverflow for code "context_length_exceeded" and
// the vLLM / llama.cpp "maximum context length" / "exceed_context_size_error"
// shapes, a wrapped model.ErrBadResponse for a 2xx body without choices, and
// ctx errors wrapped.
func (p *Provider) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	body, err := encodeRequest(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	var capt wire.Capture
	var raw []byte
	// The body is ours (encodeRequest) and so is the decoding
	// (decodeCompletion); the SDK still sends, authenticates and maps
	// errors. The empty params it is handed encode to a few bytes and are
	// replaced by body.
	_, err = p.svc.New(ctx, openai.ChatCompletionNewParams{}, option.WithRequestBody("application/json", body),
		option.WithResponseBodyInto(&raw), option.WithMiddleware(capt.Middleware))
	if err != nil {
		return nil, p.mapError(err, &capt)
	}
	return p.decodeCompletion(raw)
}

func toParams(req *model.Request) (openai.ChatCompletionNewParams, error) {
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(req.Model)}
	if req.MaxTokens > 0 {
		// max_tokens, not max_completion_tokens: Ollama, vLLM and llama.cpp
		// understand it, and OpenAI still accepts it for chat models.
		params.MaxTokens = openai.Int(int64(req.MaxTokens))
	}
	if req.Temperature != nil {
		params.Temperature = openai.Float(*req.Temperature)
	}
	if req.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.System))
	}
	for i, m := range req.Messages {
		msgs, err := toMessages(m)
		if err != nil {
			return params, fmt.Errorf("message %d: %w", i, err)
		}
		params.Messages = append(params.Messages, msgs...)
	}
	for _, t := range req.Tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		if len(t.InputSchema) > 0 {
			var schema map[string]any
			if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
				return params, fmt.Errorf("tool %q: input_schema is not a JSON object: %w", t.Name, err)
			}
			fn.Parameters = shared.FunctionParameters(schema)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	return params, nil
}

// toMessages maps one neutral message. A user message's tool_result blocks
// become "tool" messages placed before the rest of its content, which is the
// order Chat Completions requires (results right after the assistant's
// tool_calls).
func toMessages(m model.Message) ([]openai.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case model.RoleUser:
		var out []openai.ChatCompletionMessageParamUnion
		var parts []openai.ChatCompletionContentPartUnionParam
		hasImage := false
		for _, b := range m.Content {
			switch b.Type {
			case model.BlockText:
				parts = append(parts, openai.TextContentPart(b.Text))
			case model.BlockImage:
				if len(b.Data) == 0 {
					return nil, errors.New("image block without data")
				}
				hasImage = true
				url := "data:" + b.MediaType + ";base64," + base64.StdEncoding.EncodeToString(b.Data)
				parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url}))
			case model.BlockToolResult:
				text := b.Text
				if b.IsError {
					// Chat Completions has no error flag on tool results.
					text = "ERROR: " + text
				}
				out = append(out, openai.ToolMessage(text, b.ToolUseID))
			default:
				return nil, fmt.Errorf("block type %q is not allowed in a user message", b.Type)
			}
		}
		switch {
		case len(parts) == 0:
		case !hasImage:
			// Plain string content: the widest compatibility (older Ollama
			// and llama.cpp reject part arrays).
			var sb strings.Builder
			for i, p := range parts {
				if i > 0 {
					sb.WriteString("\n")
				}
				sb.WriteString(p.OfText.Text)
			}
			out = append(out, openai.UserMessage(sb.String()))
		default:
			out = append(out, openai.UserMessage(parts))
		}
		return out, nil
	case model.RoleAssistant:
		var a openai.ChatCompletionAssistantMessageParam
		var text strings.Builder
		for _, b := range m.Content {
			switch b.Type {
			case model.BlockText:
				text.WriteString(b.Text)
			case model.BlockToolUse:
				args := string(b.Input)
				if args == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       b.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.Name, Arguments: args},
					},
				})
			default:
				return nil, fmt.Errorf("block type %q is not allowed in an assistant message", b.Type)
			}
		}
		if text.Len() > 0 || len(a.ToolCalls) == 0 {
			a.Content.OfString = openai.String(text.String())
		}
		return []openai.ChatCompletionMessageParamUnion{{OfAssistant: &a}}, nil
	default:
		return nil, fmt.Errorf("unknown role %q", m.Role)
	}
}

func (p *Provider) fromCompletion(cc *openai.ChatCompletion) (*model.Response, error) {
	if cc == nil || len(cc.Choices) == 0 {
		return nil, fmt.Errorf("%w: %s: response has no choices", model.ErrBadResponse, p.name)
	}
	ch := cc.Choices[0]
	a := answer{
		model: cc.Model, content: ch.Message.Content, refusal: ch.Message.Refusal, finish: ch.FinishReason,
		usage: model.Usage{InputTokens: int(cc.Usage.PromptTokens), OutputTokens: int(cc.Usage.CompletionTokens)},
	}
	for _, tc := range ch.Message.ToolCalls {
		a.calls = append(a.calls, toolCall{id: tc.ID, typ: tc.Type, name: tc.Function.Name, args: tc.Function.Arguments})
	}
	return a.response(), nil
}

// answer is the first choice of a completion, whether it came whole or was
// assembled from stream chunks.
type answer struct {
	model, content, refusal, finish string
	calls                           []toolCall
	usage                           model.Usage
}

type toolCall struct{ id, typ, name, args string }

func (a *answer) response() *model.Response {
	resp := &model.Response{Model: a.model, Usage: a.usage}
	if a.content != "" {
		resp.Content = append(resp.Content, model.Text(a.content))
	}
	for i, tc := range a.calls {
		if tc.typ != "" && tc.typ != "function" {
			continue
		}
		id := tc.id
		if id == "" {
			// Some OpenAI-compatible servers omit ids; results must still pair.
			id = fmt.Sprintf("call_%d", i)
		}
		resp.Content = append(resp.Content, model.Block{
			Type: model.BlockToolUse, ID: id, Name: tc.name, Input: toolInput(tc.args),
		})
	}
	switch a.finish {
	case "stop":
		resp.StopReason = model.StopEndTurn
	case "tool_calls", "function_call":
		resp.StopReason = model.StopToolUse
	case "length":
		resp.StopReason = model.StopMaxTokens
	case "content_filter":
		resp.StopReason = model.StopRefusal
	default:
		resp.StopReason = model.StopOther
	}
	if len(resp.ToolUses()) > 0 {
		// Ollama reports "stop" even when it called tools.
		resp.StopReason = model.StopToolUse
	} else if a.refusal != "" {
		resp.Content = append(resp.Content, model.Text(a.refusal))
		resp.StopReason = model.StopRefusal
	}
	return resp
}

// toolInput keeps arguments that are a JSON object; anything else (models
// do emit broken JSON) is passed on as a JSON string so the tool layer
// reports a clear validation error to the model instead of failing the turn.
func toolInput(args string) json.RawMessage {
	args = strings.TrimSpace(args)
	if args == "" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(args)) && strings.HasPrefix(args, "{") {
		return json.RawMessage(args)
	}
	b, _ := json.Marshal(args)
	return b
}

func (p *Provider) mapError(err error, capt *wire.Capture) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	if capt.Status == 0 {
		if terr := wire.TransportError(p.name, err); terr != nil {
			return terr
		}
		return fmt.Errorf("%s: %w", p.name, err)
	}
	if capt.Status < 400 {
		return fmt.Errorf("%w: %s: status %d: %v", model.ErrBadResponse, p.name, capt.Status, err)
	}
	typ, code, msg := wire.ErrorBody(capt.Body)
	if msg == "" {
		msg = http.StatusText(capt.Status)
	}
	if code != "" {
		msg = code + ": " + msg
	} else if typ != "" {
		msg = typ + ": " + msg
	}
	apiErr := &model.APIError{
		Provider:   p.name,
		StatusCode: capt.Status,
		RetryAfter: model.ParseRetryAfter(capt.Header, time.Now()),
		Message:    msg,
		Retryable:  model.RetryableStatus(capt.Status),
	}
	if capt.Header.Get("X-Should-Retry") == "false" || code == "insufficient_quota" {
		apiErr.Retryable = false
	}
	if code == "context_length_exceeded" || typ == "exceed_context_size_error" ||
		capt.Status == http.StatusBadRequest && wire.ContainsAny(msg, "maximum context length", "context length exceeded", "exceeds the available context size", "context window") {
		return fmt.Errorf("%w: %w", model.ErrContextOverflow, apiErr)
	}
	return apiErr
}
