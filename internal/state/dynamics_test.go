package state

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// Long-run dynamics (see "Dynamics of a long run" in the package comment):
// neutral traffic moves nothing, mild uncertainty settles above WARNING at
// any pace, and a real crisis still trips the breaker.

// pace yields the time between two turns.
type pace struct {
	name  string
	mixed bool // random: run it over several seeds
	next  func(r *rand.Rand) time.Duration
}

func fixedPace(d time.Duration) pace {
	return pace{d.String(), false, func(*rand.Rand) time.Duration { return d }}
}

// paces are the fixed paces of the issue plus random mixes: uniform choice
// among the fixed ones, bursts of instant turns with long gaps, and a
// continuous spread up to two hours.
var paces = []pace{
	fixedPace(0), fixedPace(time.Second), fixedPace(time.Minute), fixedPace(time.Hour),
	{"mix", true, func(r *rand.Rand) time.Duration {
		return []time.Duration{0, time.Second, time.Minute, time.Hour}[r.IntN(4)]
	}},
	{"bursts", true, func(r *rand.Rand) time.Duration {
		if r.IntN(50) == 0 {
			return time.Duration(r.IntN(3)+1) * time.Hour
		}
		return 0
	}},
	{"spread", true, func(r *rand.Rand) time.Duration { return time.Duration(r.Int64N(int64(2 * time.Hour))) }},
}

// mildUncertain are uncertain messages, English and Korean, at the
// intensities Classify gives them: mostly 0.6, a few boosted or with
// several cues up to 1 (saturation target 0.55, still above WarnEnter).
var mildUncertain = []string{
	"I'm not sure", "hmm, I'm not sure", "not sure which one, no idea", "I'm really not sure!!", "I'm confused",
	"I don't know what to do", "I don't know", "no idea", "I can't decide", "Turn 12: I'm not sure about this",
	"잘 모르겠어", "헷갈려", "글쎄, 잘 모르겠네", "고민이야", "어떻게 해야 할지 모르겠어",
}

// fastEngine opens an engine whose turns are not written to disk, for
// driving tens of thousands of turns; persistence is covered elsewhere.
func fastEngine(t *testing.T, c *clock) *Engine {
	t.Helper()
	e, err := New(newMemBackend(), Options{Now: c.Now, HistoryLimit: 16})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// classified classifies each message once (Classify is deterministic), so
// the long runs cost only the engine's arithmetic.
func classified(t *testing.T, msgs []string) []Stimulus {
	t.Helper()
	out := make([]Stimulus, len(msgs))
	for i, m := range msgs {
		out[i] = Classify(m)
	}
	return out
}

const longRun = 10000

func seedsFor(p pace) []uint64 {
	if !p.mixed {
		return []uint64{1} // a fixed pace: the message choice is the only randomness
	}
	return []uint64{1, 2, 3, 4}
}

// TestNeutralTrafficNeverLeavesNormal: 10,000 neutral turns at any pace
// stay NORMAL with every value at baseline, count every turn and record no
// change.
func TestNeutralTrafficNeverLeavesNormal(t *testing.T) {
	stims := classified(t, neutralMessages)
	for i, s := range stims {
		if !s.IsNeutral() {
			t.Fatalf("%q classified %+v", neutralMessages[i], s)
		}
	}
	for _, p := range paces {
		for _, seed := range seedsFor(p) {
			t.Run(fmt.Sprintf("%s/seed%d", p.name, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 42))
				c := newClock()
				e := fastEngine(t, c)
				base := e.Options().Persona.Baseline
				for turn := 1; turn <= longRun; turn++ {
					c.Add(p.next(r))
					ev, err := e.Apply(ctx, "a", 0, stims[r.IntN(len(stims))])
					if err != nil {
						t.Fatal(err)
					}
					if ev.Level != Normal || ev.After != base || ev.Before != ev.After || len(ev.Changes) != 0 || ev.Turn != turn {
						t.Fatalf("turn %d: %+v", turn, ev)
					}
				}
				snap, _ := e.Snapshot(ctx, "a")
				if snap.Turns != longRun || len(snap.History) != 0 || snap.Values != base || snap.Level != Normal {
					t.Fatalf("after %d neutral turns: turns %d, %d changes, values %v, %s", longRun, snap.Turns, len(snap.History), snap.Values, snap.Level)
				}
			})
		}
	}
}

// TestMildUncertaintyNeverWarns: 10,000 turns of mildly uncertain
// messages, alone or mixed with neutral ones, at any pace never enter
// WARNING, and stability never drops below the lowest saturation target
// of the stimuli seen (b − K·|d|·I).
func TestMildUncertaintyNeverWarns(t *testing.T) {
	stims := classified(t, mildUncertain)
	maxI := 0.0
	for i, s := range stims {
		if s.Category != Uncertainty {
			t.Fatalf("%q classified %+v", mildUncertain[i], s)
		}
		maxI = math.Max(maxI, s.Intensity)
	}
	mixed := append(append([]Stimulus(nil), stims...), classified(t, neutralMessages)...)
	for _, traffic := range []struct {
		name  string
		stims []Stimulus
	}{{"uncertain", stims}, {"with-neutral", mixed}} {
		for _, p := range paces {
			for _, seed := range seedsFor(p) {
				t.Run(fmt.Sprintf("%s/%s/seed%d", traffic.name, p.name, seed), func(t *testing.T) {
					r := rand.New(rand.NewPCG(seed, 43))
					c := newClock()
					e := fastEngine(t, c)
					o := e.Options()
					floor := o.Persona.Baseline[Stability] + o.Guard.Saturation*o.Persona.Deltas[Uncertainty][Stability]*maxI
					if !(floor > o.Breaker.WarnEnter) {
						t.Fatalf("test setup: saturation floor %v not above WarnEnter", floor)
					}
					low := 1.0
					for turn := 1; turn <= longRun; turn++ {
						c.Add(p.next(r))
						ev, err := e.Apply(ctx, "a", 0, traffic.stims[r.IntN(len(traffic.stims))])
						if err != nil {
							t.Fatal(err)
						}
						s := ev.After[Stability]
						low = math.Min(low, s)
						if ev.Level != Normal || s < floor-1e-12 {
							t.Fatalf("turn %d (%s): stability %.4f, level %s (floor %.4f)", turn, ev.Stimulus.Category, s, ev.Level, floor)
						}
					}
					if snap, _ := e.Snapshot(ctx, "a"); snap.Turns != longRun {
						t.Fatalf("turns %d", snap.Turns)
					}
					t.Logf("lowest stability %.4f (floor %.4f)", low, floor)
				})
			}
		}
	}
}

// TestUncertaintyFixedPoint checks the fixed points quoted in the package
// comment for "I'm not sure" (uncertainty, intensity 0.6).
func TestUncertaintyFixedPoint(t *testing.T) {
	s := Classify("I'm not sure")
	if s.Category != Uncertainty || s.Intensity != 0.6 {
		t.Fatalf("classified %+v", s)
	}
	for _, tt := range []struct {
		pace        time.Duration
		after, next float64 // stability right after a turn, and just before the next
	}{
		{0, 0.63, 0.63},
		{time.Second, 0.63, 0.63},
		{time.Minute, 0.701, 0.702},
		{time.Hour, 0.718, 0.742},
	} {
		c := newClock()
		e := fastEngine(t, c)
		var ev Event
		for turn := 0; turn < 2000; turn++ {
			c.Add(tt.pace)
			ev, _ = e.Apply(ctx, "a", 0, s)
		}
		c.Add(tt.pace)
		snap, _ := e.Snapshot(ctx, "a")
		if math.Abs(ev.After[Stability]-tt.after) > 0.0015 || math.Abs(snap.Values[Stability]-tt.next) > 0.0015 {
			t.Errorf("pace %v: stability %.4f after a turn, %.4f before the next; want %.3f, %.3f",
				tt.pace, ev.After[Stability], snap.Values[Stability], tt.after, tt.next)
		}
	}
}

// TestSaturationTarget: a run of one category at one intensity, with no
// time passing, settles exactly at b + K·d·I, says so in the history, and
// a milder stimulus does not deepen a state a stronger one caused.
func TestSaturationTarget(t *testing.T) {
	c := newClock()
	e := fastEngine(t, c)
	o := e.Options()
	b, d := o.Persona.Baseline[Stability], o.Persona.Deltas[Frustration][Stability]
	target := b + o.Guard.Saturation*d*0.5
	var ev Event
	held := false
	for turn := 1; turn <= 200; turn++ {
		var err error
		ev, err = e.Apply(ctx, "a", turn, Stimulus{Category: Frustration, Intensity: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		if s := ev.After[Stability]; s < target-1e-12 {
			t.Fatalf("turn %d: stability %v below target %v", turn, s, target)
		}
		if strings.Contains(ev.Changes[0].Note, "stability held at saturation floor") {
			held = true
		}
	}
	if math.Abs(ev.After[Stability]-target) > 1e-12 || !held {
		t.Fatalf("settled at %v (want %v), held noted: %v", ev.After[Stability], target, held)
	}
	// A strong threat goes below; mild frustration then leaves it there.
	ev, _ = e.Apply(ctx, "a", 0, Stimulus{Category: Threat, Intensity: 1})
	deep := ev.After[Stability]
	if !(deep < target) {
		t.Fatalf("threat did not go below the frustration target: %v", deep)
	}
	ev, _ = e.Apply(ctx, "a", 0, Stimulus{Category: Frustration, Intensity: 0.5})
	if ev.After[Stability] != deep {
		t.Fatalf("mild frustration moved stability %v → %v", deep, ev.After[Stability])
	}
	// A single stimulus from baseline gets its whole delta.
	e2 := openTest(t, t.TempDir(), c, nil)
	ev, _ = e2.Apply(ctx, "b", 0, Stimulus{Category: Uncertainty, Intensity: 0.6})
	if got, want := ev.Changes[0].Delta[Stability], o.Persona.Deltas[Uncertainty][Stability]*0.6; math.Abs(got-want) > 1e-12 {
		t.Fatalf("first delta %v, want %v", got, want)
	}
	// Guard validation.
	for _, k := range []float64{0.5, -1, math.NaN(), math.Inf(1)} {
		g := DefaultGuard()
		g.Saturation = k
		if _, err := Open(t.TempDir(), Options{Guard: g}); err == nil {
			t.Errorf("saturation %v accepted", k)
		}
	}
	g := DefaultGuard()
	g.Saturation = 0
	if e, err := Open(t.TempDir(), Options{Guard: g}); err != nil || e.Options().Guard.Saturation != 5 {
		t.Errorf("saturation 0 should mean the default: %v", err)
	}
}

// TestNeutralTurn: a neutral Observe counts the turn, moves nothing,
// records nothing, leaves the habituation window alone, and still counts
// toward the CRITICAL cooldown; a breaker transition caused by decay alone
// is recorded with that decay.
func TestNeutralTurn(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	e := openTest(t, dir, c, nil)
	ev, err := e.Observe(ctx, "a", 0, "this is useless, it failed")
	if err != nil || ev.Stimulus.Category != Frustration {
		t.Fatalf("%+v %v", ev, err)
	}
	first := ev.After
	c.Add(10 * time.Minute)
	ev, err = e.Observe(ctx, "a", 0, "ok thanks")
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Stimulus.IsNeutral() || ev.Turn != 2 || ev.Before != ev.After || len(ev.Changes) != 0 || ev.Level != Normal {
		t.Fatalf("neutral event %+v", ev)
	}
	snap, _ := e.Snapshot(ctx, "a")
	if snap.Turns != 2 || len(snap.History) != 1 || snap.Values != ev.After {
		t.Fatalf("after neutral turn: %+v", snap)
	}
	// Persisted: a reopened engine sees the counted turn.
	if snap2, _ := openTest(t, dir, c, nil).Snapshot(ctx, "a"); snap2.Turns != 2 || snap2.Values != snap.Values {
		t.Fatalf("reopened: %+v", snap2)
	}
	// The next stimulus's Decay covers the whole time since the last change,
	// and its habituation sees the earlier frustration, not the neutral turn.
	c.Add(10 * time.Minute)
	ev, _ = e.Observe(ctx, "a", 0, "it failed again")
	ch := ev.Changes[0]
	if want := Decay(first, e.Options().Persona.Baseline, 20*time.Minute, e.Options().HalfLife); ev.Before != want {
		t.Fatalf("before %v, want %v", ev.Before, want)
	}
	if math.Abs(ch.Decay[Stability]-(ev.Before[Stability]-first[Stability])) > 1e-12 || ch.Habituation != 0.6 || ch.Turn != 3 {
		t.Fatalf("stimulus change %+v", ch)
	}
	if _, err := e.Apply(ctx, "a", 0, Stimulus{Category: Neutral, Intensity: 0.1}); err == nil {
		t.Fatal("neutral stimulus with an intensity accepted")
	}

	// Cooldown and recovery through neutral turns only.
	e2 := openTest(t, t.TempDir(), c, nil)
	for i := 0; ; i++ {
		ev, _ = e2.Apply(ctx, "b", 0, Stimulus{Category: Threat, Intensity: 1})
		if ev.Level == Critical {
			break
		}
		if i > 50 {
			t.Fatal("never CRITICAL")
		}
	}
	c.Add(24 * time.Hour) // stability is back at baseline by decay
	var levels []Level
	for i := 0; i < 4; i++ {
		ev, _ = e2.Observe(ctx, "b", 0, "hi")
		levels = append(levels, ev.Level)
		if i == 2 && (len(ev.Changes) != 1 || ev.Changes[0].Cause != CauseBreaker || !strings.Contains(ev.Changes[0].Note, "CRITICAL → NORMAL") ||
			ev.Changes[0].Decay[Stability] <= 0) {
			t.Fatalf("cooldown turn changes %+v", ev.Changes)
		}
	}
	if fmt.Sprint(levels) != "[CRITICAL CRITICAL NORMAL NORMAL]" {
		t.Fatalf("levels over neutral turns after CRITICAL: %v", levels)
	}
}

// crisis are realistic sequences of strong threat, frustration and loss
// messages.
var crisis = map[string][]string{
	"en": {
		"I'm scared, everything is falling apart",
		"I can't take this anymore",
		"I'm so stressed and overwhelmed, I give up",
		"I'm terrified, someone is threatening to hurt me",
		"everything failed again, it's hopeless",
		"I'm panicking, this is an emergency",
		"I CAN'T TAKE THIS ANYMORE!!!",
		"my dad died and I lost my job, I'm devastated",
		"they threatened me again, I'm so scared",
	},
	"ko": {
		"너무 무서워, 다 무너지고 있어",
		"더 이상 못 견디겠어",
		"다 망했어, 포기할래",
		"누가 나를 죽이겠다고 위협했어, 너무 무서워",
		"스트레스 때문에 너무 지쳤어",
		"아빠가 돌아가셨어, 너무 슬퍼",
		"또 실패했어, 정말 짜증나",
	},
}

// TestCrisisTripsBreaker: a real crisis trips WARNING and then CRITICAL at
// a conversational pace, and recovery still needs the cooldown and the
// hysteresis.
func TestCrisisTripsBreaker(t *testing.T) {
	b := DefaultBreaker()
	for lang, msgs := range crisis {
		for _, p := range []time.Duration{0, 30 * time.Second, 2 * time.Minute} {
			t.Run(fmt.Sprintf("%s/%v", lang, p), func(t *testing.T) {
				c := newClock()
				e := openTest(t, t.TempDir(), c, nil)
				var seen []Level
				turn := 0
				for ; turn < 3*len(msgs); turn++ {
					c.Add(p)
					ev, err := e.Observe(ctx, "a", 0, msgs[turn%len(msgs)])
					if err != nil {
						t.Fatal(err)
					}
					if ev.Stimulus.IsNeutral() || ev.Stimulus.Category.positive() || ev.Stimulus.Category == Uncertainty {
						t.Fatalf("%q classified %+v", msgs[turn%len(msgs)], ev.Stimulus)
					}
					if len(seen) == 0 || seen[len(seen)-1] != ev.Level {
						seen = append(seen, ev.Level)
					}
					if ev.Level == Critical {
						break
					}
				}
				if fmt.Sprint(seen) != "[NORMAL WARNING CRITICAL]" {
					t.Fatalf("levels %v after %d crisis messages", seen, turn+1)
				}
				// Recovery over neutral turns ten minutes apart: CRITICAL is
				// left only above CriticalLeave after the cooldown, WARNING
				// only above WarnLeave.
				level, inCritical := Critical, 0
				for i := 0; level != Normal; i++ {
					if i > 100 {
						t.Fatal("never recovered")
					}
					c.Add(10 * time.Minute)
					ev, err := e.Observe(ctx, "a", 0, "ok")
					if err != nil {
						t.Fatal(err)
					}
					if level == Critical {
						inCritical++
					}
					s := ev.After[Stability]
					switch {
					case level == Critical && ev.Level != Critical:
						if !(s > b.CriticalLeave) || inCritical < b.CooldownTurns {
							t.Fatalf("left CRITICAL at %.3f after %d turns", s, inCritical)
						}
					case level == Warning && ev.Level == Normal:
						if !(s > b.WarnLeave) {
							t.Fatalf("left WARNING at %.3f", s)
						}
					case ev.Level == Critical && s > b.CriticalLeave && inCritical >= b.CooldownTurns,
						ev.Level == Warning && s > b.WarnLeave:
						t.Fatalf("stuck at %s with stability %.3f after %d turns in CRITICAL", ev.Level, s, inCritical)
					}
					level = ev.Level
				}
			})
		}
	}
}

// TestFrozenClockNoRecovery: with no time passing, neutral turns finish
// the cooldown but cannot lift stability, so CRITICAL holds.
func TestFrozenClockNoRecovery(t *testing.T) {
	c := newClock()
	e := openTest(t, t.TempDir(), c, nil)
	for _, m := range crisis["en"] {
		e.Observe(ctx, "a", 0, m)
	}
	for i := 0; i < 20; i++ {
		e.Observe(ctx, "a", 0, "thanks")
	}
	if snap, _ := e.Snapshot(ctx, "a"); snap.Level != Critical || snap.TurnsInCritical < 3 {
		t.Fatalf("%s after neutral turns at a frozen clock (%d turns in CRITICAL, stability %.3f)", snap.Level, snap.TurnsInCritical, snap.Values[Stability])
	}
}
