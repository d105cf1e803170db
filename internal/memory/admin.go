package memory

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Admin is what the application layer needs of a memory backend beyond
// Store: bulk writes and listings for the pipeline, rejections, the actor
// list, expiry, rebuild, export and warm-up. The embedded store
// (sqlitestore) and the PostgreSQL store (pgstore) both implement it.
type Admin interface {
	Store
	RejectionStore
	// List returns the records q selects (q.Text is ignored) in index
	// order — records by createdAt then ID, then events by timestamp then
	// ID — without ranking.
	List(ctx context.Context, q Query) ([]Record, error)
	// PutBatch is Put for each record, atomically.
	PutBatch(ctx context.Context, recs []Record) ([]Record, error)
	// Actors lists every actor with memory, sorted by byte order.
	Actors(ctx context.Context) ([]string, error)
	// ExpireEvents deletes events older than the expiry and returns how
	// many went.
	ExpireEvents(ctx context.Context) (int, error)
	// Rebuild recreates whatever the backend derives from its source of
	// truth (embedded: the SQLite index from Markdown; PostgreSQL: the
	// in-process ranking caches from the rows); progress, when non-nil,
	// sees (done, total) actors.
	Rebuild(ctx context.Context, progress func(done, total int)) error
	// ExportMarkdown writes every actor's layer files under dir, in the
	// layout of <home>/memory, and returns the number of files written.
	ExportMarkdown(ctx context.Context, dir string) (int, error)
	// IndexedKeys are the declared filterable metadata keys.
	IndexedKeys() []IndexedKey
	// Prepare builds an actor's ranking index now instead of on its first
	// search.
	Prepare(ctx context.Context, actorID string) error
}

// CheckText returns an error wrapping ErrInvalidQuery when s cannot be
// stored as text by every backend: PostgreSQL TEXT rejects NUL bytes and
// invalid UTF-8. field names the value in the message.
func CheckText(field, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%w: %s contains a NUL byte", ErrInvalidQuery, field)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidQuery, field)
	}
	return nil
}

// CheckMetadataText is CheckText over every key and string value of md.
func CheckMetadataText(field string, md map[string]any) error {
	for k, v := range md {
		if err := CheckText(field+" key", k); err != nil {
			return err
		}
		switch x := v.(type) {
		case string:
			if err := CheckText(field+" "+k, x); err != nil {
				return err
			}
		case []string:
			for _, s := range x {
				if err := CheckText(field+" "+k, s); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// RebuildWarner is implemented by backends whose Rebuild reads files a
// user may edit by hand (sqlitestore): RebuildWarn is Rebuild returning
// what it skipped, one line each.
type RebuildWarner interface {
	RebuildWarn(ctx context.Context, progress func(done, total int)) ([]string, error)
}
