package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/jsonl"
)

func TestSessionCLI(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	t.Setenv("TENDRIL_REDIS_URL", "")
	st, err := jsonl.Open(filepath.Join(home, "agents"), jsonl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k := session.Key{AgentID: "main", Channel: "telegram", ID: "123"}
	err = st.Append(ctx, k,
		session.Node{ID: "m1", Role: "user", Text: "write an email"},
		session.Node{ID: "m2", ParentID: "m1", Role: "assistant", Text: "formal version"},
		session.Node{ID: "m5", ParentID: "m1", Role: "user", Text: "casual tone"})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()

	cases := []struct {
		args     []string
		usage    bool // exit 2
		fail     bool // exit 1
		contains []string
	}{
		{args: []string{"session", "list"}, contains: []string{"telegram:123", "3 nodes", "2 branches"}},
		{args: []string{"session", "list", "--json"}, contains: []string{`"key":"telegram:123"`, `"leaf":"m5"`}},
		{args: []string{"session", "list", "--agent", "other"}, contains: []string{"no sessions"}},
		{args: []string{"session", "show", "telegram:123"}, contains: []string{"m1", "casual tone"}},
		{args: []string{"session", "show", "telegram:123", "--tree"}, contains: []string{"├─  m2 assistant: formal version", "└─* m5 user: casual tone  (leaf)"}},
		{args: []string{"session", "show", "telegram:123", "--json"}, contains: []string{`"leaf": "m5"`}},
		{args: []string{"session", "show", "nocolon"}, usage: true},
		{args: []string{"session", "show", "telegram:999"}, fail: true},
		{args: []string{"session", "branch", "telegram:123"}, usage: true},
		{args: []string{"session", "branch", "telegram:123", "--from", "zz"}, fail: true},
		{args: []string{"session", "branch", "telegram:123", "--from", "m2"}, contains: []string{"now m2"}},
		{args: []string{"session", "show", "telegram:123"}, contains: []string{"formal version"}},
		{args: []string{"session", "export", "telegram:123", "--format", "md"}, contains: []string{"# Session telegram:123", "formal version"}},
		{args: []string{"session", "export", "telegram:123", "--format", "jsonl"}, contains: []string{`{"id":"m1","parentId":null`}},
		{args: []string{"session", "export", "telegram:123", "--format", "xml"}, usage: true},
		{args: []string{"session", "clear"}, usage: true},
		{args: []string{"session", "clear", "--all", "--session", "telegram:123"}, usage: true},
		{args: []string{"session", "clear", "--agent", "main", "--session", "telegram:123"}, contains: []string{"cleared telegram:123"}},
		{args: []string{"session", "clear", "--agent", "main", "--session", "telegram:123"}, fail: true},
		{args: []string{"session", "clear", "--all"}, contains: []string{"no sessions to clear"}},
	}
	for _, c := range cases {
		out, err := runTendril(t, home, c.args...)
		var ue usageError
		isUsage := errors.As(err, &ue) || (err != nil && isCobraUsage(err))
		switch {
		case c.usage && !isUsage:
			t.Errorf("%v: want a usage error, got %v", c.args, err)
		case c.fail && (err == nil || isUsage):
			t.Errorf("%v: want a failure, got %v", c.args, err)
		case !c.usage && !c.fail && err != nil:
			t.Errorf("%v: %v", c.args, err)
		}
		for _, want := range c.contains {
			if !strings.Contains(out, want) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, want, out)
			}
		}
	}
	out, _ := runTendril(t, home, "session", "list", "--json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 0 {
		t.Fatalf("list --json after clear: %q %v", out, err)
	}
}

// session show prints a tool call's input as the tool got it ("echo run1
// >> /tmp/x"), not with encoding/json's HTML escapes (\u003e), and keeps
// control characters escaped.
func TestSessionShowToolInputAsWritten(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	t.Setenv("TENDRIL_REDIS_URL", "")
	st, err := jsonl.Open(filepath.Join(home, "agents"), jsonl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := session.Key{AgentID: "main", Channel: "api", ID: "ana"}
	err = st.Append(context.Background(), k,
		session.Node{ID: "m1", Role: "user", Text: "log it"},
		session.Node{ID: "m2", ParentID: "m1", Role: "assistant", Blocks: []session.Block{{Type: session.BlockToolUse, ID: "call_1", Name: "shell",
			Input: json.RawMessage(`{"command":"echo run1 >> /tmp/x","note":"a\u001bb"}`)}}})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"session", "show", "api:ana"}, {"session", "show", "api:ana", "--tree"}} {
		out, err := runTendril(t, home, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !strings.Contains(out, "echo run1 >> /tmp/x") || strings.Contains(out, `\u003e`) {
			t.Errorf("%v: want the command as written:\n%s", args, out)
		}
		if strings.Contains(out, "\u001b") {
			t.Errorf("%v: a raw control character:\n%q", args, out)
		}
	}
}
