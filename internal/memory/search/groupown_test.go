package search

import (
	"fmt"
	"slices"
	"testing"
)

// TestGroupListsAfterClone: a session's key-ordered list changed inside
// (a removal, an insert before the end) in one copy leaves a clone's list
// as it was, in both directions, and each stays in key order; the lists
// are shifted in place once owned (ownList), so this is what keeps
// clones apart.
func TestGroupListsAfterClone(t *testing.T) {
	ix := NewIndex(DefaultParams())
	doc := func(k int) Doc {
		return Doc{Text: fmt.Sprint("turn about basil ", k), Group: "s", Key: fmt.Sprintf("k%03d", k)}
	}
	for k := 0; k < 40; k += 2 {
		ix.Add(doc(k))
	}
	keysOf := func(x *Index) []string {
		var out []string
		for _, d := range x.groupDocs[0] {
			out = append(out, x.keys[d])
		}
		return out
	}
	before := keysOf(ix)
	c := ix.Clone()
	ix.Remove(5)    // k010
	ix.Add(doc(11)) // inside the list
	ix.Remove(7)    // k014, now in an owned list: in place
	ix.Add(doc(13))
	if got := keysOf(c); !slices.Equal(got, before) {
		t.Fatalf("clone's list changed with the original's:\n%v\nwant\n%v", got, before)
	}
	after := keysOf(ix)
	if !slices.IsSorted(after) || slices.Contains(after, "k010") || !slices.Contains(after, "k011") || len(after) != len(before) {
		t.Fatalf("original's list %v", after)
	}
	c.Remove(0)
	c.Add(doc(1))
	if got := keysOf(ix); !slices.Equal(got, after) {
		t.Fatalf("original's list changed with the clone's:\n%v\nwant\n%v", got, after)
	}
	if got := keysOf(c); !slices.IsSorted(got) || got[0] != "k001" {
		t.Fatalf("clone's list %v", got)
	}
}
