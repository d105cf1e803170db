//go:build unix

package approval

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock (flock) on f, blocking.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}

func unlockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
