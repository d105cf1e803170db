// Package approvaltest is the conformance suite every approval ledger
// backend passes (SPEC §9: one suite per store interface, run against
// every backend): the file ledger (approval.Open) and PostgreSQL
// (pgledger). It drives whole gates, several at once over one ledger as
// several processes or instances would, and checks what SPEC §6.3 asks:
// request, approve, deny, expire; the binding; YOLO; rules; verification
// and reset; paused turns; forgetting; and exactly-once under races.
package approvaltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool"
)

// Ledger is one fresh, empty ledger of the backend under test.
type Ledger struct {
	// Open opens a new gate over this ledger, as another process or
	// instance would (PostgreSQL: on its own pool). The suite sets
	// opts.Now and opts.Monotonic; Open closes the gate at test end.
	Open func(t *testing.T, opts approval.Options) *approval.Gate
	// Tamper changes the stored entry with this seq in place behind every
	// gate's back (a flipped byte in the file, an UPDATE of the row) so
	// that it no longer matches its hash.
	Tamper func(t *testing.T, seq int64)
}

// Exercise runs the suite; newLedger makes a fresh ledger per subtest.
func Exercise(t *testing.T, newLedger func(t *testing.T) Ledger) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, l Ledger)
	}{
		{"RequestApproveExecuteOnce", testApprove},
		{"Deny", testDeny},
		{"Expire", testExpire},
		{"BindingMismatchRefused", testBinding},
		{"Yolo", testYolo},
		{"Rules", testRules},
		{"VerifyTamperReset", testVerify},
		{"PausedTurnStoreLoadDrop", testResume},
		{"ForgetActor", testForget},
		{"PendingSurvivesRestart", testRestart},
		{"ConcurrentInstancesKeepOneChain", testChain},
		{"AuthorizeRaceRunsOnce", testAuthorizeRace},
		{"DecideRaceRecordsOne", testDecideRace},
		{"WatchDeliversDecisions", testWatch},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newLedger(t)) })
	}
}

// Clock is a wall and monotonic clock shared by every gate of a test, as
// if by several processes on one machine.
type Clock struct {
	mu   sync.Mutex
	wall time.Time
	mono time.Duration
}

// NewClock starts at 2026-03-01 12:00 UTC.
func NewClock() *Clock { return &Clock{wall: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

// Now is the wall clock.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.wall }

// Mono is the monotonic clock.
func (c *Clock) Mono() time.Duration { c.mu.Lock(); defer c.mu.Unlock(); return c.mono }

// Add advances both clocks by d.
func (c *Clock) Add(d time.Duration) { c.mu.Lock(); c.wall = c.wall.Add(d); c.mono += d; c.mu.Unlock() }

type fixture struct {
	t   *testing.T
	l   Ledger
	clk *Clock
	ctx context.Context
}

func newFixture(t *testing.T, l Ledger) *fixture {
	return &fixture{t: t, l: l, clk: NewClock(), ctx: t.Context()}
}

func (f *fixture) open(mod func(*approval.Options)) *approval.Gate {
	f.t.Helper()
	o := approval.Options{Now: f.clk.Now, Monotonic: f.clk.Mono}
	if mod != nil {
		mod(&o)
	}
	return f.l.Open(f.t, o)
}

// WriteCall is a write-class call (rule ask by default) of actor with args.
func WriteCall(actor, args string) approval.Call {
	return approval.Call{AgentID: "main", ActorID: actor, SessionID: actor + ":main", Channel: "telegram",
		Tool: "notes_write", Class: tool.ClassWrite, Args: json.RawMessage(args)}
}

func (f *fixture) ask(g *approval.Gate, c approval.Call) approval.Request {
	f.t.Helper()
	d, err := g.Check(f.ctx, c, state.Normal)
	if err != nil || d.Verdict != approval.Ask || d.Request == nil {
		f.t.Fatalf("Check = %+v, %v; want ask", d, err)
	}
	if d.Request.Status != approval.StatusPending {
		f.t.Fatalf("new request is %s", d.Request.Status)
	}
	return *d.Request
}

func (f *fixture) status(g *approval.Gate, id string) approval.Status {
	f.t.Helper()
	r, err := g.Get(f.ctx, id)
	if err != nil {
		f.t.Fatalf("Get %s: %v", id, err)
	}
	return r.Status
}

func (f *fixture) verifyOK(g *approval.Gate, entries int) {
	f.t.Helper()
	rep, err := g.Verify(f.ctx)
	if err != nil || !rep.OK {
		f.t.Fatalf("Verify = %+v, %v", rep, err)
	}
	if entries >= 0 && rep.Entries != entries {
		f.t.Fatalf("Verify counted %d entries, want %d", rep.Entries, entries)
	}
}

type seen struct {
	mu  sync.Mutex
	got []string
	ch  chan string
}

func watchDecisions(g *approval.Gate) *seen {
	s := &seen{ch: make(chan string, 64)}
	g.OnDecision(func(r approval.Request, ok bool) {
		v := r.ID + map[bool]string{true: ":approved", false: ":denied"}[ok]
		s.mu.Lock()
		s.got = append(s.got, v)
		s.mu.Unlock()
		s.ch <- v
	})
	return s
}

func (s *seen) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

func testApprove(t *testing.T, l Ledger) {
	f := newFixture(t, l)
	server, cli := f.open(nil), f.open(nil)
	dec := watchDecisions(server)
	c := WriteCall("telegram:1", `{"title":"basil","body":"water daily"}`)
	req := f.ask(server, c)

	p, err := cli.Pending(f.ctx)
	if err != nil || len(p) != 1 || p[0].ID != req.ID || p[0].ArgsHash != req.ArgsHash {
		t.Fatalf("other instance's Pending = %+v, %v", p, err)
	}
	if _, err := server.Authorize(f.ctx, req.ID, c, state.Normal); !errors.Is(err, approval.ErrNotApproved) {
		t.Fatalf("Authorize before a decision: %v, want ErrNotApproved", err)
	}
	if err := cli.Decide(f.ctx, req.ID, true, "cli"); err != nil {
		t.Fatal(err)
	}
	if err := server.Refresh(f.ctx); err != nil {
		t.Fatal(err)
	}
	server.Refresh(f.ctx) // no double firing
	if got := dec.list(); !slices.Equal(got, []string{req.ID + ":approved"}) {
		t.Fatalf("OnDecision saw %v", got)
	}
	if st := f.status(server, req.ID); st != approval.StatusApproved {
		t.Fatalf("status %s, want approved", st)
	}
	ex, err := server.Authorize(f.ctx, req.ID, c, state.Normal)
	if err != nil || ex.Seq == 0 || ex.RequestID != req.ID {
		t.Fatalf("Authorize = %+v, %v", ex, err)
	}
	if err := server.RecordResult(f.ctx, ex, "saved", nil); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*approval.Gate{server, cli} {
		if _, err := g.Authorize(f.ctx, req.ID, c, state.Normal); !errors.Is(err, approval.ErrConsumed) {
			t.Fatalf("second Authorize: %v, want ErrConsumed", err)
		}
	}
	if err := cli.RecordResult(f.ctx, ex, "again", nil); err == nil {
		t.Fatal("a second result for one execution was accepted")
	}
	r, err := cli.Get(f.ctx, req.ID)
	if err != nil || r.Status != approval.StatusExecuted || r.DecidedBy != "cli" {
		t.Fatalf("final request %+v, %v", r, err)
	}
	if p, _ := server.Pending(f.ctx); len(p) != 0 {
		t.Fatalf("pending after execution: %+v", p)
	}
	// request, the refused early Authorize, decision, execute, result, and
	// the two refused Authorizes.
	f.verifyOK(cli, 7)
}

func testDeny(t *testing.T, l Ledger) {
	f := newFixture(t, l)
	a, b := f.open(nil), f.open(nil)
	dec := watchDecisions(a)
	c := WriteCall("telegram:1", `{"n":1}`)
	req := f.ask(a, c)
	if err := b.Decide(f.ctx, req.ID, false, "telegram:1"); err != nil {
		t.Fatal(err)
	}
	if err := b.Decide(f.ctx, req.ID, true, "cli"); !errors.Is(err, approval.ErrAlreadyDecided) {
		t.Fatalf("second decision: %v, want ErrAlreadyDecided", err)
	}
	a.Refresh(f.ctx)
	if got := dec.list(); !slices.Equal(got, []string{req.ID + ":denied"}) {
		t.Fatalf("OnDecision saw %v", got)
	}
	if _, err := a.Authorize(f.ctx, req.ID, c, state.Normal); !errors.Is(err, approval.ErrDenied) {
		t.Fatalf("Authorize of a denied request: %v, want ErrDenied", err)
	}
	if st := f.status(a, req.ID); st != approval.StatusDenied {
		t.Fatalf("status %s, want denied", st)
	}
	if err := a.Decide(f.ctx, "01J00000000000000000000000", true, "cli"); !errors.Is(err, approval.ErrNotFound) {
		t.Fatalf("Decide of an unknown request: %v", err)
	}
	if err := a.Decide(f.ctx, "../x", true, "cli"); !errors.Is(err, approval.ErrInvalidID) {
		t.Fatalf("Decide of a malformed id: %v", err)
	}
}

func testExpire(t *testing.T, l Ledger) {
	f := newFixture(t, l)
	g := f.open(func(o *approval.Options) { o.Expiry = time.Minute })
	c := WriteCall("telegram:1", `{"n":1}`)
	late := f.ask(g, c)
	used := f.ask(g, WriteCall("telegram:1", `{"n":2}`))
	if err := g.Decide(f.ctx, used.ID, true, "cli"); err != nil {
		t.Fatal(err)
	}
	f.clk.Add(time.Minute) // expires_at is exclusive
	other := f.open(nil)
	for _, gg := range []*approval.Gate{g, other} {
		if st := f.status(gg, late.ID); st != approval.StatusExpired {
			t.Fatalf("status %s, want expired", st)
		}
		if st := f.status(gg, used.ID); st != approval.StatusExpired {
			t.Fatalf("approved but unused: status %s, want expired", st)
		}
	}
	if err := other.Decide(f.ctx, late.ID, true, "cli"); !errors.Is(err, approval.ErrExpired) {
		t.Fatalf("Decide after expiry: %v, want ErrExpired", err)
	}
	if _, err := g.Authorize(f.ctx, used.ID, WriteCall("telegram:1", `{"n":2}`), state.Normal); !errors.Is(err, approval.ErrExpired) {
		t.Fatalf("Authorize after expiry: %v, want ErrExpired", err)
	}
	if p, _ := other.Pending(f.ctx); len(p) != 0 {
		t.Fatalf("expired requests still pending: %+v", p)
	}
}

func testBinding(t *testing.T, l Ledger) {
	f := newFixture(t, l)
	g, other := f.open(nil), f.open(nil)
	c := WriteCall("telegram:1", `{"title":"plan","tags":["a","b"]}`)
	req := f.ask(g, c)
	if err := other.Decide(f.ctx, req.ID, true, "cli"); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		field string
		mod   func(*approval.Call)
	}{
		{"args_hash", func(c *approval.Call) { c.Args = json.RawMessage(`{"title":"plan","tags":["b","a"]}`) }},
		{"args_hash", func(c *approval.Call) { c.Args = json.RawMessage(`{"title":"plan"}`) }},
		{"tool_name", func(c *approval.Call) { c.Tool = "notes_delete" }},
		{"agent_id", func(c *approval.Call) { c.AgentID = "other" }},
		{"actor_id", func(c *approval.Call) { c.ActorID = "telegram:2" }},
		{"session_id", func(c *approval.Call) { c.SessionID = "telegram:1:other" }},
	} {
		bad := c
		m.mod(&bad)
		_, err := g.Authorize(f.ctx, req.ID, bad, state.Normal)
		var be *approval.BindingError
		if !errors.As(err, &be) || be.Field != m.field || !errors.Is(err, approval.ErrBindingMismatch) {
			t.Fatalf("changed %s: %v, want a BindingError on %s", m.field, err, m.field)
		}
	}
	// Key order and whitespace are not a change: the args hash is of the
	// RFC 8785 canonical form. A refused call did not consume the request.
	same := c
	same.Args = json.RawMessage(`{ "tags" : ["a","b"], "title":"plan" }`)
	if _, err := other.Authorize(f.ctx, req.ID, same, state.Normal); err != nil {
		t.Fatalf("canonically equal args refused: %v", err)
	}
	// A tripped breaker forbids a write even when approved.
	req2 := f.ask(g, WriteCall("telegram:1", `{"n":2}`))
	g.Decide(f.ctx, req2.ID, true, "cli")
	if _, err := g.Authorize(f.ctx, req2.ID, WriteCall("telegram:1", `{"n":2}`), state.Warning); !errors.Is(err, approval.ErrForbidden) {
		t.Fatalf("Authorize under a tripped breaker: %v, want ErrForbidden", err)
	}
	f.verifyOK(other, -1)
}

func testYolo(t *testing.T, l Ledger) {
	f := newFixture(t, l)
	g := f.open(func(o *approval.Options) {
		o.Rules = map[string]approval.Rule{"notes_delete": approval.RuleNever}
		o.SyncRules = true
	})
	other := f.open(nil)
	c := WriteCall("telegram:1", `{}`)
	until, err := other.Yolo(f.ctx, time.Hour, "cli")
	if err != nil {
		t.Fatal(err)
	}
	if want := f.clk.Now().Add(approval.MaxYolo); !until.Equal(want) {
		t.Fatalf("YOLO until %v, want capped at %v", until, want)
	}
	g.Refresh(f.ctx)
	for _, gg := range []*approval.Gate{g, other} {
		if d, err := gg.Check(f.ctx, c, state.Normal); err != nil || d.Verdict != approval.Allow || d.Exec == nil {
			t.Fatalf("ask under YOLO: %+v %v, want allow", d, err)
		}
		never := c
		never.Tool = "notes_delete"
		if d, _ := gg.Check(f.ctx, never, state.Normal); d.Verdict != approval.Deny {
			t.Fatalf("never under YOLO: %s, want deny", d.Verdict)
		}
		if d, _ := gg.Check(f.ctx, c, state.Warning); d.Verdict != approval.Deny {
			t.Fatalf("tripped breaker under YOLO: %s, want deny", d.Verdict)
		}
		exec := c
		exec.Tool, exec.Class = "shell", tool.ClassExec
		if d, _ := gg.Check(f.ctx, exec, state.Normal); d.Verdict != approval.Deny {
			t.Fatalf("exec under YOLO: %s, want deny", d.Verdict)
		}
		if _, ok := gg.YoloUntil(); !ok {
			t.Fatal("YoloUntil reports no window")
		}
	}
	f.clk.Add(approval.MaxYolo)
	if d, _ := g.Check(f.ctx, c, state.Normal); d.Verdict != approval.Ask {
		t.Fatalf("after the window: %s, want ask", d.Verdict)
	}
	// Closing early reaches the other instance.
	other.Yolo(f.ctx, 10*time.Minute, "cli")
	g.Refresh(f.ctx)
	if d, _ := g.Check(f.ctx, c, state.Normal); d.Verdict != approval.Allow {
		t.Fatalf("reopened window: %s, want allow", d.Verdict)
	}
	other.Yolo(f.ctx, 0, "cli")
	g.Refresh(f.ctx)
	if d, _ := g.Check(f.ctx, c, state.Normal); d.Verdict != approval.Ask {
		t.Fatalf("closed window: %s, want ask", d.Verdict)
	}
}

func testRules(t *testing.T, l Ledger) {
	f := newFixture(t, l)
	g := f.open(func(o *approval.Options) {
		o.Rules = map[string]approval.Rule{"weather": approval.RuleNever, "notes_write": approval.RuleAsk}
		o.SyncRules = true
	})
	read := approval.Call{AgentID: "main", ActorID: "telegram:1", SessionID: "s", Tool: "weather", Class: tool.ClassRead, Args: json.RawMessage(`{"city":"Seoul"}`)}
	if d, _ := g.Check(f.ctx, read, state.Normal); d.Verdict != approval.Deny {
		t.Fatalf("rule never: %s", d.Verdict)
	}
	c := WriteCall("telegram:1", `{}`)
	req := f.ask(g, c)
	g.Decide(f.ctx, req.ID, true, "cli")
	// The CLI (no SyncRules) uses the ledger's rules.
	cli := f.open(nil)
	if rules, v := cli.Rules(); rules["weather"] != approval.RuleNever || v != 1 {
		t.Fatalf("CLI rules %v v%d", rules, v)
	}
	// Saving rules invalidates every open approval, on every instance.
	if err := cli.SetRules(f.ctx, map[string]approval.Rule{"weather": approval.RuleAlways}, "cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Authorize(f.ctx, req.ID, c, state.Normal); !errors.Is(err, approval.ErrRulesChanged) {
		t.Fatalf("Authorize after a rule change: %v, want ErrRulesChanged", err)
	}
	if st := f.status(g, req.ID); st != approval.StatusInvalidated {
		t.Fatalf("status %s, want invalidated", st)
	}
	if d, _ := g.Check(f.ctx, read, state.Normal); d.Verdict != approval.Allow {
		t.Fatalf("new rule always: %s", d.Verdict)
	}
	if rules, v := g.Rules(); rules["weather"] != approval.RuleAlways || v != 2 {
		t.Fatalf("rules %v v%d", rules, v)
	}
	if err := g.SetRules(f.ctx, map[string]approval.Rule{"bad name!": approval.RuleAsk}, "cli"); err == nil {
		t.Fatal("invalid tool name accepted")
	}
}

func testVerify(t *testing.T, l Ledger) {
	f := newFixture(t, l)
	g := f.open(func(o *approval.Options) {
		o.Rules = map[string]approval.Rule{"weather": approval.RuleAlways}
		o.SyncRules = true
	})
	c := WriteCall("telegram:1", `{"a":1}`)
	req := f.ask(g, c)
	g.Decide(f.ctx, req.ID, true, "cli")
	f.verifyOK(g, 3)
	l.Tamper(t, 2) // the request: an earlier entry, not the last
	rep, err := g.Verify(f.ctx)
	if err != nil || rep.OK || rep.FirstBad == nil || rep.FirstBad.Line != 2 || rep.Entries != 1 {
		t.Fatalf("Verify after tamper = %+v, %v; want line 2 bad", rep, err)
	}
	if g.Broken() == nil {
		t.Fatal("a failed Verify did not close the gate")
	}
	// Fail closed: everything is refused, on every instance.
	other := f.open(nil)
	if other.Broken() == nil {
		t.Fatal("a newly opened gate accepted the tampered ledger")
	}
	for _, gg := range []*approval.Gate{g, other} {
		if d, err := gg.Check(f.ctx, c, state.Normal); err != nil || d.Verdict != approval.Deny {
			t.Fatalf("Check on a broken ledger: %+v %v", d, err)
		}
		if _, err := gg.Authorize(f.ctx, req.ID, c, state.Normal); !errors.Is(err, approval.ErrLedgerBroken) {
			t.Fatalf("Authorize on a broken ledger: %v", err)
		}
		if _, err := gg.Yolo(f.ctx, time.Minute, "x"); !errors.Is(err, approval.ErrLedgerBroken) {
			t.Fatalf("Yolo on a broken ledger: %v", err)
		}
		if p, _ := gg.Pending(f.ctx); len(p) != 0 {
			t.Fatalf("pending on a broken ledger: %+v", p)
		}
	}
	if err := other.Reset(f.ctx, "", "x"); err == nil {
		t.Fatal("reset without 'by' accepted")
	}
	if err := other.Reset(f.ctx, "operator", "tamper drill"); err != nil {
		t.Fatal(err)
	}
	if err := other.Reset(f.ctx, "operator", "again"); !errors.Is(err, approval.ErrNotBroken) {
		t.Fatalf("reset of a good ledger: %v", err)
	}
	if err := g.Refresh(f.ctx); err != nil {
		t.Fatal(err)
	}
	if g.Broken() != nil {
		t.Fatalf("still closed after reset: %+v", g.Broken())
	}
	if _, err := g.Get(f.ctx, req.ID); !errors.Is(err, approval.ErrNotFound) {
		t.Fatalf("old request after reset: %v", err)
	}
	if rules, _ := g.Rules(); rules["weather"] != approval.RuleAlways {
		t.Fatalf("rules not carried over: %v", rules)
	}
	f.verifyOK(g, 1)
	if d, _ := g.Check(f.ctx, c, state.Normal); d.Verdict != approval.Ask {
		t.Fatalf("gate after reset: %s", d.Verdict)
	}
	f.verifyOK(other, 2)
}

func testResume(t *testing.T, l Ledger) {
	f := newFixture(t, l)
	g, other := f.open(nil), f.open(nil)
	payload := `{ "turn":"t1", "text":"my neighbour's name is Ottoline – ünïcødé 🌱" }`
	c := WriteCall("telegram:1", `{"title":"x"}`)
	c.Resume = json.RawMessage(payload)
	req := f.ask(g, c)
	if string(req.Resume) == payload || len(req.Resume) == 0 {
		t.Fatalf("Request.Resume = %s, want a reference", req.Resume)
	}
	var loaded []byte
	var loadErr error
	other.OnDecision(func(r approval.Request, _ bool) { loaded, loadErr = other.LoadResume(r) })
	if err := other.Decide(f.ctx, req.ID, true, "cli"); err != nil {
		t.Fatal(err)
	}
	if loadErr != nil || string(loaded) != payload {
		t.Fatalf("OnDecision LoadResume = %q, %v; want the payload byte for byte", loaded, loadErr)
	}
	r, _ := other.Get(f.ctx, req.ID)
	other.DropResume(r)
	if _, err := g.LoadResume(r); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after DropResume: %v, want ErrNotExist", err)
	}
	if _, err := g.LoadResume(approval.Request{ID: req.ID, Resume: json.RawMessage(`{"ref":"../../etc/passwd"}`)}); !errors.Is(err, approval.ErrResumeRef) {
		t.Fatalf("hostile ref: %v", err)
	}
	// Identical payloads share storage; dropping one keeps the other's.
	a := f.ask(g, withResume(WriteCall("telegram:1", `{"n":1}`), `{"turn":"same","pad":"over sixteen bytes"}`))
	b := f.ask(g, withResume(WriteCall("telegram:1", `{"n":2}`), `{"turn":"same","pad":"over sixteen bytes"}`))
	g.DropResume(a)
	if got, err := other.LoadResume(b); err != nil || string(got) != `{"turn":"same","pad":"over sixteen bytes"}` {
		t.Fatalf("shared payload of an open request dropped: %q, %v", got, err)
	}
	// A payload over MaxResumeBytes is refused before anything is written.
	small := f.open(func(o *approval.Options) { o.MaxResumeBytes = 16 })
	if _, err := small.Check(f.ctx, withResume(WriteCall("telegram:1", `{}`), `{"turn":"far too long for the limit"}`), state.Normal); !errors.Is(err, approval.ErrInvalidCall) {
		t.Fatalf("oversized payload: %v", err)
	}
	if _, err := small.LoadResume(b); !errors.Is(err, approval.ErrResumeCorrupt) {
		t.Fatalf("LoadResume over the limit: %v, want ErrResumeCorrupt", err)
	}
	if _, err := g.Check(f.ctx, withResume(WriteCall("telegram:1", `{}`), `{not json`), state.Normal); !errors.Is(err, approval.ErrInvalidCall) {
		t.Fatalf("invalid payload: %v", err)
	}
	f.verifyOK(g, -1)
}

func withResume(c approval.Call, payload string) approval.Call {
	c.Resume = json.RawMessage(payload)
	return c
}

func testForget(t *testing.T, l Ledger) {
	f := newFixture(t, l)
	g, other := f.open(nil), f.open(nil)
	dec := watchDecisions(other)
	mine1 := f.ask(g, withResume(WriteCall("telegram:1", `{"n":1}`), `{"turn":"a1"}`))
	mine2 := f.ask(g, withResume(WriteCall("telegram:1", `{"n":2}`), `{"turn":"a2"}`))
	done := f.ask(g, withResume(WriteCall("telegram:1", `{"n":3}`), `{"turn":"a3"}`))
	g.Decide(f.ctx, done.ID, true, "cli")
	theirs := f.ask(g, withResume(WriteCall("telegram:2", `{"n":1}`), `{"turn":"b1"}`))
	shared := f.ask(g, withResume(WriteCall("telegram:2", `{"n":2}`), `{"turn":"a1"}`)) // same payload as mine1

	n, err := other.ForgetActor(f.ctx, "telegram:1", "forget")
	if err != nil || n != 2 {
		t.Fatalf("ForgetActor = %d, %v; want 2 denied", n, err)
	}
	for _, r := range []approval.Request{mine2, done} {
		if _, err := g.LoadResume(r); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("paused turn of %s survived: %v", r.ID, err)
		}
	}
	for _, id := range []string{mine1.ID, mine2.ID} {
		if st := f.status(g, id); st != approval.StatusDenied {
			t.Fatalf("%s is %s, want denied", id, st)
		}
	}
	if st := f.status(g, done.ID); st != approval.StatusApproved {
		t.Fatalf("approved request is %s after forget", st)
	}
	for _, r := range []approval.Request{theirs, shared} {
		if _, err := g.LoadResume(r); err != nil {
			t.Fatalf("another actor's paused turn %s lost: %v", r.ID, err)
		}
		if st := f.status(g, r.ID); st != approval.StatusPending {
			t.Fatalf("another actor's request is %s", st)
		}
	}
	if got := dec.list(); len(got) != 3 { // done's approval, then the two denials
		t.Fatalf("OnDecision saw %v", got)
	}
	if _, err := g.ForgetActor(f.ctx, "", "forget"); !errors.Is(err, approval.ErrInvalidCall) {
		t.Fatalf("empty actor: %v", err)
	}
}

func testRestart(t *testing.T, l Ledger) {
	f := newFixture(t, l)
	g := f.open(nil)
	c := withResume(WriteCall("telegram:1", `{"title":"plan"}`), `{"turn":"t7"}`)
	req := f.ask(g, c)
	g.Close()
	cli := f.open(nil)
	if err := cli.Decide(f.ctx, req.ID, true, "cli"); err != nil {
		t.Fatal(err)
	}
	cli.Close()
	server := f.open(nil)
	var replayed []string
	server.OnDecision(func(r approval.Request, _ bool) { replayed = append(replayed, r.ID) })
	if err := server.Replay(f.ctx); err != nil || !slices.Equal(replayed, []string{req.ID}) {
		t.Fatalf("Replay fired %v (%v), want [%s]", replayed, err, req.ID)
	}
	p, _ := server.Pending(f.ctx)
	if len(p) != 1 {
		t.Fatalf("pending %+v", p)
	}
	if b, err := server.LoadResume(p[0]); err != nil || string(b) != `{"turn":"t7"}` {
		t.Fatalf("paused turn after restart: %q, %v", b, err)
	}
	if _, err := server.Authorize(f.ctx, req.ID, c, state.Normal); err != nil {
		t.Fatal(err)
	}
}

func testChain(t *testing.T, l Ledger) {
	f := newFixture(t, l)
	const gates, each = 3, 10
	var gs []*approval.Gate
	for range gates {
		gs = append(gs, f.open(nil))
	}
	var wg sync.WaitGroup
	for i, g := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				c := WriteCall(fmt.Sprintf("telegram:%d", i), fmt.Sprintf(`{"j":%d}`, j))
				if j%2 == 0 {
					c.Tool, c.Class = "weather", tool.ClassRead
				}
				if _, err := g.Check(f.ctx, c, state.Normal); err != nil {
					t.Error(i, err)
				}
			}
		}()
	}
	wg.Wait()
	f.verifyOK(gs[0], gates*each)
	for _, g := range gs {
		if p, _ := g.Pending(f.ctx); len(p) != gates*each/2 {
			t.Fatalf("an instance sees %d pending, want %d", len(p), gates*each/2)
		}
	}
}

// testAuthorizeRace: one approved request, Authorize from every instance
// at once (several goroutines each): exactly one may run the tool.
func testAuthorizeRace(t *testing.T, l Ledger) {
	f := newFixture(t, l)
	a, b := f.open(nil), f.open(nil)
	for round := range 3 {
		c := WriteCall("telegram:1", fmt.Sprintf(`{"round":%d}`, round))
		req := f.ask(a, c)
		if err := b.Decide(f.ctx, req.ID, true, "cli"); err != nil {
			t.Fatal(err)
		}
		var ok atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		start := make(chan struct{})
		for i := range 8 {
			g := []*approval.Gate{a, b}[i%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ex, err := g.Authorize(f.ctx, req.ID, c, state.Normal)
				if err == nil {
					ok.Add(1)
					g.RecordResult(f.ctx, ex, "ran", nil)
					return
				}
				errs <- err
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		if ok.Load() != 1 {
			t.Fatalf("round %d: %d Authorize calls succeeded, want exactly 1", round, ok.Load())
		}
		for err := range errs {
			if !errors.Is(err, approval.ErrConsumed) {
				t.Fatalf("losing Authorize: %v, want ErrConsumed", err)
			}
		}
	}
	f.verifyOK(a, -1)
}

// testDecideRace: approve on one instance and deny on another at once:
// one decision is recorded, the other gets ErrAlreadyDecided, and both
// instances agree.
func testDecideRace(t *testing.T, l Ledger) {
	f := newFixture(t, l)
	a, b := f.open(nil), f.open(nil)
	for round := range 3 {
		req := f.ask(a, WriteCall("telegram:1", fmt.Sprintf(`{"round":%d}`, round)))
		start := make(chan struct{})
		res := make([]error, 4)
		var wg sync.WaitGroup
		for i := range res {
			g := []*approval.Gate{a, b}[i%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res[i] = g.Decide(f.ctx, req.ID, i%2 == 0, fmt.Sprintf("op%d", i))
			}()
		}
		close(start)
		wg.Wait()
		won := -1
		for i, err := range res {
			switch {
			case err == nil && won >= 0:
				t.Fatalf("round %d: two decisions recorded (%d and %d)", round, won, i)
			case err == nil:
				won = i
			case !errors.Is(err, approval.ErrAlreadyDecided):
				t.Fatalf("losing Decide: %v, want ErrAlreadyDecided", err)
			}
		}
		if won < 0 {
			t.Fatalf("round %d: no decision recorded", round)
		}
		want := map[bool]approval.Status{true: approval.StatusApproved, false: approval.StatusDenied}[won%2 == 0]
		for _, g := range []*approval.Gate{a, b} {
			r, _ := g.Get(f.ctx, req.ID)
			if r.Status != want || r.DecidedBy != fmt.Sprintf("op%d", won) {
				t.Fatalf("an instance sees %s by %s, want %s by op%d", r.Status, r.DecidedBy, want, won)
			}
		}
	}
	f.verifyOK(b, 6)
}

// testWatch: a decision made on another instance reaches a watching gate's
// OnDecision without anyone calling Refresh.
func testWatch(t *testing.T, l Ledger) {
	f := newFixture(t, l)
	a, b := f.open(nil), f.open(nil)
	dec := watchDecisions(a)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	listening := make(chan struct{}, 1)
	var ticks atomic.Int32
	go func() {
		done <- a.Watch(ctx, approval.WatchOptions{
			Poll:      20 * time.Millisecond,
			Tick:      func(context.Context) { ticks.Add(1) },
			OnError:   func(err error) { t.Errorf("watch: %v", err) },
			Listening: func() { listening <- struct{}{} },
		})
	}()
	req := f.ask(a, WriteCall("telegram:1", `{}`))
	if err := b.Decide(f.ctx, req.ID, true, "cli"); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-dec.ch:
		if got != req.ID+":approved" {
			t.Fatalf("OnDecision saw %s", got)
		}
	case <-f.ctx.Done():
		t.Fatal("test deadline passed before the watching gate saw the decision")
	}
	for ticks.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch returned %v, want context.Canceled", err)
	}
}
