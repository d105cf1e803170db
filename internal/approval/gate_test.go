package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool"
)

var ctx = context.Background()

// clocks is an injected wall clock and monotonic clock, shared by every
// gate of a test (as if by several processes on one machine).
type clocks struct {
	mu   sync.Mutex
	wall time.Time
	mono time.Duration
}

func newClocks() *clocks { return &clocks{wall: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }
func (c *clocks) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wall
}
func (c *clocks) Mono() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mono
}

// Add advances both clocks.
func (c *clocks) Add(d time.Duration) {
	c.mu.Lock()
	c.wall = c.wall.Add(d)
	c.mono += d
	c.mu.Unlock()
}

// StepWall moves only the wall clock (an NTP step or a manual change).
func (c *clocks) StepWall(d time.Duration) {
	c.mu.Lock()
	c.wall = c.wall.Add(d)
	c.mu.Unlock()
}

func open(t *testing.T, dir string, c *clocks, mod func(*Options)) *Gate {
	t.Helper()
	o := Options{Now: c.Now, Monotonic: c.Mono}
	if mod != nil {
		mod(&o)
	}
	g, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func writeCall(args string) Call {
	return Call{AgentID: "main", ActorID: "telegram:1", SessionID: "s1", Channel: "telegram", Tool: "notes_write",
		Class: tool.ClassWrite, Args: json.RawMessage(args)}
}

// ask opens a request and approves it.
func approved(t *testing.T, g *Gate, c Call) Request {
	t.Helper()
	d, err := g.Check(ctx, c, state.Normal)
	if err != nil {
		t.Fatal(err)
	}
	if d.Verdict != Ask || d.Request == nil {
		t.Fatalf("verdict %s (%s), want ask", d.Verdict, d.Reason)
	}
	if err := g.Decide(ctx, d.Request.ID, true, "cli"); err != nil {
		t.Fatal(err)
	}
	return *d.Request
}

func TestEffectiveRules(t *testing.T) {
	rules := map[string]Rule{"weather": RuleNever, "notes_write": RuleAlways, "shell": RuleAlways, "memory_search": RuleAsk}
	tests := []struct {
		name       string
		class      tool.Class
		level      state.Level
		exec, yolo bool
		want       Rule
	}{
		{"forecast", tool.ClassRead, state.Normal, false, false, RuleAlways},
		{"notes_add", tool.ClassWrite, state.Normal, false, false, RuleAsk},
		{"sh", tool.ClassExec, state.Normal, false, false, RuleNever},
		{"sh", tool.ClassExec, state.Normal, true, false, RuleAsk},
		{"shell", tool.ClassExec, state.Normal, true, false, RuleAsk}, // rule always, floor ask
		{"shell", tool.ClassExec, state.Normal, true, true, RuleAsk},  // yolo never relaxes exec
		{"weather", tool.ClassRead, state.Normal, false, true, RuleNever},
		{"notes_write", tool.ClassWrite, state.Normal, false, false, RuleAlways},
		{"notes_write", tool.ClassWrite, state.Warning, false, false, RuleNever},
		{"notes_add", tool.ClassWrite, state.Normal, false, true, RuleAlways}, // yolo: ask → always
		{"notes_add", tool.ClassWrite, state.Warning, false, true, RuleNever}, // yolo never beats breaker
		{"memory_search", tool.ClassRead, state.Critical, false, false, RuleAsk},
		{"forecast", tool.ClassRead, state.Critical, false, false, RuleAlways},
		{"sh", tool.ClassExec, state.Warning, true, false, RuleNever},
		{"odd", tool.Class("weird"), state.Normal, true, true, RuleNever},
	}
	for _, tt := range tests {
		got, reason := Effective(rules, tt.name, tt.class, tt.level, tt.exec, tt.yolo)
		if got != tt.want || reason == "" {
			t.Errorf("Effective(%s,%s,%s,exec=%v,yolo=%v) = %s (%s), want %s", tt.name, tt.class, tt.level, tt.exec, tt.yolo, got, reason, tt.want)
		}
	}
}

func TestBindingDenials(t *testing.T) {
	c := newClocks()
	g := open(t, t.TempDir(), c, nil)
	base := writeCall(`{"title":"tomatoes","body":"water at 7"}`)

	tests := []struct {
		name   string
		mutate func(*Call)
		field  string
	}{
		{"another agent", func(x *Call) { x.AgentID = "other" }, "agent_id"},
		{"another tool", func(x *Call) { x.Tool = "notes_delete" }, "tool_name"},
		{"changed argument", func(x *Call) { x.Args = json.RawMessage(`{"title":"tomatoes","body":"water at 8"}`) }, "args_hash"},
		{"added argument", func(x *Call) { x.Args = json.RawMessage(`{"title":"tomatoes","body":"water at 7","x":1}`) }, "args_hash"},
		{"number form changed", func(x *Call) { x.Args = json.RawMessage(`{"title":"tomatoes","body":"water at 7 "}`) }, "args_hash"},
		{"another actor", func(x *Call) { x.ActorID = "telegram:2" }, "actor_id"},
		{"another session", func(x *Call) { x.SessionID = "s2" }, "session_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := approved(t, g, base)
			bad := base
			tt.mutate(&bad)
			_, err := g.Authorize(ctx, req.ID, bad, state.Normal)
			var be *BindingError
			if !errors.As(err, &be) || be.Field != tt.field || !errors.Is(err, ErrBindingMismatch) {
				t.Fatalf("Authorize = %v, want BindingError on %s", err, tt.field)
			}
			// The exact call still works once (the refusal is logged, not consuming).
			if _, err := g.Authorize(ctx, req.ID, base, state.Normal); err != nil {
				t.Fatalf("exact call after refusal: %v", err)
			}
		})
	}

	t.Run("key order and whitespace do not matter", func(t *testing.T) {
		req := approved(t, g, base)
		same := base
		same.Args = json.RawMessage(" {\"body\" : \"water at 7\",\n \"title\":\"tomatoes\"} ")
		if _, err := g.Authorize(ctx, req.ID, same, state.Normal); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("argument swapped after approval", func(t *testing.T) {
		// A hook rewrites the args between approval and execution.
		args := []byte(`{"title":"tomatoes","body":"water at 7"}`)
		call := base
		call.Args = args
		req := approved(t, g, call)
		copy(args[10:], "potatoes")
		if _, err := g.Authorize(ctx, req.ID, call, state.Normal); !errors.Is(err, ErrBindingMismatch) {
			t.Fatalf("swapped args: %v", err)
		}
	})

	t.Run("expiry at +1s", func(t *testing.T) {
		req := approved(t, g, base)
		c.Add(g.opts.Expiry + time.Second)
		if _, err := g.Authorize(ctx, req.ID, base, state.Normal); !errors.Is(err, ErrExpired) {
			t.Fatalf("after expiry: %v", err)
		}
	})

	t.Run("expiry boundary", func(t *testing.T) {
		req := approved(t, g, base)
		c.Add(g.opts.Expiry)
		if _, err := g.Authorize(ctx, req.ID, base, state.Normal); !errors.Is(err, ErrExpired) {
			t.Fatalf("exactly at expires_at: %v", err)
		}
		req = approved(t, g, base)
		c.Add(g.opts.Expiry - time.Nanosecond)
		if _, err := g.Authorize(ctx, req.ID, base, state.Normal); err != nil {
			t.Fatalf("1ns before expires_at: %v", err)
		}
	})

	t.Run("decision after expiry", func(t *testing.T) {
		d, _ := g.Check(ctx, base, state.Normal)
		c.Add(g.opts.Expiry + time.Second)
		if err := g.Decide(ctx, d.Request.ID, true, "cli"); !errors.Is(err, ErrExpired) {
			t.Fatalf("late decision: %v", err)
		}
	})

	t.Run("replayed request_id", func(t *testing.T) {
		req := approved(t, g, base)
		if _, err := g.Authorize(ctx, req.ID, base, state.Normal); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Authorize(ctx, req.ID, base, state.Normal); !errors.Is(err, ErrConsumed) {
			t.Fatalf("replay: %v", err)
		}
	})

	t.Run("decision naming another request", func(t *testing.T) {
		a, _ := g.Check(ctx, base, state.Normal)
		other := base
		other.Args = json.RawMessage(`{"title":"x","body":"y"}`)
		b := approved(t, g, other)
		// The approval of B does not approve A…
		if _, err := g.Authorize(ctx, a.Request.ID, base, state.Normal); !errors.Is(err, ErrNotApproved) {
			t.Fatalf("A with B approved: %v", err)
		}
		// …and B's approval cannot carry A's call.
		if _, err := g.Authorize(ctx, b.ID, base, state.Normal); !errors.Is(err, ErrBindingMismatch) {
			t.Fatalf("A's call under B's id: %v", err)
		}
	})

	t.Run("approval after a rule change", func(t *testing.T) {
		req := approved(t, g, base)
		if err := g.SetRules(ctx, map[string]Rule{"weather": RuleAlways}, "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Authorize(ctx, req.ID, base, state.Normal); !errors.Is(err, ErrRulesChanged) {
			t.Fatalf("after rule change: %v", err)
		}
		d, _ := g.Check(ctx, base, state.Normal)
		g.SetRules(ctx, map[string]Rule{"weather": RuleAlways}, "test") // saving, even unchanged, invalidates
		if err := g.Decide(ctx, d.Request.ID, true, "cli"); !errors.Is(err, ErrRulesChanged) {
			t.Fatalf("decide after rule change: %v", err)
		}
	})

	t.Run("denied, pending, unknown, malformed", func(t *testing.T) {
		d, _ := g.Check(ctx, base, state.Normal)
		if _, err := g.Authorize(ctx, d.Request.ID, base, state.Normal); !errors.Is(err, ErrNotApproved) {
			t.Fatalf("pending: %v", err)
		}
		g.Decide(ctx, d.Request.ID, false, "cli")
		if _, err := g.Authorize(ctx, d.Request.ID, base, state.Normal); !errors.Is(err, ErrDenied) {
			t.Fatalf("denied: %v", err)
		}
		if err := g.Decide(ctx, d.Request.ID, true, "cli"); !errors.Is(err, ErrAlreadyDecided) {
			t.Fatalf("second decision: %v", err)
		}
		if _, err := g.Authorize(ctx, "01ARZ3NDEKTSV4RRFFQ69G5FAV", base, state.Normal); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown: %v", err)
		}
		for _, id := range []string{"", "../../etc/passwd", "01arz3ndektsv4rrffq69g5fav", strings.Repeat("A", 27)} {
			if err := g.Decide(ctx, id, true, "cli"); !errors.Is(err, ErrInvalidID) {
				t.Fatalf("id %q: %v", id, err)
			}
		}
		// A hostile size is not echoed back whole.
		if err := g.Decide(ctx, strings.Repeat("é", 50000), true, "cli"); !errors.Is(err, ErrInvalidID) || len(err.Error()) > 200 || !strings.Contains(err.Error(), "(100000 bytes)") {
			t.Fatalf("long id: %d bytes of error: %.300s", len(err.Error()), err)
		}
	})

	t.Run("breaker tripped after approval", func(t *testing.T) {
		req := approved(t, g, base)
		if _, err := g.Authorize(ctx, req.ID, base, state.Warning); !errors.Is(err, ErrForbidden) {
			t.Fatalf("WARNING: %v", err)
		}
	})
}

func TestCheckVerdicts(t *testing.T) {
	c := newClocks()
	g := open(t, t.TempDir(), c, nil)
	read := Call{AgentID: "main", ActorID: "a", SessionID: "s", Tool: "weather", Class: tool.ClassRead, Args: json.RawMessage(`{"city":"Seoul"}`)}
	d, err := g.Check(ctx, read, state.Critical)
	if err != nil || d.Verdict != Allow || d.Exec == nil {
		t.Fatalf("read in CRITICAL: %+v %v", d, err)
	}
	if err := g.RecordResult(ctx, *d.Exec, "sunny", nil); err != nil {
		t.Fatal(err)
	}
	if err := g.RecordResult(ctx, *d.Exec, "sunny", nil); err == nil {
		t.Fatal("second result for one execution accepted")
	}
	w := writeCall(`{}`)
	for _, lv := range []state.Level{state.Warning, state.Critical} {
		if d, _ := g.Check(ctx, w, lv); d.Verdict != Deny {
			t.Fatalf("write in %s: %s", lv, d.Verdict)
		}
	}
	ex := Call{AgentID: "main", ActorID: "a", SessionID: "s", Tool: "shell", Class: tool.ClassExec, Args: json.RawMessage(`{"cmd":"ls"}`)}
	if d, _ := g.Check(ctx, ex, state.Normal); d.Verdict != Deny {
		t.Fatalf("exec disabled: %s", d.Verdict)
	}
	for _, bad := range []Call{
		{AgentID: "main", ActorID: "a", Tool: "x y", Class: tool.ClassRead},
		{AgentID: "", ActorID: "a", Tool: "x", Class: tool.ClassRead},
		{AgentID: "m", ActorID: "a\x00", Tool: "x", Class: tool.ClassRead},
		{AgentID: "m", ActorID: "a", Tool: "x", Class: tool.ClassRead, Args: json.RawMessage(`{"a":1,"a":2}`)},
		{AgentID: "m", ActorID: "a", Tool: "x", Class: tool.ClassRead, Args: json.RawMessage(`{"a":NaN}`)},
		{AgentID: "m", ActorID: "a", Tool: "x", Args: json.RawMessage(`{}`)},
	} {
		if _, err := g.Check(ctx, bad, state.Normal); !errors.Is(err, ErrInvalidCall) {
			t.Errorf("Check(%+v) = %v, want ErrInvalidCall", bad, err)
		}
	}
	rep, err := g.Verify(ctx)
	if err != nil || !rep.OK || rep.Entries != 5 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

func TestPendingSurvivesRestartAndRunsOnce(t *testing.T) {
	dir := t.TempDir()
	c := newClocks()
	call := writeCall(`{"title":"plan","body":"sow basil"}`)
	call.Resume = json.RawMessage(`{"batch":[{"id":"tu_1","name":"notes_write"}],"turn":"t7"}`)

	g1 := open(t, dir, c, nil)
	d, err := g1.Check(ctx, call, state.Normal)
	if err != nil || d.Verdict != Ask {
		t.Fatal(d, err)
	}
	id := d.Request.ID
	g1.Close() // process exits

	// The CLI (another process) approves.
	cli := open(t, dir, c, nil)
	p, _ := cli.Pending(ctx)
	if len(p) != 1 || p[0].ID != id || p[0].Status != StatusPending {
		t.Fatalf("pending after restart: %+v", p)
	}
	if err := cli.Decide(ctx, id, true, "cli"); err != nil {
		t.Fatal(err)
	}
	cli.Close()

	// The server restarts, finds the approved request and its resume payload.
	var runs atomic.Int32
	run := func(g *Gate) error {
		p, err := g.Pending(ctx)
		if err != nil {
			return err
		}
		for _, r := range p {
			if r.Status != StatusApproved {
				continue
			}
			payload, err := g.LoadResume(r)
			if err != nil || !bytes.Contains(payload, []byte(`"turn":"t7"`)) {
				t.Fatalf("resume payload lost: %s (%v; ref %s)", payload, err, r.Resume)
			}
			resumed := Call{AgentID: r.AgentID, ActorID: r.ActorID, SessionID: r.SessionID, Tool: r.Tool, Class: r.Class, Args: r.Args}
			ex, err := g.Authorize(ctx, r.ID, resumed, state.Normal)
			if err != nil {
				return err
			}
			runs.Add(1)
			g.RecordResult(ctx, ex, "ok", nil)
		}
		return nil
	}
	g2 := open(t, dir, c, nil)
	var replayed []string
	g2.OnDecision(func(r Request, ok bool) { replayed = append(replayed, r.ID) })
	if err := g2.Replay(ctx); err != nil || len(replayed) != 1 || replayed[0] != id {
		t.Fatalf("Replay fired for %v (%v), want [%s]", replayed, err, id)
	}
	if err := run(g2); err != nil {
		t.Fatal(err)
	}
	// A second server (or a crash-restart) sees it executed.
	g3 := open(t, dir, c, nil)
	if err := run(g3); err != nil {
		t.Fatal(err)
	}
	if _, err := g3.Authorize(ctx, id, call, state.Normal); !errors.Is(err, ErrConsumed) {
		t.Fatalf("replay after restart: %v", err)
	}
	if runs.Load() != 1 {
		t.Fatalf("tool ran %d times, want 1", runs.Load())
	}
	r, _ := g3.Get(ctx, id)
	if r.Status != StatusExecuted || r.DecidedBy != "cli" {
		t.Fatalf("final request %+v", r)
	}
}

func TestRefreshSeesOtherProcessDecision(t *testing.T) {
	dir := t.TempDir()
	c := newClocks()
	server := open(t, dir, c, nil)
	var mu sync.Mutex
	var seen []string
	server.OnDecision(func(r Request, ok bool) {
		mu.Lock()
		seen = append(seen, r.ID+map[bool]string{true: ":approved", false: ":denied"}[ok])
		mu.Unlock()
	})
	d1, _ := server.Check(ctx, writeCall(`{"n":1}`), state.Normal)
	d2, _ := server.Check(ctx, writeCall(`{"n":2}`), state.Normal)

	cli := open(t, dir, c, nil)
	cli.Decide(ctx, d1.Request.ID, true, "cli")
	cli.Decide(ctx, d2.Request.ID, false, "cli")
	if err := server.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	server.Refresh(ctx) // no double firing
	mu.Lock()
	defer mu.Unlock()
	want := []string{d1.Request.ID + ":approved", d2.Request.ID + ":denied"}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Fatalf("OnDecision saw %v, want %v", seen, want)
	}
	// And the server's own appends after the CLI's continue the same chain.
	if _, err := server.Check(ctx, writeCall(`{"n":3}`), state.Normal); err != nil {
		t.Fatal(err)
	}
	if rep, _ := VerifyLedger(server.Path()); !rep.OK {
		t.Fatalf("interleaved appends broke the chain: %+v", rep.FirstBad)
	}
}

func TestConcurrentProcessesKeepOneChain(t *testing.T) {
	dir := t.TempDir()
	c := newClocks()
	var gates []*Gate
	for i := 0; i < 3; i++ {
		gates = append(gates, open(t, dir, c, nil))
	}
	var wg sync.WaitGroup
	for i, g := range gates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				call := Call{AgentID: "main", ActorID: "a", SessionID: "s", Tool: "weather", Class: tool.ClassRead, Args: json.RawMessage(`{}`)}
				if _, err := g.Check(ctx, call, state.Normal); err != nil {
					t.Error(i, err)
				}
			}
		}()
	}
	wg.Wait()
	rep, _ := VerifyLedger(gates[0].Path())
	if !rep.OK || rep.Entries != 30 {
		t.Fatalf("report %+v", rep)
	}
}

func TestYolo(t *testing.T) {
	dir := t.TempDir()
	c := newClocks()
	g := open(t, dir, c, func(o *Options) { o.ExecEnabled = true })
	w := writeCall(`{}`)
	ex := Call{AgentID: "main", ActorID: "a", SessionID: "s", Tool: "shell", Class: tool.ClassExec, Args: json.RawMessage(`{}`)}

	until, err := g.Yolo(ctx, 10*time.Minute, "cli")
	if err != nil || !until.Equal(c.Now().Add(10*time.Minute)) {
		t.Fatal(until, err)
	}
	if d, _ := g.Check(ctx, w, state.Normal); d.Verdict != Allow {
		t.Fatalf("write during yolo: %s", d.Verdict)
	}
	if d, _ := g.Check(ctx, ex, state.Normal); d.Verdict != Ask {
		t.Fatalf("exec during yolo: %s (must still ask)", d.Verdict)
	}
	if d, _ := g.Check(ctx, w, state.Warning); d.Verdict != Deny {
		t.Fatalf("write in WARNING during yolo: %s", d.Verdict)
	}
	g.SetRules(ctx, map[string]Rule{"notes_write": RuleNever}, "t")
	if d, _ := g.Check(ctx, w, state.Normal); d.Verdict != Deny {
		t.Fatalf("never during yolo: %s", d.Verdict)
	}
	g.SetRules(ctx, nil, "t")

	// Another process sees the window.
	other := open(t, dir, c, nil)
	if _, ok := other.YoloUntil(); !ok {
		t.Fatal("other process does not see the yolo window")
	}

	// Wall clock stepped back an hour: the monotonic deadline still ends it.
	c.StepWall(-time.Hour)
	c.mu.Lock()
	c.mono += 10*time.Minute + time.Second
	c.mu.Unlock()
	if _, ok := g.YoloUntil(); ok {
		t.Fatal("yolo outlived its monotonic deadline after a wall-clock step back")
	}
	if d, _ := g.Check(ctx, w, state.Normal); d.Verdict != Ask {
		t.Fatalf("write after yolo: %s", d.Verdict)
	}

	// Wall clock stepped forward ends it early even though monotonic time did not pass.
	c2 := newClocks()
	g2 := open(t, t.TempDir(), c2, nil)
	g2.Yolo(ctx, 10*time.Minute, "cli")
	c2.StepWall(11 * time.Minute)
	if _, ok := g2.YoloUntil(); ok {
		t.Fatal("yolo outlived its wall deadline")
	}

	// Capped at 30 min.
	c3 := newClocks()
	g3 := open(t, t.TempDir(), c3, nil)
	until, _ = g3.Yolo(ctx, 2*time.Hour, "cli")
	if got := until.Sub(c3.Now()); got != MaxYolo {
		t.Fatalf("yolo window %v, want cap %v", got, MaxYolo)
	}
	c3.Add(MaxYolo)
	if _, ok := g3.YoloUntil(); ok {
		t.Fatal("yolo open at the cap")
	}
	// yolo 0 closes.
	g3.Yolo(ctx, 5*time.Minute, "cli")
	g3.Yolo(ctx, 0, "cli")
	if _, ok := g3.YoloUntil(); ok {
		t.Fatal("yolo 0 did not close the window")
	}
}

func TestSyncRulesInvalidates(t *testing.T) {
	dir := t.TempDir()
	c := newClocks()
	g := open(t, dir, c, func(o *Options) { o.SyncRules = true; o.Rules = map[string]Rule{"weather": RuleAsk} })
	req := approved(t, g, writeCall(`{}`))
	g.Close()
	// Restart with the same rules: nothing changes.
	g2 := open(t, dir, c, func(o *Options) { o.SyncRules = true; o.Rules = map[string]Rule{"weather": RuleAsk} })
	if r, _ := g2.Get(ctx, req.ID); r.Status != StatusApproved {
		t.Fatalf("same rules invalidated: %s", r.Status)
	}
	g2.Close()
	// Restart with new rules: the open approval is invalid.
	g3 := open(t, dir, c, func(o *Options) { o.SyncRules = true; o.Rules = map[string]Rule{"weather": RuleNever} })
	if r, _ := g3.Get(ctx, req.ID); r.Status != StatusInvalidated {
		t.Fatalf("rule change did not invalidate: %s", r.Status)
	}
	if rules, v := g3.Rules(); rules["weather"] != RuleNever || v != 2 {
		t.Fatalf("rules %v version %d", rules, v)
	}
}

// buildLedger writes a ledger with every entry type.
func buildLedger(t *testing.T, dir string, c *clocks) string {
	g := open(t, dir, c, func(o *Options) { o.SyncRules = true; o.Rules = map[string]Rule{"memory_write": RuleAsk} })
	read := Call{AgentID: "main", ActorID: "a", SessionID: "s", Tool: "weather", Class: tool.ClassRead, Args: json.RawMessage(`{"city":"서울"}`)}
	d, _ := g.Check(ctx, read, state.Normal)
	g.RecordResult(ctx, *d.Exec, "맑음", nil)
	req := approved(t, g, writeCall(`{"t":"x"}`))
	g.Check(ctx, writeCall(`{"t":"pending"}`), state.Normal) // stays pending
	ex, err := g.Authorize(ctx, req.ID, writeCall(`{"t":"x"}`), state.Normal)
	if err != nil {
		t.Fatal(err)
	}
	g.RecordResult(ctx, ex, "", errors.New("disk full"))
	g.Check(ctx, writeCall(`{}`), state.Critical) // deny
	g.Yolo(ctx, time.Minute, "cli")
	g.Close()
	return filepath.Join(dir, "ledger.jsonl")
}

func TestEverySingleByteChangeIsDetected(t *testing.T) {
	c := newClocks()
	dir := t.TempDir()
	path := buildLedger(t, dir, c)
	orig, _ := os.ReadFile(path)
	if rep, _ := VerifyLedger(path); !rep.OK {
		t.Fatalf("clean ledger fails: %+v", rep.FirstBad)
	}
	// By default three replacements per byte (a low bit, the case bit and
	// the high bit); one under -race, which slows JSON decoding ~10×;
	// TENDRIL_LEDGER_EXHAUSTIVE=1 tries all 255 (≈ 1M verifications).
	variants := []func(byte) byte{
		func(b byte) byte { return b ^ 0x01 },
		func(b byte) byte { return b ^ 0x20 },
		func(b byte) byte { return b ^ 0x80 },
	}
	if raceEnabled {
		variants = variants[:1]
	}
	if os.Getenv("TENDRIL_LEDGER_EXHAUSTIVE") != "" {
		variants = nil
		for x := 1; x < 256; x++ {
			variants = append(variants, func(b byte) byte { return b ^ byte(x) })
		}
	}
	checked := 0
	for i := range orig {
		for _, v := range variants {
			nb := v(orig[i])
			if nb == orig[i] {
				continue
			}
			mod := bytes.Clone(orig)
			mod[i] = nb
			rep := VerifyBytes(mod, "mem")
			if rep.OK {
				t.Fatalf("byte %d changed %q→%q not detected", i, orig[i], nb)
			}
			// The reported line is the one holding the byte (or, for the
			// newline ending it, that line or the next).
			line := bytes.Count(orig[:i], []byte("\n")) + 1
			if rep.FirstBad.Line != line && !(orig[i] == '\n' && rep.FirstBad.Line == line+1) {
				t.Fatalf("byte %d (line %d) reported at line %d: %s", i, line, rep.FirstBad.Line, rep.FirstBad.Reason)
			}
			checked++
		}
	}
	t.Logf("%d single-byte variants of a %d-byte ledger all detected", checked, len(orig))
}

func TestTamperFailsClosed(t *testing.T) {
	c := newClocks()
	orig := func() []byte {
		dir := t.TempDir()
		b, _ := os.ReadFile(buildLedger(t, dir, c))
		return b
	}()
	lines := bytes.SplitAfter(orig, []byte("\n"))
	// Flip one byte in the middle of each line in turn (a sample of the
	// exhaustive check above, through the whole gate).
	for li := 0; li < len(lines)-1; li++ {
		dir := t.TempDir()
		mod := bytes.Clone(orig)
		off := 0
		for _, l := range lines[:li] {
			off += len(l)
		}
		mod[off+len(lines[li])/2] ^= 0x04
		os.WriteFile(filepath.Join(dir, "ledger.jsonl"), mod, 0o600)

		g := open(t, dir, c, nil)
		if g.Broken() == nil {
			t.Fatalf("line %d tampered: gate not broken", li+1)
		}
		if p, _ := g.Pending(ctx); len(p) != 0 {
			t.Fatalf("broken gate still has pending approvals: %+v", p)
		}
		read := Call{AgentID: "main", ActorID: "a", SessionID: "s", Tool: "weather", Class: tool.ClassRead, Args: json.RawMessage(`{}`)}
		if d, err := g.Check(ctx, read, state.Normal); err != nil || d.Verdict != Deny {
			t.Fatalf("broken gate: %+v %v", d, err)
		}
		all, _ := g.List(ctx)
		for _, r := range all {
			if r.Status == StatusPending || r.Status == StatusApproved {
				t.Fatalf("request %s still %s", r.ID, r.Status)
			}
			if _, err := g.Authorize(ctx, r.ID, writeCall(`{"t":"x"}`), state.Normal); err == nil {
				t.Fatalf("authorize on broken gate succeeded")
			}
		}
		if _, err := g.Yolo(ctx, time.Minute, "x"); !errors.Is(err, ErrLedgerBroken) {
			t.Fatalf("yolo on broken gate: %v", err)
		}
		size := len(mod)
		if fi, _ := os.Stat(g.Path()); int(fi.Size()) != size {
			t.Fatal("broken gate appended to the ledger")
		}
	}
}

func TestTamperWhileRunningAndReset(t *testing.T) {
	dir := t.TempDir()
	c := newClocks()
	g := open(t, dir, c, func(o *Options) { o.SyncRules = true; o.Rules = map[string]Rule{"weather": RuleAlways} })
	d, _ := g.Check(ctx, writeCall(`{"a":1}`), state.Normal)
	// Tamper with the last line behind the server's back.
	b, _ := os.ReadFile(g.Path())
	b[len(b)-10] ^= 0x01
	os.WriteFile(g.Path(), b, 0o600)
	if err := g.Decide(ctx, d.Request.ID, true, "cli"); !errors.Is(err, ErrLedgerBroken) {
		t.Fatalf("decide after tamper: %v", err)
	}
	if err := g.Reset(ctx, "", "x"); err == nil {
		t.Fatal("reset without 'by' accepted")
	}
	// The operator resets from the CLI (another process).
	cli := open(t, dir, c, nil)
	if cli.Broken() == nil {
		t.Fatal("CLI does not see the break")
	}
	if err := cli.Reset(ctx, "operator", "tamper drill"); err != nil {
		t.Fatal(err)
	}
	if err := cli.Reset(ctx, "operator", "again"); !errors.Is(err, ErrNotBroken) {
		t.Fatalf("reset of a good ledger: %v", err)
	}
	// The server notices the reset on its next call; the old request stays dead.
	if err := g.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if g.Broken() != nil {
		t.Fatal("server still closed after reset")
	}
	if _, err := g.Get(ctx, d.Request.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("old request after reset: %v", err)
	}
	if rules, _ := g.Rules(); rules["weather"] != RuleAlways {
		t.Fatalf("rules not carried over: %v", rules)
	}
	// Archive kept, new ledger verifies.
	m, _ := filepath.Glob(filepath.Join(dir, "ledger.jsonl.broken-*"))
	if len(m) != 1 {
		t.Fatalf("archives: %v", m)
	}
	if rep, _ := VerifyLedger(g.Path()); !rep.OK || rep.Entries != 1 {
		t.Fatalf("after reset: %+v", rep)
	}
	if d, _ := g.Check(ctx, writeCall(`{}`), state.Normal); d.Verdict != Ask {
		t.Fatalf("gate after reset: %s", d.Verdict)
	}
}

func TestTornTailFailsClosed(t *testing.T) {
	dir := t.TempDir()
	c := newClocks()
	path := buildLedger(t, dir, c)
	b, _ := os.ReadFile(path)
	os.WriteFile(path, b[:len(b)-7], 0o600) // crash mid-append
	g := open(t, dir, c, nil)
	if g.Broken() == nil || !strings.Contains(g.Broken().FirstBad.Reason, "incomplete") {
		t.Fatalf("torn tail: %+v", g.Broken())
	}
	// Truncating at a line boundary while the server runs is noticed too.
	dir2 := t.TempDir()
	path2 := buildLedger(t, dir2, c)
	g2 := open(t, dir2, c, nil)
	b2, _ := os.ReadFile(path2)
	cut := bytes.LastIndexByte(b2[:len(b2)-1], '\n') + 1
	os.WriteFile(path2, b2[:cut], 0o600)
	g2.Refresh(ctx)
	if g2.Broken() == nil {
		t.Fatal("truncation while running not detected")
	}
}

func TestLedgerRemovedOrReplacedFailsClosed(t *testing.T) {
	c := newClocks()
	dir := t.TempDir()
	g := open(t, dir, c, nil)
	g.Check(ctx, writeCall(`{}`), state.Normal)
	os.Remove(g.Path())
	if d, _ := g.Check(ctx, writeCall(`{}`), state.Normal); d.Verdict != Deny || g.Broken() == nil {
		t.Fatalf("ledger removed: verdict %s, broken %v", d.Verdict, g.Broken())
	}
	if err := g.Reset(ctx, "operator", "ledger deleted"); err != nil {
		t.Fatal(err)
	}
	if d, _ := g.Check(ctx, writeCall(`{}`), state.Normal); d.Verdict != Ask || g.Broken() != nil {
		t.Fatalf("after reset of a removed ledger: %s %v", d.Verdict, g.Broken())
	}

	dir2 := t.TempDir()
	g2 := open(t, dir2, c, nil)
	g2.Check(ctx, writeCall(`{}`), state.Normal)
	// Someone swaps in a fresh, self-consistent chain.
	other := open(t, t.TempDir(), c, nil)
	other.Check(ctx, writeCall(`{"x":1}`), state.Normal)
	b, _ := os.ReadFile(other.Path())
	tmp := filepath.Join(dir2, "swap")
	os.WriteFile(tmp, b, 0o600)
	os.Rename(tmp, g2.Path())
	g2.Refresh(ctx)
	if g2.Broken() == nil {
		t.Fatal("replaced ledger accepted")
	}
}

// An edit to an earlier line (not the tail) is caught by a running gate
// within RefreshVerifyEvery refreshes, and the gate then fails closed.
func TestRefreshDetectsEarlierLineTamper(t *testing.T) {
	dir := t.TempDir()
	c := newClocks()
	g := open(t, dir, c, nil)
	d, _ := g.Check(ctx, writeCall(`{"a":1}`), state.Normal)
	for i := 0; i < 3; i++ {
		g.Check(ctx, writeCall(fmt.Sprintf(`{"b":%d}`, i)), state.Normal)
	}
	b, _ := os.ReadFile(g.Path())
	first := bytes.IndexByte(b, '\n')
	b[first/2] ^= 0x01 // inside the first line, same size
	os.WriteFile(g.Path(), b, 0o600)
	for i := 0; i < RefreshVerifyEvery; i++ {
		if err := g.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if g.Broken() == nil {
		t.Fatal("running gate did not notice the tampered line")
	}
	if err := g.Decide(ctx, d.Request.ID, true, "cli"); !errors.Is(err, ErrLedgerBroken) {
		t.Fatalf("decide after tamper: %v", err)
	}
	if dd, _ := g.Check(ctx, writeCall(`{"c":1}`), state.Normal); dd.Verdict != Deny {
		t.Fatalf("closed gate verdict %v", dd.Verdict)
	}
}

// Every writer of a "by" checks it with ValidateBy: a value too long, with
// control characters, not UTF-8 or blank is an ErrInvalidBy and nothing
// reaches the ledger.
func TestInvalidByWritesNothing(t *testing.T) {
	dir := t.TempDir()
	c := newClocks()
	g := open(t, dir, c, nil)
	d, err := g.Check(ctx, writeCall(`{"a":1}`), state.Normal)
	if err != nil || d.Request == nil {
		t.Fatalf("check: %v %+v", err, d)
	}
	before, err := os.ReadFile(g.Path())
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{"", "  ", strings.Repeat("a", MaxByBytes+1), strings.Repeat("a", 900<<10),
		"\u001b[2J\u0000", "evil\n\u001b[31mRED\u0000", "x\x7f", "bad\xffutf8", "a\u202eb", "cli:\u2066ana"}
	for _, by := range bad {
		label := fmt.Sprintf("%.40q", by)
		if err := ValidateBy(by); !errors.Is(err, ErrInvalidBy) {
			t.Errorf("ValidateBy(%s) = %v, want ErrInvalidBy", label, err)
		}
		if _, err := g.Yolo(ctx, time.Minute, by); !errors.Is(err, ErrInvalidBy) {
			t.Errorf("Yolo by %s: %v, want ErrInvalidBy", label, err)
		}
		if err := g.Decide(ctx, d.Request.ID, true, by); !errors.Is(err, ErrInvalidBy) {
			t.Errorf("Decide by %s: %v, want ErrInvalidBy", label, err)
		}
		if err := g.SetRules(ctx, map[string]Rule{}, by); !errors.Is(err, ErrInvalidBy) {
			t.Errorf("SetRules by %s: %v, want ErrInvalidBy", label, err)
		}
		if _, err := g.ForgetActor(ctx, "telegram:1", by); !errors.Is(err, ErrInvalidBy) {
			t.Errorf("ForgetActor by %s: %v, want ErrInvalidBy", label, err)
		}
		if err := g.Reset(ctx, by, "drill"); !errors.Is(err, ErrInvalidBy) {
			t.Errorf("Reset by %s: %v, want ErrInvalidBy", label, err)
		}
	}
	if after, _ := os.ReadFile(g.Path()); !bytes.Equal(before, after) {
		t.Fatalf("the ledger changed:\n%s", after[len(before):])
	}
	if _, open := g.YoloUntil(); open {
		t.Fatal("a YOLO window opened")
	}
	for _, by := range []string{"cli:ana", "telegram:123", "web:owner", strings.Repeat("é", MaxByBytes/2)} {
		if err := ValidateBy(by); err != nil {
			t.Errorf("ValidateBy(%q) = %v, want nil", by, err)
		}
	}
	if _, err := g.Yolo(ctx, time.Minute, "cli:ana"); err != nil {
		t.Fatalf("yolo by a valid name: %v", err)
	}
}
