package openai

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tendrilai/tendril/internal/model"
)

// bodyCases are requests of every shape toParams handles.
func bodyCases() map[string]*model.Request {
	temp := 0.25
	png := []byte("\x89PNG\r\n\x1a\n....")
	return map[string]*model.Request{
		"plain": {Model: "gpt-x", MaxTokens: 4096, System: "You are <terse> & kind.\n\u2028",
			Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text("hi \"there\"\x01"), model.Text("second")}}}},
		"no system, temperature": {Model: "m", Temperature: &temp,
			Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text("x")}}}},
		"image": {Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{
			{Type: model.BlockImage, MediaType: "image/png", Data: png}, model.Text("what is this?")}}}},
		"tools": {Model: "m", MaxTokens: 10,
			Tools: []model.ToolDef{
				{Name: "read", Description: "reads", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
				{Name: "bare"},
				{Name: "nullschema", InputSchema: json.RawMessage(`null`)},
			},
			Messages: []model.Message{
				{Role: model.RoleUser, Content: []model.Block{model.Text("read it")}},
				{Role: model.RoleAssistant, Content: []model.Block{model.Text("ok"),
					{Type: model.BlockToolUse, ID: "c1", Name: "read", Input: json.RawMessage(`{"path":"a"}`)},
					{Type: model.BlockToolUse, ID: "c2", Name: "bare"}}},
				{Role: model.RoleUser, Content: []model.Block{
					{Type: model.BlockToolResult, ToolUseID: "c1", Text: "contents"},
					{Type: model.BlockToolResult, ToolUseID: "c2", Text: "boom", IsError: true},
					model.Text("and now?")}},
				{Role: model.RoleAssistant, Content: []model.Block{{Type: model.BlockToolUse, ID: "c3", Name: "read", Input: json.RawMessage(`{}`)}}},
				{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockToolResult, ToolUseID: "c3", Text: ""}}},
				{Role: model.RoleAssistant},
			}},
	}
}

// TestEncodeRequestMatchesSDK checks that the body Generate sends decodes
// to the same JSON value as the SDK's encoding of toParams.
func TestEncodeRequestMatchesSDK(t *testing.T) {
	for name, req := range bodyCases() {
		t.Run(name, func(t *testing.T) {
			params, err := toParams(req)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(params)
			if err != nil {
				t.Fatal(err)
			}
			got, err := encodeRequest(req)
			if err != nil {
				t.Fatal(err)
			}
			var w, g any
			if err := json.Unmarshal(want, &w); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("%v\n%s", err, got)
			}
			if !reflect.DeepEqual(w, g) {
				t.Errorf("bodies differ\n sdk: %s\nours: %s", want, got)
			}
		})
	}
}

func TestEncodeRequestErrors(t *testing.T) {
	for name, req := range map[string]*model.Request{
		"array schema":    {Tools: []model.ToolDef{{Name: "t", InputSchema: json.RawMessage(`[1]`)}}},
		"broken schema":   {Tools: []model.ToolDef{{Name: "t", InputSchema: json.RawMessage(`{"a":`)}}},
		"empty image":     {Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockImage}}}}},
		"tool use (user)": {Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockToolUse}}}}},
		"unknown role":    {Messages: []model.Message{{Role: "narrator"}}},
	} {
		_, err1 := toParams(req)
		_, err2 := encodeRequest(req)
		if err1 == nil || err2 == nil {
			t.Errorf("%s: toParams err %v, encodeRequest err %v; want both to fail", name, err1, err2)
		}
	}
}

func TestDecodeCompletion(t *testing.T) {
	p := New(Options{})
	cases := []struct {
		name, body string
		text       string
		stop       model.StopReason
		uses       int
		in, out    int
	}{
		{"text", `{"model":"gpt-x","choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"hello"}}],"usage":{"prompt_tokens":7,"completion_tokens":2}}`, "hello", model.StopEndTurn, 0, 7, 2},
		{"tools", `{"model":"m","choices":[{"finish_reason":"stop","message":{"content":null,"tool_calls":[{"id":"","type":"function","function":{"name":"read","arguments":"{\"path\":\"a\"}"}}]}}]}`, "", model.StopToolUse, 1, 0, 0},
		{"refusal", `{"model":"m","choices":[{"finish_reason":"stop","message":{"content":"","refusal":"no"}}]}`, "no", model.StopRefusal, 0, 0, 0},
		{"lenient: numeric model", `{"model":5,"choices":[{"finish_reason":"length","message":{"content":"cut"}}]}`, "cut", model.StopMaxTokens, 0, 0, 0},
	}
	for _, c := range cases {
		resp, err := p.decodeCompletion([]byte(c.body))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if resp.TextContent() != c.text || resp.StopReason != c.stop || len(resp.ToolUses()) != c.uses ||
			resp.Usage.InputTokens != c.in || resp.Usage.OutputTokens != c.out {
			t.Errorf("%s: got %+v", c.name, resp)
		}
	}
	for _, body := range []string{`{"choices":[]}`, `not json`, `{"choices":"x"}`} {
		if _, err := p.decodeCompletion([]byte(body)); err == nil {
			t.Errorf("%q: no error", body)
		}
	}
}

// FuzzAppendString checks the string escaper against encoding/json: both
// decode to the same string.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"b\\s\n\r\t\x00\x1f", "\u2028\u2029", "bad \xff\xfe utf8", "<&>", "日本語 🌱"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		got := appendString(nil, s)
		var w, g string
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%q: %v (%s)", s, err, got)
		}
		if w != g {
			t.Errorf("%q: got %q, want %q", s, g, w)
		}
	})
}

func BenchmarkEncodeRequest(b *testing.B) {
	req := benchRequest()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeRequest(req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeRequestSDK(b *testing.B) {
	req := benchRequest()
	b.ReportAllocs()
	for b.Loop() {
		params, err := toParams(req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(params); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRequest is a turn's request: a 2 KB system prompt, 40 history
// messages and three tools.
func benchRequest() *model.Request {
	req := &model.Request{Model: "gpt-x", MaxTokens: 4096}
	for len(req.System) < 2000 {
		req.System += "You are a helpful assistant who remembers the user's garden. "
	}
	for i := 0; i < 40; i++ {
		role := model.RoleUser
		if i%2 == 1 {
			role = model.RoleAssistant
		}
		req.Messages = append(req.Messages, model.Message{Role: role, Content: []model.Block{model.Text("the tomatoes on the south wall are ripening early this year, about a week ahead")}})
	}
	for _, n := range []string{"memory_search", "remember", "web_fetch"} {
		req.Tools = append(req.Tools, model.ToolDef{Name: n, Description: "does " + n, InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)})
	}
	return req
}
