package providers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/model/providers"
)

// kit is one provider wired to its wire-level fake.
type kit struct {
	name                 string // provider prefix
	srv                  *modeltest.Server
	opts                 providers.Options
	text, vision, backup string // model names without prefix
	wantAuth, wantNoAuth string // header that must / must not be present
}

func (k kit) ref(m string) string { return k.name + "/" + m }

// kits starts one fake per provider. Bedrock goes through the AWS standard
// chain: AWS_ENDPOINT_URL_BEDROCK_RUNTIME and static keys from the
// environment, as a deployment would.
func kits(t testing.TB) []kit {
	t.Helper()
	ant := modeltest.NewAnthropic(t)
	oai := modeltest.NewOpenAI(t)
	oll := modeltest.NewOpenAI(t)
	br := modeltest.NewBedrock(t)
	t.Setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", br.BaseURL())
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_REGION", "us-west-2")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	// The SDKs must not pick these up: Options are the only source.
	t.Setenv("ANTHROPIC_API_KEY", "env-key-must-not-be-used")
	t.Setenv("OPENAI_API_KEY", "env-key-must-not-be-used")
	return []kit{
		{name: "anthropic", srv: ant, opts: providers.Options{AnthropicAPIKey: "ant-key", AnthropicBaseURL: ant.BaseURL()},
			text: "claude-haiku-4-5", vision: "claude-sonnet-4-5", backup: "claude-3-5-haiku", wantAuth: "Authorization"},
		{name: "openai", srv: oai, opts: providers.Options{OpenAIAPIKey: "oai-key", OpenAIBaseURL: oai.BaseURL()},
			text: "gpt-4o-mini", vision: "gpt-4o", backup: "meta-llama/Llama-3.1-8B", wantAuth: "Authorization"},
		{name: "ollama", srv: oll, opts: providers.Options{OllamaBaseURL: oll.BaseURL()},
			text: "llama3.2", vision: "llava:13b", backup: "qwen2.5:7b", wantNoAuth: "Authorization"},
		{name: "bedrock", srv: br, opts: providers.Options{},
			text: "us.anthropic.claude-haiku-4-5-20251001-v1:0", vision: "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
			backup: "amazon.nova-lite-v1:0", wantAuth: "Authorization"},
	}
}

// sleeps records the Router's backoff waits instead of sleeping.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

func router(t testing.TB, k kit, ro model.RouterOptions) (*model.Router, *sleeps) {
	t.Helper()
	sl := &sleeps{}
	if ro.TextRef == "" {
		ro.TextRef = k.ref(k.text)
	}
	ro.Sleep = sl.sleep
	ro.Jitter = func() float64 { return 0 }
	r, err := providers.NewRouter(context.Background(), ro, k.opts)
	if err != nil {
		t.Fatalf("NewRouter: %v", err)
	}
	return r, sl
}

func userText(s string) []model.Message {
	return []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text(s)}}}
}

const system = "You are Sprout, a gardening helper."

func TestTextTurn(t *testing.T) {
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, _ := router(t, k, model.RouterOptions{MaxTokens: 321})
			resp, err := r.Generate(context.Background(), &model.Request{System: system, Messages: userText("hello tomato")}, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.TextContent(); got != "echo: hello tomato" {
				t.Errorf("text = %q", got)
			}
			if resp.StopReason != model.StopEndTurn {
				t.Errorf("stop = %q", resp.StopReason)
			}
			if resp.Usage.InputTokens <= 0 || resp.Usage.OutputTokens <= 0 {
				t.Errorf("usage = %+v", resp.Usage)
			}
			seen := k.srv.Requests()
			if len(seen) != 1 {
				t.Fatalf("requests = %d", len(seen))
			}
			s := seen[0]
			if s.Model != k.text || s.System != system || s.MaxTokens != 321 {
				t.Errorf("seen model=%q system=%q max_tokens=%d", s.Model, s.System, s.MaxTokens)
			}
			if !reflect.DeepEqual(s.Messages, userText("hello tomato")) {
				t.Errorf("messages = %+v", s.Messages)
			}
			if k.wantAuth != "" && s.Header.Get(k.wantAuth) == "" {
				t.Errorf("no %s header", k.wantAuth)
			}
			if k.wantNoAuth != "" && s.Header.Get(k.wantNoAuth) != "" {
				t.Errorf("unexpected %s header %q", k.wantNoAuth, s.Header.Get(k.wantNoAuth))
			}
			if a := s.Header.Get("Authorization"); strings.Contains(a, "env-key-must-not-be-used") {
				t.Errorf("SDK used the environment key: %q", a)
			}
		})
	}
}

func TestImageTurnRoutedToVisionModel(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nfake-pixels")
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, _ := router(t, k, model.RouterOptions{VisionRef: k.ref(k.vision)})
			msgs := []model.Message{{Role: model.RoleUser, Content: []model.Block{
				model.Text("what is wrong with this leaf?"),
				{Type: model.BlockImage, MediaType: "image/png", Data: png},
			}}}
			resp, err := r.Generate(context.Background(), &model.Request{System: system, Messages: msgs}, true)
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.TextContent(); got != "echo: what is wrong with this leaf?" {
				t.Errorf("text = %q", got)
			}
			if _, err := r.Generate(context.Background(), &model.Request{System: system, Messages: userText("plain")}, false); err != nil {
				t.Fatal(err)
			}
			seen := k.srv.Requests()
			if len(seen) != 2 {
				t.Fatalf("requests = %d", len(seen))
			}
			if seen[0].Model != k.vision || seen[1].Model != k.text {
				t.Errorf("models = %q, %q; want %q, %q", seen[0].Model, seen[1].Model, k.vision, k.text)
			}
			if seen[0].System != system || seen[1].System != system {
				t.Errorf("system prompts differ: %q vs %q", seen[0].System, seen[1].System)
			}
			var img *model.Block
			for i, b := range seen[0].Messages[0].Content {
				if b.Type == model.BlockImage {
					img = &seen[0].Messages[0].Content[i]
				}
			}
			if img == nil || img.MediaType != "image/png" || !bytes.Equal(img.Data, png) {
				t.Errorf("image on the wire = %+v", img)
			}
		})
	}
}

func TestToolRoundTrip(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"plant":{"type":"string","description":"common name"},"days":{"type":"integer","minimum":1}},"required":["plant"],"additionalProperties":false}`)
	tools := []model.ToolDef{{Name: "watering_schedule", Description: "Look up how often to water a plant.", InputSchema: schema}}
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, _ := router(t, k, model.RouterOptions{})
			k.srv.Push(modeltest.Reply{Text: "Let me check.", ToolCalls: []modeltest.ToolCall{{ID: "call_1", Name: "watering_schedule", Args: `{"plant":"basil","days":3}`}}})
			k.srv.Push(modeltest.Reply{Text: "Water basil every 2 days."})

			msgs := userText("how often should I water basil?")
			resp, err := r.Generate(context.Background(), &model.Request{System: system, Messages: msgs, Tools: tools}, false)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StopReason != model.StopToolUse {
				t.Errorf("stop = %q", resp.StopReason)
			}
			uses := resp.ToolUses()
			if len(uses) != 1 || uses[0].ID != "call_1" || uses[0].Name != "watering_schedule" {
				t.Fatalf("tool uses = %+v", uses)
			}
			var args map[string]any
			if err := json.Unmarshal(uses[0].Input, &args); err != nil || args["plant"] != "basil" || args["days"] != float64(3) {
				t.Errorf("input = %s (%v)", uses[0].Input, err)
			}
			if resp.TextContent() != "Let me check." {
				t.Errorf("text = %q", resp.TextContent())
			}

			msgs = append(msgs,
				model.Message{Role: model.RoleAssistant, Content: resp.Content},
				model.Message{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockToolResult, ToolUseID: "call_1", Text: "every 2 days"}}},
			)
			resp, err = r.Generate(context.Background(), &model.Request{System: system, Messages: msgs, Tools: tools}, false)
			if err != nil {
				t.Fatal(err)
			}
			if resp.TextContent() != "Water basil every 2 days." || resp.StopReason != model.StopEndTurn {
				t.Errorf("final = %q %q", resp.TextContent(), resp.StopReason)
			}

			seen := k.srv.Requests()
			if len(seen) != 2 {
				t.Fatalf("requests = %d", len(seen))
			}
			for i, s := range seen {
				if !reflect.DeepEqual(s.Tools, []string{"watering_schedule"}) || s.ToolDefs[0].Description != tools[0].Description {
					t.Errorf("request %d tools = %+v", i, s.ToolDefs)
				}
				if !jsonEqual(t, s.ToolDefs[0].InputSchema, schema) {
					t.Errorf("request %d schema = %s", i, s.ToolDefs[0].InputSchema)
				}
			}
			got := seen[1].Messages
			if len(got) != 3 || got[1].Role != model.RoleAssistant || got[2].Role != model.RoleUser {
				t.Fatalf("second request messages = %+v", got)
			}
			var use, result *model.Block
			for i := range got[1].Content {
				if got[1].Content[i].Type == model.BlockToolUse {
					use = &got[1].Content[i]
				}
			}
			for i := range got[2].Content {
				if got[2].Content[i].Type == model.BlockToolResult {
					result = &got[2].Content[i]
				}
			}
			if use == nil || use.ID != "call_1" || use.Name != "watering_schedule" || !jsonEqual(t, use.Input, json.RawMessage(`{"plant":"basil","days":3}`)) {
				t.Errorf("tool_use on the wire = %+v", use)
			}
			if result == nil || result.ToolUseID != "call_1" || result.Text != "every 2 days" {
				t.Errorf("tool_result on the wire = %+v", result)
			}
		})
	}
}

func TestToolResultError(t *testing.T) {
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, _ := router(t, k, model.RouterOptions{})
			msgs := []model.Message{
				{Role: model.RoleUser, Content: []model.Block{model.Text("hi")}},
				{Role: model.RoleAssistant, Content: []model.Block{{Type: model.BlockToolUse, ID: "t1", Name: "boom", Input: json.RawMessage(`{}`)}}},
				{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockToolResult, ToolUseID: "t1", Text: "disk full", IsError: true}}},
			}
			if _, err := r.Generate(context.Background(), &model.Request{Messages: msgs}, false); err != nil {
				t.Fatal(err)
			}
			res := k.srv.Requests()[0].Messages[2].Content[0]
			switch k.name {
			case "openai", "ollama": // no error flag in Chat Completions
				if res.Text != "ERROR: disk full" {
					t.Errorf("tool result = %+v", res)
				}
			default:
				if !res.IsError || res.Text != "disk full" {
					t.Errorf("tool result = %+v", res)
				}
			}
		})
	}
}

func TestRateLimitRetryAfter(t *testing.T) {
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, sl := router(t, k, model.RouterOptions{MaxRetries: 2})
			k.srv.Push(modeltest.Reply{Status: 429, Header: map[string]string{"Retry-After": "7"}})
			k.srv.Push(modeltest.Reply{Text: "after the wait"})
			resp, err := r.Generate(context.Background(), &model.Request{Messages: userText("hi")}, false)
			if err != nil {
				t.Fatal(err)
			}
			if resp.TextContent() != "after the wait" {
				t.Errorf("text = %q", resp.TextContent())
			}
			if got := sl.got(); !reflect.DeepEqual(got, []time.Duration{7 * time.Second}) {
				t.Errorf("sleeps = %v, want [7s]", got)
			}
			if n := len(k.srv.Requests()); n != 2 {
				t.Errorf("requests = %d", n)
			}
		})
	}
}

func TestRateLimitExhausted(t *testing.T) {
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, sl := router(t, k, model.RouterOptions{MaxRetries: 1})
			k.srv.Push(modeltest.Reply{Status: 429}, modeltest.Reply{Status: 429})
			_, err := r.Generate(context.Background(), &model.Request{Messages: userText("hi")}, false)
			var apiErr *model.APIError
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || !apiErr.Retryable || apiErr.Provider != k.name {
				t.Fatalf("err = %v (%+v)", err, apiErr)
			}
			if len(sl.got()) != 1 {
				t.Errorf("sleeps = %v", sl.got())
			}
		})
	}
}

func TestServerErrorThenFallback(t *testing.T) {
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, sl := router(t, k, model.RouterOptions{MaxRetries: 1, Fallbacks: []string{k.ref(k.backup)}})
			k.srv.Push(modeltest.Reply{Model: k.text, Status: 500}, modeltest.Reply{Model: k.text, Status: 503})
			resp, err := r.Generate(context.Background(), &model.Request{Messages: userText("still there?")}, false)
			if err != nil {
				t.Fatal(err)
			}
			if resp.TextContent() != "echo: still there?" {
				t.Errorf("text = %q", resp.TextContent())
			}
			var models []string
			for _, s := range k.srv.Requests() {
				models = append(models, s.Model)
			}
			if want := []string{k.text, k.text, k.backup}; !reflect.DeepEqual(models, want) {
				t.Errorf("models = %q, want %q", models, want)
			}
			if len(sl.got()) != 1 {
				t.Errorf("sleeps = %v, want one backoff", sl.got())
			}
		})
	}
}

func TestNonRetryableGoesStraightToFallback(t *testing.T) {
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, sl := router(t, k, model.RouterOptions{MaxRetries: 3, Fallbacks: []string{k.ref(k.backup)}})
			k.srv.Push(modeltest.Reply{Model: k.text, Status: 403, ErrorMessage: "model access denied"})
			if _, err := r.Generate(context.Background(), &model.Request{Messages: userText("x")}, false); err != nil {
				t.Fatal(err)
			}
			if n := len(k.srv.Requests()); n != 2 || len(sl.got()) != 0 {
				t.Errorf("requests = %d, sleeps = %v", n, sl.got())
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, sl := router(t, k, model.RouterOptions{Timeout: 50 * time.Millisecond, MaxRetries: 1})
			k.srv.Push(modeltest.Reply{Delay: time.Minute}, modeltest.Reply{Delay: time.Minute})
			_, err := r.Generate(context.Background(), &model.Request{Messages: userText("slow")}, false)
			if !errors.Is(err, model.ErrTimeout) {
				t.Fatalf("err = %v, want ErrTimeout", err)
			}
			if n := len(k.srv.Requests()); n != 2 || len(sl.got()) != 1 {
				t.Errorf("requests = %d, sleeps = %v; want 2 attempts, 1 backoff", n, sl.got())
			}
		})
	}
}

func TestCallerCancelIsNotRetried(t *testing.T) {
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, sl := router(t, k, model.RouterOptions{MaxRetries: 3, Fallbacks: []string{k.ref(k.backup)}})
			k.srv.Push(modeltest.Reply{Delay: time.Minute})
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			_, err := r.Generate(ctx, &model.Request{Messages: userText("slow")}, false)
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, model.ErrTimeout) {
				t.Fatalf("err = %v, want the caller's deadline", err)
			}
			if n := len(k.srv.Requests()); n != 1 || len(sl.got()) != 0 {
				t.Errorf("requests = %d, sleeps = %v", n, sl.got())
			}
		})
	}
}

func TestMalformedResponse(t *testing.T) {
	bodies := map[string]string{
		"truncated":   `{"id":"x","content":[{"type":"text","text":"hi`,
		"not json":    `<html>502 Bad Gateway</html>`,
		"wrong shape": `{"unexpected":true}`,
	}
	for _, k := range kits(t) {
		for name, body := range bodies {
			t.Run(k.name+"/"+name, func(t *testing.T) {
				r, _ := router(t, k, model.RouterOptions{})
				k.srv.Push(modeltest.Reply{Body: body})
				resp, err := r.Generate(context.Background(), &model.Request{Messages: userText("hi")}, false)
				if !errors.Is(err, model.ErrBadResponse) {
					t.Fatalf("err = %v, resp = %+v; want ErrBadResponse", err, resp)
				}
				if !strings.Contains(err.Error(), k.name) {
					t.Errorf("error does not name the provider: %v", err)
				}
			})
		}
	}
}

func TestErrorBodyNotJSON(t *testing.T) {
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, _ := router(t, k, model.RouterOptions{})
			k.srv.Push(modeltest.Reply{Status: 502, Body: "<html>upstream down</html>", Header: map[string]string{"Content-Type": "text/html"}})
			_, err := r.Generate(context.Background(), &model.Request{Messages: userText("hi")}, false)
			var apiErr *model.APIError
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 || !apiErr.Retryable {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestContextOverflow(t *testing.T) {
	for _, k := range kits(t) {
		t.Run(k.name, func(t *testing.T) {
			r, sl := router(t, k, model.RouterOptions{MaxRetries: 3, Fallbacks: []string{k.ref(k.backup)}})
			k.srv.Push(modeltest.Reply{Overflow: true})
			_, err := r.Generate(context.Background(), &model.Request{Messages: userText("a very long prompt")}, false)
			if !errors.Is(err, model.ErrContextOverflow) {
				t.Fatalf("err = %v, want ErrContextOverflow", err)
			}
			var apiErr *model.APIError
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
				t.Errorf("no 400 APIError in %v", err)
			}
			if n := len(k.srv.Requests()); n != 1 || len(sl.got()) != 0 {
				t.Errorf("requests = %d, sleeps = %v: overflow must not be retried or fall back", n, sl.got())
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	cases := []struct {
		ref  string
		o    providers.Options
		want string
	}{
		{"anthropic/claude-haiku-4-5", providers.Options{}, "ANTHROPIC_API_KEY"},
		{"openai/gpt-4o-mini", providers.Options{}, "OPENAI_API_KEY"},
		{"mistral/large", providers.Options{}, "unknown model provider"},
		{"no-slash", providers.Options{}, "provider/model"},
	}
	for _, c := range cases {
		_, err := providers.NewRouter(context.Background(), model.RouterOptions{TextRef: c.ref}, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.ref, err, c.want)
		}
	}
	r, err := providers.NewRouter(context.Background(), model.RouterOptions{}, providers.Options{})
	if err != nil || r.Configured() {
		t.Fatalf("unconfigured router: %v %v", r, err)
	}
	if _, err := r.Generate(context.Background(), &model.Request{Messages: userText("hi")}, false); !errors.Is(err, model.ErrNotConfigured) {
		t.Errorf("err = %v, want ErrNotConfigured", err)
	}
	if !strings.Contains(model.ErrNotConfigured.Error(), "MODEL_ID") {
		t.Errorf("ErrNotConfigured does not name MODEL_ID")
	}
}

func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Errorf("bad JSON %s: %v", a, err)
		return false
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Errorf("bad JSON %s: %v", b, err)
		return false
	}
	return reflect.DeepEqual(x, y)
}
