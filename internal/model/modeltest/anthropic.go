package modeltest

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/tendrilai/tendril/internal/model"
)

// Anthropic Messages wire shapes (https://docs.anthropic.com/en/api/messages).

type antRequest struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
}

type antBlock struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func decodeAnthropic(body []byte, s *Seen) error {
	var req antRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return err
	}
	if req.Model == "" {
		return errors.New("model: field required")
	}
	if req.MaxTokens <= 0 {
		return errors.New("max_tokens: field required")
	}
	s.Model, s.MaxTokens = req.Model, req.MaxTokens
	sys, err := antText(req.System)
	if err != nil {
		return fmt.Errorf("system: %w", err)
	}
	s.System = sys
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Errorf("messages.%d.role: %q", i, m.Role)
		}
		msg := model.Message{Role: model.Role(m.Role)}
		var str string
		if json.Unmarshal(m.Content, &str) == nil {
			msg.Content = []model.Block{model.Text(str)}
			s.Messages = append(s.Messages, msg)
			continue
		}
		var blocks []antBlock
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return fmt.Errorf("messages.%d.content: %w", i, err)
		}
		for j, b := range blocks {
			nb, err := antToNeutral(b)
			if err != nil {
				return fmt.Errorf("messages.%d.content.%d: %w", i, j, err)
			}
			msg.Content = append(msg.Content, nb)
		}
		s.Messages = append(s.Messages, msg)
	}
	for _, t := range req.Tools {
		s.Tools = append(s.Tools, t.Name)
		s.ToolDefs = append(s.ToolDefs, model.ToolDef{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	return nil
}

// antText reads a string or an array of text blocks.
func antText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []antBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", err
	}
	var parts []string
	for _, b := range blocks {
		if b.Type != "text" {
			return "", fmt.Errorf("block type %q where text is expected", b.Type)
		}
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n"), nil
}

func antToNeutral(b antBlock) (model.Block, error) {
	switch b.Type {
	case "text":
		return model.Text(b.Text), nil
	case "image":
		if b.Source == nil || b.Source.Type != "base64" {
			return model.Block{}, errors.New("image.source: want type base64")
		}
		data, err := base64.StdEncoding.DecodeString(b.Source.Data)
		if err != nil {
			return model.Block{}, fmt.Errorf("image.source.data: %w", err)
		}
		return model.Block{Type: model.BlockImage, MediaType: b.Source.MediaType, Data: data}, nil
	case "tool_use":
		if b.ID == "" || b.Name == "" {
			return model.Block{}, errors.New("tool_use: id and name required")
		}
		var obj map[string]any
		if err := json.Unmarshal(b.Input, &obj); err != nil {
			return model.Block{}, fmt.Errorf("tool_use.input: want an object: %w", err)
		}
		return model.Block{Type: model.BlockToolUse, ID: b.ID, Name: b.Name, Input: b.Input}, nil
	case "tool_result":
		if b.ToolUseID == "" {
			return model.Block{}, errors.New("tool_result: tool_use_id required")
		}
		text, err := antText(b.Content)
		if err != nil {
			return model.Block{}, fmt.Errorf("tool_result.content: %w", err)
		}
		return model.Block{Type: model.BlockToolResult, ToolUseID: b.ToolUseID, Text: text, IsError: b.IsError}, nil
	}
	return model.Block{}, fmt.Errorf("unknown block type %q", b.Type)
}

func anthropicReply(n int, modelName string, r Reply) any {
	content := []map[string]any{}
	if r.Text != "" || len(r.ToolCalls) == 0 {
		content = append(content, map[string]any{"type": "text", "text": r.Text})
	}
	for _, tc := range r.ToolCalls {
		content = append(content, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": json.RawMessage(tc.Args)})
	}
	stop := map[model.StopReason]string{
		model.StopEndTurn: "end_turn", model.StopToolUse: "tool_use", model.StopMaxTokens: "max_tokens",
		model.StopSequence: "stop_sequence", model.StopRefusal: "refusal",
	}[r.StopReason]
	if stop == "" {
		stop = string(r.StopReason)
	}
	return map[string]any{
		"id": fmt.Sprintf("msg_fake_%d", n), "type": "message", "role": "assistant", "model": modelName,
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": r.InputTokens, "output_tokens": r.OutputTokens},
	}
}

func writeAnthropicError(w http.ResponseWriter, status int, r Reply) {
	typ := r.ErrorType
	if typ == "" {
		typ = map[int]string{
			400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
			404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error",
		}[status]
		if typ == "" {
			typ = "api_error"
		}
	}
	msg := r.ErrorMessage
	if msg == "" {
		msg = http.StatusText(status)
		if status == 529 {
			msg = "Overloaded"
		}
	}
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}
