package session

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Compaction strategies (sessions.compaction.strategy).
const (
	StrategySummary  = "summary"  // summarise older history through the model (default)
	StrategyTruncate = "truncate" // keep the last KeepLast nodes, no model call
)

// SummaryPrefix starts the content of every compaction node.
const SummaryPrefix = "[Session summary] "

// ErrNoSummarizer is returned by Compact with the summary strategy and no
// Summarize function.
var ErrNoSummarizer = errors.New("session: summary compaction needs a Summarize function")

// CompactOptions configure Compact.
type CompactOptions struct {
	// Strategy is StrategySummary ("" means summary) or StrategyTruncate.
	Strategy string
	// KeepLast is how many of the newest context nodes stay verbatim after
	// the summary; 0 keeps none. A tool_use is never split from its
	// tool_result, so slightly more may be kept.
	KeepLast int
	// Summarize turns the older nodes (oldest first, a previous summary
	// first among them) into summary text, usually through the model.
	// Required for StrategySummary.
	Summarize func(ctx context.Context, older []Node) (string, error)
	// PreCompact runs before anything is written, with the nodes about to
	// be summarised away (memory extraction consumes them here). An error
	// aborts the compaction: nothing is appended.
	PreCompact func(ctx context.Context, key Key, older []Node) error
	// Now stamps the compaction node; nil means time.Now.
	Now func() time.Time
}

// Compact compacts the active branch of key (SPEC §3 auto-compaction). It
// computes the branch's current context view (the latest compaction summary
// plus the nodes after its firstKeptId, with no message or token limit),
// splits it into older nodes and the KeepLast newest, calls PreCompact and
// then Summarize with the older ones, and appends one system node
//
//	{"role":"system","content":"[Session summary] ...",
//	 "metadata":{"type":"compaction","strategy":S,"originalCount":N,"firstKeptId":ID}}
//
// as a child of the active leaf, which becomes the new leaf. originalCount
// counts the original nodes the summary stands for (including those an
// earlier summary stood for); firstKeptId is "" when nothing is kept.
// Original nodes are never rewritten or deleted. The persona and identity
// anchors live in the system prompt, never in the session, so compaction
// cannot drop them.
//
// It returns the appended node, or nil and no error when there is nothing
// to compact. Errors from PreCompact, Summarize or the store are wrapped.
func Compact(ctx context.Context, st Store, key Key, opts CompactOptions) (*Node, error) {
	strategy := opts.Strategy
	if strategy == "" {
		strategy = StrategySummary
	}
	if strategy != StrategySummary && strategy != StrategyTruncate {
		return nil, fmt.Errorf("compact %s: unknown strategy %q", key, strategy)
	}
	if strategy == StrategySummary && opts.Summarize == nil {
		return nil, fmt.Errorf("compact %s: %w", key, ErrNoSummarizer)
	}
	if opts.KeepLast < 0 {
		return nil, fmt.Errorf("compact %s: KeepLast %d < 0", key, opts.KeepLast)
	}
	leaf, err := st.Leaf(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("compact %s: %w", key, err)
	}
	if leaf == "" {
		return nil, nil
	}
	view, err := fullView(ctx, st, key, leaf)
	if err != nil {
		return nil, fmt.Errorf("compact %s: %w", key, err)
	}
	view = Repair(view)
	keep := len(view) - opts.KeepLast
	if keep < 0 {
		keep = 0
	}
	// Never start the kept part inside a unit (tool_use + results) or on a
	// synthetic node.
	for keep > 0 && keep < len(view) && (hasToolResult(view[keep]) || isSynthetic(view[keep])) {
		keep--
	}
	var older []Node
	for _, n := range view[:keep] {
		if !isSynthetic(n) {
			older = append(older, n)
		}
	}
	if len(older) == 0 || (len(older) == 1 && older[0].IsCompaction()) {
		return nil, nil
	}
	firstKept := ""
	if keep < len(view) {
		firstKept = view[keep].ID
	}
	if opts.PreCompact != nil {
		if err := opts.PreCompact(ctx, key, older); err != nil {
			return nil, fmt.Errorf("compact %s: pre-compaction hook: %w", key, err)
		}
	}
	count := 0
	for _, n := range older {
		if n.IsCompaction() {
			count += metaInt(n.Metadata["originalCount"])
		} else {
			count++
		}
	}
	var text string
	if strategy == StrategySummary {
		s, err := opts.Summarize(ctx, older)
		if err != nil {
			return nil, fmt.Errorf("compact %s: summarize: %w", key, err)
		}
		text = SummaryPrefix + s
	} else {
		text = fmt.Sprintf("%s%d earlier messages were truncated.", SummaryPrefix, count)
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	node := Node{
		ID: NewNodeID(), ParentID: leaf, Role: RoleSystem, Text: text,
		Timestamp: now().Unix(), Channel: key.Channel,
		Metadata: map[string]any{
			MetaType: MetaTypeCompaction, "strategy": strategy,
			"originalCount": count, "firstKeptId": firstKept,
		},
	}
	if err := st.Append(ctx, key, node); err != nil {
		return nil, fmt.Errorf("compact %s: %w", key, err)
	}
	return &node, nil
}

// fullView returns the unlimited compaction-aware view ending at leaf,
// fetching only back to the latest compaction's firstKeptId.
func fullView(ctx context.Context, st Store, key Key, leaf string) ([]Node, error) {
	for n := 256; ; n *= 4 {
		path, err := st.Path(ctx, key, leaf, n)
		if err != nil {
			return nil, err
		}
		complete := len(path) < n
		view, summarised, ok := compactView(path, complete)
		if ok && (complete || summarised) {
			return view, nil
		}
	}
}

// ShouldCompact reports whether nodes, estimated with EstimateTokens, pass
// threshold × contextWindow tokens. threshold <= 0 means 0.8; contextWindow
// <= 0 means never.
func ShouldCompact(nodes []Node, contextWindow int, threshold float64) bool {
	if contextWindow <= 0 {
		return false
	}
	if threshold <= 0 {
		threshold = 0.8
	}
	return float64(EstimateNodesTokens(nodes)) > threshold*float64(contextWindow)
}

func isSynthetic(n Node) bool { b, _ := n.Metadata["synthetic"].(bool); return b }

// metaInt reads a number from metadata that may have come back from JSON
// as float64.
func metaInt(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case int64:
		return int(x)
	case float64:
		return int(x)
	}
	return 0
}
