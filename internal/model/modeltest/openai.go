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

// OpenAI Chat Completions wire shapes
// (https://platform.openai.com/docs/api-reference/chat/create).

type oaiRequest struct {
	Model               string `json:"model"`
	MaxTokens           int    `json:"max_tokens"`
	MaxCompletionTokens int    `json:"max_completion_tokens"`
	Messages            []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

type oaiPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

func decodeOpenAI(body []byte, s *Seen) error {
	var req oaiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return err
	}
	if req.Model == "" {
		return errors.New("model: field required")
	}
	s.Model = req.Model
	s.MaxTokens = req.MaxTokens
	if s.MaxTokens == 0 {
		s.MaxTokens = req.MaxCompletionTokens
	}
	// add appends blocks to the last message when it has the same role, so
	// "tool" messages and the user message after them form one user turn.
	add := func(role model.Role, blocks ...model.Block) {
		if n := len(s.Messages); n > 0 && s.Messages[n-1].Role == role && role == model.RoleUser {
			s.Messages[n-1].Content = append(s.Messages[n-1].Content, blocks...)
			return
		}
		s.Messages = append(s.Messages, model.Message{Role: role, Content: blocks})
	}
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "developer":
			text, _, err := oaiContent(m.Content)
			if err != nil {
				return fmt.Errorf("messages[%d].content: %w", i, err)
			}
			if s.System != "" {
				s.System += "\n"
			}
			s.System += text
		case "user":
			_, blocks, err := oaiContent(m.Content)
			if err != nil {
				return fmt.Errorf("messages[%d].content: %w", i, err)
			}
			add(model.RoleUser, blocks...)
		case "assistant":
			text, _, err := oaiContent(m.Content)
			if err != nil {
				return fmt.Errorf("messages[%d].content: %w", i, err)
			}
			var blocks []model.Block
			if text != "" {
				blocks = append(blocks, model.Text(text))
			}
			for j, tc := range m.ToolCalls {
				if tc.ID == "" || tc.Function.Name == "" {
					return fmt.Errorf("messages[%d].tool_calls[%d]: id and function.name required", i, j)
				}
				if tc.Type != "function" {
					return fmt.Errorf("messages[%d].tool_calls[%d].type: want function, got %q", i, j, tc.Type)
				}
				blocks = append(blocks, model.Block{Type: model.BlockToolUse, ID: tc.ID, Name: tc.Function.Name, Input: json.RawMessage(tc.Function.Arguments)})
			}
			add(model.RoleAssistant, blocks...)
		case "tool":
			if m.ToolCallID == "" {
				return fmt.Errorf("messages[%d].tool_call_id: field required", i)
			}
			text, _, err := oaiContent(m.Content)
			if err != nil {
				return fmt.Errorf("messages[%d].content: %w", i, err)
			}
			add(model.RoleUser, model.Block{Type: model.BlockToolResult, ToolUseID: m.ToolCallID, Text: text})
		default:
			return fmt.Errorf("messages[%d].role: %q", i, m.Role)
		}
	}
	for i, t := range req.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return fmt.Errorf("tools[%d]: want type function with a name", i)
		}
		s.Tools = append(s.Tools, t.Function.Name)
		s.ToolDefs = append(s.ToolDefs, model.ToolDef{Name: t.Function.Name, Description: t.Function.Description, InputSchema: t.Function.Parameters})
	}
	return nil
}

// oaiContent reads string-or-parts content into joined text and blocks.
func oaiContent(raw json.RawMessage) (string, []model.Block, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str, []model.Block{model.Text(str)}, nil
	}
	var parts []oaiPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, err
	}
	var texts []string
	var blocks []model.Block
	for _, p := range parts {
		switch p.Type {
		case "text":
			texts = append(texts, p.Text)
			blocks = append(blocks, model.Text(p.Text))
		case "image_url":
			if p.ImageURL == nil {
				return "", nil, errors.New("image_url: field required")
			}
			b, err := decodeDataURL(p.ImageURL.URL)
			if err != nil {
				return "", nil, err
			}
			blocks = append(blocks, b)
		default:
			return "", nil, fmt.Errorf("unknown content part type %q", p.Type)
		}
	}
	return strings.Join(texts, "\n"), blocks, nil
}

func decodeDataURL(u string) (model.Block, error) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return model.Block{}, errors.New("image_url.url: want a data: URL")
	}
	meta, data, ok := strings.Cut(rest, ",")
	mediaType, isB64 := strings.CutSuffix(meta, ";base64")
	if !ok || !isB64 {
		return model.Block{}, errors.New("image_url.url: want data:<type>;base64,<data>")
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return model.Block{}, fmt.Errorf("image_url.url: %w", err)
	}
	return model.Block{Type: model.BlockImage, MediaType: mediaType, Data: raw}, nil
}

func openAIReply(n int, modelName string, r Reply) any {
	msg := map[string]any{"role": "assistant", "content": nil}
	if r.Text != "" || len(r.ToolCalls) == 0 {
		msg["content"] = r.Text
	}
	if len(r.ToolCalls) > 0 {
		var calls []map[string]any
		for _, tc := range r.ToolCalls {
			calls = append(calls, map[string]any{
				"id": tc.ID, "type": "function", "function": map[string]any{"name": tc.Name, "arguments": tc.Args},
			})
		}
		msg["tool_calls"] = calls
	}
	finish := map[model.StopReason]string{
		model.StopEndTurn: "stop", model.StopToolUse: "tool_calls", model.StopMaxTokens: "length",
		model.StopSequence: "stop", model.StopRefusal: "content_filter",
	}[r.StopReason]
	if finish == "" {
		finish = string(r.StopReason)
	}
	return map[string]any{
		"id": fmt.Sprintf("chatcmpl-fake-%d", n), "object": "chat.completion", "created": 1764460800, "model": modelName,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage": map[string]any{
			"prompt_tokens": r.InputTokens, "completion_tokens": r.OutputTokens, "total_tokens": r.InputTokens + r.OutputTokens,
		},
	}
}

func writeOpenAIError(w http.ResponseWriter, status int, r Reply) {
	typ, code := r.ErrorType, r.ErrorCode
	if typ == "" {
		switch {
		case status == 429:
			typ = "requests"
			if code == "" {
				code = "rate_limit_exceeded"
			}
		case status >= 500:
			typ = "server_error"
		default:
			typ = "invalid_request_error"
		}
	}
	msg := r.ErrorMessage
	if msg == "" {
		msg = http.StatusText(status)
	}
	var codeV any
	if code != "" {
		codeV = code
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": codeV}})
}
