//go:build !unix

package approval

import "os"

// lockFile is a no-op where flock is unavailable: only one process may then
// use a ledger directory at a time.
func lockFile(f *os.File) error { return nil }

func unlockFile(f *os.File) error { return nil }
