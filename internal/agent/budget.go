package agent

import (
	"strings"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/session"
)

// Budget defaults (Options.MemoryBlockShare, Options.ReplyShare).
const (
	DefaultMemoryBlockShare = 0.15
	DefaultReplyShare       = 0.25
)

// The request budget. With Options.ContextWindow W > 0, every model
// request satisfies
//
//	EstimateRequest(req) + req.MaxTokens ≤ W
//
// whenever that is possible at all, where req.MaxTokens is ReplyRoom and
// EstimateRequest counts, with the session package's estimate (the one
// compaction uses), the system prompt (persona, anchors, memory block,
// skills, tool descriptions, safe-mode note, clock line), every tool
// definition with its schema, and every message. What gives way when the
// parts do not fit, in this order:
//
//  1. the memory block, sized once per turn when the turn starts: at most
//     MemoryBlockShare × W, and less when the fixed parts and this turn's
//     user message leave less; records are cut lowest-ranked first
//     (memory.FitBlock over memory.Assemble's order: explicit first);
//  2. history, oldest first, in the request only (the session keeps
//     everything): whole messages, never a tool_use without its
//     tool_result; a compaction summary at its head stays until nothing
//     else of history is left;
//  3. as a last resort, the text of this turn's own tool results, longest
//     first (cut with a marker), so the model still sees that each call
//     ran.
//
// Never cut: the persona and identity anchors (the whole system prompt
// outside the memory block), the tool definitions, and this turn's user
// message. If those alone pass the window, nothing can make the request
// fit, so nothing of history is cut either: the request is sent as it
// was (logged), without the memory block, and the provider's overflow
// error, if it comes, triggers the one compaction-and-retry of generate.

// ReplyRoom is the room kept for the reply in every request, and its
// max_tokens: Options.MaxTokens, capped at ReplyShare × ContextWindow when
// a window is set.
func (a *Agent) ReplyRoom() int {
	room := a.opt.MaxTokens
	if w := a.opt.ContextWindow; w > 0 {
		if c := int(a.opt.ReplyShare * float64(w)); c < room {
			room = c
		}
		if room < 1 {
			room = 1
		}
	}
	return room
}

// memoryBudget is MemoryBlockShare × ContextWindow, or 0 (no budget)
// without a window.
func (a *Agent) memoryBudget() int {
	if a.opt.ContextWindow <= 0 {
		return 0
	}
	return int(a.opt.MemoryBlockShare * float64(a.opt.ContextWindow))
}

// EstimateRequest estimates the prompt tokens of req (not its reply) with
// the session package's estimate (session.EstimateText and the per-message
// framing session.TokensPerNode, the same as session.EstimateTokens counts
// for a node): the system prompt, each message (text, tool names, tool
// inputs, tool-use IDs, tool results; session.TokensPerImage per image)
// and each tool definition (name, description, JSON schema).
func EstimateRequest(req *model.Request) int {
	return session.EstimateText(req.System) + estimateMessages(req.Messages) + estimateTools(req.Tools)
}

func estimateMessage(m model.Message) int {
	var e session.TextEstimate
	images := 0
	for _, b := range m.Content {
		e.Add(b.Text)
		e.Add(b.Name)
		e.AddBytes(b.Input)
		e.Add(b.ID)
		e.Add(b.ToolUseID)
		if b.Type == model.BlockImage {
			images++
		}
	}
	return session.TokensPerNode + e.Tokens() + images*session.TokensPerImage
}

func estimateMessages(msgs []model.Message) int {
	n := 0
	for _, m := range msgs {
		n += estimateMessage(m)
	}
	return n
}

func estimateTools(tools []model.ToolDef) int {
	n := 0
	for _, td := range tools {
		var e session.TextEstimate
		e.Add(td.Name)
		e.Add(td.Description)
		e.AddBytes(td.InputSchema)
		n += session.TokensPerNode + e.Tokens()
	}
	return n
}

// memoryBlock renders the turn's memory block within room tokens (≤ 0
// with a window: no block; no window: no budget) and returns it with the
// records it holds. Filtering and ranking are memory.Assemble's, fitting
// memory.FitBlock's, rendering deps.RenderMemory's (memory.RenderBlock by
// default): one renderer.
func (a *Agent) memoryBlock(hits []memory.Hit, room int) (string, []memory.Hit) {
	if len(hits) == 0 {
		return "", nil
	}
	if a.opt.ContextWindow > 0 && room <= 0 {
		return "", nil
	}
	if a.opt.ContextWindow <= 0 {
		room = 0
	}
	if a.deps.RenderMemory == nil {
		if text, fit, ok := defaultMemoryBlock(hits, room, a.deps.HitsAssembled); ok {
			return text, fit
		}
	}
	render := a.deps.RenderMemory
	if render == nil {
		render = memory.RenderBlock
	}
	hits = memory.Assemble(hits, len(hits)) // filter and rank; retrieval has capped them
	fit, text := memory.FitBlock(hits, room, func(h []memory.Hit) string {
		if len(h) == 0 {
			return ""
		}
		return strings.TrimSpace(render(h))
	})
	return text, fit
}

// defaultMemoryBlock is memoryBlock with memory.RenderBlock in one pass:
// memory.RenderBlockWith filters the hits once (Assemble and RenderBlock
// would each filter them, an O(hits²) comparison) and fits its untrimmed
// text. That text may estimate one token more than the trimmed block the
// agent sends, so it is fitted to room+1; when the trimmed result then
// fits room it is the longest prefix that does (any prefix that fits room
// trimmed fits room+1 untrimmed), else ok is false and the caller fits
// the slow way.
// With assembled set the hits are Assemble's already and not filtered at
// all.
func defaultMemoryBlock(hits []memory.Hit, room int, assembled bool) (string, []memory.Hit, bool) {
	budget := 0
	if room > 0 {
		budget = room + 1
	}
	b := memory.RenderBlockWith(hits, memory.BlockOptions{MaxTokens: budget, Filtered: assembled})
	text := strings.TrimSpace(b.Text)
	if room > 0 && session.EstimateText(text) > room {
		return "", nil, false
	}
	if len(b.Hits) == 0 {
		return "", nil, true
	}
	return text, b.Hits, true
}

// fitReport says what fitRequest cut.
type fitReport struct {
	Estimate        int // EstimateRequest after fitting
	DroppedMessages int // history messages left out
	DroppedSummary  bool
	TruncatedTools  int // this turn's tool results shortened
	Over            bool
}

// truncatedMarker ends a tool result shortened to fit the window.
const truncatedMarker = "\n…[truncated to fit the context window]"

// fitRequest fits req.Messages in place so that EstimateRequest(req) ≤
// room, where msgs[turnStart:] is this turn (its user message first) and
// msgs[:turnStart] is history. See the budget comment above for what is
// cut, in which order; when even cutting everything allowed leaves it
// over, req is left as it was and the report says Over. The input slices
// are never modified.
func fitRequest(req *model.Request, turnStart, room int) fitReport {
	fixed := session.EstimateText(req.System) + estimateTools(req.Tools)
	msgs := req.Messages
	if turnStart < 0 || turnStart > len(msgs) {
		turnStart = 0
	}
	total := fixed + estimateMessages(msgs)
	if total <= room {
		return fitReport{Estimate: total}
	}
	var rep fitReport
	hist := append([]model.Message(nil), msgs[:turnStart]...)
	turnMsgs := append([]model.Message(nil), msgs[turnStart:]...)

	// The compaction summary at the head of history is pinned: split it
	// from whatever it was merged with.
	var summary *model.Message
	if len(hist) > 0 && len(hist[0].Content) > 0 && hist[0].Role == model.RoleUser && isSummary(hist[0].Content[0]) {
		s := model.Message{Role: model.RoleUser, Content: hist[0].Content[:1:1]}
		summary = &s
		if rest := hist[0].Content[1:]; len(rest) > 0 {
			hist[0] = model.Message{Role: model.RoleUser, Content: rest}
		} else {
			hist = hist[1:]
		}
	}
	est := func() int {
		n := fixed + estimateMessages(hist) + estimateMessages(turnMsgs)
		if summary != nil {
			n += estimateMessage(*summary)
		}
		return n
	}
	total = est()
	for total > room && len(hist) > 0 {
		total -= estimateMessage(hist[0])
		hist = hist[1:]
		rep.DroppedMessages++
		// The head must be a user message with no tool_result whose
		// tool_use was just cut.
		for len(hist) > 0 {
			h := hist[0]
			if h.Role != model.RoleUser {
				total -= estimateMessage(h)
				hist = hist[1:]
				rep.DroppedMessages++
				continue
			}
			var keep []model.Block
			for _, b := range h.Content {
				if b.Type != model.BlockToolResult {
					keep = append(keep, b)
				}
			}
			if len(keep) == len(h.Content) {
				break
			}
			total -= estimateMessage(h)
			if len(keep) == 0 {
				hist = hist[1:]
				rep.DroppedMessages++
				continue
			}
			hist[0] = model.Message{Role: model.RoleUser, Content: keep}
			total += estimateMessage(hist[0])
			break
		}
	}
	if total > room && summary != nil {
		total -= estimateMessage(*summary)
		summary = nil
		rep.DroppedSummary = true
	}
	if total > room {
		shrinkToolResults(turnMsgs, total-room, &rep)
	}
	out := make([]model.Message, 0, 1+len(hist)+len(turnMsgs))
	if summary != nil {
		out = append(out, *summary)
	}
	for _, m := range append(hist, turnMsgs...) {
		out = appendMessage(out, m)
	}
	// Nothing precedes the first message, so no tool_result in it can have
	// its tool_use (e.g. one merged into this turn's user message from an
	// interrupted turn whose tool_use was just cut).
	if len(out) > 0 {
		var keep []model.Block
		for _, b := range out[0].Content {
			if b.Type != model.BlockToolResult {
				keep = append(keep, b)
			}
		}
		if len(keep) < len(out[0].Content) {
			out[0] = model.Message{Role: out[0].Role, Content: keep}
		}
	}
	if est := fixed + estimateMessages(out); est > room {
		// Even with all of that cut it does not fit: cutting would lose
		// context and gain nothing, so the request goes as it was.
		return fitReport{Estimate: fixed + estimateMessages(msgs), Over: true}
	}
	req.Messages = out
	rep.Estimate = fixed + estimateMessages(out)
	return rep
}

func isSummary(b model.Block) bool {
	return b.Type == model.BlockText && strings.HasPrefix(b.Text, session.SummaryPrefix)
}

// shrinkToolResults shortens the longest tool results of msgs (this
// turn's) until excess tokens are saved or nothing is left to cut,
// replacing the affected messages with copies.
func shrinkToolResults(msgs []model.Message, excess int, rep *fitReport) {
	for excess > 0 {
		mi, bi, longest := -1, -1, 0
		for i, m := range msgs {
			for j, b := range m.Content {
				if b.Type == model.BlockToolResult && !strings.HasSuffix(b.Text, truncatedMarker) {
					if n := session.EstimateText(b.Text); n > longest {
						mi, bi, longest = i, j, n
					}
				}
			}
		}
		if mi < 0 || longest <= session.EstimateText(truncatedMarker)+16 {
			return
		}
		b := msgs[mi].Content[bi]
		before := estimateMessage(msgs[mi])
		keepTokens := longest - excess - session.EstimateText(truncatedMarker) - 1
		if keepTokens < 16 {
			keepTokens = 16
		}
		b.Text = truncateTokens(b.Text, keepTokens) + truncatedMarker
		content := append([]model.Block(nil), msgs[mi].Content...)
		content[bi] = b
		msgs[mi] = model.Message{Role: msgs[mi].Role, Content: content}
		excess -= before - estimateMessage(msgs[mi])
		rep.TruncatedTools++
	}
}

// truncateTokens returns the longest prefix of s (whole runes) estimated at
// no more than n tokens.
func truncateTokens(s string, n int) string {
	if session.EstimateText(s) <= n {
		return s
	}
	r := []rune(s)
	lo, hi := 0, len(r)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if session.EstimateText(string(r[:mid])) <= n {
			lo = mid
		} else {
			hi = mid
		}
	}
	return string(r[:lo])
}
