package modeltest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/model"
)

func post(t *testing.T, url, body string) (int, http.Header, string) {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

// The bare handler serves a standalone process the same way.
func TestHandlerRawWire(t *testing.T) {
	cases := []struct {
		kind      Kind
		path      string
		body      string
		wantModel string
		wantSys   string
		wantReply string // a substring of the JSON answer
	}{
		{OpenAI, "/v1/chat/completions",
			`{"model":"llama3.2","messages":[{"role":"system","content":"be kind"},{"role":"user","content":[{"type":"text","text":"hi there"}]}]}`,
			"llama3.2", "be kind", `"content":"echo: hi there"`},
		{Anthropic, "/v1/messages",
			`{"model":"claude-x","max_tokens":10,"system":"be kind","messages":[{"role":"user","content":"hi there"}]}`,
			"claude-x", "be kind", `{"text":"echo: hi there","type":"text"}`},
		{Bedrock, "/model/us.anthropic.claude%3Av1%3A0/converse",
			`{"system":[{"text":"be kind"}],"messages":[{"role":"user","content":[{"text":"hi there"}]}]}`,
			"us.anthropic.claude:v1:0", "be kind", `{"text":"echo: hi there"}`},
	}
	for _, c := range cases {
		t.Run(string(c.kind), func(t *testing.T) {
			f := NewFake(c.kind)
			srv := httptest.NewServer(f)
			defer srv.Close()
			status, _, body := post(t, srv.URL+c.path, c.body)
			if status != 200 || !strings.Contains(body, c.wantReply) {
				t.Fatalf("status %d body %s", status, body)
			}
			seen := f.Requests()
			if len(seen) != 1 || seen[0].Model != c.wantModel || seen[0].System != c.wantSys || seen[0].LastUserText() != "hi there" {
				t.Errorf("seen = %+v", seen)
			}
		})
	}
}

func TestHandlerRejects(t *testing.T) {
	for _, kind := range []Kind{Anthropic, OpenAI, Bedrock} {
		t.Run(string(kind), func(t *testing.T) {
			s := Start(t, kind)
			res, err := http.Get(s.URL + "/v1/messages")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != 404 {
				t.Errorf("GET: status %d", res.StatusCode)
			}
			path := map[Kind]string{Anthropic: "/v1/messages", OpenAI: "/v1/chat/completions", Bedrock: "/model/m/converse"}[kind]
			status, _, body := post(t, s.URL+path, `{"messages":[{"role":"user","content":`)
			if status != 400 || !json.Valid([]byte(body)) || !strings.Contains(body, "malformed request") {
				t.Errorf("bad body: status %d %s", status, body)
			}
			if seen := s.Requests(); len(seen) != 1 || seen[0].DecodeErr == "" {
				t.Errorf("decode error not recorded: %+v", seen)
			}
		})
	}
}

func TestScriptByModel(t *testing.T) {
	s := NewOpenAI(t)
	s.Push(Reply{Model: "b", Text: "for b"}, Reply{Text: "for anyone"})
	ask := func(m string) string {
		_, _, body := post(t, s.BaseURL()+"/chat/completions", `{"model":"`+m+`","messages":[{"role":"user","content":"q"}]}`)
		var v struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(body), &v); err != nil || len(v.Choices) != 1 {
			t.Fatalf("body %s: %v", body, err)
		}
		return v.Choices[0].Message.Content
	}
	got := []string{ask("a"), ask("a"), ask("b")}
	if want := []string{"for anyone", "echo: q", "for b"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("replies = %q, want %q", got, want)
	}
	if s.Pending() != 0 {
		t.Errorf("pending = %d", s.Pending())
	}
}

func TestSeenMergesToolMessages(t *testing.T) {
	s := NewOpenAI(t)
	post(t, s.BaseURL()+"/chat/completions", `{"model":"m","messages":[
		{"role":"user","content":"q"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"t","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"42"},
		{"role":"user","content":"and?"}]}`)
	seen := s.Requests()[0]
	if len(seen.Messages) != 3 {
		t.Fatalf("messages = %+v", seen.Messages)
	}
	last := seen.Messages[2]
	if last.Role != model.RoleUser || len(last.Content) != 2 || last.Content[0].Type != model.BlockToolResult || last.Content[0].Text != "42" {
		t.Errorf("last = %+v", last)
	}
	if seen.LastUserText() != "and?" {
		t.Errorf("LastUserText = %q", seen.LastUserText())
	}
}
