package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/tool"
)

// fakeTool is a Tool whose behaviour is a function.
type fakeTool struct {
	name  string
	class tool.Class
	run   func(ctx context.Context, call tool.Call) (string, error)
}

func (f fakeTool) Name() string            { return f.name }
func (f fakeTool) Description() string     { return "fake " + f.name }
func (f fakeTool) Schema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (f fakeTool) Class() tool.Class       { return f.class }
func (f fakeTool) Run(ctx context.Context, call tool.Call) (string, error) {
	if f.run == nil {
		return "ok", nil
	}
	return f.run(ctx, call)
}

func TestRegister(t *testing.T) {
	tests := []struct {
		name    string
		tool    tool.Tool
		wantErr error
	}{
		{"plain", fakeTool{name: "weather", class: tool.ClassRead}, nil},
		{"mcp prefix", fakeTool{name: "files__read-file_2", class: tool.ClassWrite}, nil},
		{"64 chars", fakeTool{name: strings.Repeat("a", 64), class: tool.ClassExec}, nil},
		{"65 chars", fakeTool{name: strings.Repeat("a", 65), class: tool.ClassRead}, tool.ErrInvalidName},
		{"empty", fakeTool{name: "", class: tool.ClassRead}, tool.ErrInvalidName},
		{"space", fakeTool{name: "do it", class: tool.ClassRead}, tool.ErrInvalidName},
		{"dot", fakeTool{name: "a.b", class: tool.ClassRead}, tool.ErrInvalidName},
		{"slash", fakeTool{name: "../x", class: tool.ClassRead}, tool.ErrInvalidName},
		{"unicode", fakeTool{name: "날씨", class: tool.ClassRead}, tool.ErrInvalidName},
		{"bad class", fakeTool{name: "x", class: "admin"}, tool.ErrInvalidName},
		{"nil", nil, tool.ErrInvalidName},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tool.NewRegistry()
			err := r.Register(tc.tool)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Register: err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil {
				if _, ok := r.Get(tc.tool.Name()); !ok {
					t.Fatalf("Get(%q) missing after Register", tc.tool.Name())
				}
			}
		})
	}
}

func TestRegistryDuplicateListDefs(t *testing.T) {
	r := tool.NewRegistry()
	for _, n := range []string{"weather", "notes", "memory_search", "shell"} {
		class := tool.ClassRead
		if n == "shell" {
			class = tool.ClassExec
		}
		if err := r.Register(fakeTool{name: n, class: class}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Register(fakeTool{name: "notes", class: tool.ClassWrite}); !errors.Is(err, tool.ErrDuplicate) {
		t.Fatalf("duplicate: err = %v, want ErrDuplicate", err)
	}
	var names []string
	for _, tl := range r.List() {
		names = append(names, tl.Name())
	}
	if got, want := strings.Join(names, ","), "memory_search,notes,shell,weather"; got != want {
		t.Fatalf("List = %s, want %s", got, want)
	}
	defs := r.Defs(func(t tool.Tool) bool { return t.Class() != tool.ClassExec })
	if len(defs) != 3 || defs[0].Name != "memory_search" || defs[2].Name != "weather" {
		t.Fatalf("Defs(filter) = %+v", defs)
	}
	if string(defs[0].InputSchema) != `{"type":"object"}` || defs[0].Description != "fake memory_search" {
		t.Fatalf("Defs carried %+v", defs[0])
	}
	if all := r.Defs(nil); len(all) != 4 {
		t.Fatalf("Defs(nil) = %d defs, want 4", len(all))
	}
	if _, ok := r.Get("missing"); ok {
		t.Fatal("Get(missing) = ok")
	}
}

func TestRun(t *testing.T) {
	tests := []struct {
		name     string
		run      func(ctx context.Context, call tool.Call) (string, error)
		timeout  time.Duration
		wantOut  string
		wantErr  string
		wantKind error
	}{
		{
			name:    "ok",
			run:     func(ctx context.Context, call tool.Call) (string, error) { return "hello " + call.ActorID, nil },
			wantOut: "hello a1",
		},
		{
			name:    "tool error passes through",
			run:     func(ctx context.Context, call tool.Call) (string, error) { return "", errors.New("no such city") },
			wantErr: "no such city",
		},
		{
			name:     "panic",
			run:      func(ctx context.Context, call tool.Call) (string, error) { panic("boom") },
			wantErr:  "tool t panicked: boom",
			wantKind: tool.ErrPanicked,
		},
		{
			name: "nil map panic",
			run: func(ctx context.Context, call tool.Call) (string, error) {
				var m map[string]int
				m["x"] = 1
				return "", nil
			},
			wantErr:  "tool t panicked: assignment to entry in nil map",
			wantKind: tool.ErrPanicked,
		},
		{
			name: "timeout, tool honours ctx",
			run: func(ctx context.Context, call tool.Call) (string, error) {
				<-ctx.Done()
				return "", ctx.Err()
			},
			timeout:  20 * time.Millisecond,
			wantErr:  "tool t timed out after 20ms",
			wantKind: tool.ErrTimedOut,
		},
		{
			name: "timeout, tool ignores ctx",
			run: func(ctx context.Context, call tool.Call) (string, error) {
				time.Sleep(time.Second)
				return "late", nil
			},
			timeout:  20 * time.Millisecond,
			wantErr:  "tool t timed out after 20ms",
			wantKind: tool.ErrTimedOut,
		},
		{
			name: "oversize result truncated",
			run: func(ctx context.Context, call tool.Call) (string, error) {
				return strings.Repeat("é", tool.MaxResultBytes), nil
			},
			wantOut: "[truncated: result was 131072 bytes, limit 65536]",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tool.Run(context.Background(), fakeTool{name: "t", class: tool.ClassRead, run: tc.run},
				tool.Call{ActorID: "a1"}, tc.timeout)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if tc.wantKind != nil && !errors.Is(err, tc.wantKind) {
					t.Fatalf("err %v does not wrap %v", err, tc.wantKind)
				}
				if tc.wantKind == tool.ErrPanicked && len(tool.PanicStack(err)) == 0 {
					t.Fatal("PanicStack empty for a panic")
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if !strings.Contains(out, tc.wantOut) {
				t.Fatalf("out = %.80q…, want it to contain %q", out, tc.wantOut)
			}
			if len(out) > tool.MaxResultBytes+100 {
				t.Fatalf("out is %d bytes, not truncated", len(out))
			}
		})
	}
}

func TestRunParentCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tool.Run(ctx, fakeTool{name: "t", class: tool.ClassRead, run: func(ctx context.Context, _ tool.Call) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}}, tool.Call{}, time.Second)
	if !errors.Is(err, context.Canceled) || errors.Is(err, tool.ErrTimedOut) {
		t.Fatalf("err = %v, want context.Canceled and not a timeout", err)
	}
}

func TestCloneAndPromptSection(t *testing.T) {
	base := tool.NewRegistry()
	_ = base.Register(fakeTool{name: "weather", class: tool.ClassRead})
	turn := base.Clone()
	if err := turn.Register(fakeTool{name: "files__write", class: tool.ClassWrite}); err != nil {
		t.Fatal(err)
	}
	if len(base.List()) != 1 || len(turn.List()) != 2 {
		t.Fatalf("clone shares state: base %d, turn %d", len(base.List()), len(turn.List()))
	}
	if got := tool.PromptSection(nil); got != "" {
		t.Fatalf("empty = %q", got)
	}
	got := tool.PromptSection(turn.List())
	want := "## Tools\n\nYou can call these tools. Tools marked \"may need approval\" can pause until the user approves the exact call.\n\n" +
		"- files__write (write, may need approval): fake files__write\n- weather (read): fake weather\n"
	if got != want {
		t.Fatalf("PromptSection =\n%s\nwant\n%s", got, want)
	}
}
