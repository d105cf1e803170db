package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/tool"
)

const testPersona = `You are Sprout, a friendly gardening assistant for home growers. You give practical,
season-aware advice about vegetables, herbs, fruit trees and flowers; you respect the user's stated
preferences (organic methods, budget, language) and you say so when you are unsure. You never invent
facts about the user's garden: when something is not in what you remember, you ask. Keep answers
concrete: what to do, when, and what to watch for next.`

var testAnchors = []string{"I am Sprout, a gardening assistant.", "I never pretend to be human.", "I respect the user's explicit preferences."}

const testSkills = `## Skills
- weather: look up the forecast before advising on watering, frost or planting out.
- reminders: offer a reminder when the user plans a task for later.
- plant-notes: keep per-plant notes with the notes tool.`

// schemaTool is a read tool with a real JSON schema and a long result.
type bigTool struct {
	name, desc string
	schema     string
	result     func(args string) string
}

func (b *bigTool) Name() string            { return b.name }
func (b *bigTool) Description() string     { return b.desc }
func (b *bigTool) Schema() json.RawMessage { return json.RawMessage(b.schema) }
func (b *bigTool) Class() tool.Class       { return tool.ClassRead }
func (b *bigTool) Run(_ context.Context, c tool.Call) (string, error) {
	return b.result(string(c.Args)), nil
}

// storeRecorder records a turn's events straight into the memory store, as
// the pipeline's short-term event log does, so later turns retrieve them.
type storeRecorder struct{ st memory.Store }

func (r storeRecorder) RecordTurn(ctx context.Context, _, _, _ string, events []memory.Event) error {
	return r.st.AppendEvents(ctx, events)
}

// budgetModel answers like a chatty model (long replies, tool calls every
// few turns, two parallel calls sometimes, one context overflow now and
// then) and checks every request it receives against the window.
type budgetModel struct {
	window int

	mu        sync.Mutex
	current   string // this turn's user message
	turn      int
	calls     int
	maxEst    int
	maxSystem int
	maxBlock  int
	minBlock  int
	blockSeen int
	overflows int
	failures  []string
}

func (m *budgetModel) fail(format string, args ...any) {
	if len(m.failures) < 20 {
		m.failures = append(m.failures, fmt.Sprintf("turn %d call %d: ", m.turn, m.calls)+fmt.Sprintf(format, args...))
	}
}

func (m *budgetModel) Generate(_ context.Context, req *model.Request, _ bool) (*model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	m.check(req)
	last := req.Messages[len(req.Messages)-1]
	if last.Content[len(last.Content)-1].Type == model.BlockToolResult {
		return &model.Response{Model: "fake", StopReason: model.StopEndTurn,
			Content: []model.Block{model.Text(reply(m.turn, "Based on the lookup results"))}}, nil
	}
	if m.turn%50 == 25 && m.overflows < m.turn/50+1 {
		m.overflows++
		return nil, fmt.Errorf("provider: prompt is too long: %w", model.ErrContextOverflow)
	}
	switch {
	case m.turn%11 == 0:
		return &model.Response{Model: "fake", StopReason: model.StopToolUse, Content: []model.Block{
			model.Text("Let me check two things."),
			{Type: model.BlockToolUse, ID: fmt.Sprintf("tu_%d_a", m.turn), Name: "plant_lookup", Input: json.RawMessage(`{"plant":"fig","detail":"pests"}`)},
			{Type: model.BlockToolUse, ID: fmt.Sprintf("tu_%d_b", m.turn), Name: "weather", Input: json.RawMessage(`{"place":"Busan","days":7}`)},
		}}, nil
	case m.turn%4 == 0:
		return &model.Response{Model: "fake", StopReason: model.StopToolUse, Content: []model.Block{
			{Type: model.BlockToolUse, ID: fmt.Sprintf("tu_%d", m.turn), Name: "plant_lookup", Input: json.RawMessage(`{"plant":"basil"}`)},
		}}, nil
	}
	return &model.Response{Model: "fake", StopReason: model.StopEndTurn, Content: []model.Block{model.Text(reply(m.turn, "Here is what I would do"))}}, nil
}

// check asserts the invariants of one request.
func (m *budgetModel) check(req *model.Request) {
	est := EstimateRequest(req)
	if est > m.maxEst {
		m.maxEst = est
	}
	if s := session.EstimateText(req.System); s > m.maxSystem {
		m.maxSystem = s
	}
	if est+req.MaxTokens > m.window {
		m.fail("estimate %d + reply %d > window %d", est, req.MaxTokens, m.window)
	}
	if req.MaxTokens != m.window/4 {
		m.fail("max_tokens %d, want the reply share %d", req.MaxTokens, m.window/4)
	}
	if !strings.Contains(req.System, "You are Sprout") || !strings.Contains(req.System, testAnchors[2]) {
		m.fail("persona or anchors missing")
	}
	if i := strings.Index(req.System, memory.BlockHeader); i >= 0 {
		block := req.System[i:]
		if j := strings.Index(block, "\n\n"); j >= 0 {
			block = block[:j]
		}
		n := session.EstimateText(block)
		if n > int(DefaultMemoryBlockShare*float64(m.window)) {
			m.fail("memory block of %d tokens passes its share", n)
		}
		if n > m.maxBlock {
			m.maxBlock = n
		}
		if m.minBlock == 0 || n < m.minBlock {
			m.minBlock = n
		}
		m.blockSeen++
		if !strings.Contains(block, "[Explicit] I only use organic fertiliser") {
			m.fail("explicit preference cut from the block:\n%s", block)
		}
		for _, bad := range []string{"synthetic NPK", ") assistant:", ": thanks\n", ": ok\n", ": 감사합니다\n"} {
			if strings.Contains(block, bad) {
				m.fail("block holds %q:\n%s", bad, block)
			}
		}
	}
	// The current user message is there, in the message that starts this
	// turn.
	found := false
	for _, msg := range req.Messages {
		for _, b := range msg.Content {
			if msg.Role == model.RoleUser && b.Type == model.BlockText && b.Text == m.current {
				found = true
			}
		}
	}
	if !found {
		m.fail("current user message missing")
	}
	// Roles alternate, starting with the user; every tool_use has its
	// tool_result in the next message and every tool_result answers a
	// tool_use of the message before it.
	if req.Messages[0].Role != model.RoleUser {
		m.fail("first message is %s", req.Messages[0].Role)
	}
	for i, msg := range req.Messages {
		if i > 0 && msg.Role == req.Messages[i-1].Role {
			m.fail("two %s messages in a row at %d", msg.Role, i)
		}
		var uses []string
		for _, b := range msg.Content {
			if b.Type == model.BlockToolUse {
				uses = append(uses, b.ID)
			}
		}
		if len(uses) > 0 {
			if i+1 >= len(req.Messages) {
				m.fail("tool_use %v is the last message", uses)
				continue
			}
			results := map[string]bool{}
			for _, b := range req.Messages[i+1].Content {
				if b.Type == model.BlockToolResult {
					results[b.ToolUseID] = true
				}
			}
			for _, id := range uses {
				if !results[id] {
					m.fail("tool_use %s without its tool_result", id)
				}
			}
		}
		for _, b := range msg.Content {
			if b.Type != model.BlockToolResult {
				continue
			}
			ok := false
			if i > 0 {
				for _, p := range req.Messages[i-1].Content {
					if p.Type == model.BlockToolUse && p.ID == b.ToolUseID {
						ok = true
					}
				}
			}
			if !ok {
				m.fail("tool_result %s without its tool_use", b.ToolUseID)
			}
		}
	}
}

var topics = []string{
	"the fig tree by the south wall has curling leaves and small brown spots on the undersides",
	"my basil on the balcony keeps bolting even though I pinch the flowers off every few days",
	"the tomatoes in the second raised bed split after the heavy rain last night",
	"aphids are back on the roses and the ladybirds I bought have all flown off",
	"the lavender hedge looks woody at the base and sparse at the top after winter",
	"I want to sow carrots and radishes together in the long bed, is that a good idea",
	"slugs ate half the lettuce seedlings overnight, what can I do that is safe for the hedgehog",
	"the chilli plants on the windowsill have pale new leaves and dropped their first flowers",
	"고추 잎이 노랗게 변하고 있어요. 물을 너무 많이 준 걸까요? 배수가 빠른 화단인데도 그래요",
	"the compost heap smells sour and is full of fruit flies since I added the grass cuttings",
}

func userMessage(i int, rng *rand.Rand) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Day %d: %s.", i, topics[i%len(topics)])
	for n := rng.Intn(4); n >= 0; n-- {
		b.WriteString(" " + []string{
			"It has been warm and dry in Busan this week, around 27 degrees in the afternoon with a sea breeze.",
			"I water in the morning before work, usually about two litres per bed, a bit more for the pots.",
			"Remember that I only use organic fertiliser, so please do not suggest anything synthetic.",
			"The bed gets full sun from about ten until four and the soil is a sandy loam with fast drainage.",
			"I also noticed some ants running up and down the stems, which might be farming something.",
			"Last year the same thing happened in July and I lost most of the crop, so I want to act early.",
		}[rng.Intn(6)])
	}
	return b.String()
}

func reply(turn int, lead string) string {
	return fmt.Sprintf("%s for turn %d. First, check the leaves and stems closely in the morning light and note what you see, "+
		"because the pattern tells you more than any single spot. Second, keep watering at the base rather than over the foliage, "+
		"early in the day, so the plants go into the night dry. Third, feed only with what you already use — compost tea or a diluted "+
		"seaweed feed is enough at this stage — and stop if the new growth turns soft. Finally, look again in three or four days; if the "+
		"problem has spread to new growth, send me a photo and we can narrow it down.", lead, turn)
}

func lookupResult(args string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "lookup %s:\n", args)
	for i := 0; i < 12; i++ {
		fmt.Fprintf(&b, "- note %d: common causes include overwatering, root damage, sap-sucking insects and nutrient lockout in alkaline soil; check drainage and the undersides of leaves.\n", i)
	}
	return b.String()
}

// seedMemory writes standing records, a conflicting inference and ~25 KB of
// past exchanges (half of them the assistant's, many acknowledgements and
// repeats) for the actor.
func seedMemory(t *testing.T, st memory.Store, actor string) {
	t.Helper()
	ctx := context.Background()
	ns := memory.MustNamespace(memory.DefaultLongTermTemplate, memory.NamespaceVars{AgentID: "main", ActorID: actor})
	for _, r := range []memory.Record{
		{Namespace: ns, Strategy: memory.StrategyUserPreference, Content: "I only use organic fertiliser", Metadata: map[string]any{"type": "preference"}},
		{Namespace: ns, Strategy: memory.StrategyUserPreference, Content: "call me Jin"},
		{Namespace: ns, Strategy: memory.StrategyProcedural, Content: "keep answers practical and short"},
		{Namespace: ns, Strategy: memory.StrategySemantic, Content: "my fertiliser is a synthetic NPK blend", Metadata: map[string]any{"type": "fact"}},
		{Namespace: ns, Strategy: memory.StrategySemantic, Content: "lives in Busan; raised beds with fast drainage"},
		{Namespace: ns, Strategy: memory.StrategySemantic, Content: "has a fig tree by the south wall and basil on the balcony"},
	} {
		if _, err := st.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewSource(7))
	var events []memory.Event
	at := time.Now().Add(-10 * 24 * time.Hour)
	size := 0
	for i := 0; size < 26000; i++ {
		u := userMessage(i, rng)
		a := reply(i, "Earlier advice")
		events = append(events,
			memory.Event{ID: fmt.Sprintf("old-u%d", i), ActorID: actor, SessionID: "old", Role: "user", Text: u, Timestamp: at},
			memory.Event{ID: fmt.Sprintf("old-a%d", i), ActorID: actor, SessionID: "old", Role: "assistant", Text: a, Timestamp: at.Add(time.Second)})
		size += len(u) + len(a)
		if i%3 == 0 {
			events = append(events, memory.Event{ID: fmt.Sprintf("old-t%d", i), ActorID: actor, SessionID: "old", Role: "user",
				Text: []string{"thanks", "ok", "감사합니다"}[(i/3)%3], Timestamp: at.Add(2 * time.Second)})
		}
		at = at.Add(time.Hour)
	}
	if err := st.AppendEvents(ctx, events); err != nil {
		t.Fatal(err)
	}
}

// TestEveryRequestFitsTheWindow drives the real agent for 300 turns with a
// 4,000-token window: real retrieval over the SQLite memory store (seeded
// with ~25 KB of past exchanges, and fed every turn's events), real
// context building and summary compaction, long messages, tool calls and a
// context overflow now and then. Every request must fit the window with
// its reply room, keep the current user message and never split a
// tool_use from its tool_result.
func TestEveryRequestFitsTheWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("300 turns")
	}
	const window = 4000
	ctx := context.Background()
	const actor = "telegram:42"
	mem, err := sqlitestore.Open(t.TempDir(), sqlitestore.Options{AgentID: "main", SyncInterval: -1, NoFsync: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	seedMemory(t, mem, actor)

	st := newMemStore()
	compactions := 0
	compact := func(ctx context.Context, key session.Key) error {
		n, err := session.Compact(ctx, st, key, session.CompactOptions{KeepLast: 10,
			Summarize: func(_ context.Context, older []session.Node) (string, error) {
				// A long, realistic summary: a line per older user message, capped.
				var b strings.Builder
				b.WriteString("The user (Jin) gardens in Busan in raised beds with fast drainage and only uses organic fertiliser. ")
				for _, n := range older {
					if n.Role == session.RoleUser && b.Len() < 1500 {
						txt := n.PlainText()
						if len(txt) > 80 {
							txt = txt[:80]
						}
						b.WriteString("Asked: " + txt + ". ")
					}
				}
				return b.String(), nil
			}})
		if n != nil {
			compactions++
		}
		return err
	}
	limits := session.Limits{MaxHistoryMessages: 50, MaxHistoryTokens: 8000}
	maxHistory := 0
	history := func(ctx context.Context, key session.Key, _ string) ([]session.Node, error) {
		// As assistant.history: build, compact past 0.8 of the window, rebuild.
		nodes, err := session.BuildContext(ctx, st, key, limits)
		if err == nil && session.ShouldCompact(nodes, window, 0.8) {
			if err := compact(ctx, key); err != nil {
				return nil, err
			}
			nodes, err = session.BuildContext(ctx, st, key, limits)
		}
		maxHistory = max(maxHistory, session.EstimateNodesTokens(nodes))
		return nodes, err
	}
	m := &budgetModel{window: window}
	tools := []tool.Tool{
		&bigTool{name: "plant_lookup", desc: "Look up care notes, pests and diseases for a plant species.",
			schema: `{"type":"object","properties":{"plant":{"type":"string","description":"common or botanical name"},"detail":{"type":"string","enum":["care","pests","diseases"]}},"required":["plant"]}`,
			result: lookupResult},
		&bigTool{name: "weather", desc: "Forecast for a place: temperature, rain and wind for the next days (Open-Meteo).",
			schema: `{"type":"object","properties":{"place":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":16}},"required":["place"]}`,
			result: func(string) string {
				return strings.Repeat("day: 24-28°C, rain 10%, wind 3 m/s from the south-east\n", 7)
			}},
	}
	a, err := New(Options{AgentID: "main", MaxToolIterations: 6, ToolTimeout: time.Second, MaxTokens: 4096, ContextWindow: window,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, Deps{
		Sessions: st, Models: m, History: history, Compact: compact,
		Retriever: memory.NewRetriever(mem, memory.RetrieveOptions{Timeout: 10 * time.Second}),
		Recorder:  storeRecorder{mem},
		Persona:   Persona{Text: testPersona, Anchors: testAnchors},
		Skills:    testSkills,
		Tools:     tools,
	})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	for i := 1; i <= 300; i++ {
		msg := userMessage(i, rng)
		m.mu.Lock()
		m.turn, m.current = i, msg
		m.mu.Unlock()
		res, err := a.Invoke(ctx, Request{Message: msg, ActorID: actor, Channel: "telegram"})
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		if res.Text == "" {
			t.Fatalf("turn %d: no reply", i)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.failures {
		t.Error(f)
	}
	if compactions == 0 || m.overflows == 0 || m.blockSeen == 0 {
		t.Fatalf("compactions %d, overflows %d, requests with a memory block %d: the run did not exercise budgeting", compactions, m.overflows, m.blockSeen)
	}
	// Compaction alone would not have kept requests in the window: the
	// history it leaves plus the system prompt and the reply room pass it.
	if maxHistory+m.maxSystem+window/4 <= window {
		t.Fatalf("history %d + system %d + reply %d fit anyway: budgeting not exercised", maxHistory, m.maxSystem, window/4)
	}
	t.Logf("%d requests; max estimate %d + reply %d = %d ≤ %d; max system prompt %d; memory block %d–%d tokens (budget %d); history up to %d tokens before fitting; %d compactions, %d overflows",
		m.calls, m.maxEst, window/4, m.maxEst+window/4, window, m.maxSystem, m.minBlock, m.maxBlock, int(DefaultMemoryBlockShare*window), maxHistory, compactions, m.overflows)
}

func msgText(m model.Message) string {
	var b strings.Builder
	for _, bl := range m.Content {
		b.WriteString(bl.Text)
	}
	return b.String()
}

// fitRequest unit cases: what goes first, what never goes.
func TestFitRequestSacrificeOrder(t *testing.T) {
	text := func(s string) []model.Block { return []model.Block{model.Text(s)} }
	long := strings.Repeat("history words ", 40) // ~140 tokens
	msgs := []model.Message{
		{Role: model.RoleUser, Content: append(text(session.SummaryPrefix+"earlier: figs and aphids"), model.Text("u0 "+long))},
		{Role: model.RoleAssistant, Content: []model.Block{model.Text("a0 "), {Type: model.BlockToolUse, ID: "x1", Name: "lookup", Input: json.RawMessage(`{}`)}}},
		{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockToolResult, ToolUseID: "x1", Text: "r1 " + long}, model.Text("u1 " + long)}},
		{Role: model.RoleAssistant, Content: text("a1 " + long)},
		{Role: model.RoleUser, Content: text("u2 " + long)},
		{Role: model.RoleAssistant, Content: text("a2 " + long)},
		{Role: model.RoleUser, Content: text("current question")},
		{Role: model.RoleAssistant, Content: []model.Block{{Type: model.BlockToolUse, ID: "x2", Name: "lookup", Input: json.RawMessage(`{}`)}}},
		{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockToolResult, ToolUseID: "x2", Text: strings.Repeat("big result ", 400)}}},
	}
	orig := fmt.Sprint(msgs)
	all := estimateMessages(msgs)
	sys := "persona and anchors"
	for _, room := range []int{all, all - 100, all - 300, all - 600, all - 900, 1200, 400, 60, 20} {
		req := &model.Request{System: sys, Messages: msgs}
		rep := fitRequest(req, 6, room)
		got := req.Messages
		if fmt.Sprint(msgs) != orig {
			t.Fatal("fitRequest modified its input")
		}
		if rep.Estimate != EstimateRequest(req) {
			t.Fatalf("room %d: report %d, estimate %d", room, rep.Estimate, EstimateRequest(req))
		}
		if !rep.Over && rep.Estimate > room {
			t.Fatalf("room %d: estimate %d and not over", room, rep.Estimate)
		}
		if room == 20 && !rep.Over {
			t.Fatalf("room 20: fitted to %d", rep.Estimate)
		}
		if rep.Over {
			// Hopeless (the system prompt and this turn alone pass the
			// room): nothing is cut for nothing.
			if room != 20 || fmt.Sprint(got) != orig {
				t.Fatalf("room %d: over, and messages changed: %v", room, rep)
			}
			continue
		}
		var all []string
		for _, m := range got {
			all = append(all, msgText(m))
		}
		joined := strings.Join(all, "|")
		if !strings.Contains(joined, "current question") || got[0].Role != model.RoleUser {
			t.Fatalf("room %d: current message lost or bad head: %q", room, joined)
		}
		// The summary goes only after all other history.
		hasSummary := strings.Contains(joined, session.SummaryPrefix)
		hasHistory := strings.Contains(joined, "a2 ")
		if !hasSummary && hasHistory {
			t.Fatalf("room %d: summary dropped before history", room)
		}
		// Oldest first: a kept message implies every later one is kept.
		for _, pair := range [][2]string{{"u0 ", "u1 "}, {"u1 ", "a1 "}, {"a1 ", "u2 "}, {"u2 ", "a2 "}} {
			if strings.Contains(joined, pair[0]) && !strings.Contains(joined, pair[1]) {
				t.Fatalf("room %d: %q kept but the newer %q dropped", room, pair[0], pair[1])
			}
		}
		// Pairs: no r1 without the x1 tool_use.
		if strings.Contains(joined, "r1 ") != strings.Contains(fmt.Sprint(got), "x1") {
			t.Fatalf("room %d: x1 pair split: %v", room, got)
		}
		t.Logf("room %d: estimate %d, dropped %d messages, summary dropped %v, tool results cut %d, over %v", room, rep.Estimate, rep.DroppedMessages, rep.DroppedSummary, rep.TruncatedTools, rep.Over)
		if room == 400 && (rep.TruncatedTools != 1 || rep.Over || !strings.Contains(joined, truncatedMarker)) {
			t.Fatalf("room 400: this turn's tool result not shortened to fit: %+v", rep)
		}
	}
}

// The memory block keeps its share while history gives way; a user
// message too big for both shrinks the block below its share (history is
// gone by then) but is itself kept whole.
func TestMemoryBlockBudgetInTheAgent(t *testing.T) {
	var hits []memory.Hit
	hits = append(hits, memory.Hit{Record: memory.Record{ID: "e1", Strategy: memory.StrategyUserPreference, Content: "I only use organic fertiliser"}})
	for i := 0; i < 120; i++ {
		hits = append(hits, memory.Hit{Record: memory.Record{ID: fmt.Sprintf("i%d", i), Strategy: memory.StrategySemantic,
			Content: fmt.Sprintf("%s number %d grows in bed %d near the %s", topics[i%len(topics)], i, i%9, []string{"shed", "pond", "gate", "wall"}[i%4])}})
	}
	m := &scriptModel{}
	st := newMemStore()
	a, err := New(Options{AgentID: "main", ContextWindow: 4000, MaxTokens: 4096}, Deps{Sessions: st, Models: m, Retriever: fixedRetriever{hits},
		Persona: Persona{Text: testPersona, Anchors: testAnchors}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		if _, err := a.Invoke(ctx, Request{Message: userMessage(i, rand.New(rand.NewSource(int64(i)))), ActorID: "api:u"}); err != nil {
			t.Fatal(err)
		}
	}
	reqs := m.requests()
	last := reqs[len(reqs)-1]
	i := strings.Index(last.System, memory.BlockHeader)
	if i < 0 {
		t.Fatal("no memory block")
	}
	block := strings.TrimSpace(last.System[i:strings.LastIndex(last.System, "\n\nCurrent time")])
	n := session.EstimateText(block)
	if n > 600 || n < 500 {
		t.Fatalf("memory block %d tokens; want its full share (≤ 600, and nearly all of it while history is cut)", n)
	}
	if len(last.Messages) >= 2*30-1 {
		t.Fatalf("history not cut: %d messages", len(last.Messages))
	}
	if EstimateRequest(&last)+last.MaxTokens > 4000 || last.MaxTokens != 1000 {
		t.Fatalf("request %d + %d", EstimateRequest(&last), last.MaxTokens)
	}
	// A message that leaves no room for memory: no block, the message kept.
	huge := strings.Repeat("a very long message about the garden ", 300) // ~2775 tokens: ~75 left for memory
	res, err := a.Invoke(ctx, Request{Message: huge, ActorID: "api:u"})
	if err != nil {
		t.Fatal(err)
	}
	req := m.requests()[len(m.requests())-1]
	if i := strings.Index(req.System, memory.BlockHeader); i >= 0 {
		if n := session.EstimateText(req.System[i:strings.LastIndex(req.System, "\n\nCurrent time")]); n > 100 {
			t.Fatalf("memory block of %d tokens next to a message that needs its room", n)
		}
	}
	if msgText(req.Messages[len(req.Messages)-1]) != huge || EstimateRequest(&req)+req.MaxTokens > 4000 {
		t.Fatalf("huge turn: estimate %d", EstimateRequest(&req))
	}
	t.Logf("huge turn: %d memories, %d messages, estimate %d", res.MemoriesUsed, len(req.Messages), EstimateRequest(&req))
}

// The one-pass default memory block (no Deps.RenderMemory) is the block
// the explicit memory.RenderBlock renderer gives, at every budget: the
// same records and the same text.
func TestDefaultMemoryBlockMatchesRenderer(t *testing.T) {
	var hits []memory.Hit
	hits = append(hits, memory.Hit{Record: memory.Record{ID: "e1", Strategy: memory.StrategyUserPreference, Content: "I only use organic fertiliser"}})
	hits = append(hits, memory.Hit{Record: memory.Record{ID: "e1", Strategy: memory.StrategyUserPreference, Content: "I only use organic fertiliser"}}) // duplicate
	for i := 0; i < 40; i++ {
		hits = append(hits, memory.Hit{Record: memory.Record{ID: fmt.Sprintf("i%d", i), Strategy: memory.StrategySemantic,
			Content: fmt.Sprintf("%s number %d grows in bed %d near the %s ", topics[i%len(topics)], i%7, i%9, []string{"shed", "pond", "gate", "wall"}[i%4])}})
	}
	fast := &Agent{opt: Options{ContextWindow: 4000}}
	slow := &Agent{opt: Options{ContextWindow: 4000}, deps: Deps{RenderMemory: memory.RenderBlock}}
	for room := -1; room <= 700; room++ {
		ft, fh := fast.memoryBlock(hits, room)
		st, sh := slow.memoryBlock(hits, room)
		if ft != st || len(fh) != len(sh) {
			t.Fatalf("room %d: default block %d records %q, renderer's %d records %q", room, len(fh), ft, len(sh), st)
		}
		for i := range fh {
			if fh[i].Record.ID != sh[i].Record.ID {
				t.Fatalf("room %d: record %d is %s, want %s", room, i, fh[i].Record.ID, sh[i].Record.ID)
			}
		}
	}
	// Hits the retriever assembled already are not filtered again: the
	// same block as from the raw hits.
	pre := &Agent{opt: Options{ContextWindow: 4000}, deps: Deps{HitsAssembled: true}}
	assembled := memory.Assemble(hits, len(hits))
	for room := 1; room <= 700; room += 7 {
		pt, ph := pre.memoryBlock(assembled, room)
		st, sh := slow.memoryBlock(hits, room)
		if pt != st || len(ph) != len(sh) {
			t.Fatalf("room %d: assembled hits give %d records %q, raw hits %d records %q", room, len(ph), pt, len(sh), st)
		}
	}
	// Without a window there is no budget.
	ft, fh := (&Agent{}).memoryBlock(hits, 5)
	st, sh := (&Agent{deps: Deps{RenderMemory: memory.RenderBlock}}).memoryBlock(hits, 5)
	if ft != st || len(fh) != len(sh) || len(fh) < 10 {
		t.Fatalf("no window: %d vs %d records", len(fh), len(sh))
	}
}
