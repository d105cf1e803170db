package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/trace"
	"sort"
	"strings"
	"time"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool"
)

// preTurn resolves the session, retrieves memory, reads the breaker level,
// chooses the tool set and assembles the system prompt and history.
func (a *Agent) preTurn(ctx context.Context, req Request, key session.Key) (*turn, error) {
	t := &turn{ID: a.newID("turn_"), Req: req, Key: key, Vision: len(req.Images) > 0}

	region := trace.StartRegion(ctx, "history")
	history, err := a.deps.History(ctx, key, req.ChatType)
	region.End()
	if err != nil {
		return nil, fmt.Errorf("load session %s/%s: %w", key.Channel, key.ID, err)
	}
	if err := checkOwner(history, req.ActorID, req.Channel); err != nil {
		return nil, err
	}
	a.reconcile(ctx, key, history)

	region = trace.StartRegion(ctx, "retrieve")
	memories := a.retrieve(ctx, req)
	region.End()

	t.Level = state.Normal
	if a.deps.State != nil {
		if lvl, err := a.deps.State.Level(ctx, req.ActorID); err != nil {
			a.opt.Logger.Warn("state level unavailable; assuming NORMAL", "actor", req.ActorID, "err", err)
		} else {
			t.Level = lvl
		}
	}

	t.tools = a.chooseTools(ctx, t.Level)
	for name := range t.tools {
		t.ToolNames = append(t.ToolNames, name)
	}
	sort.Strings(t.ToolNames)

	t.Messages = nodesToMessages(history)
	user, node, err := a.userMessage(ctx, req, t)
	if err != nil {
		return nil, err
	}
	t.Messages = appendMessage(t.Messages, user)
	t.Nodes = append(t.Nodes, node)

	// The memory block gets its share of the window, or what the fixed
	// parts, this turn's user message and the reply leave (see budget.go).
	room := 0
	if a.opt.ContextWindow > 0 {
		bare := &model.Request{System: a.systemPrompt(t, ""), Tools: a.toolDefs(t), Messages: t.Messages[len(t.Messages)-1:]}
		// +2: the newlines around the block in the prompt.
		room = min(a.memoryBudget(), a.opt.ContextWindow-a.ReplyRoom()-EstimateRequest(bare)-2)
	}
	block, used := a.memoryBlock(memories, room)
	t.MemoriesUsed = len(used)
	t.System = a.systemPrompt(t, block)
	return t, nil
}

// retrieve asks the retrieval component for the actor's memory. It owns
// the fallback query for an empty message, the timeout, metrics and the
// never-fail rule (SPEC §4.6); a Retriever that does fail anyway yields no
// memory. Cron turns search for the tasks that are due.
func (a *Agent) retrieve(ctx context.Context, req Request) []memory.Hit {
	if a.deps.Retriever == nil {
		return nil
	}
	query := req.Message
	if req.InvocationType == "cron" {
		query = "tasks due: " + query
	}
	hits, err := a.deps.Retriever.Recall(ctx, a.opt.AgentID, req.ActorID, query)
	if err != nil {
		a.opt.Logger.Warn("memory retrieval failed; continuing without memory", "actor", req.ActorID, "err", err)
		return nil
	}
	return hits
}

// chooseTools applies rules, breaker and floor: a tool is offered only if
// its effective rule at this level is not never. Without a gate only
// read-class tools are offered.
func (a *Agent) chooseTools(ctx context.Context, level state.Level) map[string]tool.Tool {
	out := map[string]tool.Tool{}
	tools := a.deps.Tools
	if a.deps.ToolSource != nil {
		tools = a.deps.ToolSource(ctx)
	}
	for _, tl := range tools {
		visible := tl.Class() == tool.ClassRead // no gate: read only
		if a.deps.Gate != nil {
			rule, _ := a.deps.Gate.Effective(tl.Name(), tl.Class(), level)
			visible = rule != approval.RuleNever
		}
		if visible {
			out[tl.Name()] = tl
		}
	}
	return out
}

// systemPrompt assembles, in this documented order:
//  1. the persona (persona.md);
//  2. the identity anchors;
//  3. the memory block ("What you remember about this user");
//  4. the active skills;
//  5. the tool descriptions;
//  6. when the breaker is WARNING or CRITICAL, the identity anchors again
//     with a safe-mode note, so they are the last thing the model reads.
//
// memoryBlock is the rendered block ("" for none), already filtered and
// fitted to its budget by memoryBlock.
func (a *Agent) systemPrompt(t *turn, memoryBlock string) string {
	persona := strings.TrimSpace(a.deps.Persona.Text)
	memoryBlock = strings.TrimSpace(memoryBlock)
	skills := strings.TrimSpace(a.deps.Skills)
	var b strings.Builder
	b.Grow(len(persona) + len(memoryBlock) + len(skills) + 64*len(t.ToolNames) + 256)
	line := func(parts ...string) {
		for _, p := range parts {
			b.WriteString(p)
		}
		b.WriteByte('\n')
	}
	line(persona)
	if len(a.deps.Persona.Anchors) > 0 {
		line("\n## Identity anchors")
		for _, an := range a.deps.Persona.Anchors {
			line("- ", an)
		}
	}
	if memoryBlock != "" {
		line("\n", memoryBlock)
	}
	if skills != "" {
		line("\n", skills)
	}
	if len(t.ToolNames) > 0 {
		line("\n## Tools")
		for _, name := range t.ToolNames {
			line("- ", name, ": ", t.tools[name].Description())
		}
	}
	if t.Level != state.Normal {
		line("\n## Identity anchors (re-asserted: safe mode ", t.Level.String(), ")")
		for _, an := range a.deps.Persona.Anchors {
			line("- ", an)
		}
		if t.Level == state.Critical {
			line("Only read-only tools are available. Keep replies calm and brief.")
		} else {
			line("Tools that change anything are unavailable right now.")
		}
	}
	line("\nCurrent time: ", a.opt.Clock().UTC().Format(time.RFC3339), ". Channel: ", t.Req.Channel, ".")
	return b.String()
}

func (a *Agent) userMessage(ctx context.Context, req Request, t *turn) (model.Message, session.Node, error) {
	msg := model.Message{Role: model.RoleUser}
	node := session.Node{ID: session.NewNodeID(), Role: session.RoleUser, Timestamp: a.opt.Clock().Unix(),
		Channel: req.Channel, Metadata: map[string]any{"turnId": t.ID, "actorId": req.ActorID}}
	if req.InvocationType != "" && req.InvocationType != "api" {
		node.Metadata["invocationType"] = req.InvocationType
	}
	for _, img := range req.Images {
		msg.Content = append(msg.Content, model.Block{Type: model.BlockImage, MediaType: img.MediaType, Data: img.Data})
		ref := fmt.Sprintf("inline:%d bytes", len(img.Data))
		if a.deps.Media != nil {
			r, err := a.deps.Media.Put(ctx, img.MediaType, img.Data)
			if err != nil {
				return msg, node, fmt.Errorf("store image: %w", err)
			}
			ref = r
		}
		node.Blocks = append(node.Blocks, session.Block{Type: "image", ImageRef: ref, MediaType: img.MediaType})
	}
	text := req.Message
	if text == "" {
		text = "(image)"
	}
	msg.Content = append(msg.Content, model.Text(text))
	if len(node.Blocks) > 0 {
		node.Blocks = append(node.Blocks, session.Block{Type: "text", Text: text})
	} else {
		node.Text = text
	}
	return msg, node, nil
}

// runLoop alternates model calls and tool calls, at most MaxToolIterations
// model calls. It returns a Result with PendingApproval when a tool call
// waits for approval.
func (a *Agent) runLoop(ctx context.Context, t *turn) (*Result, error) {
	if len(t.PendingUses) > 0 {
		if res, err := a.runTools(ctx, t); res != nil || err != nil {
			return res, err
		}
	}
	for t.Iteration < a.opt.MaxToolIterations {
		t.Iteration++
		resp, err := a.generate(ctx, t)
		if err != nil {
			return nil, err
		}
		t.Model = resp.Model
		t.Messages = append(t.Messages, model.Message{Role: model.RoleAssistant, Content: resp.Content})
		uses := resp.ToolUses()
		if len(uses) == 0 {
			text := strings.TrimSpace(resp.TextContent())
			t.Nodes = append(t.Nodes, a.node(t, session.RoleAssistant, text, nil))
			return a.result(t, text), nil
		}
		t.Nodes = append(t.Nodes, a.node(t, session.RoleAssistant, "", assistantBlocks(resp.Content)))
		t.PendingUses, t.Results = uses, nil
		if res, err := a.runTools(ctx, t); res != nil || err != nil {
			return res, err
		}
	}
	text := fmt.Sprintf("I stopped after %d tool steps without reaching an answer. Please narrow the request or try again.", a.opt.MaxToolIterations)
	t.Nodes = append(t.Nodes, a.nodeMeta(t, session.RoleAssistant, text, nil, map[string]any{"stopReason": "max_tool_iterations"}))
	return a.result(t, text), nil
}

func assistantBlocks(content []model.Block) []session.Block {
	var out []session.Block
	for _, b := range content {
		switch b.Type {
		case model.BlockText:
			if strings.TrimSpace(b.Text) != "" {
				out = append(out, session.Block{Type: "text", Text: b.Text})
			}
		case model.BlockToolUse:
			out = append(out, session.Block{Type: "tool_use", ID: b.ID, Name: b.Name, Input: b.Input})
		}
	}
	return out
}

// generate calls the model, compacting once on context overflow.
func (a *Agent) generate(ctx context.Context, t *turn) (*model.Response, error) {
	if a.deps.Models == nil {
		return nil, model.ErrNotConfigured
	}
	req := a.request(t)
	region := trace.StartRegion(ctx, "model")
	start := time.Now()
	resp, err := a.call(ctx, req, t.Vision)
	t.modelTime += time.Since(start)
	region.End()
	if errors.Is(err, model.ErrContextOverflow) && !t.Compacted && a.deps.Compact != nil {
		t.Compacted = true
		a.opt.Logger.Info("context overflow; compacting session and retrying once", "session", t.Key.ID)
		if cerr := a.deps.Compact(ctx, t.Key); cerr != nil {
			return nil, fmt.Errorf("%w: %v (compaction failed: %v)", errModel, err, cerr)
		}
		history, herr := a.deps.History(ctx, t.Key, t.Req.ChatType)
		if herr != nil {
			return nil, herr
		}
		// History after compaction plus this turn's messages so far.
		turnMsgs := append([]model.Message(nil), t.Messages[turnStart(t):]...)
		msgs := nodesToMessages(history)
		for _, m := range turnMsgs {
			msgs = appendMessage(msgs, m)
		}
		t.Messages = msgs
		start := time.Now()
		resp, err = a.call(ctx, a.request(t), t.Vision)
		t.modelTime += time.Since(start)
	}
	if err != nil {
		if errors.Is(err, model.ErrNotConfigured) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", errModel, err)
	}
	return resp, nil
}

// request builds the model request of the turn's next call, fitted to the
// context window (fitRequest): the system prompt, the tool definitions,
// the history and this turn's messages, and ReplyRoom as max_tokens.
func (a *Agent) request(t *turn) *model.Request {
	req := &model.Request{System: t.System, Messages: t.Messages, Tools: a.toolDefs(t), MaxTokens: a.ReplyRoom()}
	if a.opt.ContextWindow > 0 {
		rep := fitRequest(req, turnStart(t), a.opt.ContextWindow-req.MaxTokens)
		if rep.Over {
			a.opt.Logger.Warn("the system prompt, tools and this turn alone pass the context window; sending anyway",
				"session", t.Key.ID, "estimate", rep.Estimate, "reply", req.MaxTokens, "window", a.opt.ContextWindow)
		} else if rep.DroppedMessages > 0 || rep.DroppedSummary || rep.TruncatedTools > 0 {
			a.opt.Logger.Debug("request fitted to the context window", "session", t.Key.ID, "estimate", rep.Estimate,
				"droppedMessages", rep.DroppedMessages, "droppedSummary", rep.DroppedSummary, "truncatedToolResults", rep.TruncatedTools)
		}
	}
	return req
}

// toolDefs are the definitions of the turn's tools, in name order.
func (a *Agent) toolDefs(t *turn) []model.ToolDef {
	var defs []model.ToolDef
	for _, name := range t.ToolNames {
		tl := t.tools[name]
		if tl == nil {
			continue
		}
		defs = append(defs, model.ToolDef{Name: name, Description: tl.Description(), InputSchema: tl.Schema()})
	}
	return defs
}

// turnStart is the index in t.Messages of the message holding this turn's
// user message; the messages before it are history.
func turnStart(t *turn) int {
	if i := len(t.Messages) - 1 - countTurnMessages(t); i >= 0 {
		return i
	}
	return 0
}

// countTurnMessages is how many messages after the user message belong to
// this turn (assistant tool calls and tool results).
func countTurnMessages(t *turn) int {
	n := 0
	for _, nd := range t.Nodes[1:] {
		if nd.Role == session.RoleAssistant || nd.Role == session.RoleTool {
			n++
		}
	}
	return n
}

// runTools executes t.PendingUses in order through the gate. It returns a
// non-nil Result when the turn pauses for approval, and (nil, nil) when
// every use has its result and the loop should call the model again.
func (a *Agent) runTools(ctx context.Context, t *turn) (*Result, error) {
	for len(t.Results) < len(t.PendingUses) {
		use := t.PendingUses[len(t.Results)]
		toolEvent(ctx, ToolEvent{Phase: "call", ID: use.ID, Name: use.Name, Args: use.Input})
		out, isErr, pending, err := a.callTool(ctx, t, use, nil)
		if err != nil {
			return nil, err
		}
		if pending != nil {
			toolEvent(ctx, ToolEvent{Phase: "pending", ID: use.ID, Name: use.Name, RequestID: pending.RequestID})
			return a.pause(ctx, t, pending)
		}
		toolEvent(ctx, ToolEvent{Phase: "result", ID: use.ID, Name: use.Name, Result: out, IsError: isErr})
		t.Results = append(t.Results, model.Block{Type: model.BlockToolResult, ToolUseID: use.ID, Text: out, IsError: isErr})
	}
	a.finishToolBatch(t)
	return nil, nil
}

func (a *Agent) finishToolBatch(t *turn) {
	t.Messages = append(t.Messages, model.Message{Role: model.RoleUser, Content: t.Results})
	var blocks []session.Block
	for _, r := range t.Results {
		blocks = append(blocks, session.Block{Type: "tool_result", ToolUseID: r.ToolUseID, Text: r.Text, IsError: r.IsError})
	}
	t.Nodes = append(t.Nodes, a.node(t, session.RoleTool, "", blocks))
	t.PendingUses, t.Results = nil, nil
}

// callTool runs one tool call through the gate. approved, when not nil, is
// the execution handle of an approval request the caller has already
// authorized for this call (the gate is then not consulted again). It
// returns the tool result text and whether it is an error, or a pending
// approval.
func (a *Agent) callTool(ctx context.Context, t *turn, use model.Block, approved *approval.Exec) (string, bool, *PendingApproval, error) {
	tl := t.tools[use.Name]
	if tl == nil {
		a.countTool(use.Name, "refused")
		return fmt.Sprintf("tool %q is not available in this turn; use only the tools listed", use.Name), true, nil, nil
	}
	args := use.Input
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	// Malformed arguments go back to the model; they never reach the gate
	// or an operator's approval queue.
	var obj map[string]any
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		a.countTool(use.Name, "bad_args")
		return fmt.Sprintf("tool %q: arguments must be a JSON object: %v", use.Name, err), true, nil, nil
	}
	if err := checkArgs(tl.Schema(), obj); err != nil {
		a.countTool(use.Name, "bad_args")
		return fmt.Sprintf("tool %q: %v; fix the arguments and call it again", use.Name, err), true, nil, nil
	}
	var exec approval.Exec // zero: no execution recorded by the gate
	if approved != nil {
		exec = *approved
	} else if a.deps.Gate != nil {
		call := a.gateCall(t, use.Name, tl.Class(), args)
		// The resume payload must say the user node is persisted:
		// pause persists it before the request is visible to anyone.
		wasSent := t.UserNodeSent
		t.UserNodeSent = true
		resume, err := json.Marshal(t)
		t.UserNodeSent = wasSent
		if err != nil {
			return "", false, nil, fmt.Errorf("encode turn for approval: %w", err)
		}
		call.Resume = resume
		dec, err := a.deps.Gate.Check(ctx, call, t.Level)
		if err != nil {
			a.countTool(use.Name, "gate_error")
			return "approval gate unavailable: " + err.Error(), true, nil, nil
		}
		switch dec.Verdict {
		case approval.Allow:
			if dec.Exec != nil {
				exec = *dec.Exec
			}
		case approval.Ask:
			if dec.Request == nil {
				a.countTool(use.Name, "gate_error")
				return "approval gate unavailable: it asked without opening a request", true, nil, nil
			}
			a.countTool(use.Name, "pending")
			if a.opt.Metrics != nil {
				a.opt.Metrics.Approvals.WithLabelValues("requested").Inc()
			}
			// The request's canonical args (what args_hash is over), as the
			// approval_wait frame and the ledger show them, not the model's raw bytes.
			return "", false, &PendingApproval{RequestID: dec.Request.ID, ToolName: use.Name, Args: string(dec.Request.Args), ExpiresAt: dec.Request.ExpiresAt.Unix()}, nil
		default: // Deny, and anything unknown: fail closed
			a.countTool(use.Name, "denied")
			return "refused by the approval gate: " + dec.Reason, true, nil, nil
		}
	} else if tl.Class() != tool.ClassRead {
		a.countTool(use.Name, "refused")
		return "tool refused: no approval gate is configured for write tools", true, nil, nil
	}
	out, err := tool.Run(ctx, tl, tool.Call{AgentID: a.opt.AgentID, ActorID: t.Req.ActorID, SessionID: t.Key.ID, Channel: t.Req.Channel, Args: args}, a.opt.ToolTimeout)
	if a.deps.Gate != nil && exec != (approval.Exec{}) {
		if lerr := a.deps.Gate.RecordResult(ctx, exec, out, err); lerr != nil {
			a.opt.Logger.Error("audit ledger append failed", "tool", use.Name, "err", lerr)
		}
	}
	if err != nil {
		a.countTool(use.Name, "error")
		return err.Error(), true, nil, nil
	}
	a.countTool(use.Name, "ok")
	return out, false, nil, nil
}

func (a *Agent) gateCall(t *turn, name string, class tool.Class, args json.RawMessage) approval.Call {
	return approval.Call{AgentID: a.opt.AgentID, ActorID: t.Req.ActorID, SessionID: t.Key.ID, Channel: t.Req.Channel, Tool: name, Class: class, Args: args}
}

func (a *Agent) countTool(name, outcome string) {
	if a.opt.Metrics != nil {
		a.opt.Metrics.ToolCalls.WithLabelValues(name, outcome).Inc()
	}
}

// pause persists the user node (so the session never holds an orphaned
// tool_use) and returns the pending approval.
func (a *Agent) pause(ctx context.Context, t *turn, p *PendingApproval) (*Result, error) {
	if !t.UserNodeSent {
		if err := a.appendNodes(ctx, t.Key, t.Nodes[:1]); err != nil {
			return nil, err
		}
		t.UserNodeSent = true
	}
	text := fmt.Sprintf("I need your approval to run %s. Approve request %s (it expires at %s).",
		p.ToolName, p.RequestID, time.Unix(p.ExpiresAt, 0).UTC().Format(time.RFC3339))
	res := a.result(t, text)
	res.PendingApproval = p
	return res, nil
}

// appendNodes links nodes to the session's active leaf and appends them
// durably. The leaf is read just before the append, so the append fails
// with session.ErrLeafMoved only when another writer lands in between:
// with several instances, a killed instance's last commit can reach the
// database after the chat or session passed to another instance (its
// lock connection closed first). The nodes are then linked to the new
// leaf and appended again, at most appendAttempts times in all, as they
// would have been had that write landed a moment earlier.
func (a *Agent) appendNodes(ctx context.Context, key session.Key, nodes []session.Node) error {
	if len(nodes) == 0 {
		return nil
	}
	linked := make([]session.Node, len(nodes))
	for attempt := 1; ; attempt++ {
		leaf, err := a.deps.Sessions.Leaf(ctx, key)
		if err != nil && !errors.Is(err, session.ErrNotFound) {
			return fmt.Errorf("read leaf: %w", err)
		}
		copy(linked, nodes)
		for i := range linked {
			if i == 0 {
				linked[i].ParentID = leaf
			} else {
				linked[i].ParentID = linked[i-1].ID
			}
		}
		err = a.deps.Sessions.Append(ctx, key, linked...)
		if err == nil {
			return nil
		}
		if !errors.Is(err, session.ErrLeafMoved) || attempt == appendAttempts {
			return fmt.Errorf("persist turn: %w", err)
		}
		a.opt.Logger.Warn("session leaf moved while the turn was appended; appending after the new leaf", "session", key.ID, "attempt", attempt, "err", err)
	}
}

// appendAttempts bounds appendNodes' tries when the leaf keeps moving.
const appendAttempts = 3

func (a *Agent) node(t *turn, role, text string, blocks []session.Block) session.Node {
	return a.nodeMeta(t, role, text, blocks, nil)
}

func (a *Agent) nodeMeta(t *turn, role, text string, blocks []session.Block, meta map[string]any) session.Node {
	m := map[string]any{"turnId": t.ID}
	for k, v := range meta {
		m[k] = v
	}
	return session.Node{ID: session.NewNodeID(), Role: role, Text: text, Blocks: blocks, Timestamp: a.opt.Clock().Unix(), Channel: t.Req.Channel, Metadata: m}
}

func (a *Agent) result(t *turn, text string) *Result {
	return &Result{Text: text, SessionID: t.Key.ID, TurnID: t.ID, MemoriesUsed: t.MemoriesUsed, Model: t.Model, ModelTime: t.modelTime,
		Metadata: map[string]any{"breaker_level": t.Level.String(), "iterations": t.Iteration}}
}

// postTurn persists the turn's nodes (durable before the reply is
// acknowledged), updates state and queues memory extraction.
func (a *Agent) postTurn(ctx context.Context, t *turn, res *Result) error {
	nodes := t.Nodes
	if t.UserNodeSent {
		nodes = nodes[1:]
	}
	region := trace.StartRegion(ctx, "append nodes")
	err := a.appendNodes(ctx, t.Key, nodes)
	region.End()
	if err != nil {
		return err
	}
	if a.deps.State != nil && t.Req.InvocationType != "cron" && t.Req.Message != "" {
		region := trace.StartRegion(ctx, "state")
		if _, err := a.deps.State.Observe(ctx, t.Req.ActorID, 0, t.Req.Message); err != nil {
			a.opt.Logger.Warn("state update failed", "actor", t.Req.ActorID, "err", err)
		}
		region.End()
	}
	if a.deps.Recorder != nil && t.Req.InvocationType != "cron" {
		now := a.opt.Clock()
		events := []memory.Event{
			{ID: t.Nodes[0].ID, ActorID: t.Req.ActorID, SessionID: t.Key.ID, Role: "user", Text: t.Req.Message, Timestamp: now},
			{ID: t.Nodes[len(t.Nodes)-1].ID, ActorID: t.Req.ActorID, SessionID: t.Key.ID, Role: "assistant", Text: res.Text, Timestamp: now},
		}
		region := trace.StartRegion(ctx, "record turn")
		err := a.deps.Recorder.RecordTurn(ctx, a.opt.AgentID, t.Req.ActorID, t.Key.ID, events)
		region.End()
		if err != nil {
			a.opt.Logger.Warn("memory recording failed; the session's next turn writes its events", "actor", t.Req.ActorID, "err", err)
			a.reconciled.Delete(t.Key.String())
		}
	}
	return nil
}

// Resume continues a turn that paused at the approval gate. approved says
// whether the operator approved requestID; resume is the paused turn the
// agent passed as approval.Call.Resume (with *approval.Gate, what
// Gate.LoadResume returns for the request, not the stored reference). The completed turn is persisted and, when a Deliverer
// is set, delivered on its channel. Of tendril_approvals_total the agent
// counts only outcome "requested" (a call paused); Resume counts none,
// since only its caller knows whether a request not approved was denied
// or expired.
func (a *Agent) Resume(ctx context.Context, requestID string, approved bool, reason string, resume json.RawMessage) (*Result, error) {
	mode := resumeDenied
	if approved {
		mode = resumeApproved
	}
	return a.resume(ctx, requestID, mode, reason, resume)
}

// InterruptedOutcome is the tool result ResumeInterrupted gives the
// paused call (an error result), for the model to tell the user.
const InterruptedOutcome = "outcome unknown: the call was approved and started, but the process running it stopped before its result was recorded; it may or may not have finished, so check before running it again"

// ResumeInterrupted finishes a paused turn whose approved call was started
// (its request is executed in the ledger) by a process that stopped before
// the turn was recorded: the call is not run again (an approval is redeemed
// once), it gets the error result InterruptedOutcome, and the model
// finishes the turn, which is persisted and delivered as Resume's is.
// resume is the saved paused turn, as for Resume.
func (a *Agent) ResumeInterrupted(ctx context.Context, requestID string, resume json.RawMessage) (*Result, error) {
	return a.resume(ctx, requestID, resumeInterrupted, "", resume)
}

// resumeMode is how resume settles the paused call.
type resumeMode int

const (
	resumeApproved    resumeMode = iota // redeem the approval and run the call
	resumeDenied                        // "not approved: <reason>"
	resumeInterrupted                   // InterruptedOutcome
)

func (a *Agent) resume(ctx context.Context, requestID string, mode resumeMode, reason string, resume json.RawMessage) (*Result, error) {
	var t turn
	if err := json.Unmarshal(resume, &t); err != nil {
		return nil, fmt.Errorf("decode paused turn: %w", err)
	}
	if len(t.PendingUses) == 0 || len(t.Results) >= len(t.PendingUses) {
		return nil, errors.New("paused turn has no pending tool call")
	}
	if a.opt.Tracker != nil {
		defer a.opt.Tracker.Begin()()
	}
	unlock, err := a.locks.Lock(ctx, keyString(t.Key))
	if err != nil {
		return nil, err
	}
	defer unlock()
	t.tools = a.chooseTools(ctx, t.Level)
	// Tools removed since the pause (rule change, breaker) stay removed.
	for name := range t.tools {
		if !contains(t.ToolNames, name) {
			delete(t.tools, name)
		}
	}
	use := t.PendingUses[len(t.Results)]
	var out string
	var isErr bool
	switch mode {
	case resumeApproved:
		if a.deps.Gate == nil {
			return nil, errors.New("no approval gate configured")
		}
		args := use.Input
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		tl := t.tools[use.Name]
		if tl == nil {
			return nil, fmt.Errorf("tool %q is no longer available", use.Name)
		}
		// A request that cannot be redeemed (replayed, expired, changed
		// arguments) resumes nothing and persists nothing.
		exec, err := a.deps.Gate.Authorize(ctx, requestID, a.gateCall(&t, use.Name, tl.Class(), args), t.Level)
		if err != nil {
			return nil, fmt.Errorf("approval %s: %w", requestID, err)
		}
		out, isErr, _, err = a.callTool(ctx, &t, use, &exec)
		if err != nil {
			return nil, err
		}
	case resumeInterrupted:
		out, isErr = InterruptedOutcome, true
	default:
		if reason == "" {
			reason = "denied by the operator"
		}
		out, isErr = "not approved: "+reason, true
	}
	t.Results = append(t.Results, model.Block{Type: model.BlockToolResult, ToolUseID: use.ID, Text: out, IsError: isErr})
	res, err := a.runLoop(ctx, &t)
	if err != nil {
		return nil, err
	}
	if res.PendingApproval == nil {
		if err := a.postTurn(ctx, &t, res); err != nil {
			return nil, err
		}
	}
	if a.deps.Deliverer != nil {
		if err := a.deps.Deliverer.Deliver(ctx, t.Req.Channel, t.Req.ActorID, t.Req.Metadata, res.Text); err != nil {
			a.opt.Logger.Warn("deliver resumed turn failed", "channel", t.Req.Channel, "err", err)
		}
	}
	return res, nil
}

// appendMessage appends m, merging it into the last message when both have
// the same role (providers require alternating roles).
func appendMessage(msgs []model.Message, m model.Message) []model.Message {
	if n := len(msgs); n > 0 && msgs[n-1].Role == m.Role {
		merged := append(append([]model.Block{}, msgs[n-1].Content...), m.Content...)
		out := append(msgs[:n-1:n-1], model.Message{Role: m.Role, Content: merged})
		return out
	}
	return append(msgs, m)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// nodesToMessages converts session history to model messages. Image
// references in history become a short text marker; only the current turn
// carries image bytes. Tool nodes become user messages of tool_result
// blocks, as all three providers expect.
func nodesToMessages(nodes []session.Node) []model.Message {
	var out []model.Message
	for _, n := range nodes {
		var role model.Role
		switch n.Role {
		case session.RoleUser, session.RoleTool:
			role = model.RoleUser
		case session.RoleAssistant:
			role = model.RoleAssistant
		case session.RoleSystem:
			// Compaction summaries travel as a user-side context note.
			role = model.RoleUser
		default:
			continue
		}
		var blocks []model.Block
		if len(n.Blocks) == 0 {
			if strings.TrimSpace(n.Text) == "" {
				continue
			}
			blocks = []model.Block{model.Text(n.Text)}
		}
		for _, b := range n.Blocks {
			switch b.Type {
			case "text":
				blocks = append(blocks, model.Text(b.Text))
			case "image":
				blocks = append(blocks, model.Text("[image shared earlier]"))
			case "tool_use":
				blocks = append(blocks, model.Block{Type: model.BlockToolUse, ID: b.ID, Name: b.Name, Input: b.Input})
			case "tool_result":
				blocks = append(blocks, model.Block{Type: model.BlockToolResult, ToolUseID: b.ToolUseID, Text: b.Text, IsError: b.IsError})
			}
		}
		if len(blocks) == 0 {
			continue
		}
		// Providers require alternating roles: merge consecutive same-role
		// messages.
		if len(out) > 0 && out[len(out)-1].Role == role {
			out[len(out)-1].Content = append(out[len(out)-1].Content, blocks...)
			continue
		}
		out = append(out, model.Message{Role: role, Content: blocks})
	}
	// A conversation must start with a user message.
	for len(out) > 0 && out[0].Role != model.RoleUser {
		out = out[1:]
	}
	return out
}

// reconcile writes the memory events of the session's last turn when
// memory may lack them, through the Recorder's memory.TurnReconciler: the
// first time this process serves the session (a process that died
// between postTurn's session append and its RecordTurn left the turn in
// the session only) and after a RecordTurn of the session failed. Events
// already stored are skipped, so a check that finds them costs one
// lookup; cron turns are not memory, as in postTurn. A failure is logged
// and retried on the session's next turn; the turn goes on.
func (a *Agent) reconcile(ctx context.Context, key session.Key, history []session.Node) {
	rc, ok := a.deps.Recorder.(memory.TurnReconciler)
	if !ok {
		return
	}
	k := key.String()
	if _, done := a.reconciled.LoadOrStore(k, struct{}{}); done {
		return
	}
	actor, events := lastTurnEvents(history, key.ID)
	if len(events) == 0 {
		return
	}
	if err := rc.ReconcileTurn(ctx, a.opt.AgentID, actor, key.ID, events); err != nil {
		a.reconciled.Delete(k)
		a.opt.Logger.Warn("memory reconciliation failed; retrying on the session's next turn", "session", k, "err", err)
	}
}

// lastTurnEvents returns the actor and memory events of the last turn of
// path (a session's nodes, oldest first) as postTurn records them: the
// turn's first node (the user's message, with metadata turnId and
// actorId) and its final assistant reply. It returns none when the path
// does not end in a completed turn, or the turn was a cron run.
func lastTurnEvents(path []session.Node, sessionID string) (string, []memory.Event) {
	n := len(path)
	if n < 2 {
		return "", nil
	}
	last := path[n-1]
	turnID, _ := last.Metadata["turnId"].(string)
	if last.Role != session.RoleAssistant || len(last.Blocks) > 0 || turnID == "" {
		return "", nil
	}
	first := -1
	for i := n - 2; i >= 0; i-- {
		if id, _ := path[i].Metadata["turnId"].(string); id != turnID {
			break
		}
		first = i
	}
	if first < 0 {
		return "", nil
	}
	u := path[first]
	actor, _ := u.Metadata["actorId"].(string)
	if u.Role != session.RoleUser || actor == "" || u.Metadata["invocationType"] == "cron" {
		return "", nil
	}
	text := u.Text
	if len(u.Blocks) > 0 {
		text = ""
		for _, b := range u.Blocks {
			if b.Type == "text" && b.Text != "(image)" {
				text = b.Text
			}
		}
	}
	return actor, []memory.Event{
		{ID: u.ID, ActorID: actor, SessionID: sessionID, Role: "user", Text: text, Timestamp: time.Unix(u.Timestamp, 0).UTC()},
		{ID: last.ID, ActorID: actor, SessionID: sessionID, Role: "assistant", Text: last.Text, Timestamp: time.Unix(last.Timestamp, 0).UTC()},
	}
}
