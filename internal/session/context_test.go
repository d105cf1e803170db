package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"unicode"

	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/jsonl"
)

var ctx = context.Background()

func openStore(t *testing.T) session.Store {
	st, err := jsonl.Open(t.TempDir(), jsonl.Options{Fsync: jsonl.FsyncNever})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func ids(nodes []session.Node) []string {
	out := []string{}
	for _, n := range nodes {
		out = append(out, n.ID)
	}
	return out
}

func use(id, parent, tu string) session.Node {
	return session.Node{ID: id, ParentID: parent, Role: "assistant", Blocks: []session.Block{{Type: "tool_use", ID: tu, Name: "t", Input: json.RawMessage(`{}`)}}}
}

func result(id, parent, tu string) session.Node {
	return session.Node{ID: id, ParentID: parent, Role: "tool", Blocks: []session.Block{{Type: "tool_result", ToolUseID: tu, Text: "ok"}}}
}

// TestCompactNeverSplitsAPair: KeepLast landing on a tool_result moves the
// kept part back to include its tool_use.
func TestCompactNeverSplitsAPair(t *testing.T) {
	st := openStore(t)
	k := session.Key{AgentID: "main", Channel: "telegram", ID: "1"}
	nodes := []session.Node{
		{ID: "u1", Role: "user", Text: "a"}, {ID: "a1", ParentID: "u1", Role: "assistant", Text: "b"},
		{ID: "u2", ParentID: "a1", Role: "user", Text: "c"}, use("t", "u2", "X"), result("r", "t", "X"),
		{ID: "a2", ParentID: "r", Role: "assistant", Text: "d"},
	}
	if err := st.Append(ctx, k, nodes...); err != nil {
		t.Fatal(err)
	}
	var older []string
	c, err := session.Compact(ctx, st, k, session.CompactOptions{KeepLast: 2, Strategy: session.StrategyTruncate,
		PreCompact: func(_ context.Context, _ session.Key, o []session.Node) error { older = ids(o); return nil }})
	if err != nil || c == nil {
		t.Fatal(c, err)
	}
	if c.Metadata["firstKeptId"] != "t" || !reflect.DeepEqual(older, []string{"u1", "a1", "u2"}) {
		t.Fatalf("firstKeptId %v, older %v", c.Metadata["firstKeptId"], older)
	}
	got, _ := session.BuildContext(ctx, st, k, session.DefaultLimits)
	if want := []string{c.ID, "t", "r", "a2"}; !reflect.DeepEqual(ids(got), want) {
		t.Fatalf("context %v, want %v", ids(got), want)
	}
}

// TestContextFetchesBackToFirstKept: a compaction keeping more nodes than
// the message window still finds its firstKeptId, and limits then apply.
func TestContextFetchesBackToFirstKept(t *testing.T) {
	st := openStore(t)
	k := session.Key{AgentID: "main", Channel: "telegram", ID: "2"}
	parent := ""
	for i := 0; i < 200; i++ {
		id := fmt.Sprintf("n%03d", i)
		if err := st.Append(ctx, k, session.Node{ID: id, ParentID: parent, Role: "user", Text: "x"}); err != nil {
			t.Fatal(err)
		}
		parent = id
	}
	c, err := session.Compact(ctx, st, k, session.CompactOptions{KeepLast: 150,
		Summarize: func(context.Context, []session.Node) (string, error) { return "s", nil }})
	if err != nil || c == nil || c.Metadata["firstKeptId"] != "n050" {
		t.Fatal(c, err)
	}
	got, err := session.BuildContext(ctx, st, k, session.Limits{MaxHistoryMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{c.ID, "n191", "n192", "n193", "n194", "n195", "n196", "n197", "n198", "n199"}
	if !reflect.DeepEqual(ids(got), want) {
		t.Fatalf("context %v", ids(got))
	}
	all, _ := session.BuildContext(ctx, st, k, session.Limits{})
	if len(all) != 151 || all[0].ID != c.ID || all[1].ID != "n050" {
		t.Fatalf("unlimited context: %d nodes from %v", len(all), ids(all[:2]))
	}
}

func TestRepairTable(t *testing.T) {
	cases := []struct {
		name string
		in   []session.Node
		want []string
	}{
		{"paired", []session.Node{use("t", "", "A"), result("r", "t", "A")}, []string{"t", "r"}},
		{"orphan result first", []session.Node{result("r", "", "A"), {ID: "u", Role: "user", Text: "x"}}, []string{"u"}},
		{"use at the end", []session.Node{{ID: "u", Role: "user", Text: "x"}, use("t", "u", "A")}, []string{"u", "t", "synthetic_t"}},
		{"result after text", []session.Node{use("t", "", "A"), {ID: "a", Role: "assistant", Text: "x"}, result("r", "a", "A")}, []string{"t", "synthetic_t", "a"}},
		{"two uses one result", []session.Node{
			{ID: "t", Role: "assistant", Blocks: []session.Block{{Type: "tool_use", ID: "A"}, {Type: "tool_use", ID: "B"}}},
			result("r", "t", "B")}, []string{"t", "r", "synthetic_t"}},
	}
	for _, c := range cases {
		got := session.Repair(c.in)
		if !reflect.DeepEqual(ids(got), c.want) {
			t.Errorf("%s: %v, want %v", c.name, ids(got), c.want)
		}
	}
}

// EstimateText is EstimateTokens without the framing, and subadditive, so
// budgets summing pieces never undercount the whole.
func TestEstimateText(t *testing.T) {
	n := session.Node{Text: "hello there", Blocks: []session.Block{{Type: session.BlockText, Text: "비료"}, {Type: "tool_use", Name: "weather", Input: []byte(`{"place":"Busan"}`)}}}
	if got, want := session.EstimateTokens(n), session.TokensPerNode+session.EstimateText("hello there", "비료", "", "", "weather", `{"place":"Busan"}`); got != want {
		t.Fatalf("EstimateTokens %d, want %d", got, want)
	}
	if session.EstimateText("") != 0 || session.EstimateText("abcd") != 1 || session.EstimateText("abcde") != 2 || session.EstimateText("감사합니다") != 5 {
		t.Fatal("session.EstimateText rule")
	}
	for _, p := range [][2]string{{"abc", "de"}, {"a", "b"}, {"비료", "x"}, {"", "abcd"}} {
		if session.EstimateText(p[0]+p[1]) > session.EstimateText(p[0])+session.EstimateText(p[1]) || session.EstimateText(p[0], p[1]) != session.EstimateText(p[0]+p[1]) {
			t.Fatalf("%q: not subadditive", p)
		}
	}
	if session.EstimateTokens(session.Node{Blocks: []session.Block{{Type: session.BlockImage}}}) != session.TokensPerNode+session.TokensPerImage {
		t.Fatal("image cost")
	}
}

// TextEstimate adds up to EstimateText of the pieces, bytes or strings,
// invalid UTF-8 included.
func TestTextEstimate(t *testing.T) {
	parts := []string{"hello there", "비료", "", "日本語のテキスト", "bad \xff\xfe utf8", "🌱 emoji", "x"}
	var e session.TextEstimate
	for i, p := range parts {
		if i%2 == 0 {
			e.Add(p)
		} else {
			e.AddBytes([]byte(p))
		}
	}
	// The rule, by range over runes (an invalid byte is one U+FFFD).
	other, cjk := 0, 0
	for _, p := range parts {
		for _, r := range p {
			if unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) {
				cjk++
			} else {
				other++
			}
		}
	}
	want := (other+3)/4 + cjk
	if got := e.Tokens(); got != want || session.EstimateText(parts...) != want {
		t.Errorf("TextEstimate %d, EstimateText %d, want %d", got, session.EstimateText(parts...), want)
	}
	var zero session.TextEstimate
	if zero.Tokens() != 0 {
		t.Error("zero value not empty")
	}
}
