package sqlitestore

import (
	"os"
	"sync"

	"github.com/tendrilai/tendril/internal/memory/markdown"
)

// Record files are append-only between compactions (see package
// markdown): a changed record is appended again with its ID, and the file
// is rewritten whole only when most of it is stale. What the store knows
// of a file's stale entries is kept here, by path.

// compactMinBytes is the size below which a record file is never
// compacted for staleness: rewriting a small file costs little either way.
const compactMinBytes = 64 << 10

// staleFilesMax bounds the stale-bytes cache; when full it starts afresh
// (an entry is recounted from the file when next needed).
const staleFilesMax = 4096

// staleInfo is one record file's stale bytes when it had size bytes.
type staleInfo struct {
	size  int64
	stale int64
}

// staleFiles caches staleInfo by absolute path. Entries stay right across
// processes and hand edits because they are checked against the file: a
// file that grew since (appends: events, new records, our own writes)
// keeps its count; a file that shrank or is unknown is parsed once.
var staleFiles = struct {
	sync.Mutex
	m map[string]staleInfo
}{m: map[string]staleInfo{}}

// knownStale returns the stale bytes of the record file at path, of size
// bytes now, when the cache holds them.
func knownStale(path string, size int64) (int64, bool) {
	staleFiles.Lock()
	defer staleFiles.Unlock()
	in, ok := staleFiles.m[path]
	if !ok || size < in.size {
		return 0, false
	}
	return in.stale, true
}

// countStale returns the stale bytes of the record file at path: from the
// cache, else by parsing it (a read, once per file and process). A missing
// file has none.
func countStale(path string) (int64, error) {
	st, err := os.Stat(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if n, ok := knownStale(path, st.Size()); ok {
		return n, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n := markdown.Parse(data, markdown.Defaults{File: path}).StaleBytes
	noteStale(path, int64(len(data)), n)
	return n, nil
}

// noteStale records that the record file at path has stale bytes at size
// bytes.
func noteStale(path string, size, stale int64) {
	staleFiles.Lock()
	defer staleFiles.Unlock()
	if len(staleFiles.m) >= staleFilesMax {
		staleFiles.m = map[string]staleInfo{}
	}
	staleFiles.m[path] = staleInfo{size: size, stale: stale}
}

// forgetStale drops what is known of the file at path (rewritten whole or
// removed).
func forgetStale(path string) {
	staleFiles.Lock()
	defer staleFiles.Unlock()
	delete(staleFiles.m, path)
}

// mostlyStale reports whether a record file of size bytes, stale of them
// stale, is due for compaction: more stale than live bytes, and at least
// compactMinBytes. Compacting only then bounds the rewrites to about the
// bytes appended since the last compaction, so a merge costs about one
// record entry however many records the file holds.
func mostlyStale(size, stale int64) bool {
	return size >= compactMinBytes && stale > size-stale
}
