//go:build unix

package approval

import "os"

// fsyncDir makes a directory's entries (a rename, a removal) durable.
func fsyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
