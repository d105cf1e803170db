package mcp

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/tool"
)

func TestToolName(t *testing.T) {
	long := strings.Repeat("x", 80)
	tests := []struct {
		prefix, remote string
		used           []string
		want           string
	}{
		{"files", "read_file", nil, "files__read_file"},
		{"files", "get.file/v2", nil, "files__get_file_v2"},
		{sanitize("my server!"), "ls", nil, "my_server___ls"},
		{sanitize("도구"), "검색", nil, "____"},
		{"files", "read_file", []string{"files__read_file"}, "files__read_file_"}, // collision: hashed
		{"s", long, nil, "s__" + strings.Repeat("x", 64-3-9) + "_"},
	}
	for _, tc := range tests {
		used := map[string]bool{}
		for _, u := range tc.used {
			used[u] = true
		}
		got := toolName(tc.prefix, tc.remote, used)
		if !tool.ValidName(got) || used[got] {
			t.Errorf("toolName(%q, %q) = %q: invalid or colliding", tc.prefix, tc.remote, got)
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("toolName(%q, %q) = %q, want prefix %q", tc.prefix, tc.remote, got, tc.want)
		}
		if again := toolName(tc.prefix, tc.remote, used); again != got {
			t.Errorf("toolName is not stable: %q then %q", got, again)
		}
	}
	// Two long names that share 64 characters stay distinct.
	a, b := toolName("s", long+"a", map[string]bool{}), toolName("s", long+"b", map[string]bool{})
	if a == b || len(a) != 64 {
		t.Fatalf("long names %q %q", a, b)
	}
}

func TestEnviron(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-secret")
	t.Setenv("PATH", "/usr/bin")
	env := strings.Join(environ(map[string]string{"PATH": "/opt/bin", "TOKEN": "mine"}), "\n")
	if strings.Contains(env, "sk-secret") || !strings.Contains(env, "PATH=/opt/bin") ||
		strings.Contains(env, "PATH=/usr/bin") || !strings.Contains(env, "TOKEN=mine") {
		t.Fatalf("environ = %s", env)
	}
}

func TestLogWriter(t *testing.T) {
	var buf bytes.Buffer
	w := &logWriter{logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	w.Write([]byte("first li"))
	w.Write([]byte("ne\nsecond\npart"))
	w.Write(bytes.Repeat([]byte("z"), 10000))
	out := buf.String()
	if strings.Count(out, "mcp server stderr") != 2 || !strings.Contains(out, `line="first line"`) || !strings.Contains(out, "line=second") {
		t.Fatalf("log = %s", out)
	}
	if len(w.buf) > 8192 {
		t.Fatalf("buffer grew to %d", len(w.buf))
	}
}

func TestPrefixesStayDistinct(t *testing.T) {
	m := NewManager(map[string]ServerConfig{"a b": {}, "a_b": {}, "a.b": {}, strings.Repeat("long", 20): {}}, nil)
	seen := map[string]bool{}
	for _, s := range m.servers {
		if seen[s.prefix] || !tool.ValidName(s.prefix) || len(s.prefix) > 40 {
			t.Fatalf("prefix %q for %q: duplicate, invalid or long", s.prefix, s.name)
		}
		seen[s.prefix] = true
		if s.cfg.Class != tool.ClassWrite {
			t.Fatalf("default class = %q, want write", s.cfg.Class)
		}
	}
}
