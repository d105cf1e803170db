package assistant

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// exportDir checks and prepares the directory of an export (ExportMemory,
// POST /memory/export) before anything is rendered, so that a path the caller got wrong is a
// 400 naming it, not a 500 halfway through the export. dir must be
// absolute (it is a path on the server); it is cleaned ("/a/b/../c" is
// "/a/c"), created when missing (0700, like the layer files' directories)
// and must take a new file. It may be neither home itself (an actor
// encoded "memory" or "approvals" would write into the live directories)
// nor inside home's memory directory, the embedded store's live Markdown,
// which the export would overwrite from the index; symbolic links are
// followed for both checks. It returns the cleaned path.
//
// Errors wrap ErrInvalid for the caller's mistakes (a relative
// path, a NUL byte, a file where a directory is needed, no permission, a
// read-only file system, a name too long); anything else (a full disk, an
// I/O error) is returned as it is, a server fault.
func exportDir(home, dir string) (string, error) {
	bad := func(format string, a ...any) error { return badDir(dir, format, a...) }
	switch {
	case dir == "":
		return "", fmt.Errorf("%w: dir is required: an absolute path on the server", ErrInvalid)
	case strings.ContainsRune(dir, 0):
		return "", bad("contains a NUL byte")
	case !filepath.IsAbs(dir):
		return "", bad("must be absolute (it is a path on the server)")
	}
	clean := filepath.Clean(dir)
	if err := notLive(home, clean, bad); err != nil {
		return "", err
	}
	if err := os.MkdirAll(clean, 0o700); err != nil {
		return "", pathError(dir, "cannot create it", err)
	}
	// Through a symbolic link that MkdirAll followed, or one that appeared
	// meanwhile, the directory may still be a live one.
	if err := notLive(home, clean, bad); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(clean, ".tendril-export-*")
	if err != nil {
		return "", pathError(dir, "cannot write in it", err)
	}
	f.Close()
	os.Remove(f.Name())
	return clean, nil
}

// notLive refuses dir when it is home or inside home's memory directory,
// comparing the paths with their existing parts' symbolic links resolved.
func notLive(home, dir string, bad func(string, ...any) error) error {
	if home == "" {
		return nil
	}
	d, h := resolve(dir), resolve(filepath.Clean(home))
	mem := filepath.Join(h, "memory")
	switch {
	case d == h:
		return bad("is the Tendril home %s; export to a directory of its own", h)
	case d == mem || strings.HasPrefix(d, mem+string(filepath.Separator)):
		return bad("is inside the live memory directory %s, which the export would overwrite; export elsewhere", mem)
	}
	return nil
}

// resolve returns p with the symbolic links of its longest existing
// prefix resolved; the part that does not exist yet is appended as it is.
func resolve(p string) string {
	rest := ""
	for cur := p; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// badDir is the caller's mistake about the export directory dir.
func badDir(dir, format string, a ...any) error {
	return fmt.Errorf("%w: export directory %.256q: %s", ErrInvalid, dir, fmt.Sprintf(format, a...))
}

// pathError classifies a failure to create or write in the export
// directory dir: what the caller can fix is a 400, the rest a server
// fault.
func pathError(dir, what string, err error) error {
	for _, e := range []error{fs.ErrPermission, fs.ErrExist, fs.ErrNotExist, syscall.ENOTDIR, syscall.EISDIR,
		syscall.EROFS, syscall.ENAMETOOLONG, syscall.ELOOP, syscall.EINVAL} {
		if errors.Is(err, e) {
			return badDir(dir, "%s: %v", what, err)
		}
	}
	return fmt.Errorf("export directory %q: %s: %w", dir, what, err)
}
