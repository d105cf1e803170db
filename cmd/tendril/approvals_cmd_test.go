package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool"
)

// "approvals yolo --for" beyond the cap is a usage error in the CLI's
// terms (the flag, in minutes), not the API's "seconds … by is required",
// and writes nothing; within the cap the window opens.
func TestApprovalsYoloForCap(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	ledger := filepath.Join(home, "approvals", "ledger.jsonl")
	for _, d := range []string{"10h", "31m", "30m1s"} {
		out, err := runRoot(t, "--home", home, "approvals", "yolo", "--for", d)
		var ue usageError
		if !errors.As(err, &ue) || err.Error() != "--for must be at most 30m (the YOLO window's cap)" {
			t.Fatalf("--for %s: %v (%T), want the usage error \"--for must be at most 30m …\"\n%s", d, err, err, out)
		}
		if strings.Contains(err.Error()+out, "seconds") || strings.Contains(err.Error()+out, "by is required") {
			t.Fatalf("--for %s: the API's wording leaked: %v\n%s", d, err, out)
		}
		if b, _ := os.ReadFile(ledger); bytes.Contains(b, []byte(`"yolo"`)) {
			t.Fatalf("--for %s wrote a YOLO entry:\n%s", d, b)
		}
	}
	out, err := runRoot(t, "--home", home, "approvals", "yolo", "--for", "30m")
	if err != nil || !strings.Contains(out, "YOLO window open until") || strings.Contains(out, "capped") {
		t.Fatalf("--for 30m: %v\n%s", err, out)
	}
	b, err := os.ReadFile(ledger)
	if err != nil || !bytes.Contains(b, []byte(`"by":"cli:`)) {
		t.Fatalf("the YOLO entry does not name the CLI's operator: %v\n%s", err, b)
	}
}

// showJSON undoes encoding/json's HTML escapes only: other escapes, and an
// escaped backslash before "u003e", stay as they are.
func TestShowJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"command":"echo run1 \u003e\u003e /tmp/x"}`, `{"command":"echo run1 >> /tmp/x"}`},
		{`{"a":"\u003cb\u003e \u0026 \u003E"}`, `{"a":"<b> & >"}`},
		{`{"a":"\\u003e"}`, `{"a":"\\u003e"}`},
		{`{"a":"\\\u003e"}`, `{"a":"\\>"}`},
		{`{"a":"\u001b[2J\u0000\n\"\u00e9"}`, `{"a":"\u001b[2J\u0000\n\"\u00e9"}`},
		{`{"a":"\u202e"}`, `{"a":"\u202e"}`},
		{`"\u003`, `"\u003`},
		{`"\`, `"\`},
	} {
		if got := showJSON([]byte(tc.in)); got != tc.want {
			t.Errorf("showJSON(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// approvals list and approve show a request's arguments as the tool got
// them ("echo run1 >> /tmp/x"), not as the management API's JSON encoder
// escapes them (\u003e), with control and bidirectional characters still
// escaped.
func TestApprovalsShowArgsAsWritten(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	g, err := approval.Open(filepath.Join(home, "approvals"), approval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := g.Check(context.Background(), approval.Call{AgentID: "main", ActorID: "api:ana", SessionID: "s1", Channel: "api",
		Tool: "shell", Class: tool.ClassWrite, Args: json.RawMessage(`{"command":"echo run1 >> /tmp/x && cat <f","note":"a\u202eb\u001bc"}`)}, state.Normal)
	g.Close()
	if err != nil || d.Request == nil {
		t.Fatalf("check: %v %+v", err, d)
	}
	for _, args := range [][]string{{"approvals", "list"}, {"approvals", "approve", d.Request.ID}} {
		out, err := runRoot(t, append([]string{"--home", home}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		if !strings.Contains(out, "echo run1 >> /tmp/x && cat <f") || strings.Contains(out, `\u003`) || strings.Contains(out, `\u0026`) {
			t.Errorf("%v: want the command as written:\n%s", args, out)
		}
		if strings.ContainsAny(out, "\u202e\u001b") || !strings.Contains(out, `\u202e`) || !strings.Contains(out, `\u001b`) {
			t.Errorf("%v: want the bidi and control characters escaped:\n%q", args, out)
		}
	}
}

// A long argument that is not a request ID comes back cut short.
func TestApprovalsLongIDNotEchoed(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	id := strings.Repeat("x", 5000)
	out, err := runRoot(t, "--home", home, "approvals", "approve", id)
	var ue usageError
	if !errors.As(err, &ue) {
		t.Fatalf("%v (%T), want a usage error\n%.300s", err, err, out)
	}
	if msg := err.Error(); len(msg) > 200 || !strings.Contains(msg, "(5000 bytes)") || !strings.Contains(msg, "is not a request ID") {
		t.Fatalf("error of %d bytes, want a short one naming the length: %.300s", len(msg), msg)
	}
}
