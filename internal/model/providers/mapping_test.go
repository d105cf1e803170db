package providers_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/modeltest"
)

func TestStopReasonsAndUsage(t *testing.T) {
	cases := []struct {
		reply modeltest.Reply
		want  model.StopReason
	}{
		{modeltest.Reply{Text: "cut", StopReason: model.StopMaxTokens, InputTokens: 11, OutputTokens: 22}, model.StopMaxTokens},
		{modeltest.Reply{Text: "no", StopReason: model.StopRefusal, InputTokens: 11, OutputTokens: 22}, model.StopRefusal},
		// Ollama says "stop" while calling tools; tool calls always win.
		{modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "t"}}, StopReason: model.StopEndTurn, InputTokens: 11, OutputTokens: 22}, model.StopToolUse},
	}
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, _ := router(t, k, model.RouterOptions{})
			for _, c := range cases {
				k.srv.Push(c.reply)
				resp, err := r.Generate(context.Background(), &model.Request{Messages: userText("x")}, false)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StopReason != c.want || resp.Usage != (model.Usage{InputTokens: 11, OutputTokens: 22}) {
					t.Errorf("reply %+v: stop = %q, usage = %+v", c.reply, resp.StopReason, resp.Usage)
				}
				for _, u := range resp.ToolUses() {
					if u.ID == "" || string(u.Input) != "{}" {
						t.Errorf("tool use = %+v", u)
					}
				}
			}
		})
	}
}

func TestTemperatureOnTheWire(t *testing.T) {
	temp := 0.25
	paths := map[string][]string{
		"anthropic": {"temperature"}, "openai": {"temperature"}, "ollama": {"temperature"},
		"bedrock": {"inferenceConfig", "temperature"},
	}
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, _ := router(t, k, model.RouterOptions{})
			if _, err := r.Generate(context.Background(), &model.Request{Messages: userText("x"), Temperature: &temp}, false); err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(k.srv.Requests()[0].Body, &v); err != nil {
				t.Fatal(err)
			}
			for _, key := range paths[k.name] {
				m, _ := v.(map[string]any)
				v = m[key]
			}
			if v != 0.25 {
				t.Errorf("temperature on the wire = %v in %s", v, k.srv.Requests()[0].Body)
			}
		})
	}
}

// Chat Completions wants tool results as "tool" messages right after the
// assistant's tool_calls, before any new user text.
func TestOpenAIToolMessagesBeforeUserText(t *testing.T) {
	k := kits(t)[1]
	r, _ := router(t, k, model.RouterOptions{})
	msgs := []model.Message{
		{Role: model.RoleUser, Content: []model.Block{model.Text("water?")}},
		{Role: model.RoleAssistant, Content: []model.Block{
			{Type: model.BlockToolUse, ID: "a", Name: "soil", Input: json.RawMessage(`{}`)},
			{Type: model.BlockToolUse, ID: "b", Name: "rain", Input: json.RawMessage(`{"days":2}`)},
		}},
		{Role: model.RoleUser, Content: []model.Block{
			model.Text("also, it is sunny"),
			{Type: model.BlockToolResult, ToolUseID: "a", Text: "dry"},
			{Type: model.BlockToolResult, ToolUseID: "b", Text: "none"},
		}},
	}
	if _, err := r.Generate(context.Background(), &model.Request{System: system, Messages: msgs}, false); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []struct {
			Role       string          `json:"role"`
			ToolCallID string          `json:"tool_call_id"`
			Content    json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(k.srv.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range body.Messages {
		roles = append(roles, m.Role+":"+m.ToolCallID)
	}
	if got, want := strings.Join(roles, " "), "system: user: assistant: tool:a tool:b user:"; got != want {
		t.Errorf("roles = %q, want %q", got, want)
	}
}

// Models do emit broken JSON arguments; the turn must survive so the tool
// layer can report the problem back to the model.
func TestOpenAIBrokenToolArguments(t *testing.T) {
	k := kits(t)[1]
	r, _ := router(t, k, model.RouterOptions{})
	k.srv.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{ID: "c", Name: "t", Args: `{"plant":`}}})
	resp, err := r.Generate(context.Background(), &model.Request{Messages: userText("x")}, false)
	if err != nil {
		t.Fatal(err)
	}
	u := resp.ToolUses()
	var s string
	if len(u) != 1 || json.Unmarshal(u[0].Input, &s) != nil || s != `{"plant":` {
		t.Errorf("tool uses = %+v", u)
	}
}

func TestBadRequestInput(t *testing.T) {
	bad := []model.Request{
		{Messages: []model.Message{{Role: "system", Content: []model.Block{model.Text("x")}}}},
		{Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{{Type: "video"}}}}},
		{Messages: userText("x"), Tools: []model.ToolDef{{Name: "t", InputSchema: json.RawMessage(`[1,2]`)}}},
		{Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockImage, MediaType: "image/png"}}}}},
	}
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, _ := router(t, k, model.RouterOptions{})
			for i, req := range bad {
				if _, err := r.Generate(context.Background(), &req, false); err == nil || !strings.Contains(err.Error(), k.name) {
					t.Errorf("request %d: err = %v", i, err)
				}
			}
			if n := len(k.srv.Requests()); n != 0 {
				t.Errorf("%d bad requests reached the wire", n)
			}
		})
	}
}
