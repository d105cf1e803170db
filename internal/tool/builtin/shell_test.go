//go:build unix

package builtin_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/tool"
	"github.com/tendrilai/tendril/internal/tool/builtin"
)

func TestShell(t *testing.T) {
	t.Setenv("TENDRIL_TEST_SECRET", "sk-do-not-leak")
	dir := t.TempDir()
	sh := builtin.NewShell(builtin.ShellOptions{Dir: dir, Timeout: 5 * time.Second, MaxOutputBytes: 64})
	if sh.Class() != tool.ClassExec {
		t.Fatal("shell must be exec class")
	}
	tests := []struct {
		name    string
		args    string
		want    string
		wantErr string
	}{
		{name: "echo", args: `{"command":"echo hello; echo err >&2"}`, want: "exit status 0\nhello\nerr\n"},
		{name: "no output", args: `{"command":"true"}`, want: "exit status 0 (no output)"},
		{name: "working dir", args: `{"command":"pwd"}`, want: "exit status 0\n" + dir + "\n"},
		{name: "env is scrubbed", args: `{"command":"echo \"[$TENDRIL_TEST_SECRET]\""}`, want: "exit status 0\n[]\n"},
		{name: "exit status", args: `{"command":"echo nope; exit 3"}`, wantErr: "exit status 3\nnope\n"},
		{name: "bounded output", args: `{"command":"yes abcdefgh | head -c 10000"}`, wantErr: "", want: "[output truncated: 64 of 10000 bytes shown]"},
		{name: "timeout kills the group", args: `{"command":"sleep 30 & echo $! > child.pid; sleep 30; echo never","timeout_seconds":1}`, wantErr: "command killed after 1s"},
		{name: "empty", args: `{"command":"  "}`, wantErr: "command is required"},
		{name: "unknown field", args: `{"cmd":"ls"}`, wantErr: `unknown field "cmd"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := sh.Run(context.Background(), call("u", tc.args))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if tc.name == "timeout kills the group" {
					assertChildGone(t, filepath.Join(dir, "child.pid"))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, tc.want) {
				t.Fatalf("out = %q, want it to contain %q", out, tc.want)
			}
			if strings.Contains(out, "sk-do-not-leak") {
				t.Fatal("secret leaked")
			}
		})
	}
	// The working dir is where the command writes.
	if _, err := sh.Run(context.Background(), call("u", `{"command":"echo x > f.txt"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "f.txt")); err != nil {
		t.Fatal(err)
	}
}

// assertChildGone checks that the background child whose PID the command
// wrote was killed with its process group.
func assertChildGone(t *testing.T, pidFile string) {
	t.Helper()
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		// Signal 0 probes; a killed child may linger as a zombie of the
		// (also killed) shell until it is reaped, so also accept zombie.
		if syscall.Kill(pid, 0) != nil || isZombie(pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	t.Fatalf("background child %d survived the timeout", pid)
}

func isZombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data))
	return len(fields) > 2 && fields[2] == "Z"
}
