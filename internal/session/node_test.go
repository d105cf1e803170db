package session_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/tendrilai/tendril/internal/session"
)

func TestNodeJSON(t *testing.T) {
	cases := []struct {
		name string
		node session.Node
		json string
	}{
		{"root text", session.Node{ID: "msg_1", Role: "user", Text: "안녕", Timestamp: 1710000000, Channel: "telegram"},
			`{"id":"msg_1","parentId":null,"role":"user","content":"안녕","timestamp":1710000000,"channel":"telegram"}`},
		{"blocks", session.Node{ID: "m2", ParentID: "msg_1", Role: "assistant", Timestamp: 2,
			Blocks: []session.Block{{Type: "tool_use", ID: "t", Name: "weather", Input: json.RawMessage(`{"q":1}`)}}, Metadata: map[string]any{"type": "x"}},
			`{"id":"m2","parentId":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"t","name":"weather","input":{"q":1}}],"timestamp":2,"metadata":{"type":"x"}}`},
		{"empty", session.Node{ID: "e", Role: "system"}, `{"id":"e","parentId":null,"role":"system","content":"","timestamp":0}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(c.node)
			if err != nil || string(b) != c.json {
				t.Fatalf("marshal = %s, %v\nwant %s", b, err, c.json)
			}
			var back session.Node
			if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, c.node) {
				t.Fatalf("unmarshal = %+v, %v", back, err)
			}
		})
	}
	var n session.Node
	for _, bad := range []string{`{"id":"x","content":5}`, `{"id":"x","content":{}}`, `[`, `{"id":"x","content":[1]}`} {
		if err := json.Unmarshal([]byte(bad), &n); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	if err := json.Unmarshal([]byte(`{"id":"x","role":"user"}`), &n); err != nil || n.Text != "" {
		t.Fatalf("absent content: %v", err)
	}
}

func TestNewNodeIDAndKeys(t *testing.T) {
	a, b := session.NewNodeID(), session.NewNodeID()
	if a == b || len(a) != 30 || a[:4] != "msg_" || !(a < b) {
		t.Fatalf("ids %q %q", a, b)
	}
	cases := []struct {
		in   string
		want session.Key
		err  bool
	}{
		{"telegram:123", session.Key{AgentID: "main", Channel: "telegram", ID: "123"}, false},
		{"web:a:b", session.Key{AgentID: "main", Channel: "web", ID: "a:b"}, false},
		{"nocolon", session.Key{}, true},
		{":x", session.Key{}, true},
		{"x:", session.Key{}, true},
	}
	for _, c := range cases {
		k, err := session.ParseKey("main", c.in)
		if c.err {
			if !errors.Is(err, session.ErrInvalidKey) {
				t.Errorf("ParseKey(%q) err = %v", c.in, err)
			}
			continue
		}
		if err != nil || k != c.want || k.String() != c.in {
			t.Errorf("ParseKey(%q) = %+v, %v", c.in, k, err)
		}
	}
}

func TestEstimateTokens(t *testing.T) {
	cases := []struct {
		node session.Node
		want int
	}{
		{session.Node{Text: ""}, 4},
		{session.Node{Text: "abcd"}, 5},
		{session.Node{Text: "abcde"}, 6},
		{session.Node{Text: "안녕하세요"}, 9},
		{session.Node{Text: "日本語です"}, 9},
		{session.Node{Blocks: []session.Block{{Type: "image", ImageRef: "sha256:x"}}}, 4 + 1600},
		{session.Node{Blocks: []session.Block{{Type: "tool_use", Name: "ab", Input: json.RawMessage(`{}`)}}}, 5},
	}
	for _, c := range cases {
		if got := session.EstimateTokens(c.node); got != c.want {
			t.Errorf("EstimateTokens(%+v) = %d, want %d", c.node, got, c.want)
		}
	}
}
