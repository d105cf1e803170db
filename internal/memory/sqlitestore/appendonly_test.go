package sqlitestore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/markdown"
)

const aoNS = "/main/u/long_term/"

func aoPath(home string) string { return filepath.Join(home, "memory", "u", "semantic.md") }

func aoPut(t *testing.T, s *Store, r memory.Record) memory.Record {
	t.Helper()
	got, err := s.Put(bg, r)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// merged is r as consolidation merges a duplicate into it.
func merged(r memory.Record, i int) memory.Record {
	r.Sources = append(append([]string(nil), r.Sources...), fmt.Sprintf("ev_%d", i))
	r.UpdatedAt = time.Time{}
	return r
}

func entriesOf(t *testing.T, path, id string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), `<!-- tendril:record {"id":"`+id+`"`)
}

// A merge appends the record's new version; the file's other entries are
// not rewritten, and every reader (Get, a reopened store, Rebuild) sees the
// last version.
func TestMergeAppendsEntry(t *testing.T) {
	home := t.TempDir()
	s, err := Open(home, Options{SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := aoPut(t, s, memory.Record{Namespace: aoNS, Content: "has a fig tree"})
	aoPut(t, s, memory.Record{Namespace: aoNS, Content: "owns a greenhouse"})
	before, _ := os.ReadFile(aoPath(home))
	a2 := aoPut(t, s, merged(a, 1))
	after, _ := os.ReadFile(aoPath(home))
	if !strings.HasPrefix(string(after), string(before)) || len(after) <= len(before) {
		t.Fatalf("merge did not append:\n%s", after)
	}
	if n := entriesOf(t, aoPath(home), a.ID); n != 2 {
		t.Fatalf("%d entries of %s, want 2", n, a.ID)
	}
	check := func(s *Store, when string) {
		t.Helper()
		got, err := s.Get(bg, a.ID)
		if err != nil || len(got.Sources) != 1 || !got.UpdatedAt.Equal(a2.UpdatedAt) {
			t.Fatalf("%s: Get = %+v, %v; want %+v", when, got, err, a2)
		}
		hits, err := s.Search(bg, memory.Query{NamespacePath: "/main/u/", Text: "fig tree"})
		if err != nil || len(hits) != 1 || hits[0].Record.ID != a.ID {
			t.Fatalf("%s: search = %+v, %v", when, hits, err)
		}
	}
	check(s, "after merge")
	if err := s.Sync(bg); err != nil {
		t.Fatal(err)
	}
	check(s, "after Sync")
	s.Close()
	s2, err := Open(home, Options{SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	check(s2, "after reopen")
	if err := s2.Rebuild(bg, nil); err != nil {
		t.Fatal(err)
	}
	check(s2, "after Rebuild")
	if n := entriesOf(t, aoPath(home), a.ID); n != 1 {
		t.Fatalf("after Rebuild %d entries of %s, want 1 (compacted)", n, a.ID)
	}
}

// Merges into a file compact it once it is mostly stale: its size stays
// bounded by about twice its live entries (and the minimum), and nothing
// is lost by the rewrites.
func TestMergesCompactMostlyStaleFile(t *testing.T) {
	home := t.TempDir()
	s, err := Open(home, Options{SyncInterval: -1, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var recs []memory.Record
	for i := 0; i < 20; i++ {
		recs = append(recs, aoPut(t, s, memory.Record{Namespace: aoNS, Content: fmt.Sprintf("fact %d: %s", i, strings.Repeat("figs and plums ", 10))}))
	}
	var maxSize, shrinks int64
	prev := int64(0)
	for i := 0; i < 600; i++ {
		j := i % 3 // merges hit a few records again and again
		recs[j] = aoPut(t, s, merged(recs[j], i))
		st, err := os.Stat(aoPath(home))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() < prev {
			shrinks++
		}
		prev = st.Size()
		maxSize = max(maxSize, st.Size())
	}
	if shrinks == 0 {
		t.Fatalf("file never compacted (grew to %d bytes)", maxSize)
	}
	if maxSize > compactMinBytes+4096 {
		t.Fatalf("file grew to %d bytes; compaction keeps it near %d", maxSize, compactMinBytes)
	}
	s.Close()
	s2, err := Open(home, Options{SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.Rebuild(bg, nil); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		got, err := s2.Get(bg, r.ID)
		if err != nil || got.Content != r.Content || len(got.Sources) != len(r.Sources) {
			t.Fatalf("after compactions %s = %+v, %v; want %d sources", r.ID, got, err, len(r.Sources))
		}
	}
}

// A hand edit counts in the last entry of an ID; an edit of an earlier,
// stale entry is ignored (last entry wins).
func TestHandEditOfAppendedRecord(t *testing.T) {
	home := t.TempDir()
	s, err := Open(home, Options{SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := aoPut(t, s, memory.Record{Namespace: aoNS, Content: "has a fig tree"})
	aoPut(t, s, merged(a, 1))
	path := aoPath(home)
	data, _ := os.ReadFile(path)
	first := strings.Index(string(data), "\nhas a fig tree\n")
	last := strings.LastIndex(string(data), "\nhas a fig tree\n")
	if first < 0 || first == last {
		t.Fatalf("want two entries:\n%s", data)
	}
	edit := func(at int, text string) {
		t.Helper()
		out := string(data[:at]) + "\n" + text + "\n" + string(data[at+len("\nhas a fig tree\n"):])
		if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(bg); err != nil {
			t.Fatal(err)
		}
	}
	edit(first, "has a pear tree, old entry")
	if got, _ := s.Get(bg, a.ID); got.Content != "has a fig tree" {
		t.Fatalf("edit of the stale entry took effect: %q", got.Content)
	}
	edit(last, "has an olive tree")
	if got, _ := s.Get(bg, a.ID); got.Content != "has an olive tree" {
		t.Fatalf("edit of the last entry: %q", got.Content)
	}
	// The next merge carries the hand edit on.
	got, _ := s.Get(bg, a.ID)
	aoPut(t, s, merged(got, 2))
	s.Close()
	s2, _ := Open(home, Options{SyncInterval: -1})
	defer s2.Close()
	if err := s2.Rebuild(bg, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := s2.Get(bg, a.ID); got.Content != "has an olive tree" || len(got.Sources) != 2 {
		t.Fatalf("after merge and rebuild: %+v", got)
	}
}

// A crash that tears the appended entry of a merge anywhere loses no
// earlier record: the other records are whole and the merged record is
// its earlier version or the start of its new one; the next write goes on.
func TestTornMergeKeepsEarlierRecords(t *testing.T) {
	home := t.TempDir()
	s, err := Open(home, Options{SyncInterval: -1, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	a := aoPut(t, s, memory.Record{Namespace: aoNS, Content: "has a fig tree\nin a large pot"})
	b := aoPut(t, s, memory.Record{Namespace: aoNS, Content: "owns a greenhouse"})
	before, _ := os.ReadFile(aoPath(home))
	aoPut(t, s, merged(a, 1))
	after, _ := os.ReadFile(aoPath(home))
	s.Close()
	tail := after[len(before):]
	for _, cut := range []int{1, 2, 3, 10, len(tail) / 3, len(tail) / 2, len(tail) - 30, len(tail) - 3, len(tail) - 2, len(tail) - 1} {
		if err := os.WriteFile(aoPath(home), append(append([]byte(nil), before...), tail[:cut]...), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(home, Options{SyncInterval: -1, NoFsync: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Rebuild(bg, nil); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(bg, b.ID); err != nil || got.Content != b.Content {
			t.Fatalf("cut %d: %s = %+v, %v", cut, b.ID, got, err)
		}
		got, err := s.Get(bg, a.ID)
		if err != nil || got.Content == "" || !strings.HasPrefix(a.Content, got.Content) {
			t.Fatalf("cut %d: %s = %+v, %v", cut, a.ID, got, err)
		}
		// Writing goes on after the torn entry.
		aoPut(t, s, merged(got, 2))
		c := aoPut(t, s, memory.Record{Namespace: aoNS, Content: fmt.Sprintf("likes plums %d", cut)})
		if err := s.Rebuild(bg, nil); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{a.ID, b.ID, c.ID} {
			if _, err := s.Get(bg, id); err != nil {
				t.Fatalf("cut %d: after more writes %s: %v", cut, id, err)
			}
		}
		s.Close()
	}
}

// A record that moves to another layer file leaves no entry behind in the
// file it left.
func TestMovedRecordLeavesOldFile(t *testing.T) {
	home := t.TempDir()
	s, err := Open(home, Options{SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := aoPut(t, s, memory.Record{Namespace: aoNS, Content: "answer briefly"})
	aoPut(t, s, memory.Record{Namespace: aoNS, Content: "owns a greenhouse"})
	a.Strategy = memory.StrategyProcedural
	aoPut(t, s, a)
	if n := entriesOf(t, aoPath(home), a.ID); n != 0 {
		t.Fatalf("%d entries of the moved record left in semantic.md", n)
	}
	if n := entriesOf(t, filepath.Join(home, "memory", "u", "procedural.md"), a.ID); n != 1 {
		t.Fatalf("%d entries in procedural.md, want 1", n)
	}
}

// Export renders the compact form: the same bytes as a store that never
// merged (one entry per record), and as Rebuild's compaction.
func TestExportAfterMergesIsCompact(t *testing.T) {
	home := t.TempDir()
	s, err := Open(home, Options{SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := aoPut(t, s, memory.Record{Namespace: aoNS, Content: "has a fig tree"})
	aoPut(t, s, memory.Record{Namespace: aoNS, Content: "owns a greenhouse"})
	for i := 0; i < 5; i++ {
		a = aoPut(t, s, merged(a, i))
	}
	exp := t.TempDir()
	if _, err := s.ExportMarkdown(bg, exp); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(exp, "u", "semantic.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(got), `"id":"`+a.ID+`"`); n != 1 {
		t.Fatalf("export holds %d entries of %s", n, a.ID)
	}
	recs, _ := s.ListRecords(bg, aoNS, nil)
	if want := markdown.Render("u", recs, nil, nil)["semantic.md"]; string(got) != string(want) {
		t.Fatalf("export differs from Render:\n%s\nwant\n%s", got, want)
	}
	if err := s.Rebuild(bg, nil); err != nil {
		t.Fatal(err)
	}
	if disk, _ := os.ReadFile(aoPath(home)); string(disk) != string(got) {
		t.Fatalf("compacted file differs from export:\n%s\nwant\n%s", disk, got)
	}
}

// Forget removes every entry of the actor's records from disk, stale
// entries of merged records included.
func TestForgetRemovesStaleEntries(t *testing.T) {
	home := t.TempDir()
	s, err := Open(home, Options{SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := aoPut(t, s, memory.Record{Namespace: aoNS, Content: "secret fig orchard at the old mill"})
	a.Content = "fig orchard"
	aoPut(t, s, merged(a, 1))
	if err := s.Forget(bg, "main", "u"); err != nil {
		t.Fatal(err)
	}
	filepath.Walk(home, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || !strings.HasSuffix(path, ".md") {
			return nil
		}
		if data, _ := os.ReadFile(path); strings.Contains(string(data), "orchard") {
			t.Errorf("%s still holds forgotten text", path)
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(home, "memory", "u")); !os.IsNotExist(err) {
		t.Fatalf("actor directory after Forget: %v", err)
	}
}
