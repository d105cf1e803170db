//go:build !unix

package approval

// fsyncDir is a no-op where directories cannot be opened for fsync
// (Windows): renames there are made durable by the file system itself.
func fsyncDir(dir string) error { return nil }
