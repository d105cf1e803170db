package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/metrics"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool"
)

// memStore is a minimal in-memory session.Store for unit tests of the turn;
// the conformance-tested backends are exercised end to end elsewhere.
type memStore struct {
	mu    sync.Mutex
	nodes map[string][]session.Node
	leaf  map[string]string
}

func newMemStore() *memStore {
	return &memStore{nodes: map[string][]session.Node{}, leaf: map[string]string{}}
}
func (m *memStore) k(key session.Key) string { return keyString(key) }
func (m *memStore) Append(_ context.Context, key session.Key, nodes ...session.Node) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nodes[m.k(key)] = append(m.nodes[m.k(key)], nodes...)
	m.leaf[m.k(key)] = nodes[len(nodes)-1].ID
	return nil
}
func (m *memStore) Leaf(_ context.Context, key session.Key) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leaf[m.k(key)], nil
}
func (m *memStore) SetLeaf(_ context.Context, key session.Key, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leaf[m.k(key)] = id
	return nil
}
func (m *memStore) Path(_ context.Context, key session.Key, leaf string, max int) ([]session.Node, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	byID := map[string]session.Node{}
	for _, n := range m.nodes[m.k(key)] {
		byID[n.ID] = n
	}
	var out []session.Node
	for id := leaf; id != "" && (max <= 0 || len(out) < max); {
		n := byID[id]
		out = append([]session.Node{n}, out...)
		id = n.ParentID
	}
	return out, nil
}
func (m *memStore) Nodes(_ context.Context, key session.Key) ([]session.Node, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]session.Node(nil), m.nodes[m.k(key)]...), nil
}
func (m *memStore) List(context.Context, string) ([]session.Key, error) { return nil, nil }
func (m *memStore) Clear(context.Context, session.Key) error            { return nil }
func (m *memStore) Close() error                                        { return nil }

// scriptModel records requests and answers from a script; when the script
// is exhausted it echoes the last user text.
type scriptModel struct {
	mu     sync.Mutex
	reqs   []model.Request
	vision []bool
	script []func(*model.Request) (*model.Response, error)
	delay  time.Duration
}

func (s *scriptModel) Generate(ctx context.Context, req *model.Request, vision bool) (*model.Response, error) {
	s.mu.Lock()
	cp := *req
	cp.Messages = append([]model.Message(nil), req.Messages...)
	s.reqs = append(s.reqs, cp)
	s.vision = append(s.vision, vision)
	var f func(*model.Request) (*model.Response, error)
	if len(s.script) > 0 {
		f, s.script = s.script[0], s.script[1:]
	}
	s.mu.Unlock()
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	if f != nil {
		return f(req)
	}
	last := req.Messages[len(req.Messages)-1]
	txt := ""
	for _, b := range last.Content {
		if b.Type == model.BlockText {
			txt = b.Text
		}
	}
	return &model.Response{Model: "fake", Content: []model.Block{model.Text("echo: " + txt)}, StopReason: model.StopEndTurn}, nil
}

func (s *scriptModel) requests() []model.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]model.Request(nil), s.reqs...)
}

func toolCall(id, name, args string) func(*model.Request) (*model.Response, error) {
	return func(*model.Request) (*model.Response, error) {
		return &model.Response{Model: "fake", StopReason: model.StopToolUse, Content: []model.Block{
			{Type: model.BlockToolUse, ID: id, Name: name, Input: json.RawMessage(args)}}}, nil
	}
}

type fakeTool struct {
	name  string
	class tool.Class
	run   func(ctx context.Context, c tool.Call) (string, error)
	calls int
	mu    sync.Mutex
}

func (f *fakeTool) Name() string            { return f.name }
func (f *fakeTool) Description() string     { return "the " + f.name + " tool" }
func (f *fakeTool) Schema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (f *fakeTool) Class() tool.Class       { return f.class }
func (f *fakeTool) Run(ctx context.Context, c tool.Call) (string, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	if f.run != nil {
		return f.run(ctx, c)
	}
	return f.name + " ok", nil
}

type fixedRetriever struct{ hits []memory.Hit }

func (f fixedRetriever) Recall(context.Context, string, string, string) ([]memory.Hit, error) {
	return f.hits, nil
}

type failingRetriever struct{}

func (failingRetriever) Recall(ctx context.Context, _, _, _ string) ([]memory.Hit, error) {
	return nil, context.DeadlineExceeded
}

// newState returns a real state engine in which actor is at level: one
// threat stimulus of a persona whose threat delta lowers stability from
// 0.75 to 0.45 (WARNING) or 0.25 (CRITICAL). The clock is frozen, so the
// level does not decay during the test.
func newState(t *testing.T, actor string, level state.Level) *state.Engine {
	t.Helper()
	p := state.DefaultPersona()
	drop := map[state.Level]float64{state.Warning: -0.30, state.Critical: -0.50}[level]
	p.Deltas = maps.Clone(p.Deltas)
	p.Deltas[state.Threat] = state.Vector{0, 0, 0, 0, drop, 0}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	e, err := state.Open(t.TempDir(), state.Options{Persona: p, NoSync: true, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if level != state.Normal {
		if _, err := e.Apply(context.Background(), actor, 0, state.Stimulus{Category: state.Threat, Intensity: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := e.Level(context.Background(), actor); err != nil || got != level {
		t.Fatalf("state engine at %v (%v), want %v", got, err, level)
	}
	return e
}

// newGate opens a real approval gate in a temporary directory: read tools
// always, write tools ask, exec tools never (SPEC §6.3 defaults), unless
// rules say otherwise.
func newGate(t *testing.T, rules map[string]approval.Rule) *approval.Gate {
	t.Helper()
	g, err := approval.Open(t.TempDir(), approval.Options{Rules: rules, SyncRules: rules != nil})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func requests(t *testing.T, g *approval.Gate) []approval.Request {
	t.Helper()
	rs, err := g.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func newTestAgent(t *testing.T, m Models, deps Deps) (*Agent, *memStore) {
	t.Helper()
	st := newMemStore()
	deps.Sessions = st
	deps.Models = m
	if deps.Persona.Text == "" {
		deps.Persona = Persona{Text: "You are Sprout, a gardening helper.", Anchors: []string{"I am Sprout.", "I never pretend to be human."}}
	}
	a, err := New(Options{AgentID: "main", MaxToolIterations: 4, ToolTimeout: 200 * time.Millisecond}, deps)
	if err != nil {
		t.Fatal(err)
	}
	return a, st
}

func TestSystemPromptOrder(t *testing.T) {
	m := &scriptModel{}
	hits := []memory.Hit{
		{Record: memory.Record{Content: "User has a fig tree", Strategy: memory.StrategySemantic}},
		{Record: memory.Record{Content: "Only uses organic fertiliser", Strategy: memory.StrategyUserPreference}},
	}
	a, _ := newTestAgent(t, m, Deps{
		Retriever: fixedRetriever{hits},
		Skills:    "## Skills\n- weather: forecasts",
		Tools:     []tool.Tool{&fakeTool{name: "lookup", class: tool.ClassRead}},
	})
	res, err := a.Invoke(context.Background(), Request{Message: "how do I treat aphids?", ActorID: "telegram:1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.MemoriesUsed != 2 || res.Text != "echo: how do I treat aphids?" {
		t.Fatalf("result = %+v", res)
	}
	sys := m.requests()[0].System
	order := []string{"You are Sprout", "## Identity anchors", "I am Sprout.", "What you remember about this user", "[Inferred] User has a fig tree", "## Skills", "## Tools", "lookup: the lookup tool"}
	last := -1
	for _, s := range order {
		i := strings.Index(sys, s)
		if i < 0 || i < last {
			t.Fatalf("system prompt: %q missing or out of order (at %d, previous %d):\n%s", s, i, last, sys)
		}
		last = i
	}
	if strings.Contains(sys, "re-asserted") {
		t.Fatalf("anchors re-asserted at NORMAL level:\n%s", sys)
	}
	// The default renderer is the production one.
	if !strings.Contains(sys, strings.TrimSpace(memory.RenderBlock(hits))) {
		t.Fatalf("memory block is not memory.RenderBlock's:\n%s", sys)
	}
	if got := res.Metadata["breaker_level"]; got != "NORMAL" {
		t.Fatalf("breaker_level = %#v", got)
	}
}

func TestWarningRemovesWriteToolsAndReinjectsAnchors(t *testing.T) {
	m := &scriptModel{}
	a, _ := newTestAgent(t, m, Deps{
		State: newState(t, "api:u", state.Warning),
		Gate:  newGate(t, nil),
		Tools: []tool.Tool{&fakeTool{name: "lookup", class: tool.ClassRead}, &fakeTool{name: "notes", class: tool.ClassWrite}},
	})
	res, err := a.Invoke(context.Background(), Request{Message: "hi", ActorID: "api:u"})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Metadata["breaker_level"]; got != "WARNING" {
		t.Fatalf("breaker_level = %#v, want the string WARNING", got)
	}
	req := m.requests()[0]
	var names []string
	for _, td := range req.Tools {
		names = append(names, td.Name)
	}
	if len(names) != 1 || names[0] != "lookup" {
		t.Fatalf("tools offered in WARNING = %v, want only lookup", names)
	}
	if strings.Count(req.System, "I am Sprout.") != 2 || !strings.Contains(req.System, "re-asserted: safe mode WARNING") {
		t.Fatalf("anchors not re-injected:\n%s", req.System)
	}
}

func TestToolNotInListIsRefused(t *testing.T) {
	write := &fakeTool{name: "notes", class: tool.ClassWrite}
	m := &scriptModel{script: []func(*model.Request) (*model.Response, error){toolCall("t1", "notes", `{"text":"x"}`)}}
	a, st := newTestAgent(t, m, Deps{State: newState(t, "api:u", state.Critical), Gate: newGate(t, nil), Tools: []tool.Tool{write}})
	res, err := a.Invoke(context.Background(), Request{Message: "write it", ActorID: "api:u"})
	if err != nil {
		t.Fatal(err)
	}
	if write.calls != 0 {
		t.Fatal("removed tool ran")
	}
	reqs := m.requests()
	tr := reqs[1].Messages[len(reqs[1].Messages)-1].Content[0]
	if tr.Type != model.BlockToolResult || !tr.IsError || !strings.Contains(tr.Text, "not available") {
		t.Fatalf("tool result = %+v", tr)
	}
	if res.Text == "" {
		t.Fatal("no reply")
	}
	nodes, _ := st.Nodes(context.Background(), session.Key{AgentID: "main", Channel: "api", ID: "u"})
	if len(nodes) != 4 { // user, assistant tool_use, tool result, assistant
		t.Fatalf("persisted %d nodes, want 4", len(nodes))
	}
}

func TestLoopStopsAtIterationCap(t *testing.T) {
	rd := &fakeTool{name: "lookup", class: tool.ClassRead}
	var script []func(*model.Request) (*model.Response, error)
	for i := 0; i < 10; i++ {
		script = append(script, toolCall(fmt.Sprintf("t%d", i), "lookup", `{}`))
	}
	m := &scriptModel{script: script}
	a, _ := newTestAgent(t, m, Deps{Tools: []tool.Tool{rd}})
	res, err := a.Invoke(context.Background(), Request{Message: "loop", ActorID: "api:u"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.requests()) != 4 || rd.calls != 4 {
		t.Fatalf("model calls %d, tool calls %d; want 4 each", len(m.requests()), rd.calls)
	}
	if !strings.Contains(res.Text, "stopped after 4 tool steps") {
		t.Fatalf("reply = %q", res.Text)
	}
}

func TestToolPanicAndTimeoutBecomeErrorResults(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context, c tool.Call) (string, error)
		want string
	}{
		{"panic", func(context.Context, tool.Call) (string, error) { panic("boom") }, "panic"},
		{"timeout", func(ctx context.Context, _ tool.Call) (string, error) {
			<-ctx.Done()
			time.Sleep(10 * time.Millisecond)
			return "", ctx.Err()
		}, "timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &scriptModel{script: []func(*model.Request) (*model.Response, error){toolCall("t1", "bad", `{}`)}}
			a, _ := newTestAgent(t, m, Deps{Tools: []tool.Tool{&fakeTool{name: "bad", class: tool.ClassRead, run: tc.run}}})
			res, err := a.Invoke(context.Background(), Request{Message: "go", ActorID: "api:u"})
			if err != nil {
				t.Fatal(err)
			}
			reqs := m.requests()
			tr := reqs[1].Messages[len(reqs[1].Messages)-1].Content[0]
			if !tr.IsError || !strings.Contains(tr.Text, tc.want) {
				t.Fatalf("tool result = %+v", tr)
			}
			if res.Text == "" {
				t.Fatal("turn did not answer")
			}
		})
	}
}

// The timeout itself is memory.Retrieval's (see its tests); a retriever
// that fails anyway leaves the turn without memory, never failed.
func TestRetrievalFailureContinuesWithoutMemory(t *testing.T) {
	m := &scriptModel{}
	a, _ := newTestAgent(t, m, Deps{Retriever: failingRetriever{}})
	res, err := a.Invoke(context.Background(), Request{Message: "hello", ActorID: "api:u"})
	if err != nil {
		t.Fatal(err)
	}
	if res.MemoriesUsed != 0 || strings.Contains(m.requests()[0].System, "What you remember") {
		t.Fatalf("memory used despite timeout: %+v", res)
	}
}

func TestNoModelConfigured(t *testing.T) {
	a, _ := newTestAgent(t, nil, Deps{})
	a.deps.Models = nil
	_, err := a.Invoke(context.Background(), Request{Message: "hello", ActorID: "api:u"})
	if !errors.Is(err, model.ErrNotConfigured) || ErrorCode(err) != "MODEL_NOT_CONFIGURED" {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "MODEL_ID") {
		t.Fatalf("message does not name MODEL_ID: %v", err)
	}
}

func TestInvalidRequests(t *testing.T) {
	a, _ := newTestAgent(t, &scriptModel{}, Deps{})
	for _, tc := range []struct {
		req  Request
		code string
	}{
		{Request{ActorID: "api:u"}, "INVALID_REQUEST"},
		{Request{Message: "x"}, "INVALID_ACTOR_ID"},
		{Request{Message: "x", ActorID: "a\x00b"}, "INVALID_ACTOR_ID"},
		{Request{Message: "x", ActorID: strings.Repeat("a", 300)}, "INVALID_ACTOR_ID"},
		{Request{Message: "x", ActorID: "u", SessionID: "s\n1"}, "INVALID_REQUEST"},
		{Request{Message: "x", ActorID: "u", Images: []Image{{Data: []byte{1}, MediaType: "text/html"}}}, "INVALID_REQUEST"},
		{Request{Message: " \n\t ", ActorID: "u"}, "INVALID_REQUEST"},
		{Request{Message: "x", ActorID: "u", Images: make([]Image, 11)}, "INVALID_REQUEST"},
		{Request{Message: "x", ActorID: "u", Images: []Image{{Data: make([]byte, MaxImageBytes+1), MediaType: "image/png"}}}, "INVALID_REQUEST"},
		{Request{Message: "\u200b\u200b", ActorID: "u"}, "INVALID_REQUEST"},
		{Request{Message: "x", ActorID: "u", Images: []Image{{Data: []byte("<html><script>alert(1)</script>"), MediaType: "image/png"}}}, "INVALID_REQUEST"},
		{Request{Message: "x", ActorID: "   "}, "INVALID_ACTOR_ID"},
		{Request{Message: "a\x00b", ActorID: "u"}, "INVALID_REQUEST"},
		{Request{Message: "a\xffb", ActorID: "u"}, "INVALID_REQUEST"},
	} {
		_, err := a.Invoke(context.Background(), tc.req)
		if got := ErrorCode(err); got != tc.code {
			t.Errorf("%+v: code %q, want %q (%v)", tc.req, got, tc.code, err)
		}
	}
}

func TestImageTurnUsesVisionWithSameSystemPrompt(t *testing.T) {
	m := &scriptModel{}
	a, _ := newTestAgent(t, m, Deps{})
	ctx := context.Background()
	if _, err := a.Invoke(ctx, Request{Message: "what is this leaf?", ActorID: "api:u", Images: []Image{{Data: []byte("\xff\xd8\xff\xe0jpeg"), MediaType: "image/jpeg"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Invoke(ctx, Request{Message: "thanks", ActorID: "api:u"}); err != nil {
		t.Fatal(err)
	}
	reqs := m.requests()
	if !m.vision[0] || m.vision[1] {
		t.Fatalf("vision flags = %v", m.vision)
	}
	strip := func(s string) string { return s[:strings.Index(s, "Current time:")] }
	if strip(reqs[0].System) != strip(reqs[1].System) {
		t.Fatal("vision and text turns got different system prompts")
	}
	if reqs[0].Messages[0].Content[0].Type != model.BlockImage {
		t.Fatalf("image block missing: %+v", reqs[0].Messages[0])
	}
	// History carries a marker, not the bytes.
	for _, b := range reqs[1].Messages[0].Content {
		if b.Type == model.BlockImage {
			t.Fatal("image bytes resent in history")
		}
	}
}

func TestSameSessionTurnsDoNotInterleave(t *testing.T) {
	m := &scriptModel{delay: time.Millisecond}
	a, st := newTestAgent(t, m, Deps{})
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if _, err := a.Invoke(context.Background(), Request{Message: fmt.Sprintf("m%d", i), ActorID: "api:u"}); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	nodes, _ := st.Nodes(context.Background(), session.Key{AgentID: "main", Channel: "api", ID: "u"})
	if len(nodes) != 100 {
		t.Fatalf("%d nodes, want 100", len(nodes))
	}
	for i := 0; i < 100; i += 2 {
		u, r := nodes[i], nodes[i+1]
		if u.Role != session.RoleUser || r.Role != session.RoleAssistant || r.Text != "echo: "+u.Text || r.ParentID != u.ID {
			t.Fatalf("interleaved at %d: %+v / %+v", i, u, r)
		}
		if i > 0 && u.ParentID != nodes[i-1].ID {
			t.Fatalf("turn %d not chained to the previous one", i/2)
		}
	}
}

func TestKeyedFIFOServesInArrivalOrder(t *testing.T) {
	k := newKeyedFIFO()
	unlock, _ := k.Lock(context.Background(), "s")
	var order []int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			u, err := k.Lock(context.Background(), "s")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			u()
		}(i)
		// Wait until goroutine i is queued before starting i+1.
		for {
			k.mu.Lock()
			n := len(k.queues["s"].waiters)
			k.mu.Unlock()
			if n == i+1 {
				break
			}
			time.Sleep(time.Microsecond)
		}
	}
	unlock()
	wg.Wait()
	for i, v := range order {
		if v != i {
			t.Fatalf("served order %v", order)
		}
	}
	if len(k.queues) != 0 {
		t.Fatal("idle queue not removed")
	}
}

func TestApprovalPauseAndResume(t *testing.T) {
	write := &fakeTool{name: "notes", class: tool.ClassWrite}
	m := &scriptModel{script: []func(*model.Request) (*model.Response, error){toolCall("t1", "notes", `{"text":"fig pruned"}`)}}
	gate := newGate(t, nil)
	a, st := newTestAgent(t, m, Deps{Gate: gate, State: newState(t, "api:u", state.Normal), Tools: []tool.Tool{write}})
	ctx := context.Background()
	res, err := a.Invoke(ctx, Request{Message: "note that I pruned the fig", ActorID: "api:u"})
	if err != nil {
		t.Fatal(err)
	}
	if res.PendingApproval == nil || write.calls != 0 {
		t.Fatalf("expected a pending approval, got %+v (calls %d)", res, write.calls)
	}
	key := session.Key{AgentID: "main", Channel: "api", ID: "u"}
	nodes, _ := st.Nodes(ctx, key)
	if len(nodes) != 1 || nodes[0].Role != session.RoleUser {
		t.Fatalf("while paused the session holds %d nodes", len(nodes))
	}
	id := res.PendingApproval.RequestID
	// The paused turn is beside the ledger, not in it.
	if ledger, _ := os.ReadFile(gate.Path()); bytes.Contains(ledger, []byte("pruned the fig")) {
		t.Fatal("the ledger holds the conversation")
	}
	// The operator approves; the callback gets the stored reference and
	// loads the paused turn, as the server's wiring does.
	var resume json.RawMessage
	var loadErr error
	gate.OnDecision(func(r approval.Request, approved bool) {
		if r.ID == id && approved {
			resume, loadErr = gate.LoadResume(r)
		}
	})
	if err := gate.Decide(ctx, id, true, "cli"); err != nil {
		t.Fatal(err)
	}
	if loadErr != nil || !bytes.Contains(resume, []byte("pruned the fig")) {
		t.Fatalf("LoadResume in OnDecision: %s, %v", resume, loadErr)
	}
	// A fresh agent stands in for a restarted process.
	b, _ := New(a.opt, a.deps)
	out, err := b.Resume(ctx, id, true, "", resume)
	if err != nil {
		t.Fatal(err)
	}
	if write.calls != 1 || out.PendingApproval != nil {
		t.Fatalf("calls=%d out=%+v", write.calls, out)
	}
	// Redeeming again is refused and runs nothing.
	if _, err := b.Resume(ctx, id, true, "", resume); !errors.Is(err, approval.ErrConsumed) {
		t.Fatalf("replayed approval: %v, want approval.ErrConsumed", err)
	}
	if write.calls != 1 {
		t.Fatalf("tool ran %d times", write.calls)
	}
	nodes, _ = st.Nodes(ctx, key)
	roles := ""
	for _, n := range nodes[:4] {
		roles += n.Role + " "
	}
	if roles != "user assistant tool assistant " {
		t.Fatalf("persisted roles %q", roles)
	}
	// The run's outcome is in the ledger, which still verifies.
	if ledger, _ := os.ReadFile(gate.Path()); !bytes.Contains(ledger, []byte(`"type":"result"`)) {
		t.Fatal("no result entry for the approved run")
	}
	if rep, err := gate.Verify(ctx); err != nil || !rep.OK {
		t.Fatalf("ledger: %+v %v", rep, err)
	}
}

func TestSessionsBelongToTheirActor(t *testing.T) {
	m := &scriptModel{}
	a, _ := newTestAgent(t, m, Deps{})
	ctx := context.Background()
	if _, err := a.Invoke(ctx, Request{Message: "my secret garden plan", ActorID: "api:jin", SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	// Another actor naming the same session_id gets a session of its own.
	res, err := a.Invoke(ctx, Request{Message: "what did I say before?", ActorID: "api:evil", SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(allModelText(m.requests()[1]), "secret garden") || res.SessionID == "jin~s1" {
		t.Fatalf("evil reached jin's session %q", res.SessionID)
	}
	// An actor whose own default key would collide with another's session
	// ("~" joins actor and session) is refused before anything reaches
	// the model.
	n := len(m.requests())
	_, err = a.Invoke(ctx, Request{Message: "hi", ActorID: "api:jin~s1"})
	if ErrorCode(err) != "INVALID_ACTOR_ID" || len(m.requests()) != n {
		t.Fatalf("colliding actor: %v", err)
	}
	// Default sessions of actors that differ only in prefix stay apart.
	if _, err := a.Invoke(ctx, Request{Message: "hi", ActorID: "api:me"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Invoke(ctx, Request{Message: "hi", ActorID: "other:me"}); err != nil {
		t.Fatalf("other:me collided with api:me: %v", err)
	}
	for _, tc := range []struct {
		req  Request
		want string
	}{
		{Request{ActorID: "telegram:5", Channel: "telegram"}, "5"},
		{Request{ActorID: "other:5", Channel: "telegram"}, "other:5"},
		{Request{ActorID: "api:zed:carl", Channel: "api"}, "api:zed:carl"},
		{Request{ActorID: "telegram:5", Channel: "telegram", SessionID: "new1"}, "5~new1"},
		{Request{ActorID: "api:bob", Channel: "telegram", SessionID: "123"}, "api:bob~123"},
	} {
		if got := a.sessionKey(tc.req).ID; got != tc.want {
			t.Errorf("sessionKey(%+v) = %q, want %q", tc.req, got, tc.want)
		}
	}
}

func allModelText(r model.Request) string {
	var b strings.Builder
	for _, m := range r.Messages {
		for _, c := range m.Content {
			b.WriteString(c.Text + "\n")
		}
	}
	return b.String()
}

func TestMalformedToolArgsNeverReachTheGate(t *testing.T) {
	write := &fakeTool{name: "notes", class: tool.ClassWrite}
	m := &scriptModel{script: []func(*model.Request) (*model.Response, error){toolCall("t1", "notes", `{not json`)}}
	gate := newGate(t, nil)
	a, _ := newTestAgent(t, m, Deps{Gate: gate, Tools: []tool.Tool{write}})
	res, err := a.Invoke(context.Background(), Request{Message: "note it", ActorID: "api:u"})
	if err != nil {
		t.Fatal(err)
	}
	if res.PendingApproval != nil || len(requests(t, gate)) != 0 || write.calls != 0 {
		t.Fatalf("malformed call reached the gate: %+v", res)
	}
	reqs := m.requests()
	tr := reqs[1].Messages[len(reqs[1].Messages)-1].Content[0]
	if !tr.IsError || !strings.Contains(tr.Text, "JSON object") {
		t.Fatalf("tool result %+v", tr)
	}
}

type streamModel struct{ scriptModel }

func (s *streamModel) GenerateStream(ctx context.Context, req *model.Request, vision bool, onDelta func(string)) (*model.Response, error) {
	resp, err := s.Generate(ctx, req, vision)
	if err != nil {
		return nil, err
	}
	txt := resp.TextContent()
	for i := 0; i < len(txt); i += 4 {
		onDelta(txt[i:min(i+4, len(txt))])
	}
	return resp, nil
}

func TestDeltasStreamWhenAsked(t *testing.T) {
	m := &streamModel{}
	a, _ := newTestAgent(t, m, Deps{})
	var got []string
	ctx := WithDeltas(context.Background(), func(s string) { got = append(got, s) })
	res, err := a.Invoke(ctx, Request{Message: "stream please", ActorID: "api:u"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 2 || strings.Join(got, "") != res.Text {
		t.Fatalf("deltas %q for %q", got, res.Text)
	}
	// Without the context value nothing streams.
	got = nil
	if _, err := a.Invoke(context.Background(), Request{Message: "no stream", ActorID: "api:u"}); err != nil || got != nil {
		t.Fatalf("streamed without asking: %v %v", got, err)
	}
}

func TestArgsCheckedAgainstTheSchemaBeforeTheGate(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","required":["action"],"properties":{"action":{"type":"string","enum":["add","delete"]},"text":{"type":"string"},"plants":{"type":"array"}}}`)
	for _, tc := range []struct {
		args string
		ok   bool
	}{
		{`{"action":"add","text":"x"}`, true},
		{`{"action":"add","plants":["fig"]}`, true},
		{`{"text":"x"}`, false},
		{`{"action":"explode"}`, false},
		{`{"action":1}`, false},
		{`{"action":"add","plants":"fig"}`, false},
	} {
		var obj map[string]any
		json.Unmarshal([]byte(tc.args), &obj)
		if err := checkArgs(schema, obj); (err == nil) != tc.ok {
			t.Errorf("%s: err %v", tc.args, err)
		}
	}
	// Through the turn: the bad call never reaches the gate.
	write := &schemaTool{fakeTool: fakeTool{name: "notes", class: tool.ClassWrite}, schema: schema}
	m := &scriptModel{script: []func(*model.Request) (*model.Response, error){toolCall("t1", "notes", `{"action":"explode"}`)}}
	gate := newGate(t, nil)
	a, _ := newTestAgent(t, m, Deps{Gate: gate, Tools: []tool.Tool{write}})
	res, err := a.Invoke(context.Background(), Request{Message: "go", ActorID: "api:u"})
	if err != nil || res.PendingApproval != nil || len(requests(t, gate)) != 0 {
		t.Fatalf("bad call reached the gate: %+v %v", res, err)
	}
}

type schemaTool struct {
	fakeTool
	schema json.RawMessage
}

func (s *schemaTool) Schema() json.RawMessage { return s.schema }

func TestPausedTurnKeepsItsBreakerLevel(t *testing.T) {
	// A read tool that asks can pause even at WARNING; the paused turn
	// carries the level through JSON and resumes at it.
	look := &fakeTool{name: "lookup", class: tool.ClassRead}
	m := &scriptModel{script: []func(*model.Request) (*model.Response, error){toolCall("t1", "lookup", `{"q":"figs"}`)}}
	gate := newGate(t, map[string]approval.Rule{"lookup": approval.RuleAsk})
	a, _ := newTestAgent(t, m, Deps{Gate: gate, State: newState(t, "api:u", state.Warning), Tools: []tool.Tool{look}})
	ctx := context.Background()
	res, err := a.Invoke(ctx, Request{Message: "look up figs", ActorID: "api:u"})
	if err != nil || res.PendingApproval == nil {
		t.Fatalf("no pause: %+v %v", res, err)
	}
	id := res.PendingApproval.RequestID
	req, err := gate.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := gate.LoadResume(req)
	if err != nil {
		t.Fatal(err)
	}
	var paused struct {
		Level json.RawMessage `json:"level"`
	}
	if err := json.Unmarshal(payload, &paused); err != nil || string(paused.Level) != `"WARNING"` {
		t.Fatalf("paused turn level %s (%v), want \"WARNING\"", paused.Level, err)
	}
	if err := gate.Decide(ctx, id, true, "cli"); err != nil {
		t.Fatal(err)
	}
	out, err := a.Resume(ctx, id, true, "", payload)
	if err != nil {
		t.Fatal(err)
	}
	if look.calls != 1 || out.Metadata["breaker_level"] != "WARNING" {
		t.Fatalf("calls %d, metadata %v", look.calls, out.Metadata)
	}
	gate.DropResume(req)
	if _, err := gate.LoadResume(req); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("paused turn kept after DropResume: %v", err)
	}
}

func TestTurnLevelJSONRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		level state.Level
		json  string
	}{
		{state.Normal, `"NORMAL"`},
		{state.Warning, `"WARNING"`},
		{state.Critical, `"CRITICAL"`},
	} {
		b, err := json.Marshal(turn{ID: "turn_1", Level: tc.level})
		if err != nil || !bytes.Contains(b, []byte(`"level":`+tc.json)) {
			t.Fatalf("%v marshals as %s (%v)", tc.level, b, err)
		}
		var back turn
		if err := json.Unmarshal(b, &back); err != nil || back.Level != tc.level {
			t.Fatalf("round trip of %v: %v (%v)", tc.level, back.Level, err)
		}
	}
	// Turns paused before the level became state.Level have the same form.
	var old turn
	if err := json.Unmarshal([]byte(`{"id":"turn_0","level":"CRITICAL","tools":["lookup"]}`), &old); err != nil || old.Level != state.Critical {
		t.Fatalf("old paused turn: %v (%v)", old.Level, err)
	}
}

func TestWithoutAGateOnlyReadToolsAreOfferedAndRun(t *testing.T) {
	tools := []tool.Tool{&fakeTool{name: "lookup", class: tool.ClassRead}, &fakeTool{name: "notes", class: tool.ClassWrite},
		&fakeTool{name: "shell", class: tool.ClassExec}}
	for _, lvl := range []state.Level{state.Normal, state.Warning, state.Critical} {
		a, _ := newTestAgent(t, &scriptModel{}, Deps{Tools: tools})
		got := a.chooseTools(context.Background(), lvl)
		if len(got) != 1 || got["lookup"] == nil {
			t.Errorf("%v without a gate offers %v", lvl, got)
		}
	}
	// Even if a write tool slips into the turn's set, it does not run.
	write := &fakeTool{name: "notes", class: tool.ClassWrite}
	a, _ := newTestAgent(t, &scriptModel{}, Deps{})
	tr := &turn{Req: Request{ActorID: "api:u"}, tools: map[string]tool.Tool{"notes": write}}
	out, isErr, p, err := a.callTool(context.Background(), tr, model.Block{Type: model.BlockToolUse, ID: "t1", Name: "notes", Input: json.RawMessage(`{}`)}, nil)
	if err != nil || p != nil || !isErr || write.calls != 0 || !strings.Contains(out, "no approval gate") {
		t.Fatalf("write tool without a gate: %q %v %v %v (calls %d)", out, isErr, p, err, write.calls)
	}
}

// noExecGate is the real gate, except that Allow decisions lose their
// execution handle; it counts RecordResult calls.
type noExecGate struct {
	*approval.Gate
	records int
}

func (g *noExecGate) Check(ctx context.Context, c approval.Call, l state.Level) (approval.Decision, error) {
	d, err := g.Gate.Check(ctx, c, l)
	d.Exec = nil
	return d, err
}

func (g *noExecGate) RecordResult(ctx context.Context, ex approval.Exec, out string, runErr error) error {
	g.records++
	return g.Gate.RecordResult(ctx, ex, out, runErr)
}

func TestRecordResultOnlyForRecordedExecutions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gate    func(*approval.Gate) Gate
		records func(Gate) int
		want    int
	}{
		{"real gate records the run", func(g *approval.Gate) Gate { return g }, nil, 1},
		{"allow without an exec records nothing", func(g *approval.Gate) Gate { return &noExecGate{Gate: g} },
			func(g Gate) int { return g.(*noExecGate).records }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			look := &fakeTool{name: "lookup", class: tool.ClassRead}
			m := &scriptModel{script: []func(*model.Request) (*model.Response, error){toolCall("t1", "lookup", `{}`)}}
			real := newGate(t, nil)
			g := tc.gate(real)
			a, _ := newTestAgent(t, m, Deps{Gate: g, Tools: []tool.Tool{look}})
			if _, err := a.Invoke(context.Background(), Request{Message: "look", ActorID: "api:u"}); err != nil {
				t.Fatal(err)
			}
			ledger, _ := os.ReadFile(real.Path())
			results := bytes.Count(ledger, []byte(`"type":"result"`))
			if look.calls != 1 || results != tc.want {
				t.Fatalf("calls %d, result entries %d, want %d", look.calls, results, tc.want)
			}
			if tc.records != nil && tc.records(g) != 0 {
				t.Fatal("RecordResult called with a zero Exec")
			}
			if real.Broken() != nil {
				t.Fatal("ledger broken")
			}
		})
	}
}

func TestStateObservesEachUserTurn(t *testing.T) {
	eng := newState(t, "api:u", state.Normal)
	a, _ := newTestAgent(t, &scriptModel{}, Deps{State: eng})
	ctx := context.Background()
	for _, msg := range []string{"hello", "thanks, that helped"} {
		if _, err := a.Invoke(ctx, Request{Message: msg, ActorID: "api:u"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Invoke(ctx, Request{Message: "water the figs", ActorID: "api:u", InvocationType: "cron"}); err != nil {
		t.Fatal(err)
	}
	snap, err := eng.Snapshot(ctx, "api:u")
	if err != nil || snap.Turns != 2 {
		t.Fatalf("engine saw %d turns (%v), want 2 (cron turns are not observed)", snap.Turns, err)
	}
}

// TestOwnerErrorNamesTheSharedKey: "carol" and "api:carol" on channel api
// name the same session keys; the second actor is refused (the history is
// the first one's) with an error that says why, while an actor of another
// form gets the plain refusal.
func TestOwnerErrorNamesTheSharedKey(t *testing.T) {
	a, _ := newTestAgent(t, &scriptModel{}, Deps{})
	ctx := context.Background()
	if _, err := a.Invoke(ctx, Request{Message: "first", ActorID: "carol", Channel: "api"}); err != nil {
		t.Fatal(err)
	}
	_, err := a.Invoke(ctx, Request{Message: "second", ActorID: "api:carol", Channel: "api"})
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), `"carol" and "api:carol" name the same sessions`) {
		t.Fatalf("err = %v, want a FORBIDDEN naming both forms", err)
	}
	if _, err := a.Invoke(ctx, Request{Message: "third", ActorID: "carol", Channel: "api"}); err != nil {
		t.Fatalf("the owner itself: %v", err)
	}
}

// TestCanceledTurnIsNotAnError: a turn whose caller cancels it while the
// model answers (the dashboard's Stop) ends with CANCELED, is counted under
// that outcome in the turn histogram and not in tendril_errors_total.
func TestCanceledTurnIsNotAnError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m := &scriptModel{script: []func(*model.Request) (*model.Response, error){
		func(*model.Request) (*model.Response, error) {
			cancel()
			return nil, fmt.Errorf("%w: openai/fake: %w", errModel, context.Canceled)
		},
	}}
	met := metrics.New()
	st := newMemStore()
	a, err := New(Options{AgentID: "main", MaxToolIterations: 4, Metrics: met},
		Deps{Sessions: st, Models: m, Persona: Persona{Text: "You are Sprout."}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Invoke(ctx, Request{Message: "slow please", ActorID: "web:u", Channel: "web"})
	if got := ErrorCode(err); got != CodeCanceled {
		t.Fatalf("code %q (%v), want %s", got, err, CodeCanceled)
	}
	mfs, err := met.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var canceled uint64
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch mf.GetName() {
			case "tendril_errors_total":
				if mt.GetCounter().GetValue() != 0 {
					t.Errorf("tendril_errors_total%v = %v after a canceled turn", labels, mt.GetCounter().GetValue())
				}
			case "tendril_turn_duration_seconds":
				if labels["outcome"] == CodeCanceled {
					canceled += mt.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	if canceled != 1 {
		t.Fatalf("turn histogram outcome=CANCELED count %d, want 1", canceled)
	}
}

// TestResultModelTime: Result.ModelTime sums the turn's model calls (a
// tool call then the answer, each at least the fake's delay) and leaves out
// the rest of the turn (the tool's own time).
func TestResultModelTime(t *testing.T) {
	const delay = 15 * time.Millisecond
	m := &scriptModel{delay: delay, script: []func(*model.Request) (*model.Response, error){toolCall("c1", "slow", `{}`)}}
	const toolTime = 40 * time.Millisecond
	slow := &fakeTool{name: "slow", class: tool.ClassRead, run: func(context.Context, tool.Call) (string, error) {
		time.Sleep(toolTime)
		return "done", nil
	}}
	a, _ := newTestAgent(t, m, Deps{Tools: []tool.Tool{slow}})
	start := time.Now()
	res, err := a.Invoke(context.Background(), Request{Message: "hi", ActorID: "telegram:1"})
	wall := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(m.requests()); n != 2 {
		t.Fatalf("model calls = %d, want 2", n)
	}
	if res.ModelTime < 2*delay || res.ModelTime > wall-toolTime {
		t.Fatalf("ModelTime = %v, want at least %v (two calls) and at most %v (the turn less the tool)", res.ModelTime, 2*delay, wall-toolTime)
	}
}
