package session

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Branch describes one leaf of a session tree: a node without children.
type Branch struct {
	LeafID    string `json:"leafId"`
	Length    int    `json:"length"`    // nodes from the root to the leaf, inclusive
	LastText  string `json:"lastText"`  // the leaf's text, at most 80 runes
	Timestamp int64  `json:"timestamp"` // the leaf's, unix seconds
	Active    bool   `json:"active"`    // the leaf is the session's active leaf
}

// BranchFrom makes the next Append start a new branch at node from: it
// sets the active leaf to from, so a node appended with ParentID = Leaf()
// becomes a sibling of from's existing children. ErrNotFound if from is not
// in the session.
func BranchFrom(ctx context.Context, st Store, key Key, from string) error {
	if err := st.SetLeaf(ctx, key, from); err != nil {
		return fmt.Errorf("branch %s from %s: %w", key, from, err)
	}
	return nil
}

// Branches lists the leaves of the session tree in append order of the
// leaf, with their path length and last text. The active leaf is marked;
// when it is an inner node (right after BranchFrom) it is listed too.
// ErrNotFound for an unknown session.
func Branches(ctx context.Context, st Store, key Key) ([]Branch, error) {
	nodes, err := st.Nodes(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("branches %s: %w", key, err)
	}
	leaf, err := st.Leaf(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("branches %s: %w", key, err)
	}
	return branchesOf(nodes, leaf), nil
}

func branchesOf(nodes []Node, leaf string) []Branch {
	idx := make(map[string]int, len(nodes))
	hasChild := make([]bool, len(nodes))
	for i, n := range nodes {
		idx[n.ID] = i
	}
	for _, n := range nodes {
		if p, ok := idx[n.ParentID]; ok {
			hasChild[p] = true
		}
	}
	depth := make([]int, len(nodes)) // parents precede children in append order
	for i, n := range nodes {
		depth[i] = 1
		if p, ok := idx[n.ParentID]; ok && p < i {
			depth[i] = depth[p] + 1
		}
	}
	var out []Branch
	for i, n := range nodes {
		if hasChild[i] && n.ID != leaf {
			continue
		}
		out = append(out, Branch{LeafID: n.ID, Length: depth[i], LastText: clip(n.PlainText(), 80), Timestamp: n.Timestamp, Active: n.ID == leaf})
	}
	return out
}

func clip(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max-1]) + "…"
}

// TreeNode is one node of a session tree with its children in append
// order, the ?tree=1 shape of the management API.
type TreeNode struct {
	Node     Node        `json:"node"`
	Active   bool        `json:"active,omitempty"` // on the path to the active leaf
	Children []*TreeNode `json:"children,omitempty"`
}

// BuildTree arranges nodes (append order) as a forest of roots. A node whose
// parent is missing is treated as a root. Nodes on the path to leaf are
// marked Active.
func BuildTree(nodes []Node, leaf string) []*TreeNode {
	byID := make(map[string]*TreeNode, len(nodes))
	parent := make(map[string]string, len(nodes))
	var roots []*TreeNode
	for _, n := range nodes {
		t := &TreeNode{Node: n}
		byID[n.ID] = t
		parent[n.ID] = n.ParentID
		if p, ok := byID[n.ParentID]; ok && n.ParentID != "" {
			p.Children = append(p.Children, t)
		} else {
			roots = append(roots, t)
		}
	}
	for id, steps := leaf, 0; id != "" && steps <= len(nodes); id, steps = parent[id], steps+1 {
		if t, ok := byID[id]; ok {
			t.Active = true
		}
	}
	return roots
}

// WriteTree draws the session tree as text, one node per line, indenting
// only where the tree forks (a linear chain stays in one column):
// "* msg_… user: text", with '*' marking the active path and "(leaf)" the
// active leaf.
func WriteTree(w io.Writer, nodes []Node, leaf string) error {
	var sb strings.Builder
	line := func(prefix string, t *TreeNode) {
		mark := " "
		if t.Active {
			mark = "*"
		}
		suffix := ""
		if t.Node.ID == leaf {
			suffix = "  (leaf)"
		}
		fmt.Fprintf(&sb, "%s%s %s %s: %s%s\n", prefix, mark, t.Node.ID, t.Node.Role, clip(t.Node.PlainText(), 60), suffix)
	}
	type item struct {
		t     *TreeNode
		first string // prefix of the first line
		cont  string // prefix of the following lines of this chain
	}
	var stack []item
	push := func(ts []*TreeNode, prefix string, fork bool) {
		for i := len(ts) - 1; i >= 0; i-- {
			first, cont := prefix, prefix
			if fork {
				if i == len(ts)-1 {
					first, cont = prefix+"└─", prefix+"  "
				} else {
					first, cont = prefix+"├─", prefix+"│ "
				}
			}
			stack = append(stack, item{ts[i], first, cont})
		}
	}
	roots := BuildTree(nodes, leaf)
	push(roots, "", len(roots) > 1)
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		t := it.t
		line(it.first, t)
		for len(t.Children) == 1 {
			t = t.Children[0]
			line(it.cont, t)
		}
		if len(t.Children) > 1 {
			push(t.Children, it.cont, true)
		}
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// sortKeys orders keys by agent, channel, ID.
func sortKeys(ks []Key) {
	sort.Slice(ks, func(i, j int) bool {
		a, b := ks[i], ks[j]
		if a.AgentID != b.AgentID {
			return a.AgentID < b.AgentID
		}
		if a.Channel != b.Channel {
			return a.Channel < b.Channel
		}
		return a.ID < b.ID
	})
}

// SortKeys sorts keys by agent, channel and ID; stores use it so List is
// deterministic.
func SortKeys(ks []Key) { sortKeys(ks) }

func unixTime(ts int64) string { return time.Unix(ts, 0).UTC().Format(time.RFC3339) }
