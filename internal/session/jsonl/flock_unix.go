//go:build unix

package jsonl

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive flock(2) on f, serialising writers across
// processes (e.g. `tendril serve` and the CLI).
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}

func unlockFile(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
