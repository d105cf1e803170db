package search

import (
	"fmt"
	"testing"
)

// TestCloneIsIndependent: after Clone, adding and removing documents on
// either index leaves the other ranking exactly as before, and each ranks
// like an index built from its own documents.
func TestCloneIsIndependent(t *testing.T) {
	docs := []Doc{
		{Text: "fig tree water weekly", Key: "a"},
		{Text: "tomato aphids soap spray", Key: "b"},
		{Text: "fig rust copper spray", Key: "c"},
		{Text: "water the basil", Key: "d"},
	}
	a := build(DefaultParams(), docs...)
	b := a.Clone()
	a.Add(Doc{Text: "fig fig fig water", Key: "e"})
	a.Remove(0)
	b.Add(Doc{Text: "spray the tomato", Key: "f"})
	b.Remove(2)
	wantA := build(DefaultParams(), docs[1], docs[2], docs[3], Doc{Text: "fig fig fig water", Key: "e"})
	wantB := build(DefaultParams(), docs[0], docs[1], docs[3], Doc{Text: "spray the tomato", Key: "f"})
	for _, q := range []string{"fig water", "spray tomato", "basil", "rust"} {
		for _, c := range []struct {
			name      string
			got, want *Index
		}{{"original", a, wantA}, {"clone", b, wantB}} {
			g, w := c.got.Search(q, nil, 10), c.want.Search(q, nil, 10)
			if len(g) != len(w) {
				t.Fatalf("%s %q: %d results, want %d", c.name, q, len(g), len(w))
			}
			for i := range g {
				if c.got.Key(g[i].Doc) != c.want.Key(w[i].Doc) || g[i].Score != w[i].Score || g[i].Explain != w[i].Explain {
					t.Fatalf("%s %q rank %d: %s %v, want %s %v", c.name, q, i, c.got.Key(g[i].Doc), g[i].Score, c.want.Key(w[i].Doc), w[i].Score)
				}
			}
		}
	}
	if fmt.Sprint(a.Dead(), b.Dead()) != "1 1" {
		t.Fatalf("dead counts %d %d", a.Dead(), b.Dead())
	}
}
