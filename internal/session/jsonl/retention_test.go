package jsonl_test

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/jsonl"
)

func TestArchive(t *testing.T) {
	now := time.Unix(1800000000, 0)
	cases := []struct {
		name         string
		opts         jsonl.RetentionOptions
		wantArchived []string // session IDs
		wantDeleted  int
	}{
		{"age", jsonl.RetentionOptions{MaxAge: 30 * 24 * time.Hour}, []string{"old"}, 0},
		{"size keeps the newest", jsonl.RetentionOptions{MaxSize: 1}, []string{"old", "mid", "new"}, 0},
		{"size", jsonl.RetentionOptions{MaxSize: 2200}, []string{"old"}, 0},
		{"delete", jsonl.RetentionOptions{MaxAge: 30 * 24 * time.Hour, Delete: true}, nil, 1},
		{"off", jsonl.RetentionOptions{}, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			st, _ := jsonl.Open(dir, jsonl.Options{})
			ages := map[string]time.Duration{"old": 40 * 24 * time.Hour, "mid": 10 * 24 * time.Hour, "new": time.Hour}
			text := make([]byte, 900)
			for i := range text {
				text[i] = 'a'
			}
			for id := range ages {
				k := session.Key{AgentID: "main", Channel: "telegram", ID: id}
				if err := st.Append(ctx, k, node("n-"+id, "", string(text))); err != nil {
					t.Fatal(err)
				}
			}
			st.Close()
			for id, age := range ages {
				p := jsonl.PathFor(dir, session.Key{AgentID: "main", Channel: "telegram", ID: id})
				os.Chtimes(p, now.Add(-age), now.Add(-age))
			}
			rep, err := jsonl.Archive(dir, c.opts, now)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Archived) != len(c.wantArchived) || len(rep.Deleted) != c.wantDeleted {
				t.Fatalf("report %+v", rep)
			}
			for i, id := range c.wantArchived {
				want := filepath.Join(dir, "main", "sessions", "archive", "telegram_"+id+".jsonl.gz")
				if rep.Archived[i] != want {
					t.Fatalf("archived %s, want %s", rep.Archived[i], want)
				}
				f, err := os.Open(want)
				if err != nil {
					t.Fatal(err)
				}
				zr, err := gzip.NewReader(f)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(zr)
				f.Close()
				if len(b) < 900 {
					t.Fatalf("archive holds %d bytes", len(b))
				}
				if _, err := os.Stat(filepath.Join(dir, "main", "sessions", "telegram_"+id+".jsonl")); !os.IsNotExist(err) {
					t.Fatalf("original still there: %v", err)
				}
			}
			st, _ = jsonl.Open(dir, jsonl.Options{})
			defer st.Close()
			keys, _ := st.List(ctx, "main")
			if len(keys) != 3-len(c.wantArchived)-c.wantDeleted {
				t.Fatalf("live sessions %v", keys)
			}
		})
	}
}
