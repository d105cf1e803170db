// Package bedrock implements model.Provider on the Amazon Bedrock Converse
// API (POST /model/{modelId}/converse,
// https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html)
// through aws-sdk-go-v2 service/bedrockruntime.
package bedrock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"

	"github.com/tendrilai/tendril/internal/awsbody"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/internal/wire"
)

// Name is the provider prefix of model references.
const Name = "bedrock"

// DefaultRegion is used when neither Options.Region nor the AWS shared
// config / AWS_REGION names one.
const DefaultRegion = "us-east-1"

// Options configures the provider. Credentials, region and the endpoint
// otherwise come from the AWS standard chain (AWS_ACCESS_KEY_ID,
// AWS_PROFILE, AWS_REGION, AWS_ENDPOINT_URL_BEDROCK_RUNTIME, ~/.aws/…).
type Options struct {
	Region string
	// Endpoint overrides the service URL, e.g. a VPC endpoint or a test fake.
	Endpoint string
	// Credentials overrides the default chain, e.g.
	// credentials.NewStaticCredentialsProvider in tests.
	Credentials aws.CredentialsProvider
	HTTPClient  *http.Client
}

// Provider is the Bedrock Converse backend.
type Provider struct {
	client *bedrockruntime.Client
}

// New loads the AWS configuration (local files and environment only; no
// network) and returns a Provider. The SDK's retryer is replaced by
// aws.NopRetryer: the model.Router owns retries and fallbacks.
func New(ctx context.Context, o Options) (*Provider, error) {
	// The AWS default client is kept unless one is given: it honours
	// AWS_CA_BUNDLE, which a plain *http.Client cannot take at load time.
	load := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
	}
	if o.Region != "" {
		load = append(load, config.WithRegion(o.Region))
	}
	if o.Credentials != nil {
		load = append(load, config.WithCredentialsProvider(o.Credentials))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("%s: load AWS config: %w", Name, err)
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	client := bedrockruntime.NewFromConfig(cfg, func(bo *bedrockruntime.Options) {
		bo.Retryer = aws.NopRetryer{}
		if o.HTTPClient != nil {
			bo.HTTPClient = o.HTTPClient
		}
		// See package awsbody: without it a stream can die mid-answer.
		bo.HTTPClient = awsbody.Guard(bo.HTTPClient)
		if o.Endpoint != "" {
			bo.BaseEndpoint = aws.String(o.Endpoint)
		}
	})
	return &Provider{client: client}, nil
}

// Name returns "bedrock".
func (p *Provider) Name() string { return Name }

// Generate sends one Converse request.
//
// Errors: *model.APIError for HTTP failures (Retryable for
// ThrottlingException, ServiceUnavailableException, InternalServerException,
// ModelNotReadyException, ModelTimeoutException and any 429/5xx), a wrapped
// model.ErrContextOverflow for a ValidationException saying the input is too
// long, a wrapped model.ErrBadResponse for a 2xx body that does not decode or
// has no output message, and ctx errors wrapped.
func (p *Provider) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	in, err := toInput(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	out, err := p.client.Converse(ctx, in)
	if err != nil {
		return nil, mapError(err)
	}
	return fromOutput(req.Model, out)
}

func toInput(req *model.Request) (*bedrockruntime.ConverseInput, error) {
	in := &bedrockruntime.ConverseInput{ModelId: aws.String(req.Model)}
	if req.System != "" {
		in.System = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: req.System}}
	}
	if req.MaxTokens > 0 || req.Temperature != nil {
		in.InferenceConfig = &types.InferenceConfiguration{}
		if req.MaxTokens > 0 {
			in.InferenceConfig.MaxTokens = aws.Int32(int32(min(req.MaxTokens, 1<<31-1)))
		}
		if req.Temperature != nil {
			in.InferenceConfig.Temperature = aws.Float32(float32(*req.Temperature))
		}
	}
	for i, m := range req.Messages {
		var role types.ConversationRole
		switch m.Role {
		case model.RoleUser:
			role = types.ConversationRoleUser
		case model.RoleAssistant:
			role = types.ConversationRoleAssistant
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
		msg := types.Message{Role: role}
		for _, b := range m.Content {
			cb, err := toBlock(b)
			if err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
			msg.Content = append(msg.Content, cb)
		}
		in.Messages = append(in.Messages, msg)
	}
	if len(req.Tools) > 0 {
		tc := &types.ToolConfiguration{}
		for _, t := range req.Tools {
			schema := map[string]any{"type": "object"}
			if len(t.InputSchema) > 0 {
				if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
					return nil, fmt.Errorf("tool %q: input_schema is not a JSON object: %w", t.Name, err)
				}
			}
			spec := types.ToolSpecification{
				Name:        aws.String(t.Name),
				InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(schema)},
			}
			if t.Description != "" {
				spec.Description = aws.String(t.Description)
			}
			tc.Tools = append(tc.Tools, &types.ToolMemberToolSpec{Value: spec})
		}
		in.ToolConfig = tc
	}
	return in, nil
}

func toBlock(b model.Block) (types.ContentBlock, error) {
	switch b.Type {
	case model.BlockText:
		return &types.ContentBlockMemberText{Value: b.Text}, nil
	case model.BlockImage:
		format, ok := imageFormats[b.MediaType]
		if !ok {
			return nil, fmt.Errorf("image media type %q is not one of image/jpeg, image/png, image/gif, image/webp", b.MediaType)
		}
		if len(b.Data) == 0 {
			return nil, errors.New("image block without data")
		}
		return &types.ContentBlockMemberImage{Value: types.ImageBlock{
			Format: format, Source: &types.ImageSourceMemberBytes{Value: b.Data},
		}}, nil
	case model.BlockToolUse:
		var input any = map[string]any{}
		if len(b.Input) > 0 {
			if err := json.Unmarshal(b.Input, &input); err != nil {
				return nil, fmt.Errorf("tool_use %s: input is not valid JSON: %w", b.ID, err)
			}
		}
		return &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
			ToolUseId: aws.String(b.ID), Name: aws.String(b.Name), Input: document.NewLazyDocument(input),
		}}, nil
	case model.BlockToolResult:
		r := types.ToolResultBlock{
			ToolUseId: aws.String(b.ToolUseID),
			Content:   []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: b.Text}},
		}
		if b.IsError {
			r.Status = types.ToolResultStatusError
		}
		return &types.ContentBlockMemberToolResult{Value: r}, nil
	default:
		return nil, fmt.Errorf("unknown block type %q", b.Type)
	}
}

var imageFormats = map[string]types.ImageFormat{
	"image/jpeg": types.ImageFormatJpeg,
	"image/jpg":  types.ImageFormatJpeg,
	"image/png":  types.ImageFormatPng,
	"image/gif":  types.ImageFormatGif,
	"image/webp": types.ImageFormatWebp,
}

func fromOutput(modelName string, out *bedrockruntime.ConverseOutput) (*model.Response, error) {
	msg, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok || msg == nil {
		return nil, fmt.Errorf("%w: %s: response has no output message", model.ErrBadResponse, Name)
	}
	resp := &model.Response{Model: modelName}
	if u := out.Usage; u != nil {
		resp.Usage.InputTokens = int(aws.ToInt32(u.InputTokens) + aws.ToInt32(u.CacheReadInputTokens) + aws.ToInt32(u.CacheWriteInputTokens))
		resp.Usage.OutputTokens = int(aws.ToInt32(u.OutputTokens))
	}
	for _, c := range msg.Value.Content {
		switch v := c.(type) {
		case *types.ContentBlockMemberText:
			resp.Content = append(resp.Content, model.Text(v.Value))
		case *types.ContentBlockMemberToolUse:
			input := json.RawMessage(`{}`)
			if v.Value.Input != nil {
				b, err := v.Value.Input.MarshalSmithyDocument()
				if err != nil {
					return nil, fmt.Errorf("%w: %s: tool_use %s input: %v", model.ErrBadResponse, Name, aws.ToString(v.Value.ToolUseId), err)
				}
				if s := strings.TrimSpace(string(b)); s != "" && s != "null" {
					input = b
				}
			}
			resp.Content = append(resp.Content, model.Block{
				Type: model.BlockToolUse, ID: aws.ToString(v.Value.ToolUseId), Name: aws.ToString(v.Value.Name), Input: input,
			})
		}
	}
	resp.StopReason = stopReason(out.StopReason)
	if len(resp.ToolUses()) > 0 {
		resp.StopReason = model.StopToolUse
	}
	return resp, nil
}

func stopReason(r types.StopReason) model.StopReason {
	switch r {
	case types.StopReasonEndTurn:
		return model.StopEndTurn
	case types.StopReasonToolUse:
		return model.StopToolUse
	case types.StopReasonMaxTokens, types.StopReasonModelContextWindowExceeded:
		return model.StopMaxTokens
	case types.StopReasonStopSequence:
		return model.StopSequence
	case types.StopReasonGuardrailIntervened, types.StopReasonContentFiltered:
		return model.StopRefusal
	}
	return model.StopOther
}

// retryableCodes are the Converse error codes worth retrying.
var retryableCodes = map[string]bool{
	"ThrottlingException":         true,
	"ServiceUnavailableException": true,
	"InternalServerException":     true,
	"ModelNotReadyException":      true,
	"ModelTimeoutException":       true,
}

func mapError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", Name, err)
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.Response == nil {
		if terr := wire.TransportError(Name, err); terr != nil {
			return terr
		}
		return fmt.Errorf("%s: %w", Name, err)
	}
	status := re.HTTPStatusCode()
	if status < 400 {
		return fmt.Errorf("%w: %s: status %d: %v", model.ErrBadResponse, Name, status, err)
	}
	code, msg := "", ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code, msg = ae.ErrorCode(), ae.ErrorMessage()
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	if code != "" {
		msg = code + ": " + msg
	}
	apiErr := &model.APIError{
		Provider:   Name,
		StatusCode: status,
		RetryAfter: model.ParseRetryAfter(re.Response.Header, time.Now()),
		Message:    msg,
		Retryable:  model.RetryableStatus(status) || retryableCodes[code],
	}
	if code == "ValidationException" && wire.ContainsAny(msg, "too long", "context length", "context window", "too many tokens", "maximum context") {
		return fmt.Errorf("%w: %w", model.ErrContextOverflow, apiErr)
	}
	return apiErr
}
