package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/tendrilai/tendril/internal/tool"
)

// Shell defaults.
const (
	DefaultShellTimeout   = 30 * time.Second
	MaxShellTimeout       = 10 * time.Minute
	DefaultShellMaxOutput = 16 << 10
)

// ShellOptions configures the exec-class shell tool.
type ShellOptions struct {
	// Shell runs the command as Shell -c <command>; default /bin/sh.
	Shell string
	// Dir is the working directory; default the process's.
	Dir string
	// Timeout is the default and the cap per command (default 30 s,
	// never more than MaxShellTimeout). The model may ask for less.
	Timeout time.Duration
	// MaxOutputBytes bounds stdout+stderr kept for the model (default 16 KiB).
	MaxOutputBytes int
	// Env is the whole environment of the command. Default: PATH, HOME,
	// LANG and TZ from the process only, so API keys and tokens in
	// Tendril's environment never reach the command or the model.
	Env []string
}

type shellTool struct {
	staticTool
	opts ShellOptions
}

// NewShell returns the exec-class shell tool. Register it only when exec
// tools are enabled; the approval gate always asks before it runs. The
// command runs in its own process group, which is killed when the timeout
// or ctx ends; a non-zero exit status is returned as an error carrying the
// output.
func NewShell(o ShellOptions) tool.Tool {
	if o.Shell == "" {
		o.Shell = "/bin/sh"
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultShellTimeout
	}
	if o.Timeout > MaxShellTimeout {
		o.Timeout = MaxShellTimeout
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultShellMaxOutput
	}
	if o.Env == nil {
		for _, k := range []string{"PATH", "HOME", "LANG", "TZ"} {
			if v, ok := os.LookupEnv(k); ok {
				o.Env = append(o.Env, k+"="+v)
			}
		}
		if o.Env == nil {
			o.Env = []string{}
		}
	}
	return &shellTool{opts: o, staticTool: staticTool{
		name:  NameShell,
		class: tool.ClassExec,
		desc: fmt.Sprintf("Run a shell command on the host (%s -c). Needs approval every time. "+
			"Output is cut at %d bytes; the command is killed after timeout_seconds (default and max %d).",
			o.Shell, o.MaxOutputBytes, int(o.Timeout/time.Second)),
		schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "minLength": 1, "maxLength": 8192},
    "timeout_seconds": {"type": "integer", "minimum": 1}
  },
  "required": ["command"],
  "additionalProperties": false
}`),
	}}
}

func (s *shellTool) Run(ctx context.Context, call tool.Call) (string, error) {
	var a struct {
		Command        string `json:"command"`
		TimeoutSeconds int    `json:"timeout_seconds"`
	}
	if err := decodeArgs(call.Args, &a); err != nil {
		return "", err
	}
	if strings.TrimSpace(a.Command) == "" {
		return "", errors.New("command is required")
	}
	if len(a.Command) > 8192 || strings.ContainsRune(a.Command, 0) {
		return "", errors.New("command is over 8192 bytes or contains a NUL byte")
	}
	timeout := s.opts.Timeout
	if a.TimeoutSeconds > 0 && time.Duration(a.TimeoutSeconds)*time.Second < timeout {
		timeout = time.Duration(a.TimeoutSeconds) * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	cmd := exec.CommandContext(ctx, s.opts.Shell, "-c", a.Command)
	cmd.Dir = s.opts.Dir
	cmd.Env = s.opts.Env
	cmd.Stdin = nil
	out := &capWriter{max: s.opts.MaxOutputBytes}
	cmd.Stdout, cmd.Stderr = out, out
	setProcessGroup(cmd)
	cmd.WaitDelay = 2 * time.Second

	err := cmd.Run()
	text := out.String()
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return "", fmt.Errorf("command killed after %s\n%s", timeout, text)
	case err != nil:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("exit status %d\n%s", ee.ExitCode(), text)
		}
		return "", fmt.Errorf("run command: %w", err)
	}
	if text == "" {
		return "exit status 0 (no output)", nil
	}
	return "exit status 0\n" + text, nil
}

// capWriter keeps the first max bytes written and counts the rest.
type capWriter struct {
	mu    sync.Mutex
	max   int
	buf   bytes.Buffer
	total int
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.total += len(p)
	if room := w.max - w.buf.Len(); room > 0 {
		if len(p) > room {
			w.buf.Write(p[:room])
		} else {
			w.buf.Write(p)
		}
	}
	return len(p), nil
}

func (w *capWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := strings.ToValidUTF8(w.buf.String(), "")
	if w.total > w.buf.Len() {
		s += fmt.Sprintf("\n[output truncated: %d of %d bytes shown]", w.buf.Len(), w.total)
	}
	return s
}
