package modeltest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/tendrilai/tendril/internal/model"
)

// Bedrock Converse wire shapes
// (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html).
// Blob members ("bytes") are base64 in JSON, which encoding/json does for []byte.

type brRequest struct {
	Messages []struct {
		Role    string    `json:"role"`
		Content []brBlock `json:"content"`
	} `json:"messages"`
	System []struct {
		Text string `json:"text"`
	} `json:"system"`
	InferenceConfig *struct {
		MaxTokens int `json:"maxTokens"`
	} `json:"inferenceConfig"`
	ToolConfig *struct {
		Tools []struct {
			ToolSpec *struct {
				Name        string `json:"name"`
				Description string `json:"description"`
				InputSchema struct {
					JSON json.RawMessage `json:"json"`
				} `json:"inputSchema"`
			} `json:"toolSpec"`
		} `json:"tools"`
	} `json:"toolConfig"`
}

type brBlock struct {
	Text  *string `json:"text"`
	Image *struct {
		Format string `json:"format"`
		Source struct {
			Bytes []byte `json:"bytes"`
		} `json:"source"`
	} `json:"image"`
	ToolUse *struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	} `json:"toolUse"`
	ToolResult *struct {
		ToolUseID string `json:"toolUseId"`
		Content   []struct {
			Text *string         `json:"text"`
			JSON json.RawMessage `json:"json"`
		} `json:"content"`
		Status string `json:"status"`
	} `json:"toolResult"`
}

var brMediaTypes = map[string]string{"jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp"}

func decodeBedrock(body []byte, s *Seen) error {
	var req brRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return err
	}
	var sys []string
	for _, b := range req.System {
		sys = append(sys, b.Text)
	}
	s.System = strings.Join(sys, "\n")
	if req.InferenceConfig != nil {
		s.MaxTokens = req.InferenceConfig.MaxTokens
	}
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Errorf("messages.%d.role: %q", i, m.Role)
		}
		msg := model.Message{Role: model.Role(m.Role)}
		for j, b := range m.Content {
			nb, err := brToNeutral(b)
			if err != nil {
				return fmt.Errorf("messages.%d.content.%d: %w", i, j, err)
			}
			msg.Content = append(msg.Content, nb)
		}
		s.Messages = append(s.Messages, msg)
	}
	if req.ToolConfig != nil {
		for i, t := range req.ToolConfig.Tools {
			if t.ToolSpec == nil || t.ToolSpec.Name == "" {
				return fmt.Errorf("toolConfig.tools.%d: toolSpec with a name required", i)
			}
			s.Tools = append(s.Tools, t.ToolSpec.Name)
			s.ToolDefs = append(s.ToolDefs, model.ToolDef{Name: t.ToolSpec.Name, Description: t.ToolSpec.Description, InputSchema: t.ToolSpec.InputSchema.JSON})
		}
	}
	return nil
}

func brToNeutral(b brBlock) (model.Block, error) {
	switch {
	case b.Text != nil:
		return model.Text(*b.Text), nil
	case b.Image != nil:
		mt, ok := brMediaTypes[b.Image.Format]
		if !ok {
			return model.Block{}, fmt.Errorf("image.format: %q", b.Image.Format)
		}
		return model.Block{Type: model.BlockImage, MediaType: mt, Data: b.Image.Source.Bytes}, nil
	case b.ToolUse != nil:
		if b.ToolUse.ToolUseID == "" || b.ToolUse.Name == "" {
			return model.Block{}, errors.New("toolUse: toolUseId and name required")
		}
		return model.Block{Type: model.BlockToolUse, ID: b.ToolUse.ToolUseID, Name: b.ToolUse.Name, Input: b.ToolUse.Input}, nil
	case b.ToolResult != nil:
		if b.ToolResult.ToolUseID == "" {
			return model.Block{}, errors.New("toolResult: toolUseId required")
		}
		var texts []string
		for _, c := range b.ToolResult.Content {
			switch {
			case c.Text != nil:
				texts = append(texts, *c.Text)
			case len(c.JSON) > 0:
				texts = append(texts, string(c.JSON))
			}
		}
		return model.Block{
			Type: model.BlockToolResult, ToolUseID: b.ToolResult.ToolUseID,
			Text: strings.Join(texts, "\n"), IsError: b.ToolResult.Status == "error",
		}, nil
	}
	return model.Block{}, errors.New("content block has no known member")
}

func bedrockReply(r Reply) any {
	var content []map[string]any
	if r.Text != "" || len(r.ToolCalls) == 0 {
		content = append(content, map[string]any{"text": r.Text})
	}
	for _, tc := range r.ToolCalls {
		content = append(content, map[string]any{"toolUse": map[string]any{"toolUseId": tc.ID, "name": tc.Name, "input": json.RawMessage(tc.Args)}})
	}
	stop := map[model.StopReason]string{
		model.StopEndTurn: "end_turn", model.StopToolUse: "tool_use", model.StopMaxTokens: "max_tokens",
		model.StopSequence: "stop_sequence", model.StopRefusal: "content_filtered",
	}[r.StopReason]
	if stop == "" {
		stop = string(r.StopReason)
	}
	return map[string]any{
		"output":     map[string]any{"message": map[string]any{"role": "assistant", "content": content}},
		"stopReason": stop,
		"usage":      map[string]any{"inputTokens": r.InputTokens, "outputTokens": r.OutputTokens, "totalTokens": r.InputTokens + r.OutputTokens},
		"metrics":    map[string]any{"latencyMs": 1},
	}
}

func writeBedrockError(w http.ResponseWriter, status int, r Reply) {
	typ := r.ErrorType
	if typ == "" {
		typ = map[int]string{
			400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException",
			408: "ModelTimeoutException", 424: "ModelErrorException", 429: "ThrottlingException",
			503: "ServiceUnavailableException",
		}[status]
		if typ == "" {
			typ = "InternalServerException"
		}
	}
	msg := r.ErrorMessage
	if msg == "" {
		msg = http.StatusText(status)
	}
	w.Header().Set("X-Amzn-ErrorType", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	w.Header().Set("X-Amzn-RequestId", "fake-request-id")
	writeJSON(w, status, map[string]any{"message": msg})
}
