package jsonl

import (
	"context"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/session"
)

func TestNodeIDsKeys(t *testing.T) {
	gen := session.NewNodeID()
	if _, ok := ulidKey(gen); !ok {
		t.Fatalf("ulidKey(%q): not a ULID key", gen)
	}
	lower := "msg_" + strings.ToLower(gen[4:])
	for _, id := range []string{lower, gen[4:], "MSG_" + gen[4:], gen + "X", gen[:len(gen)-1], "msg_ZZZZZZZZZZZZZZZZZZZZZZZZZZ", "n1", ""} {
		if _, ok := ulidKey(id); ok {
			t.Errorf("ulidKey(%q): keyed by ULID, want by string", id)
		}
	}

	var x nodeIDs
	if x.has(gen) || x.len() != 0 {
		t.Fatal("zero nodeIDs not empty")
	}
	ids := []string{gen, lower, "n1", "msg_not-a-ulid", session.NewNodeID()}
	for i, id := range ids {
		x.put(id, int32(i))
	}
	if x.len() != len(ids) {
		t.Fatalf("len %d, want %d", x.len(), len(ids))
	}
	for i, id := range ids {
		if got, ok := x.get(id); !ok || got != int32(i) {
			t.Errorf("get(%q) = %d, %v; want %d, true", id, got, ok, i)
		}
	}
	if x.has(session.NewNodeID()) || x.has("n2") {
		t.Error("an ID never put is found")
	}
}

// TestMixedNodeIDsSurviveReload: generated, hand-written and lower-case
// ULID IDs in one session resolve the same before and after the index is
// rebuilt from the file.
func TestMixedNodeIDsSurviveReload(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	k := session.Key{AgentID: "main", Channel: "api", ID: "mixed"}
	a := session.NewNodeID()
	lower := "msg_" + strings.ToLower(session.NewNodeID()[4:])
	nodes := []session.Node{
		{ID: a, Role: session.RoleUser, Text: "one", Timestamp: 1},
		{ID: "hand-1", ParentID: a, Role: session.RoleAssistant, Text: "two", Timestamp: 2},
		{ID: lower, ParentID: "hand-1", Role: session.RoleUser, Text: "three", Timestamp: 3},
		{ID: session.NewNodeID(), ParentID: lower, Role: session.RoleAssistant, Text: "four", Timestamp: 4},
	}
	st, err := Open(dir, Options{Fsync: FsyncNever})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Append(ctx, k, nodes...); err != nil {
		t.Fatal(err)
	}
	// The upper-case spelling of the lower-case ID is another node ID.
	if err := st.SetLeaf(ctx, k, "msg_"+strings.ToUpper(lower[4:])); err == nil {
		t.Fatal("SetLeaf to the upper-case spelling of a lower-case ID: want ErrNotFound")
	}
	check := func(st *Store) {
		t.Helper()
		p, err := st.Path(ctx, k, nodes[3].ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, n := range p {
			got = append(got, n.Text)
		}
		if strings.Join(got, " ") != "one two three four" {
			t.Fatalf("path %v", got)
		}
		if err := st.SetLeaf(ctx, k, lower); err != nil {
			t.Fatal(err)
		}
		if err := st.SetLeaf(ctx, k, nodes[3].ID); err != nil {
			t.Fatal(err)
		}
	}
	check(st)
	st.Close()
	st2, err := Open(dir, Options{Fsync: FsyncNever})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	check(st2)
	// A duplicate of a generated ID is refused after the reload too.
	if err := st2.Append(ctx, k, session.Node{ID: a, ParentID: nodes[3].ID, Role: session.RoleUser, Text: "dup", Timestamp: 5}); err == nil {
		t.Fatal("duplicate generated ID appended")
	}
}

// TestNodeIDsOutOfOrder: ULIDs that arrive out of order (an older ID
// after newer ones, the same ID again) are found like those in order, and
// an ID put twice resolves to its last index, as a map would.
func TestNodeIDsOutOfOrder(t *testing.T) {
	gen := make([]string, 6)
	for i := range gen {
		gen[i] = session.NewNodeID()
	}
	order := []int{1, 2, 0, 4, 3, 5} // 0 and 3 arrive late
	var x nodeIDs
	for pos, g := range order {
		x.put(gen[g], int32(pos))
	}
	x.put(gen[2], 10) // again: the last put wins
	x.put(gen[0], 11)
	if x.len() != len(gen) {
		t.Fatalf("len %d, want %d", x.len(), len(gen))
	}
	if len(x.seq) == 0 || len(x.ulids) == 0 {
		t.Fatalf("seq %d, map %d: want both used", len(x.seq), len(x.ulids))
	}
	want := map[int]int32{1: 0, 2: 10, 0: 11, 4: 3, 3: 4, 5: 5}
	for g, w := range want {
		if got, ok := x.get(gen[g]); !ok || got != w {
			t.Errorf("get(gen[%d]) = %d, %v; want %d", g, got, ok, w)
		}
	}
	if x.has(session.NewNodeID()) {
		t.Error("an ID never put is found")
	}
}
