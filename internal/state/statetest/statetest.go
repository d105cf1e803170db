// Package statetest is the conformance suite every state.Backend passes
// (SPEC §9: one suite per store interface, run against every backend).
// It drives a real state.Engine over the backend, so it checks the
// engine's contract as persisted, not the backend's calls in isolation.
package statetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/state"
)

// Harness opens the backend under test.
type Harness struct {
	// Open returns a new, empty store. Exercise calls it once per subtest.
	Open func(t *testing.T) state.Backend
	// Reopen returns a second handle on the store b is a handle of, as
	// after a restart: for files a new backend on the same directory, for
	// a database a new store on a new pool. Exercise stops using b when
	// testing a restart, but keeps using both in the concurrency test when
	// Shared is set.
	Reopen func(t *testing.T, b state.Backend) state.Backend
	// Shared says that handles from Reopen may write concurrently with b
	// (several instances share the store). When false, the concurrency
	// test runs its two engines on the one handle b.
	Shared bool
}

// Clock is a settable fake clock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at 2026-01-01T00:00:00Z.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock forward by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var ctx = context.Background()

func engine(t *testing.T, b state.Backend, c *Clock, limit int) *state.Engine {
	t.Helper()
	e, err := state.New(b, state.Options{Now: c.Now, HistoryLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func apply(t *testing.T, e *state.Engine, actor string, cat state.Category, in float64) state.Event {
	t.Helper()
	ev, err := e.Apply(ctx, actor, 0, state.Stimulus{Category: cat, Intensity: in})
	if err != nil {
		t.Fatalf("Apply(%q, %s): %v", actor, cat, err)
	}
	return ev
}

func snap(t *testing.T, e *state.Engine, actor string) state.Snapshot {
	t.Helper()
	s, err := e.Snapshot(ctx, actor)
	if err != nil {
		t.Fatalf("Snapshot(%q): %v", actor, err)
	}
	return s
}

// jsonOf normalises a value through JSON (times lose their monotonic
// reading and location), so a snapshot read back from a store compares
// equal to the one taken before.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// HostileActors are valid actor IDs that try to break out of a store's
// namespace or collide with each other: path tricks, escapes, case,
// Windows device names, the maximum length in ASCII, punctuation and
// multi-byte UTF-8.
func HostileActors() []string {
	return []string{
		"../../etc/passwd", "a/b", "..", ".", "./x", "/abs", `a\b`, "%2e%2e", "%", "a%00b", "~abc",
		"Bob", "bob", "BOB", "CON", "nul", "a b", "a:b", "'; DROP TABLE state_actors; --",
		strings.Repeat("/", 256), strings.Repeat("x", 256), strings.Repeat("가", 85), // 255 bytes
		strings.Repeat("가", 85) + "x", strings.Repeat("%", 200), "telegram:12345",
	}
}

// InvalidActors are IDs the engine must reject with state.ErrInvalidActor.
func InvalidActors() []string {
	return []string{"", "a\x00b", strings.Repeat("x", 257), "\xff", "a\nb", "\x7f"}
}

// Exercise runs the suite against h.
func Exercise(t *testing.T, h Harness) {
	t.Run("ApplySnapshotLevel", func(t *testing.T) { testApplySnapshotLevel(t, h) })
	t.Run("Decay", func(t *testing.T) { testDecay(t, h) })
	t.Run("Forget", func(t *testing.T) { testForget(t, h) })
	t.Run("Actors", func(t *testing.T) { testActors(t, h) })
	t.Run("HostileActors", func(t *testing.T) { testHostile(t, h) })
	t.Run("HistoryLimit", func(t *testing.T) { testHistoryLimit(t, h) })
	t.Run("LevelCounts", func(t *testing.T) { testLevelCounts(t, h) })
	t.Run("ConcurrentApply", func(t *testing.T) { testConcurrent(t, h) })
	t.Run("Restart", func(t *testing.T) { testRestart(t, h) })
	t.Run("Cancelled", func(t *testing.T) { testCancelled(t, h) })
	t.Run("UpdateError", func(t *testing.T) { testUpdateError(t, h) })
}

// testUpdateError calls the backend directly: an update whose fn fails
// stores nothing, for a new actor and for an existing one, and returns
// fn's error.
func testUpdateError(t *testing.T, h Harness) {
	c := NewClock()
	b := h.Open(t)
	e := engine(t, b, c, 50)
	ev := apply(t, e, "old", state.Joy, 1)
	boom := errors.New("boom")
	for _, actor := range []string{"new", "old"} {
		calls := 0
		err := b.Update(ctx, actor, 50, func(cur state.Record, ok bool) (state.Record, []state.Change, error) {
			calls++
			if ok != (actor == "old") || (ok && cur.Turns != 1) {
				t.Errorf("%s: fn got ok=%v turns=%d", actor, ok, cur.Turns)
			}
			cur.ActorID, cur.Turns = actor, 99
			return cur, []state.Change{{Cause: state.CauseStimulus}}, boom
		})
		if !errors.Is(err, boom) || calls == 0 {
			t.Fatalf("%s: Update = %v after %d calls, want fn's error", actor, err, calls)
		}
	}
	if acts, err := e.Actors(ctx); err != nil || !slices.Equal(acts, []string{"old"}) {
		t.Fatalf("Actors after failed updates = %q, %v", acts, err)
	}
	if s := snap(t, e, "old"); s.Turns != 1 || s.Values != ev.After || len(s.History) != len(ev.Changes) {
		t.Fatalf("failed update changed the state: %d turns, %d changes", s.Turns, len(s.History))
	}
	if _, _, ok, err := b.Load(ctx, "new", true); ok || err != nil {
		t.Fatalf("failed first update left a record: ok=%v err=%v", ok, err)
	}
}

func testApplySnapshotLevel(t *testing.T, h Harness) {
	c := NewClock()
	e := engine(t, h.Open(t), c, 50)
	base := state.DefaultPersona().Baseline

	s := snap(t, e, "a")
	if s.Values != base || s.Level != state.Normal || s.Turns != 0 || len(s.History) != 0 || !s.UpdatedAt.IsZero() {
		t.Fatalf("unobserved actor: %+v", s)
	}
	ev := apply(t, e, "a", state.Joy, 0.5)
	s = snap(t, e, "a")
	if s.Values != ev.After || s.Turns != 1 || len(s.History) != len(ev.Changes) || len(s.History) == 0 {
		t.Fatalf("after one Apply: values %v turns %d changes %d; event after %v with %d changes", s.Values, s.Turns, len(s.History), ev.After, len(ev.Changes))
	}
	if got := s.History[len(s.History)-1]; got.Cause != state.CauseStimulus || got.Stimulus != state.Joy || got.Turn != 1 || got.Values != ev.After {
		t.Fatalf("recorded change %+v", got)
	}
	if !s.UpdatedAt.Equal(c.Now()) {
		t.Fatalf("UpdatedAt %v, want %v", s.UpdatedAt, c.Now())
	}
	// Threats walk stability down through WARNING into CRITICAL; Level
	// agrees with every event and the snapshot keeps every change.
	total := len(ev.Changes)
	seen := map[state.Level]bool{}
	for i := 0; ev.Level != state.Critical; i++ {
		if i > 50 {
			t.Fatalf("no CRITICAL after %d threats (stability %.3f)", i, ev.After[state.Stability])
		}
		ev = apply(t, e, "a", state.Threat, 1)
		total += len(ev.Changes)
		seen[ev.Level] = true
		lv, err := e.Level(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if lv != ev.Level {
			t.Fatalf("Level %s, event level %s", lv, ev.Level)
		}
	}
	if !seen[state.Warning] {
		t.Fatal("never passed through WARNING")
	}
	s = snap(t, e, "a")
	if len(s.History) != total || s.Level != state.Critical || s.Values != ev.After {
		t.Fatalf("after the threats: %d changes (want %d), level %s, values %v (want %v)", len(s.History), total, s.Level, s.Values, ev.After)
	}
	for i, ch := range s.History {
		if ch.Cause == "" || (i > 0 && ch.Turn < s.History[i-1].Turn) {
			t.Fatalf("history out of order or without cause at %d: %+v", i, ch)
		}
	}
	// A Neutral turn counts the turn and moves nothing.
	if _, err := e.Observe(ctx, "a", 0, "ok"); err != nil {
		t.Fatal(err)
	}
	if s2 := snap(t, e, "a"); s2.Turns != s.Turns+1 || s2.Values != s.Values {
		t.Fatalf("neutral turn: turns %d values %v, before %d %v", s2.Turns, s2.Values, s.Turns, s.Values)
	}
}

func testDecay(t *testing.T, h Harness) {
	c := NewClock()
	b := h.Open(t)
	e := engine(t, b, c, 50)
	hl := e.Options().HalfLife
	base := e.Options().Persona.Baseline
	ev := apply(t, e, "a", state.Frustration, 1)
	stored := ev.After
	c.Add(hl)
	want := state.Decay(stored, base, hl, hl)
	got := snap(t, e, "a")
	if got.Values != want || got.Values == stored {
		t.Fatalf("after one half-life: %v, want %v (stored %v)", got.Values, want, stored)
	}
	for i := range want {
		if d := math.Abs((got.Values[i] - base[i]) - (stored[i]-base[i])/2); d > 1e-12 {
			t.Fatalf("%s not half-way to baseline: %v", state.Dim(i), d)
		}
	}
	// Decay is computed on read, not stored: a reopened store decays the
	// same way, from the same UpdatedAt.
	e2 := engine(t, h.Reopen(t, b), c, 50)
	if got2 := snap(t, e2, "a"); got2.Values != want || !got2.UpdatedAt.Equal(got.UpdatedAt) {
		t.Fatalf("reopened: %v at %v, want %v at %v", got2.Values, got2.UpdatedAt, want, got.UpdatedAt)
	}
	// The next stimulus records the decay it started from.
	ev = apply(t, e2, "a", state.Joy, 0.2)
	if ev.Before != want || ev.Changes[0].Decay != sub(want, stored) {
		t.Fatalf("next turn started from %v (decay %v), want %v", ev.Before, ev.Changes[0].Decay, want)
	}
	// A clock that went backwards does not un-decay.
	c.Add(-2 * hl)
	if s := snap(t, e2, "a"); s.Values != ev.After {
		t.Fatalf("clock went back: %v, want %v", s.Values, ev.After)
	}
}

func sub(a, b state.Vector) state.Vector {
	var out state.Vector
	for i := range a {
		out[i] = a[i] - b[i]
	}
	return out
}

func testForget(t *testing.T, h Harness) {
	c := NewClock()
	b := h.Open(t)
	e := engine(t, b, c, 50)
	for range 3 {
		apply(t, e, "a/../b", state.Loss, 1)
	}
	apply(t, e, "keep", state.Joy, 1)
	if err := e.Forget(ctx, "a/../b"); err != nil {
		t.Fatal(err)
	}
	if err := e.Forget(ctx, "never-there"); err != nil {
		t.Fatalf("Forget of nothing: %v", err)
	}
	check := func(e *state.Engine) {
		t.Helper()
		s := snap(t, e, "a/../b")
		if s.Turns != 0 || len(s.History) != 0 || s.Values != e.Options().Persona.Baseline {
			t.Fatalf("state survived Forget: turns %d, %d changes, values %v", s.Turns, len(s.History), s.Values)
		}
		acts, err := e.Actors(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(acts, []string{"keep"}) {
			t.Fatalf("Actors after Forget = %q", acts)
		}
		counts, err := e.LevelCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if counts[state.Normal]+counts[state.Warning]+counts[state.Critical] != 1 {
			t.Fatalf("LevelCounts after Forget = %v", counts)
		}
		if k := snap(t, e, "keep"); k.Turns != 1 {
			t.Fatalf("Forget touched another actor: %d turns", k.Turns)
		}
	}
	check(e)
	check(engine(t, h.Reopen(t, b), c, 50))
	// Afterwards the actor starts again at turn 1.
	if ev := apply(t, e, "a/../b", state.Joy, 1); ev.Turn != 1 || ev.Before != e.Options().Persona.Baseline {
		t.Fatalf("after Forget: turn %d from %v", ev.Turn, ev.Before)
	}
}

func testActors(t *testing.T, h Harness) {
	c := NewClock()
	b := h.Open(t)
	e := engine(t, b, c, 50)
	if acts, err := e.Actors(ctx); err != nil || len(acts) != 0 {
		t.Fatalf("empty store: %q, %v", acts, err)
	}
	want := []string{"telegram:2", "http:alice", "telegram:1", "z", "A"}
	for _, a := range want {
		apply(t, e, a, state.Connection, 0.5)
	}
	snap(t, e, "only-read") // reading stores nothing
	if _, err := e.Level(ctx, "only-read-too"); err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	for _, e := range []*state.Engine{e, engine(t, h.Reopen(t, b), c, 50)} {
		got, err := e.Actors(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("Actors = %q, want %q", got, want)
		}
	}
}

func testHostile(t *testing.T, h Harness) {
	c := NewClock()
	b := h.Open(t)
	e := engine(t, b, c, 50)
	ids := HostileActors()
	// Actor i gets i+1 turns, so any two that shared storage would show it.
	for i, a := range ids {
		for range i + 1 {
			if _, err := e.Observe(ctx, a, 0, "thanks, that worked"); err != nil {
				t.Fatalf("Observe(%q): %v", a, err)
			}
		}
	}
	check := func(e *state.Engine) {
		t.Helper()
		for i, a := range ids {
			if s := snap(t, e, a); s.Turns != i+1 || s.ActorID != a {
				t.Fatalf("%q: %d turns (want %d), actor %q", a, s.Turns, i+1, s.ActorID)
			}
		}
		got, err := e.Actors(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(ids)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("Actors = %q\nwant %q", got, want)
		}
	}
	check(e)
	check(engine(t, h.Reopen(t, b), c, 50))
	for _, a := range ids[:5] {
		if err := e.Forget(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if acts, _ := e.Actors(ctx); len(acts) != len(ids)-5 {
		t.Fatalf("after forgetting 5: %d actors, want %d", len(acts), len(ids)-5)
	}

	for _, a := range InvalidActors() {
		if _, err := e.Observe(ctx, a, 1, "hi"); !errors.Is(err, state.ErrInvalidActor) {
			t.Errorf("Observe(%q): %v, want ErrInvalidActor", a, err)
		}
		if _, err := e.Snapshot(ctx, a); !errors.Is(err, state.ErrInvalidActor) {
			t.Errorf("Snapshot(%q): %v, want ErrInvalidActor", a, err)
		}
		if err := e.Forget(ctx, a); !errors.Is(err, state.ErrInvalidActor) {
			t.Errorf("Forget(%q): %v, want ErrInvalidActor", a, err)
		}
	}
}

func testHistoryLimit(t *testing.T, h Harness) {
	c := NewClock()
	b := h.Open(t)
	e := engine(t, b, c, 5)
	cats := []state.Category{state.Joy, state.Connection, state.Achievement, state.Uncertainty}
	for i := range 40 {
		c.Add(time.Minute)
		apply(t, e, "a", cats[i%len(cats)], 0.3)
	}
	for _, e := range []*state.Engine{e, engine(t, h.Reopen(t, b), c, 5)} {
		s := snap(t, e, "a")
		if len(s.History) != 5 {
			t.Fatalf("%d changes kept, want 5", len(s.History))
		}
		for i, ch := range s.History {
			if ch.Turn != 36+i {
				t.Fatalf("kept change %d is turn %d, want %d (the last five)", i, ch.Turn, 36+i)
			}
		}
		if s.Turns != 40 {
			t.Fatalf("Turns = %d", s.Turns)
		}
	}
}

func testLevelCounts(t *testing.T, h Harness) {
	c := NewClock()
	b := h.Open(t)
	e := engine(t, b, c, 50)
	driveTo := func(actor string, want state.Level) {
		ev := apply(t, e, actor, state.Joy, 1)
		for i := 0; ev.Level != want; i++ {
			if i > 60 || ev.Level > want {
				t.Fatalf("%s: could not stop at %s", actor, want)
			}
			ev = apply(t, e, actor, state.Threat, 1)
		}
	}
	want := func(e *state.Engine, n, w, cr int) {
		t.Helper()
		got, err := e.LevelCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if exp := map[state.Level]int{state.Normal: n, state.Warning: w, state.Critical: cr}; !reflect.DeepEqual(got, exp) {
			t.Fatalf("LevelCounts = %v, want %v", got, exp)
		}
	}
	want(e, 0, 0, 0)
	driveTo("n1", state.Normal)
	driveTo("w1", state.Warning)
	driveTo("w2", state.Warning)
	driveTo("c1", state.Critical)
	snap(t, e, "never-observed")
	want(e, 1, 2, 1)
	e2 := engine(t, h.Reopen(t, b), c, 50)
	want(e2, 1, 2, 1)
	// Decay alone clears WARNING (as Level does); CRITICAL needs turns.
	c.Add(24 * time.Hour)
	want(e, 3, 0, 1)
	want(e2, 3, 0, 1)
}

// testConcurrent applies from two engines to one actor at once. With a
// frozen clock and one repeated stimulus the result of n applies does not
// depend on their order, so it must equal n applies in a row on another
// actor: same values, same turn count, one recorded change per apply, and
// turn numbers 1…n each once (each apply saw the one before).
func testConcurrent(t *testing.T, h Harness) {
	const per = 20
	c := NewClock()
	b1 := h.Open(t)
	b2 := b1
	if h.Shared {
		b2 = h.Reopen(t, b1)
	}
	e1, e2 := engine(t, b1, c, 4*per), engine(t, b2, c, 4*per)
	s := state.Stimulus{Category: state.Uncertainty, Intensity: 0.05}
	for range 2 * per {
		if _, err := e1.Apply(ctx, "reference", 0, s); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for _, e := range []*state.Engine{e1, e2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				if _, err := e.Apply(ctx, "shared", 0, s); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	ref := snap(t, e1, "reference")
	for _, e := range []*state.Engine{e1, e2} {
		got := snap(t, e, "shared")
		if got.Turns != 2*per || got.Values != ref.Values || len(got.History) != len(ref.History) {
			t.Fatalf("lost update: %d turns, values %v, %d changes; want %d, %v, %d",
				got.Turns, got.Values, len(got.History), 2*per, ref.Values, len(ref.History))
		}
		turns := map[int]bool{}
		for _, ch := range got.History {
			if ch.Cause == state.CauseStimulus {
				turns[ch.Turn] = true
			}
		}
		for i := 1; i <= 2*per; i++ {
			if !turns[i] {
				t.Fatalf("no stimulus change for turn %d: two applies saw the same state", i)
			}
		}
	}
}

func testRestart(t *testing.T, h Harness) {
	c := NewClock()
	b := h.Open(t)
	e := engine(t, b, c, 20)
	msgs := []string{"thank you!!", "this is useless, it failed again", "I'm not sure", "my dog died",
		"we did it!!", "고마워 정말", "짜증나 실패", "hello", "KILL BOMB ATTACK"}
	actors := []string{"telegram:1", "http:b/../c", strings.Repeat("가", 85)}
	for i := range 60 {
		if i%7 == 0 {
			c.Add(17 * time.Minute)
		}
		if _, err := e.Observe(ctx, actors[i%len(actors)], i+1, msgs[i%len(msgs)]); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]string{}
	for _, a := range actors {
		before[a] = jsonOf(t, snap(t, e, a))
	}
	counts, err := e.LevelCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e2 := engine(t, h.Reopen(t, b), c, 20)
	for _, a := range actors {
		if got := jsonOf(t, snap(t, e2, a)); got != before[a] {
			t.Fatalf("%q after restart:\n%s\nwant\n%s", a, got, before[a])
		}
	}
	if got, _ := e2.LevelCounts(ctx); fmt.Sprint(got) != fmt.Sprint(counts) {
		t.Fatalf("LevelCounts after restart %v, want %v", got, counts)
	}
	// And the restarted engine continues where the first stopped.
	ev, err := e2.Observe(ctx, actors[0], 0, "thanks")
	if err != nil {
		t.Fatal(err)
	}
	var prev state.Snapshot
	json.Unmarshal([]byte(before[actors[0]]), &prev)
	if ev.Turn != prev.Turns+1 || ev.Before != prev.Values {
		t.Fatalf("after restart the next turn is %d from %v, want %d from %v", ev.Turn, ev.Before, prev.Turns+1, prev.Values)
	}
}

func testCancelled(t *testing.T, h Harness) {
	c := NewClock()
	e := engine(t, h.Open(t), c, 50)
	apply(t, e, "a", state.Joy, 1)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.Apply(cctx, "a", 0, state.Stimulus{Category: state.Threat, Intensity: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply with a cancelled context: %v", err)
	}
	if _, err := e.Snapshot(cctx, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Snapshot with a cancelled context: %v", err)
	}
	if s := snap(t, e, "a"); s.Turns != 1 {
		t.Fatalf("cancelled Apply changed the state: %d turns", s.Turns)
	}
}
