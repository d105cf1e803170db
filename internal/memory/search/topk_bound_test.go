package search

import "testing"

// TestSearchHugeK: k far above the documents returns every match without
// reserving k slots (make of 1<<40 results panics; a k of 1e9 once took a
// server down with an out-of-memory fatal error).
func TestSearchHugeK(t *testing.T) {
	for _, p := range []Params{DefaultParams(), PlainBM25()} {
		ix := NewIndex(p)
		ix.Add(Doc{Text: "basil on the windowsill", Group: "s1", Key: "a"})
		ix.Add(Doc{Text: "basil seedlings", Group: "s1", Key: "b"})
		ix.Add(Doc{Text: "tomatoes", Group: "s2", Key: "c"})
		if got := ix.Search("basil", nil, 1<<40); len(got) != 2 {
			t.Fatalf("%d results, want 2", len(got))
		}
	}
}
