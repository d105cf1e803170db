// Package model defines the provider-neutral types of a model call and the
// Provider interface that every backend (Anthropic Messages, Bedrock
// Converse, OpenAI-compatible Chat Completions) implements.
//
// A model reference has the form "provider/model", for example
// "anthropic/claude-haiku-4-5", "bedrock/us.anthropic.claude-haiku-4-5-20251001-v1:0",
// "openai/gpt-4o-mini" or "ollama/llama3.2".
package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Role is the author of a Message. System prompts travel in Request.System,
// never as a message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// BlockType names the kind of a content Block.
type BlockType string

const (
	BlockText       BlockType = "text"
	BlockImage      BlockType = "image"
	BlockToolUse    BlockType = "tool_use"
	BlockToolResult BlockType = "tool_result"
)

// Block is one typed piece of message content.
//
//   - text:        Text
//   - image:       MediaType ("image/jpeg", "image/png", "image/gif", "image/webp") and Data (raw bytes)
//   - tool_use:    ID, Name, Input (a JSON object)
//   - tool_result: ToolUseID, Text (the result), IsError
type Block struct {
	Type      BlockType       `json:"type"`
	Text      string          `json:"text,omitempty"`
	MediaType string          `json:"media_type,omitempty"`
	Data      []byte          `json:"data,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// Text returns a text block.
func Text(s string) Block { return Block{Type: BlockText, Text: s} }

// Message is one turn of the conversation sent to the model.
type Message struct {
	Role    Role    `json:"role"`
	Content []Block `json:"content"`
}

// ToolDef describes a tool the model may call. InputSchema is a JSON Schema
// object (draft 2020-12 subset accepted by all three providers).
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Request is one model call. Model is the model name without the provider
// prefix; the Router fills it in.
type Request struct {
	Model       string    `json:"model"`
	System      string    `json:"system,omitempty"`
	Messages    []Message `json:"messages"`
	Tools       []ToolDef `json:"tools,omitempty"`
	MaxTokens   int       `json:"max_tokens,omitempty"`
	Temperature *float64  `json:"temperature,omitempty"`
}

// StopReason says why the model stopped, normalised across providers.
type StopReason string

const (
	StopEndTurn   StopReason = "end_turn"
	StopToolUse   StopReason = "tool_use"
	StopMaxTokens StopReason = "max_tokens"
	StopSequence  StopReason = "stop_sequence"
	StopRefusal   StopReason = "refusal"
	StopOther     StopReason = "other"
)

// Usage counts tokens for one call.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Response is the model's answer to a Request.
type Response struct {
	Model      string     `json:"model"`
	Content    []Block    `json:"content"`
	StopReason StopReason `json:"stop_reason"`
	Usage      Usage      `json:"usage"`
}

// TextContent joins the text blocks of the response.
func (r *Response) TextContent() string {
	var s string
	for _, b := range r.Content {
		if b.Type == BlockText {
			s += b.Text
		}
	}
	return s
}

// ToolUses returns the tool_use blocks of the response, in order.
func (r *Response) ToolUses() []Block {
	var out []Block
	for _, b := range r.Content {
		if b.Type == BlockToolUse {
			out = append(out, b)
		}
	}
	return out
}

// Provider is one model backend. Generate must honour ctx cancellation and
// return an *APIError for HTTP-level failures so the Router can decide on
// retries and fallbacks.
type Provider interface {
	// Name is the provider prefix of model references, e.g. "anthropic".
	Name() string
	Generate(ctx context.Context, req *Request) (*Response, error)
}

// ErrNotConfigured is returned when no model is configured for a turn.
var ErrNotConfigured = errors.New("no model configured: set MODEL_ID (e.g. anthropic/claude-haiku-4-5 with ANTHROPIC_API_KEY, openai/gpt-4o-mini with OPENAI_API_KEY, or ollama/llama3.2) and optionally VISION_MODEL_ID")

// ErrContextOverflow is returned (wrapped) when the provider rejects the
// request because the prompt exceeds the model's context window.
var ErrContextOverflow = errors.New("model context window exceeded")

// APIError is an HTTP-level provider failure.
type APIError struct {
	Provider   string
	StatusCode int           // HTTP status; 0 for transport errors
	RetryAfter time.Duration // from the retry-after header, 0 if absent
	Message    string
	Retryable  bool // 429, 5xx, overload, transport timeouts
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s: status %d: %s", e.Provider, e.StatusCode, e.Message)
}
