package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/session"
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

type slowRetriever struct{}

func (slowRetriever) Recall(ctx context.Context, _, _, _ string) ([]memory.Hit, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

type fixedState struct{ level Level }

func (f fixedState) Level(context.Context, string) (Level, error)          { return f.level, nil }
func (f fixedState) Observe(context.Context, string, string, string) error { return nil }

// classGate allows read, asks for write, denies exec; WARNING hides write.
type classGate struct {
	mu       sync.Mutex
	pending  map[string]GateCall
	approved map[string]bool
	resume   map[string]json.RawMessage
	n        int
}

func newClassGate() *classGate {
	return &classGate{pending: map[string]GateCall{}, approved: map[string]bool{}, resume: map[string]json.RawMessage{}}
}
func (g *classGate) Visible(_ string, c tool.Class, l Level) bool {
	switch l {
	case LevelCritical:
		return c == tool.ClassRead
	case LevelWarning:
		return c != tool.ClassWrite && c != tool.ClassExec
	}
	return c != tool.ClassExec
}
func (g *classGate) Check(_ context.Context, call GateCall, l Level, resume json.RawMessage) (GateDecision, error) {
	if !g.Visible(call.Tool, call.Class, l) {
		return GateDecision{Verdict: Deny, Reason: "removed"}, nil
	}
	if call.Class == tool.ClassRead {
		return GateDecision{Verdict: Allow}, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n++
	id := fmt.Sprintf("req_%d", g.n)
	g.pending[id] = call
	g.resume[id] = resume
	return GateDecision{Verdict: Ask, RequestID: id, ExpiresAt: time.Now().Add(2 * time.Minute)}, nil
}
func (g *classGate) Authorize(_ context.Context, id string, call GateCall, _ Level) (any, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.pending[id]
	if !ok || !g.approved[id] {
		return nil, errors.New("not approved")
	}
	if p.Tool != call.Tool || string(p.Args) != string(call.Args) || p.ActorID != call.ActorID {
		return nil, errors.New("binding mismatch")
	}
	delete(g.pending, id)
	return id, nil
}
func (g *classGate) RecordExecution(context.Context, any, string, error) error { return nil }

func newTestAgent(t *testing.T, m Models, deps Deps) (*Agent, *memStore) {
	t.Helper()
	st := newMemStore()
	deps.Sessions = st
	deps.Models = m
	if deps.Persona.Text == "" {
		deps.Persona = Persona{Text: "You are Sprout, a gardening helper.", Anchors: []string{"I am Sprout.", "I never pretend to be human."}}
	}
	a, err := New(Options{AgentID: "main", MaxToolIterations: 4, ToolTimeout: 200 * time.Millisecond, RetrieveTimeout: 50 * time.Millisecond}, deps)
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
		Retriever:    fixedRetriever{hits},
		Skills:       "## Skills\n- weather: forecasts",
		Tools:        []tool.Tool{&fakeTool{name: "lookup", class: tool.ClassRead}},
		RenderMemory: renderMemory,
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
}

func TestWarningRemovesWriteToolsAndReinjectsAnchors(t *testing.T) {
	m := &scriptModel{}
	a, _ := newTestAgent(t, m, Deps{
		State: fixedState{LevelWarning},
		Gate:  newClassGate(),
		Tools: []tool.Tool{&fakeTool{name: "lookup", class: tool.ClassRead}, &fakeTool{name: "notes", class: tool.ClassWrite}},
	})
	if _, err := a.Invoke(context.Background(), Request{Message: "hi", ActorID: "api:u"}); err != nil {
		t.Fatal(err)
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
	a, st := newTestAgent(t, m, Deps{State: fixedState{LevelCritical}, Gate: newClassGate(), Tools: []tool.Tool{write}})
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

func TestRetrievalTimeoutContinuesWithoutMemory(t *testing.T) {
	m := &scriptModel{}
	a, _ := newTestAgent(t, m, Deps{Retriever: slowRetriever{}})
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
	gate := newClassGate()
	a, st := newTestAgent(t, m, Deps{Gate: gate, Tools: []tool.Tool{write}})
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
	gate.mu.Lock()
	gate.approved[id] = true
	resume := gate.resume[id]
	gate.mu.Unlock()
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
	if _, err := b.Resume(ctx, id, true, "", resume); err == nil {
		t.Fatal("replayed approval resumed the turn")
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
	// An actor whose own default key collides with another's session is
	// refused before anything reaches the model.
	n := len(m.requests())
	_, err = a.Invoke(ctx, Request{Message: "hi", ActorID: "api:jin~s1"})
	if ErrorCode(err) != "FORBIDDEN" || len(m.requests()) != n {
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
	gate := newClassGate()
	a, _ := newTestAgent(t, m, Deps{Gate: gate, Tools: []tool.Tool{write}})
	res, err := a.Invoke(context.Background(), Request{Message: "note it", ActorID: "api:u"})
	if err != nil {
		t.Fatal(err)
	}
	if res.PendingApproval != nil || len(gate.pending) != 0 || write.calls != 0 {
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
	gate := newClassGate()
	a, _ := newTestAgent(t, m, Deps{Gate: gate, Tools: []tool.Tool{write}})
	res, err := a.Invoke(context.Background(), Request{Message: "go", ActorID: "api:u"})
	if err != nil || res.PendingApproval != nil || len(gate.pending) != 0 {
		t.Fatalf("bad call reached the gate: %+v %v", res, err)
	}
}

type schemaTool struct {
	fakeTool
	schema json.RawMessage
}

func (s *schemaTool) Schema() json.RawMessage { return s.schema }
