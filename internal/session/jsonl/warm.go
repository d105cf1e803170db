package jsonl

import (
	"context"
	"os"
	"sort"
	"time"

	"github.com/tendrilai/tendril/internal/session"
)

// Recent returns the keys of the n non-empty sessions whose files were
// modified last, most recent first (ties by key), of every agent; n ≤ 0
// gives none, and at most Options.MaxOpen are returned, so that loading
// them all evicts none of them. It costs what List does plus one stat(2)
// per session file and loads nothing: a restarted server warms these
// sessions by reading their context (session.BuildContext) in the
// background, so that their first turn does not read the file. A file
// removed meanwhile is skipped; errors are List's.
func (s *Store) Recent(ctx context.Context, n int) ([]session.Key, error) {
	n = min(n, s.opts.MaxOpen)
	if n <= 0 {
		return nil, nil
	}
	keys, err := s.List(ctx, "")
	if err != nil {
		return nil, err
	}
	type dated struct {
		k   session.Key
		mod time.Time
	}
	ds := make([]dated, 0, len(keys))
	for _, k := range keys {
		fi, err := os.Stat(PathFor(s.dir, k))
		if err != nil {
			continue
		}
		ds = append(ds, dated{k, fi.ModTime()})
	}
	// Stable over List's key order: equal times stay sorted by key.
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].mod.After(ds[j].mod) })
	out := make([]session.Key, 0, min(n, len(ds)))
	for _, d := range ds[:min(n, len(ds))] {
		out = append(out, d.k)
	}
	return out, nil
}
