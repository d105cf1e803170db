// Package sessiontest is the conformance suite every session.Store backend
// must pass (the riverdrivertest pattern).
package sessiontest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/tendrilai/tendril/internal/session"
)

// NewStore returns a store over storage private to t. Calling it again with
// the same t must return a new store over the same storage: the suite
// closes the first one and checks that everything was persisted, and it
// also keeps two open at once, as two instances (or the server and the CLI)
// would. The backend's test cleans the storage up.
type NewStore func(t *testing.T) session.Store

// Exercise runs the whole suite against a backend.
func Exercise(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(*testing.T, NewStore)
	}{
		{"AppendReload", testAppendReload},
		{"Validation", testValidation},
		{"HostileKeys", testHostileKeys},
		{"BranchAndSwitch", testBranchAndSwitch},
		{"ContextLimits", testContextLimits},
		{"PairingRepair", testPairingRepair},
		{"Compaction", testCompaction},
		{"ConcurrentOneSession", testConcurrentOneSession},
		{"LeafMoved", testLeafMoved},
		{"TwoInstances", testTwoInstances},
		{"BadInput", testBadInput},
		{"ConcurrentManySessions", testConcurrentManySessions},
		{"ExportAndClear", testExportAndClear},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore) })
	}
}

var ctx = context.Background()

func key(id string) session.Key { return session.Key{AgentID: "main", Channel: "telegram", ID: id} }

func node(id, parent, role, text string) session.Node {
	return session.Node{ID: id, ParentID: parent, Role: role, Text: text, Timestamp: 1710000000, Channel: "telegram"}
}

// chain appends n linear text nodes n0..n(n-1) (alternating user/assistant)
// under parent and returns their IDs.
func chain(t *testing.T, st session.Store, k session.Key, prefix, parent string, n int, text string) []string {
	t.Helper()
	ids := make([]string, n)
	for i := 0; i < n; i++ {
		role := session.RoleUser
		if i%2 == 1 {
			role = session.RoleAssistant
		}
		ids[i] = fmt.Sprintf("%s%d", prefix, i)
		if err := st.Append(ctx, k, node(ids[i], parent, role, text)); err != nil {
			t.Fatalf("append %s: %v", ids[i], err)
		}
		parent = ids[i]
	}
	return ids
}

func ids(nodes []session.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}

func mustEqual[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %#v\n want %#v", what, got, want)
	}
}

func testAppendReload(t *testing.T, newStore NewStore) {
	st := newStore(t)
	k := key("100")
	nodes := []session.Node{
		node("a", "", session.RoleUser, "안녕하세요 — hello"),
		{ID: "b", ParentID: "a", Role: session.RoleAssistant, Timestamp: 1710000001, Channel: "telegram",
			Blocks: []session.Block{{Type: "text", Text: "checking"}, {Type: "tool_use", ID: "tu1", Name: "weather", Input: json.RawMessage(`{"city":"Busan"}`)}}},
		{ID: "c", ParentID: "b", Role: session.RoleTool, Timestamp: 1710000002, Channel: "telegram",
			Blocks: []session.Block{{Type: "tool_result", ToolUseID: "tu1", Text: "sunny"}}},
		{ID: "d", ParentID: "c", Role: session.RoleUser, Timestamp: 1710000003, Channel: "telegram", Metadata: map[string]any{"k": "v"},
			Blocks: []session.Block{{Type: "image", ImageRef: "sha256:00", MediaType: "image/jpeg"}}},
	}
	if err := st.Append(ctx, k, nodes[:2]...); err != nil {
		t.Fatal(err)
	}
	if err := st.Append(ctx, k, nodes[2:]...); err != nil {
		t.Fatal(err)
	}
	check := func(st session.Store, wantLeaf string) {
		t.Helper()
		got, err := st.Nodes(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		mustEqual(t, "nodes", got, nodes)
		leaf, err := st.Leaf(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		mustEqual(t, "leaf", leaf, wantLeaf)
		p, err := st.Path(ctx, k, "d", 2)
		if err != nil {
			t.Fatal(err)
		}
		mustEqual(t, "path", ids(p), []string{"c", "d"})
		keys, err := st.List(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		mustEqual(t, "list", keys, []session.Key{k})
	}
	check(st, "d")
	if err := st.SetLeaf(ctx, k, "b"); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2 := newStore(t)
	defer st2.Close()
	check(st2, "b")
	// A node with no timestamp or channel gets defaults.
	if err := st2.Append(ctx, k, session.Node{ID: "e", ParentID: "b", Role: session.RoleUser, Text: "x"}); err != nil {
		t.Fatal(err)
	}
	p, _ := st2.Path(ctx, k, "e", 0)
	if p[len(p)-1].Timestamp == 0 || p[len(p)-1].Channel != "telegram" {
		t.Fatalf("defaults not filled: %+v", p[len(p)-1])
	}
}

func testValidation(t *testing.T, newStore NewStore) {
	st := newStore(t)
	defer st.Close()
	k := key("v")
	if leaf, err := st.Leaf(ctx, k); err != nil || leaf != "" {
		t.Fatalf("leaf of empty session = %q, %v", leaf, err)
	}
	if n, err := st.Nodes(ctx, k); err != nil || len(n) != 0 {
		t.Fatalf("nodes of empty session = %v, %v", n, err)
	}
	chain(t, st, k, "n", "", 2, "x")
	cases := []struct {
		name string
		err  error
		run  func() error
	}{
		{"empty channel", session.ErrInvalidKey, func() error {
			return st.Append(ctx, session.Key{AgentID: "main", ID: "1"}, node("z", "", "user", "x"))
		}},
		{"empty agent", session.ErrInvalidKey, func() error {
			return st.Append(ctx, session.Key{Channel: "c", ID: "1"}, node("z", "", "user", "x"))
		}},
		{"no id", session.ErrInvalidNode, func() error { return st.Append(ctx, k, node("", "", "user", "x")) }},
		{"bad role", session.ErrInvalidNode, func() error { return st.Append(ctx, k, node("z", "", "robot", "x")) }},
		{"duplicate", session.ErrDuplicateNode, func() error { return st.Append(ctx, k, node("n0", "", "user", "x")) }},
		{"duplicate in batch", session.ErrDuplicateNode, func() error {
			return st.Append(ctx, k, node("z", "", "user", "x"), node("z", "", "user", "y"))
		}},
		{"unknown parent", session.ErrNotFound, func() error { return st.Append(ctx, k, node("z", "nope", "user", "x")) }},
		{"set unknown leaf", session.ErrNotFound, func() error { return st.SetLeaf(ctx, k, "nope") }},
		{"path unknown", session.ErrNotFound, func() error { _, err := st.Path(ctx, k, "nope", 5); return err }},
	}
	for _, c := range cases {
		if err := c.run(); !errors.Is(err, c.err) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.err)
		}
	}
	got, _ := st.Nodes(ctx, k)
	mustEqual(t, "nothing appended by failures", ids(got), []string{"n0", "n1"})
}

func testHostileKeys(t *testing.T, newStore NewStore) {
	st := newStore(t)
	hostile := []session.Key{
		{AgentID: "main", Channel: "..", ID: ".."},
		{AgentID: "../../etc", Channel: "telegram", ID: "../../passwd"},
		{AgentID: "main", Channel: "tele/gram", ID: `a\b/c`},
		{AgentID: "main", Channel: "telegram", ID: "nul\x00byte"},
		{AgentID: "main", Channel: "telegram", ID: strings.Repeat("x", 10000)},
		{AgentID: "main", Channel: "telegram", ID: strings.Repeat("x", 9999) + "y"},
		{AgentID: "main", Channel: "telegram", ID: "ｔelegram"}, // fullwidth look-alike
		{AgentID: "main", Channel: "telegram", ID: "telegram"},
		{AgentID: "main", Channel: "Telegram", ID: "A"},
		{AgentID: "main", Channel: "telegram", ID: "a"},
		{AgentID: "main", Channel: "a_b", ID: "c"},
		{AgentID: "main", Channel: "a", ID: "b_c"},
		{AgentID: "main", Channel: "x%2e", ID: "%"},
	}
	for i, k := range hostile {
		if err := st.Append(ctx, k, node(fmt.Sprintf("n%d", i), "", "user", fmt.Sprint(i))); err != nil {
			t.Fatalf("append %q: %v", k, err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = newStore(t)
	defer st.Close()
	for i, k := range hostile {
		got, err := st.Nodes(ctx, k)
		if err != nil {
			t.Fatalf("nodes %q: %v", k, err)
		}
		mustEqual(t, fmt.Sprintf("nodes of %.40q", k), ids(got), []string{fmt.Sprintf("n%d", i)})
	}
	keys, err := st.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	want := append([]session.Key(nil), hostile...)
	session.SortKeys(want)
	mustEqual(t, "list", keys, want)
}

func testBranchAndSwitch(t *testing.T, newStore NewStore) {
	st := newStore(t)
	k := key("branch")
	// a ─ b ─ c
	//  └─ d ─ e
	for _, n := range []session.Node{node("a", "", "user", "write an email"), node("b", "a", "assistant", "formal"), node("c", "b", "user", "shorter")} {
		if err := st.Append(ctx, k, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := session.BranchFrom(ctx, st, k, "a"); err != nil {
		t.Fatal(err)
	}
	leaf, _ := st.Leaf(ctx, k)
	mustEqual(t, "leaf after branch", leaf, "a")
	if err := st.Append(ctx, k, node("d", leaf, "assistant", "casual"), node("e", "d", "user", "thanks")); err != nil {
		t.Fatal(err)
	}
	got, err := session.BuildContext(ctx, st, k, session.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "context of new branch", ids(got), []string{"a", "d", "e"})
	br, err := session.Branches(ctx, st, k)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "branches", br, []session.Branch{
		{LeafID: "c", Length: 3, LastText: "shorter", Timestamp: 1710000000},
		{LeafID: "e", Length: 3, LastText: "thanks", Timestamp: 1710000000, Active: true},
	})
	if err := st.SetLeaf(ctx, k, "c"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = newStore(t)
	defer st.Close()
	got, err = session.BuildContext(ctx, st, k, session.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "context after switch and reload", ids(got), []string{"a", "b", "c"})
	var tree bytes.Buffer
	nodes, _ := st.Nodes(ctx, k)
	if err := session.WriteTree(&tree, nodes, "c"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tree.String(), "* c user: shorter  (leaf)") || !strings.Contains(tree.String(), "  d assistant: casual") {
		t.Fatalf("tree:\n%s", tree.String())
	}
}

func testContextLimits(t *testing.T, newStore NewStore) {
	st := newStore(t)
	defer st.Close()
	k := key("limits")
	ids120 := chain(t, st, k, "m", "", 120, "short")
	cases := []struct {
		chatType string
		want     int
	}{{"dm", 100}, {"group", 20}, {"", 50}, {"channel", 50}}
	for _, c := range cases {
		lim := session.LimitsFor(c.chatType)
		got, err := session.BuildContext(ctx, st, k, lim)
		if err != nil {
			t.Fatal(err)
		}
		mustEqual(t, "context for "+c.chatType, ids(got), ids120[120-c.want:])
	}
	cfg := session.ContextConfig{Default: session.Limits{MaxHistoryMessages: 7}, ChannelOverrides: map[string]session.Limits{"dm": {MaxHistoryTokens: 100}}}
	mustEqual(t, "override falls back to default", cfg.For("dm"), session.Limits{MaxHistoryMessages: 7, MaxHistoryTokens: 100})
	got, _ := session.BuildContext(ctx, st, k, session.Limits{})
	mustEqual(t, "unlimited reaches the root", len(got), 120)

	// Tokens: 4000 ASCII chars = 4+1000 tokens; 1000 Hangul = 4+1000 tokens.
	for _, text := range []string{strings.Repeat("a", 4000), strings.Repeat("가", 1000)} {
		k2 := key("tokens-" + fmt.Sprint(len(text)))
		tids := chain(t, st, k2, "t", "", 12, text)
		got, err := session.BuildContext(ctx, st, k2, session.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		mustEqual(t, "token-limited context", ids(got), tids[5:]) // 7×1004 ≤ 8000 < 8×1004
		got, _ = session.BuildContext(ctx, st, k2, session.Limits{MaxHistoryTokens: 10})
		mustEqual(t, "the newest node always fits", ids(got), tids[11:])
	}
	if session.EstimateTokens(node("x", "", "user", "")) != 4 || session.EstimateTokens(node("x", "", "user", "abcde")) != 6 {
		t.Fatal("token estimate changed: document it")
	}
}

func toolUse(id, parent, useID string) session.Node {
	return session.Node{ID: id, ParentID: parent, Role: "assistant", Timestamp: 1, Channel: "telegram",
		Blocks: []session.Block{{Type: "tool_use", ID: useID, Name: "weather", Input: json.RawMessage(`{}`)}}}
}

func toolResult(id, parent string, useIDs ...string) session.Node {
	n := session.Node{ID: id, ParentID: parent, Role: "tool", Timestamp: 1, Channel: "telegram"}
	for _, u := range useIDs {
		n.Blocks = append(n.Blocks, session.Block{Type: "tool_result", ToolUseID: u, Text: "ok"})
	}
	return n
}

func testPairingRepair(t *testing.T, newStore NewStore) {
	st := newStore(t)
	defer st.Close()
	k := key("pairs")
	// u1 → tu(A) → r(A) → a1 → orphanResult(Z) → u2 → tu(B, crash: no result)
	for _, n := range []session.Node{
		node("u1", "", "user", "weather?"), toolUse("t1", "u1", "A"), toolResult("r1", "t1", "A"),
		node("a1", "r1", "assistant", "sunny"), toolResult("rz", "a1", "Z"),
		node("u2", "rz", "user", "and tomorrow?"), toolUse("t2", "u2", "B"),
	} {
		if err := st.Append(ctx, k, n); err != nil {
			t.Fatal(err)
		}
	}
	got, err := session.BuildContext(ctx, st, k, session.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "repaired", ids(got), []string{"u1", "t1", "r1", "a1", "u2", "t2", "synthetic_t2"})
	last := got[len(got)-1]
	if len(last.Blocks) != 1 || last.Blocks[0].ToolUseID != "B" || !last.Blocks[0].IsError {
		t.Fatalf("synthetic result = %+v", last)
	}
	// A limit that would cut between t1 and r1 drops the whole unit.
	got, _ = session.BuildContext(ctx, st, k, session.Limits{MaxHistoryMessages: 5})
	mustEqual(t, "unit kept whole", ids(got), []string{"a1", "u2", "t2", "synthetic_t2"})
	stored, _ := st.Nodes(ctx, k)
	if len(stored) != 7 {
		t.Fatalf("repair changed storage: %d nodes", len(stored))
	}
	// Two results of one use, one for an unknown use: the extra ones go.
	k2 := key("pairs2")
	if err := st.Append(ctx, k2, toolUse("t", "", "A"), toolResult("r", "t", "A", "Q"), toolResult("r2", "r", "A")); err != nil {
		t.Fatal(err)
	}
	got, _ = session.BuildContext(ctx, st, k2, session.DefaultLimits)
	mustEqual(t, "duplicates dropped", ids(got), []string{"t", "r"})
	mustEqual(t, "only the matching block", len(got[1].Blocks), 1)
}

func testCompaction(t *testing.T, newStore NewStore) {
	st := newStore(t)
	k := key("compact")
	ids30 := chain(t, st, k, "c", "", 30, "turn")
	var pre []string
	failing := session.CompactOptions{KeepLast: 4,
		Summarize:  func(context.Context, []session.Node) (string, error) { return "never", nil },
		PreCompact: func(context.Context, session.Key, []session.Node) error { return errors.New("extraction down") },
	}
	if _, err := session.Compact(ctx, st, k, failing); err == nil {
		t.Fatal("compaction ran although the pre-compaction hook failed")
	}
	if n, _ := st.Nodes(ctx, k); len(n) != 30 {
		t.Fatalf("failed compaction appended: %d nodes", len(n))
	}
	opts := session.CompactOptions{KeepLast: 4,
		Summarize: func(_ context.Context, older []session.Node) (string, error) {
			return fmt.Sprintf("%d messages about turns", len(older)), nil
		},
		PreCompact: func(_ context.Context, _ session.Key, older []session.Node) error {
			pre = ids(older)
			return nil
		},
	}
	cn, err := session.Compact(ctx, st, k, opts)
	if err != nil || cn == nil {
		t.Fatalf("compact: %v, %v", cn, err)
	}
	mustEqual(t, "pre-compaction saw the older nodes", pre, ids30[:26])
	mustEqual(t, "summary", cn.Text, "[Session summary] 26 messages about turns")
	got, _ := session.BuildContext(ctx, st, k, session.DefaultLimits)
	mustEqual(t, "context after compaction", ids(got), append([]string{cn.ID}, ids30[26:]...))
	more := chain(t, st, k, "after", cn.ID, 4, "later")
	st.Close()
	st = newStore(t)
	defer st.Close()
	got, _ = session.BuildContext(ctx, st, k, session.DefaultLimits)
	mustEqual(t, "context after reload", ids(got), append(append([]string{cn.ID}, ids30[26:]...), more...))
	c0 := got[0]
	if !c0.IsCompaction() || c0.Role != session.RoleSystem || c0.Metadata["firstKeptId"] != ids30[26] || fmt.Sprint(c0.Metadata["originalCount"]) != "26" {
		t.Fatalf("compaction node = %+v", c0)
	}
	// A second compaction covers the first summary too.
	opts.Strategy = session.StrategyTruncate
	opts.KeepLast = 2
	c2, err := session.Compact(ctx, st, k, opts)
	if err != nil || c2 == nil {
		t.Fatalf("second compact: %v %v", c2, err)
	}
	if fmt.Sprint(c2.Metadata["originalCount"]) != "32" || !strings.HasPrefix(c2.Text, session.SummaryPrefix) {
		t.Fatalf("second compaction = %+v", c2)
	}
	got, _ = session.BuildContext(ctx, st, k, session.DefaultLimits)
	mustEqual(t, "context after second compaction", ids(got), []string{c2.ID, more[2], more[3]})
	all, _ := st.Nodes(ctx, k)
	mustEqual(t, "originals kept", len(all), 30+1+4+1)
	// Nothing left to compact.
	if c3, err := session.Compact(ctx, st, k, opts); err != nil || c3 != nil {
		t.Fatalf("third compact = %v, %v", c3, err)
	}
	if !session.ShouldCompact(all, 100, 0.8) || session.ShouldCompact(all[:2], 100000, 0.8) {
		t.Fatal("ShouldCompact threshold")
	}
}

// appendAtLeaf appends nodes as a turn at the active leaf, reading it again
// after each ErrLeafMoved, the way a caller racing other writers must.
func appendAtLeaf(st session.Store, k session.Key, nodes ...session.Node) (retries int, err error) {
	for {
		leaf, err := st.Leaf(ctx, k)
		if err != nil {
			return retries, err
		}
		nodes[0].ParentID = leaf
		err = st.Append(ctx, k, nodes...)
		if !errors.Is(err, session.ErrLeafMoved) {
			return retries, err
		}
		retries++
	}
}

func testConcurrentOneSession(t *testing.T, newStore NewStore) {
	st := newStore(t)
	defer st.Close()
	k := key("busy")
	if err := st.Append(ctx, k, node("root", "", "user", "start")); err != nil {
		t.Fatal(err)
	}
	const writers, turns = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers*turns+writers)
	stop := make(chan struct{})
	var rg sync.WaitGroup
	for r := 0; r < 2; r++ { // concurrent readers
		rg.Add(1)
		go func() {
			defer rg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := session.BuildContext(ctx, st, k, session.DefaultLimits); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < turns; i++ {
				u := fmt.Sprintf("u-%d-%d", w, i)
				a := fmt.Sprintf("a-%d-%d", w, i)
				if _, err := appendAtLeaf(st, k, node(u, "", "user", u), node(a, u, "assistant", a)); err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	rg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := st.Nodes(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1+2*writers*turns {
		t.Fatalf("%d nodes, want %d", len(got), 1+2*writers*turns)
	}
	for i := 1; i < len(got); i += 2 {
		u, a := got[i], got[i+1]
		if u.Role != "user" || a.ParentID != u.ID || "a"+u.ID[1:] != a.ID || u.ParentID != got[i-1].ID {
			t.Fatalf("turn interleaved or forked at %d: %s (parent %s) then %s", i, u.ID, u.ParentID, a.ID)
		}
	}
	leaf, _ := st.Leaf(ctx, k)
	path, err := st.Path(ctx, k, leaf, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "one unbroken chain", ids(path), ids(got))
}

// testLeafMoved: Append is a compare-and-set of the active leaf.
func testLeafMoved(t *testing.T, newStore NewStore) {
	st := newStore(t)
	defer st.Close()
	k := key("cas")
	moved := func(what string, err error, expected, actual string) {
		t.Helper()
		var lm *session.LeafMovedError
		if !errors.Is(err, session.ErrLeafMoved) || !errors.As(err, &lm) {
			t.Fatalf("%s: err = %v, want ErrLeafMoved", what, err)
		}
		if lm.Expected != expected || lm.Actual != actual || lm.Key != k {
			t.Fatalf("%s: %+v, want expected %q actual %q", what, lm, expected, actual)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", actual)) {
			t.Fatalf("%s: message %q does not name the active leaf", what, err)
		}
	}
	if err := st.Append(ctx, k, node("a", "", "user", "one")); err != nil {
		t.Fatal(err)
	}
	moved("second root", st.Append(ctx, k, node("r2", "", "user", "x")), "", "a")
	if err := st.Append(ctx, k, node("b", "a", "assistant", "two")); err != nil {
		t.Fatal(err)
	}
	moved("stale parent", st.Append(ctx, k, node("c", "a", "user", "x"), node("c2", "c", "assistant", "y")), "a", "b")
	// Permanent errors win over a moved leaf: retrying would not help.
	if err := st.Append(ctx, k, node("b", "a", "user", "x")); !errors.Is(err, session.ErrDuplicateNode) {
		t.Fatalf("duplicate at a stale parent: %v", err)
	}
	if err := st.Append(ctx, k, node("z", "nope", "user", "x")); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("unknown parent: %v", err)
	}
	got, _ := st.Nodes(ctx, k)
	mustEqual(t, "losers wrote nothing", ids(got), []string{"a", "b"})
	if leaf, _ := st.Leaf(ctx, k); leaf != "b" {
		t.Fatalf("leaf moved by a loser: %q", leaf)
	}
	// Branching is explicit: SetLeaf first, then append at it.
	if err := session.BranchFrom(ctx, st, k, "a"); err != nil {
		t.Fatal(err)
	}
	moved("old leaf after branch", st.Append(ctx, k, node("c", "b", "user", "x")), "b", "a")
	// Only the first node is checked: later ones may point anywhere known.
	if err := st.Append(ctx, k, node("c", "a", "user", "three"), node("d", "b", "user", "sibling")); err != nil {
		t.Fatal(err)
	}
	if leaf, _ := st.Leaf(ctx, k); leaf != "d" {
		t.Fatalf("leaf = %q, want d", leaf)
	}
	// A cleared session is empty again: only a root may start it.
	if err := st.Clear(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := st.Append(ctx, k, node("e", "d", "user", "x")); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("parent from before the clear: %v", err)
	}
	if err := st.Append(ctx, k, node("e", "", "user", "fresh")); err != nil {
		t.Fatal(err)
	}
	// Racing writers of one turn each: exactly one wins every round.
	const racers = 6
	for round := 0; round < 5; round++ {
		leaf, _ := st.Leaf(ctx, k)
		var wg sync.WaitGroup
		res := make(chan error, racers)
		for r := 0; r < racers; r++ {
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				res <- st.Append(ctx, k, node(fmt.Sprintf("x%d-%d", round, r), leaf, "user", "race"))
			}(r)
		}
		wg.Wait()
		close(res)
		wins := 0
		for err := range res {
			switch {
			case err == nil:
				wins++
			case errors.Is(err, session.ErrLeafMoved):
			default:
				t.Fatal(err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d winners, want exactly 1", round, wins)
		}
	}
	all, _ := st.Nodes(ctx, k)
	leaf, _ := st.Leaf(ctx, k)
	path, _ := st.Path(ctx, k, leaf, 0)
	mustEqual(t, "no fork", ids(path), ids(all))
}

// testTwoInstances: two stores over the same storage, as two processes
// would hold, race turns into one session at the leaf each last read. The
// compare-and-set must hold between them, not only inside one store.
func testTwoInstances(t *testing.T, newStore NewStore) {
	a, b := newStore(t), newStore(t)
	defer a.Close()
	defer b.Close()
	k := key("two")
	if err := a.Append(ctx, k, node("root", "", "user", "start")); err != nil {
		t.Fatal(err)
	}
	const turns = 25
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	retries := make([]int, 2)
	for w, st := range []session.Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < turns; i++ {
				u := fmt.Sprintf("u-%d-%d", w, i)
				r, err := appendAtLeaf(st, k, node(u, "", "user", u), node("a"+u[1:], u, "assistant", u))
				retries[w] += r
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, st := range []session.Store{a, b} {
		all, err := st.Nodes(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := st.Leaf(ctx, k)
		path, err := st.Path(ctx, k, leaf, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 1+4*turns {
			t.Fatalf("%d nodes, want %d", len(all), 1+4*turns)
		}
		mustEqual(t, "both instances see one unbroken chain", ids(path), ids(all))
	}
	// A leaf moved by one instance is seen by the other's compare-and-set.
	leaf, _ := a.Leaf(ctx, k)
	if err := b.Append(ctx, k, node("late-b", leaf, "user", "b")); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, k, node("late-a", leaf, "user", "a")); !errors.Is(err, session.ErrLeafMoved) {
		t.Fatalf("stale append through the other instance: %v", err)
	}
	t.Logf("compare-and-set retries: %v", retries)
}

// testBadInput: hostile node IDs and text round-trip or get a clear error,
// the same on every backend.
func testBadInput(t *testing.T, newStore NewStore) {
	st := newStore(t)
	k := key("bad")
	weird := []string{"nul\x00id", "caf\u00e9", "cafe\u0301", "A", "a", "../../x", "%00", "line\nbreak", `"quote"`, strings.Repeat("é", 128)}
	parent := ""
	for i, id := range weird {
		n := node(id, parent, []string{"user", "assistant"}[i%2], fmt.Sprintf("text with NUL \x00 and \x01 controls %d", i))
		n.Metadata = map[string]any{"nul": "x\x00y", "n": float64(i)}
		if err := st.Append(ctx, k, n); err != nil {
			t.Fatalf("append %q: %v", id, err)
		}
		parent = id
	}
	rejected := []struct {
		name string
		err  error
		n    session.Node
	}{
		{"id over 256 bytes", session.ErrInvalidNode, node(strings.Repeat("x", 257), parent, "user", "x")},
		{"id not UTF-8", session.ErrInvalidNode, node("bad\xff", parent, "user", "x")},
		{"node over MaxNodeBytes", session.ErrInvalidNode, node("huge", parent, "user", strings.Repeat("x", session.MaxNodeBytes))},
		{"self parent", session.ErrInvalidNode, node("self", "self", "user", "x")},
	}
	for _, c := range rejected {
		if err := st.Append(ctx, k, c.n); !errors.Is(err, c.err) {
			t.Errorf("%s: err = %.200v, want %v", c.name, err, c.err)
		}
	}
	if err := st.Append(ctx, session.Key{AgentID: "main", Channel: "telegram", ID: strings.Repeat("k", session.MaxIDLen+1)}, node("k", "", "user", "x")); !errors.Is(err, session.ErrInvalidKey) {
		t.Errorf("oversize key: %v", err)
	}
	long := session.Key{AgentID: "main", Channel: "telegram", ID: strings.Repeat("\x00", session.MaxIDLen)}
	if err := st.Append(ctx, long, node("k", "", "user", "x")); err != nil {
		t.Fatalf("key of MaxIDLen: %v", err)
	}
	st.Close()
	st = newStore(t)
	defer st.Close()
	got, err := st.Nodes(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "ids survive", ids(got), weird)
	for i, n := range got {
		if want := fmt.Sprintf("text with NUL \x00 and \x01 controls %d", i); n.Text != want || n.Metadata["nul"] != "x\x00y" {
			t.Fatalf("node %d text %q metadata %v", i, n.Text, n.Metadata)
		}
	}
	if err := st.SetLeaf(ctx, k, "nul\x00id"); err != nil {
		t.Fatal(err)
	}
	if leaf, _ := st.Leaf(ctx, k); leaf != "nul\x00id" {
		t.Fatalf("leaf %q", leaf)
	}
	for _, c := range []struct {
		max  int
		want []string
	}{{1, weird[9:]}, {3, weird[7:]}, {0, weird}, {-1, weird}, {1000, weird}} {
		p, err := st.Path(ctx, k, weird[9], c.max)
		if err != nil {
			t.Fatal(err)
		}
		mustEqual(t, fmt.Sprintf("path max %d", c.max), ids(p), c.want)
	}
	if _, err := st.Path(ctx, k, "nul", 0); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("a prefix of an id matched: %v", err)
	}
	if got, err := st.Nodes(ctx, long); err != nil || len(got) != 1 {
		t.Fatalf("key of MaxIDLen: %v, %v", ids(got), err)
	}
	unknown := key("never")
	if err := st.SetLeaf(ctx, unknown, "a"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("set leaf of an unknown session: %v", err)
	}
	if _, err := st.Path(ctx, unknown, "a", 0); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("path of an unknown session: %v", err)
	}
	if err := st.Clear(ctx, unknown); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("clear of an unknown session: %v", err)
	}
}

func testConcurrentManySessions(t *testing.T, newStore NewStore) {
	st := newStore(t)
	defer st.Close()
	const sessions, turns = 12, 15
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for s := 0; s < sessions; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			k := key(fmt.Sprint("many-", s))
			parent := ""
			for i := 0; i < turns; i++ {
				id := fmt.Sprintf("s%d-%d", s, i)
				if err := st.Append(ctx, k, node(id, parent, "user", id)); err != nil {
					errs <- err
					return
				}
				parent = id
			}
		}(s)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for s := 0; s < sessions; s++ {
		got, err := session.BuildContext(ctx, st, key(fmt.Sprint("many-", s)), session.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != turns || got[0].ID != fmt.Sprintf("s%d-0", s) || got[turns-1].ID != fmt.Sprintf("s%d-%d", s, turns-1) {
			t.Fatalf("session %d: %v", s, ids(got))
		}
	}
	keys, _ := st.List(ctx, "main")
	mustEqual(t, "sessions listed", len(keys), sessions)
}

func testExportAndClear(t *testing.T, newStore NewStore) {
	st := newStore(t)
	defer st.Close()
	k := key("export")
	other := key("other")
	chain(t, st, k, "x", "", 4, "line **bold**")
	chain(t, st, other, "o", "", 1, "keep me")
	var js, jl, md bytes.Buffer
	for _, c := range []struct {
		format string
		w      *bytes.Buffer
	}{{"json", &js}, {"jsonl", &jl}, {"md", &md}} {
		if err := session.Export(ctx, st, k, c.format, c.w); err != nil {
			t.Fatalf("export %s: %v", c.format, err)
		}
	}
	var doc session.ExportDoc
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "json export", ids(doc.Nodes), []string{"x0", "x1", "x2", "x3"})
	mustEqual(t, "json leaf", doc.Leaf, "x3")
	lines := strings.Split(strings.TrimSpace(jl.String()), "\n")
	mustEqual(t, "jsonl lines", len(lines), 4)
	var n session.Node
	if err := json.Unmarshal([]byte(lines[3]), &n); err != nil || n.ParentID != "x2" {
		t.Fatalf("jsonl line: %v %+v", err, n)
	}
	if !strings.Contains(md.String(), "line **bold**") || strings.Count(md.String(), "## ") != 4 {
		t.Fatalf("md export:\n%s", md.String())
	}
	if err := session.Export(ctx, st, k, "xml", &md); err == nil {
		t.Fatal("unknown format accepted")
	}
	if err := st.Clear(ctx, k); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Nodes(ctx, k); len(got) != 0 {
		t.Fatalf("nodes after clear: %v", ids(got))
	}
	if leaf, _ := st.Leaf(ctx, k); leaf != "" {
		t.Fatalf("leaf after clear: %q", leaf)
	}
	if err := st.Clear(ctx, k); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("second clear: %v", err)
	}
	keys, _ := st.List(ctx, "main")
	mustEqual(t, "list after clear", keys, []session.Key{other})
	// The session is usable again after a clear.
	chain(t, st, k, "y", "", 1, "again")
	got, _ := st.Nodes(ctx, k)
	mustEqual(t, "after clear", ids(got), []string{"y0"})
}
