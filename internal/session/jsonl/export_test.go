package jsonl

// SetScanChunk sets the load read size and returns a func restoring it.
func SetScanChunk(n int) func() {
	old := scanChunk
	scanChunk = n
	return func() { scanChunk = old }
}

// OpenFiles reports how many sessions hold an open file.
func OpenFiles(s *Store) int64 { return s.open.Load() }

// NodeCaches reports how many sessions hold decoded nodes.
func NodeCaches(s *Store) int64 { return s.caches.Load() }
