package session

import "testing"

func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n          int
		noun, want string
	}{{1, "node", "1 node"}, {2, "node", "2 nodes"}, {0, "node", "0 nodes"}, {1, "branch", "1 branch"}, {3, "branch", "3 branches"}} {
		if got := plural(c.n, c.noun); got != c.want {
			t.Errorf("plural(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}
