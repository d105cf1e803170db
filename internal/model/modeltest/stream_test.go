package modeltest

import (
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	cases := []struct {
		s    string
		n    int
		want []string
	}{
		{"", 3, nil},
		{"ab", 3, []string{"a", "b"}},
		{"abcdef", 0, []string{"ab", "cd", "ef"}},
		{"abcdefg", 3, []string{"abc", "def", "g"}},
		{"토마토물", 2, []string{"토마", "토물"}},
	}
	for _, c := range cases {
		if got := split(c.s, c.n); !reflect.DeepEqual(got, c.want) {
			t.Errorf("split(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

// The raw streaming wire: SSE events in order, usage only when asked for,
// and the request recorded with Stream set.
func TestStreamRawWire(t *testing.T) {
	cases := []struct {
		kind    Kind
		path    string
		body    string
		want    []string // substrings, in order
		notWant string
	}{
		{OpenAI, "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
			[]string{`"role":"assistant"`, `"content":"ec"`, `"content":"ho"`, `"finish_reason":"stop"`, `"prompt_tokens":`, "data: [DONE]"}, ""},
		{OpenAI, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{`"finish_reason":"stop"`, "data: [DONE]"}, `"prompt_tokens"`},
		{Anthropic, "/v1/messages", `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{"event: message_start", "event: ping", "event: content_block_start", `{"text":"ec","type":"text_delta"}`,
				"event: content_block_stop", `"stop_reason":"end_turn"`, "event: message_stop"}, ""},
	}
	for _, c := range cases {
		t.Run(string(c.kind), func(t *testing.T) {
			f := NewFake(c.kind)
			srv := httptest.NewServer(f)
			defer srv.Close()
			f.Push(Reply{Text: "echo: hi", StreamChunks: 4})
			status, h, body := post(t, srv.URL+c.path, c.body)
			if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d content-type %q", status, h.Get("Content-Type"))
			}
			rest := body
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("%q missing or out of order in\n%s", w, body)
				}
				rest = rest[i+len(w):]
			}
			if c.notWant != "" && strings.Contains(body, c.notWant) {
				t.Errorf("unexpected %q in\n%s", c.notWant, body)
			}
			if seen := f.Requests(); len(seen) != 1 || !seen[0].Stream || seen[0].LastUserText() != "hi" {
				t.Errorf("seen = %+v", seen)
			}
		})
	}
}
