package session

import (
	"context"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Limits bound the context built for the model (SPEC §3). A value <= 0
// means no limit.
type Limits struct {
	MaxHistoryMessages int `json:"maxHistoryMessages"` // nodes
	MaxHistoryTokens   int `json:"maxHistoryTokens"`   // estimated tokens, see EstimateTokens
}

// DefaultLimits are maxHistoryMessages 50 and maxHistoryTokens 8000.
var DefaultLimits = Limits{MaxHistoryMessages: 50, MaxHistoryTokens: 8000}

// ContextConfig holds the default limits and per-chat-type overrides
// (channelOverrides in tendril.json). A zero field in an override falls
// back to Default.
type ContextConfig struct {
	Default          Limits            `json:"default"`
	ChannelOverrides map[string]Limits `json:"channelOverrides"`
}

// DefaultContextConfig returns 50/8000 with the overrides dm 100/16000 and
// group 20/4000.
func DefaultContextConfig() ContextConfig {
	return ContextConfig{
		Default: DefaultLimits,
		ChannelOverrides: map[string]Limits{
			"dm":    {MaxHistoryMessages: 100, MaxHistoryTokens: 16000},
			"group": {MaxHistoryMessages: 20, MaxHistoryTokens: 4000},
		},
	}
}

// For returns the limits of a chat type ("dm", "group", or anything else,
// which gets Default).
func (c ContextConfig) For(chatType string) Limits {
	l := c.Default
	if o, ok := c.ChannelOverrides[chatType]; ok {
		if o.MaxHistoryMessages != 0 {
			l.MaxHistoryMessages = o.MaxHistoryMessages
		}
		if o.MaxHistoryTokens != 0 {
			l.MaxHistoryTokens = o.MaxHistoryTokens
		}
	}
	return l
}

// LimitsFor returns DefaultContextConfig().For(chatType): dm 100/16000,
// group 20/4000, anything else 50/8000.
func LimitsFor(chatType string) Limits { return DefaultContextConfig().For(chatType) }

// Token estimate constants; see EstimateTokens.
const (
	// TokensPerNode is the framing cost of one node or model message (role
	// and delimiters).
	TokensPerNode = 4
	// TokensPerImage is the cost of one image block (Anthropic's figure for
	// a ~1.15 megapixel image).
	TokensPerImage = 1600
)

// EstimateTokens estimates a node's tokens without a tokenizer:
//
//	4 per node (role and framing)
//	+ EstimateText of its text, block texts, tool names and tool inputs
//	+ 1600 per image block (Anthropic's figure for a ~1.15 megapixel image)
//
// It is the one token estimate of the project: compaction (ShouldCompact),
// context limits (BuildContext) and the agent's request budget (system
// prompt, memory block, tool definitions, messages) all use it or
// EstimateText, so what compaction counts is what the request budget
// counts. The providers expose no tokenizer, so there is no better one.
func EstimateTokens(n Node) int {
	var e TextEstimate
	e.Add(n.Text)
	images := 0
	for _, b := range n.Blocks {
		e.Add(b.Text)
		e.Add(b.Name)
		e.AddBytes(b.Input)
		if b.Type == BlockImage {
			images++
		}
	}
	return TokensPerNode + e.Tokens() + images*TokensPerImage
}

// EstimateText estimates the tokens of the concatenation of parts, with no
// framing:
//
//	ceil(r/4) where r counts runes outside CJK scripts (about 4 characters
//	  per token for Latin text in BPE tokenizers)
//	+ 1 per CJK rune (Han, Hiragana, Katakana, Hangul: these usually cost at
//	  least a token each)
//
// EstimateText(a, b) ≤ EstimateText(a) + EstimateText(b), so summing the
// estimates of pieces never undercounts their concatenation.
func EstimateText(parts ...string) int {
	var e TextEstimate
	for _, s := range parts {
		e.Add(s)
	}
	return e.Tokens()
}

// TextEstimate accumulates EstimateText over pieces without joining them:
// after Add(a) and Add(b), Tokens() == EstimateText(a, b). The zero value
// is empty.
type TextEstimate struct{ other, cjk int }

// Add counts the runes of s.
func (e *TextEstimate) Add(s string) {
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			e.other++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) {
			e.cjk++
		} else {
			e.other++
		}
	}
}

// AddBytes is Add of string(b), without the copy.
func (e *TextEstimate) AddBytes(b []byte) {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			e.other++
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		i += size
		if unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) {
			e.cjk++
		} else {
			e.other++
		}
	}
}

// Tokens is the estimate of everything added: ceil(other/4) + cjk.
func (e *TextEstimate) Tokens() int { return (e.other+3)/4 + e.cjk }

// EstimateNodesTokens sums EstimateTokens over nodes.
func EstimateNodesTokens(nodes []Node) int {
	t := 0
	for _, n := range nodes {
		t += EstimateTokens(n)
	}
	return t
}

// BuildContext returns the history to send the model for key, oldest
// first: the path from the active leaf toward the root (a sibling branch
// never appears), cut at lim, with the latest compaction node on the path
// standing in for everything before its metadata.firstKeptId, and with
// tool_use / tool_result pairing repaired (see Repair). It returns nil for
// an empty session.
//
// The walk keeps whole units: an assistant node with tool_use blocks is
// taken together with the tool_result nodes that answer it, or not at all.
// The newest unit is always included even if it alone passes a limit. The
// latest compaction summary within reach of the walk (the message limit
// plus a 16-node margin) is always first and counts toward the limits; one
// further back than that has been pushed out by newer history. System nodes other than compaction summaries are passed through;
// the persona and identity anchors are never stored in a session (they are
// part of the system prompt), so no limit or compaction can drop them.
//
// Cost is proportional to the limits, not to the session size.
func BuildContext(ctx context.Context, st Store, key Key, lim Limits) ([]Node, error) {
	leaf, err := st.Leaf(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("build context %s: %w", key, err)
	}
	return BuildContextFrom(ctx, st, key, leaf, lim)
}

// contextMargin is the number of extra nodes fetched beyond the message
// limit so that repair and unit boundaries can be decided.
const contextMargin = 16

// BuildContextFrom is BuildContext from an explicit leaf ("" = empty).
func BuildContextFrom(ctx context.Context, st Store, key Key, leaf string, lim Limits) ([]Node, error) {
	if leaf == "" {
		return nil, nil
	}
	n := 0
	if lim.MaxHistoryMessages > 0 {
		n = lim.MaxHistoryMessages + contextMargin
	}
	for {
		path, err := st.Path(ctx, key, leaf, n)
		if err != nil {
			return nil, fmt.Errorf("build context %s: %w", key, err)
		}
		complete := n <= 0 || len(path) < n
		view, summarised, ok := compactView(path, complete)
		if !ok {
			n *= 4
			continue
		}
		view = Repair(view)
		sel, start := selectLimits(view, summarised, lim)
		if !complete && !summarised && start < contextMargin {
			n *= 4 // the cut may sit on a unit the window split
			continue
		}
		return sel, nil
	}
}

// compactView applies the latest compaction node of path (oldest first):
// the result is the compaction node, then the kept nodes from its
// firstKeptId (earlier compaction nodes among them dropped), then the nodes
// after it. ok is false when the path is incomplete and firstKeptId was not
// found in it, so the caller must fetch more.
func compactView(path []Node, complete bool) (view []Node, summarised, ok bool) {
	c := -1
	for i := len(path) - 1; i >= 0; i-- {
		if path[i].IsCompaction() {
			c = i
			break
		}
	}
	if c < 0 {
		return path, false, true
	}
	first, _ := path[c].Metadata["firstKeptId"].(string)
	start := c // nothing kept
	if first != "" {
		found := false
		for j := c - 1; j >= 0; j-- {
			if path[j].ID == first {
				start, found = j, true
				break
			}
		}
		if !found && !complete {
			return nil, false, false
		}
	}
	view = make([]Node, 0, len(path)-start)
	view = append(view, path[c])
	for _, n := range path[start:c] {
		if !n.IsCompaction() {
			view = append(view, n)
		}
	}
	view = append(view, path[c+1:]...)
	return view, true, true
}

// units splits a repaired view into indivisible units: a node, plus, when it
// carries tool_use blocks, the tool_result nodes right after it.
func units(view []Node) [][2]int {
	var us [][2]int
	for i := 0; i < len(view); {
		j := i + 1
		if len(view[i].toolUseIDs()) > 0 {
			for j < len(view) && hasToolResult(view[j]) {
				j++
			}
		}
		us = append(us, [2]int{i, j})
		i = j
	}
	return us
}

// selectLimits keeps the newest units of view that fit lim, with a leading
// summary pinned when summarised. start is the view index of the oldest
// unpinned node kept.
func selectLimits(view []Node, summarised bool, lim Limits) (sel []Node, start int) {
	if len(view) == 0 {
		return nil, 0
	}
	body := view
	msgs, toks := 0, 0
	if summarised {
		body = view[1:]
		msgs, toks = 1, EstimateTokens(view[0])
	}
	us := units(body)
	start = len(body)
	for k := len(us) - 1; k >= 0; k-- {
		u := us[k]
		m := u[1] - u[0]
		t := EstimateNodesTokens(body[u[0]:u[1]])
		over := (lim.MaxHistoryMessages > 0 && msgs+m > lim.MaxHistoryMessages) ||
			(lim.MaxHistoryTokens > 0 && toks+t > lim.MaxHistoryTokens)
		if over && start < len(body) {
			break
		}
		msgs += m
		toks += t
		start = u[0]
	}
	if summarised {
		sel = append(sel, view[0])
	}
	sel = append(sel, body[start:]...)
	return sel, start
}

func hasToolResult(n Node) bool {
	for _, b := range n.Blocks {
		if b.Type == BlockToolResult {
			return true
		}
	}
	return false
}

// SyntheticResultText is the text of a tool_result that Repair synthesises
// for a tool_use whose result was never recorded.
const SyntheticResultText = "error: this tool call was interrupted and no result was recorded"

// Repair returns nodes (oldest first) with tool_use / tool_result pairing
// made valid for every provider, in memory only:
//
//   - a tool_result block is kept only inside the run of result-carrying
//     nodes right after the assistant node whose tool_use it answers, once;
//     any other tool_result block is removed (an orphan result);
//   - a tool_use with no result in that run gets a synthesised error
//     result: one extra node {role: tool, metadata.synthetic: true, id
//     "synthetic_<tool_use node id>"} appended to the run, with one
//     tool_result block per missing ID, IsError and SyntheticResultText.
//     Synthesising (rather than dropping the tool_use) tells the model the
//     call was attempted and failed, e.g. after a crash or an abort;
//   - a node left with no content after removals is dropped.
//
// The input is not modified. Stored history is never changed.
func Repair(nodes []Node) []Node {
	out := make([]Node, 0, len(nodes))
	for i := 0; i < len(nodes); {
		n := nodes[i]
		uses := n.toolUseIDs()
		if len(uses) == 0 {
			if m, keep := filterResults(n, nil); keep {
				out = append(out, m)
			}
			i++
			continue
		}
		out = append(out, n)
		want := make(map[string]bool, len(uses))
		for _, id := range uses {
			want[id] = true
		}
		seen := make(map[string]bool, len(uses))
		j := i + 1
		for ; j < len(nodes) && hasToolResult(nodes[j]); j++ {
			m, keep := filterResults(nodes[j], func(id string) bool {
				if want[id] && !seen[id] {
					seen[id] = true
					return true
				}
				return false
			})
			if keep {
				out = append(out, m)
			}
		}
		var missing []Block
		for _, id := range uses {
			if !seen[id] {
				missing = append(missing, Block{Type: BlockToolResult, ToolUseID: id, IsError: true, Text: SyntheticResultText})
				seen[id] = true
			}
		}
		if len(missing) > 0 {
			out = append(out, Node{
				ID: "synthetic_" + n.ID, ParentID: out[len(out)-1].ID, Role: RoleTool,
				Blocks: missing, Timestamp: n.Timestamp, Channel: n.Channel,
				Metadata: map[string]any{"synthetic": true},
			})
		}
		i = j
	}
	return out
}

// filterResults removes the tool_result blocks of n that keep rejects (all
// of them when keep is nil). ok is false if nothing is left.
func filterResults(n Node, keep func(toolUseID string) bool) (Node, bool) {
	if !hasToolResult(n) {
		return n, true
	}
	bl := make([]Block, 0, len(n.Blocks))
	for _, b := range n.Blocks {
		if b.Type == BlockToolResult && (keep == nil || !keep(b.ToolUseID)) {
			continue
		}
		bl = append(bl, b)
	}
	n.Blocks = bl
	return n, n.Text != "" || len(bl) > 0
}
