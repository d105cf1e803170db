package jsonl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/jsonl"
	"github.com/tendrilai/tendril/internal/session/sessiontest"
)

var ctx = context.Background()

func TestConformance(t *testing.T) {
	variants := []struct {
		name string
		opts jsonl.Options
	}{
		{"always", jsonl.Options{Fsync: jsonl.FsyncAlways}},
		{"batch", jsonl.Options{Fsync: jsonl.FsyncBatch}},
		{"never", jsonl.Options{Fsync: jsonl.FsyncNever}},
		// Two loaded sessions at most: sessions are unloaded and reloaded
		// all the time, also under concurrent use.
		{"never-maxopen2", jsonl.Options{Fsync: jsonl.FsyncNever, MaxOpen: 2}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			var mu sync.Mutex
			dirs := map[*testing.T]string{}
			sessiontest.Exercise(t, func(t *testing.T) session.Store {
				mu.Lock()
				dir, ok := dirs[t]
				if !ok {
					dir = t.TempDir()
					dirs[t] = dir
				}
				mu.Unlock()
				st, err := jsonl.Open(dir, v.opts)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				return st
			})
		})
	}
}

func node(id, parent, text string) session.Node {
	return session.Node{ID: id, ParentID: parent, Role: session.RoleUser, Text: text, Timestamp: 1}
}

var key = session.Key{AgentID: "main", Channel: "telegram", ID: "42"}

func TestLayoutAndLeafRecord(t *testing.T) {
	dir := t.TempDir()
	st, err := jsonl.Open(dir, jsonl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Append(ctx, key, node("a", "", "hi"), node("b", "a", "yo")); err != nil {
		t.Fatal(err)
	}
	if err := st.SetLeaf(ctx, key, "a"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	p := filepath.Join(dir, "main", "sessions", "telegram_42.jsonl")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	want := []string{
		`{"type":"session","version":1,"agentId":"main","channel":"telegram","id":"42"}`,
		`{"id":"a","parentId":null,"role":"user","content":"hi","timestamp":1,"channel":"telegram"}`,
		`{"id":"b","parentId":"a","role":"user","content":"yo","timestamp":1,"channel":"telegram"}`,
	}
	if len(lines) != 4 || strings.Join(lines[:3], "\n") != strings.Join(want, "\n") || !strings.HasPrefix(lines[3], `{"type":"leaf","leafId":"a",`) {
		t.Fatalf("file:\n%s", b)
	}
}

// TestTornTail covers a write cut anywhere inside the last line, and a
// last line that has its newline but is garbage.
func TestTornTail(t *testing.T) {
	full := `{"id":"c","parentId":"b","role":"user","content":"third","timestamp":1,"channel":"telegram"}` + "\n"
	cases := []struct {
		name string
		tail string
	}{
		{"half a line", full[:30]},
		{"all but the newline", full[:len(full)-2]},
		{"one byte", full[:1]},
		{"zeros with newline", "\x00\x00\x00\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			st, _ := jsonl.Open(dir, jsonl.Options{})
			if err := st.Append(ctx, key, node("a", "", "one"), node("b", "a", "two")); err != nil {
				t.Fatal(err)
			}
			st.Close()
			p := jsonl.PathFor(dir, key)
			good, _ := os.ReadFile(p)
			f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			f.WriteString(c.tail)
			f.Close()

			st, _ = jsonl.Open(dir, jsonl.Options{})
			defer st.Close()
			got, err := st.Nodes(ctx, key)
			if err != nil || len(got) != 2 {
				t.Fatalf("nodes after torn tail: %v, %v", got, err)
			}
			after, _ := os.ReadFile(p)
			if string(after) != string(good) {
				t.Fatalf("file not truncated to the good prefix:\n%q", after)
			}
			torn, _ := filepath.Glob(p + ".torn-*")
			if len(torn) != 1 {
				t.Fatalf("quarantine files: %v", torn)
			}
			if q, _ := os.ReadFile(torn[0]); string(q) != c.tail {
				t.Fatalf("quarantined %q, want %q", q, c.tail)
			}
			// Appending continues cleanly.
			if err := st.Append(ctx, key, node("c", "b", "three")); err != nil {
				t.Fatal(err)
			}
			st.Close()
			st2, _ := jsonl.Open(dir, jsonl.Options{})
			defer st2.Close()
			got, _ = st2.Nodes(ctx, key)
			if len(got) != 3 {
				t.Fatalf("after re-append: %d nodes", len(got))
			}
		})
	}
}

// TestBadMiddleLine: a corrupt line in the middle is skipped, never
// deleted, and the nodes around it load.
func TestBadMiddleLine(t *testing.T) {
	dir := t.TempDir()
	st, _ := jsonl.Open(dir, jsonl.Options{})
	st.Append(ctx, key, node("a", "", "one"))
	st.Close()
	p := jsonl.PathFor(dir, key)
	f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("not json\n" + `{"id":"b","parentId":"a","role":"user","content":"two"}` + "\n")
	f.Close()
	st, _ = jsonl.Open(dir, jsonl.Options{})
	defer st.Close()
	got, _ := st.Nodes(ctx, key)
	if len(got) != 2 {
		t.Fatalf("nodes: %+v", got)
	}
	if b, _ := os.ReadFile(p); !strings.Contains(string(b), "not json\n") {
		t.Fatal("bad line was deleted")
	}
}

// TestSecondProcessAppend: another writer (here a second Store standing in
// for the CLI) appends to the same file; the first store notices on its next
// append and keeps both.
func TestSecondProcessAppend(t *testing.T) {
	dir := t.TempDir()
	a, _ := jsonl.Open(dir, jsonl.Options{})
	defer a.Close()
	b, _ := jsonl.Open(dir, jsonl.Options{})
	defer b.Close()
	if err := a.Append(ctx, key, node("1", "", "a")); err != nil {
		t.Fatal(err)
	}
	if err := b.Append(ctx, key, node("2", "1", "b")); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, key, node("3", "2", "a")); err != nil {
		t.Fatal(err)
	}
	got, err := session.BuildContext(ctx, a, key, session.Limits{})
	if err != nil || len(got) != 3 {
		t.Fatalf("context: %+v %v", got, err)
	}
}

func TestOpenRejectsPolicy(t *testing.T) {
	if _, err := jsonl.Open(t.TempDir(), jsonl.Options{Fsync: "sometimes"}); err == nil {
		t.Fatal("unknown fsync policy accepted")
	}
}

// TestLongLinesAcrossChunks loads lines longer than the read chunk (shrunk
// to 4 KiB) and many lines crossing chunk boundaries, then a torn tail
// after them.
func TestLongLinesAcrossChunks(t *testing.T) {
	defer jsonl.SetScanChunk(4096)()
	dir := t.TempDir()
	st, _ := jsonl.Open(dir, jsonl.Options{Fsync: jsonl.FsyncNever})
	parent := ""
	var want []string
	for i := 0; i < 40; i++ {
		id := fmt.Sprintf("n%d", i)
		text := strings.Repeat("p", 300+i*1013)
		if i == 20 {
			text = strings.Repeat("L", 9<<12)
		}
		if err := st.Append(ctx, key, node(id, parent, text)); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
		parent = id
	}
	st.Close()
	f, _ := os.OpenFile(jsonl.PathFor(dir, key), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"id":"torn","parentId":"n39","role":"us`)
	f.Close()
	st, _ = jsonl.Open(dir, jsonl.Options{})
	defer st.Close()
	got, err := st.Nodes(ctx, key)
	if err != nil || len(got) != 40 {
		t.Fatalf("%d nodes, %v", len(got), err)
	}
	for i, n := range got {
		if n.ID != want[i] || (i == 20 && len(n.Text) != 9<<12) {
			t.Fatalf("node %d = %s (%d bytes)", i, n.ID, len(n.Text))
		}
	}
	if leaf, _ := st.Leaf(ctx, key); leaf != "n39" {
		t.Fatalf("leaf %s", leaf)
	}
}

// TestMaxOpen: beyond MaxOpen loaded sessions the least recently used is
// unloaded, and comes back intact from its file.
func TestMaxOpen(t *testing.T) {
	st, _ := jsonl.Open(t.TempDir(), jsonl.Options{MaxOpen: 3, Fsync: jsonl.FsyncNever})
	defer st.Close()
	for round := 0; round < 3; round++ {
		for i := 0; i < 10; i++ {
			k := session.Key{AgentID: "main", Channel: "telegram", ID: fmt.Sprint(i)}
			leaf, err := st.Leaf(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Append(ctx, k, node(fmt.Sprintf("r%d", round), leaf, "x")); err != nil {
				t.Fatal(err)
			}
			if n := jsonl.OpenFiles(st); n > 3 {
				t.Fatalf("%d open files with MaxOpen 3", n)
			}
		}
	}
	for i := 0; i < 10; i++ {
		k := session.Key{AgentID: "main", Channel: "telegram", ID: fmt.Sprint(i)}
		got, err := session.BuildContext(ctx, st, k, session.Limits{})
		if err != nil || len(got) != 3 || got[2].ID != "r2" {
			t.Fatalf("session %d: %+v %v", i, got, err)
		}
	}
}
