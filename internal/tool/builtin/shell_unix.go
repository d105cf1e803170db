//go:build unix

package builtin

import (
	"os/exec"
	"syscall"
)

// setProcessGroup runs cmd in its own process group and makes cancellation
// kill the whole group, so a command's children die with it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
