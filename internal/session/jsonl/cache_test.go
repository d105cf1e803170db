package jsonl_test

import (
	"fmt"
	"testing"

	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/jsonl"
)

// Path serves repeated reads from decoded nodes kept per session; what a
// caller does to the nodes it got, a Clear, or another process rewriting
// the session never shows in later reads.
func TestPathCacheIsolation(t *testing.T) {
	dir := t.TempDir()
	a, err := jsonl.Open(dir, jsonl.Options{Fsync: jsonl.FsyncNever})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	const total = 300 // more than the cache holds: slots are reused
	parent := ""
	for i := 0; i < total; i++ {
		n := node(fmt.Sprintf("n%03d", i), parent, "")
		n.Metadata = map[string]any{"i": float64(i)}
		n.Blocks = []session.Block{{Type: session.BlockText, Text: fmt.Sprintf("text %d", i)}}
		if err := a.Append(ctx, key, n); err != nil {
			t.Fatal(err)
		}
		parent = n.ID
	}
	check := func(st *jsonl.Store, leaf string, from, to int) {
		t.Helper()
		for pass := 0; pass < 2; pass++ { // the second pass reads cached nodes
			got, err := st.Path(ctx, key, leaf, to-from)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != to-from {
				t.Fatalf("pass %d: %d nodes, want %d", pass, len(got), to-from)
			}
			for j, n := range got {
				i := from + j
				if n.ID != fmt.Sprintf("n%03d", i) || n.Metadata["i"] != float64(i) || len(n.Blocks) != 1 || n.Blocks[0].Text != fmt.Sprintf("text %d", i) {
					t.Fatalf("pass %d: node %d = %+v", pass, i, n)
				}
				// The caller's changes stay the caller's.
				n.Metadata["i"] = "changed"
				n.Blocks[0].Text = "changed"
			}
		}
	}
	check(a, "n299", 200, 300)
	check(a, "n299", 150, 300) // wider than the cache
	check(a, "n149", 50, 150)
	check(a, "n299", 200, 300)

	// Another process clears and rewrites the session under the same IDs.
	b, err := jsonl.Open(dir, jsonl.Options{Fsync: jsonl.FsyncNever})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Clear(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := b.Append(ctx, key, node("n000", "", "new"), node("n001", "n000", "newer")); err != nil {
		t.Fatal(err)
	}
	got, err := a.Path(ctx, key, "n001", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Text != "new" || got[1].Text != "newer" || got[0].Metadata != nil {
		t.Fatalf("after the rewrite: %+v", got)
	}
	// And this process's own Clear.
	if err := a.Clear(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, key, node("n000", "", "third")); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Path(ctx, key, "n000", 0); err != nil || len(got) != 1 || got[0].Text != "third" {
		t.Fatalf("after Clear: %+v %v", got, err)
	}
}

// Many sessions taking turns in rotation keep at most MaxNodeCaches of
// them holding decoded nodes; a session whose nodes were dropped reads
// its path from the file again, unchanged, and Clear or an eviction
// gives its count back.
func TestNodeCachesBounded(t *testing.T) {
	st, err := jsonl.Open(t.TempDir(), jsonl.Options{Fsync: jsonl.FsyncNever, MaxNodeCaches: 3, MaxOpen: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const sessions, turns = 8, 20
	keys := make([]session.Key, sessions)
	leaf := make([]string, sessions)
	for s := range keys {
		keys[s] = session.Key{AgentID: "main", Channel: "http", ID: fmt.Sprintf("s%d", s)}
	}
	for turn := 0; turn < turns; turn++ {
		for s, k := range keys {
			n := node(fmt.Sprintf("s%d-n%02d", s, turn), leaf[s], fmt.Sprintf("session %d turn %d", s, turn))
			if err := st.Append(ctx, k, n); err != nil {
				t.Fatal(err)
			}
			leaf[s] = n.ID
			got, err := st.Path(ctx, k, leaf[s], 10)
			if err != nil {
				t.Fatal(err)
			}
			if want := min(turn+1, 10); len(got) != want {
				t.Fatalf("session %d turn %d: %d nodes, want %d", s, turn, len(got), want)
			}
			for j, g := range got {
				if i := turn + 1 - len(got) + j; g.ID != fmt.Sprintf("s%d-n%02d", s, i) || g.Text != fmt.Sprintf("session %d turn %d", s, i) {
					t.Fatalf("session %d turn %d: node %d = %s %q", s, turn, j, g.ID, g.Text)
				}
			}
			if c := jsonl.NodeCaches(st); c > 3 {
				t.Fatalf("after session %d turn %d: %d sessions hold decoded nodes, want at most 3", s, turn, c)
			}
		}
	}
	if c := jsonl.NodeCaches(st); c != 3 {
		t.Fatalf("%d sessions hold decoded nodes at the end, want 3", c)
	}
	if err := st.Clear(ctx, keys[sessions-1]); err != nil {
		t.Fatal(err)
	}
	if c := jsonl.NodeCaches(st); c != 2 {
		t.Fatalf("%d sessions hold decoded nodes after a Clear, want 2", c)
	}
}
