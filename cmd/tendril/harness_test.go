package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The end-to-end tests build the real binary once and run it as a child
// process, the way a user does.
var (
	binOnce sync.Once
	binPath string
	binErr  error
)

func tendrilBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tendril-bin-*")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "tendril")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// proc is a running `tendril serve`.
type proc struct {
	cmd  *exec.Cmd
	URL  string
	Home string
	logs *syncBuffer
	done chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// baseEnv is a clean environment: no provider keys or tokens leak in from
// the developer's shell.
func baseEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k := kv[:strings.IndexByte(kv, '=')]
		switch {
		case strings.HasPrefix(k, "TENDRIL_"), strings.HasPrefix(k, "TELEGRAM_"), strings.HasPrefix(k, "ANTHROPIC_"),
			strings.HasPrefix(k, "OPENAI_"), strings.HasPrefix(k, "AWS_"), k == "MODEL_ID", k == "VISION_MODEL_ID",
			k == "GOMEMLIMIT", k == "AUTOMEMLIMIT", k == "GOGC":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "TENDRIL_HOME="+home)
}

// startServe starts the binary with extra env ("K=V") and waits for a
// Healthy /ping.
func startServe(t testing.TB, home string, extra ...string) *proc {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(tendrilBinary(t), "serve", "--addr", addr)
	cmd.Env = append(baseEnv(home), extra...)
	p := &proc{cmd: cmd, URL: "http://" + addr, Home: home, logs: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() { p.kill() })
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			t.Fatalf("serve exited early: %v\n%s", err, p.logs.String())
		default:
		}
		resp, err := http.Get(p.URL + "/ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("serve not healthy in time\n%s", p.logs.String())
	return nil
}

func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Kill()
		<-p.done
		p.done <- nil // let later waiters through
	}
}

// stop sends SIGTERM and waits for exit.
func (p *proc) stop(t testing.TB) error {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not stop after SIGTERM\n%s", p.logs.String())
		return nil
	}
}

// invoke posts to /invocations and decodes the JSON reply.
func invoke(t testing.TB, url string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url+"/invocations", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("reply is not JSON: %q", raw)
	}
	return resp.StatusCode, out
}

// runCLI runs a tendril subcommand to completion.
func runCLI(t testing.TB, home string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, tendrilBinary(t), args...)
	cmd.Env = append(baseEnv(home), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}
