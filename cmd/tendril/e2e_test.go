package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

func TestE2ENoModelConfigured(t *testing.T) {
	p := startServe(t, t.TempDir())
	status, out := invoke(t, p.URL, map[string]any{"message": "hello", "actor_id": "api:u"})
	if status != http.StatusServiceUnavailable || out["ok"] != false || out["error"] != "MODEL_NOT_CONFIGURED" {
		t.Fatalf("%d %v", status, out)
	}
	if msg, _ := out["message"].(string); !strings.Contains(msg, "MODEL_ID") {
		t.Fatalf("message does not name MODEL_ID: %q", msg)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs.String())
	}
}

func TestCLIExitCodes(t *testing.T) {
	home := t.TempDir()
	if _, _, code := runCLI(t, home, nil, "version"); code != 0 {
		t.Fatalf("version exit %d", code)
	}
	if _, stderr, code := runCLI(t, home, nil, "no-such-command"); code != 2 || stderr == "" {
		t.Fatalf("unknown command exit %d stderr %q", code, stderr)
	}
	if _, _, code := runCLI(t, home, nil, "serve", "--no-such-flag"); code != 2 {
		t.Fatalf("bad flag exit %d", code)
	}
	if _, stderr, code := runCLI(t, home, nil, "invoke", "hi"); code != 1 || !strings.Contains(stderr, "MODEL_NOT_CONFIGURED") {
		t.Fatalf("invoke without model: exit %d stderr %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, home, []string{"TENDRIL_ADDR=0.0.0.0:0"}, "serve"); code != 1 || !strings.Contains(stderr, "TENDRIL_AUTH_TOKEN") {
		t.Fatalf("non-loopback without token: exit %d stderr %q", code, stderr)
	}
	// a format the command does not write is bad usage, not a Markdown export under another name
	if _, stderr, code := runCLI(t, home, nil, "memory", "export", "--format", "json", "--out", filepath.Join(t.TempDir(), "x")); code != 2 || !strings.Contains(stderr, "--format") {
		t.Fatalf("memory export --format json: exit %d stderr %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, home, nil, "memory", "staging", "reject", " "); code != 2 || !strings.Contains(stderr, "needs the ID") {
		t.Fatalf("staging reject with a blank ID: exit %d stderr %q", code, stderr)
	}
	for _, sub := range []string{"serve", "chat", "invoke", "doctor", "version"} {
		out, _, code := runCLI(t, home, nil, sub, "--help")
		if code != 0 || len(out) < 80 {
			t.Errorf("%s --help: exit %d, %d bytes", sub, code, len(out))
		}
	}
}

func TestE2ESecondServeOnOneHomeIsRefused(t *testing.T) {
	home := t.TempDir()
	startServe(t, home)
	_, stderr, code := runCLI(t, home, []string{"TENDRIL_ADDR=" + freeAddr(t)}, "serve")
	if code != 1 || !strings.Contains(stderr, "already running") {
		t.Fatalf("second serve: exit %d %q", code, stderr)
	}
	// The CLI is the server's client: invoke beside it answers through it
	// (here: the server has no model).
	_, stderr, code = runCLI(t, home, nil, "invoke", "hello")
	if code != 1 || !strings.Contains(stderr, "MODEL_NOT_CONFIGURED") {
		t.Fatalf("invoke beside serve: exit %d %q", code, stderr)
	}
}
