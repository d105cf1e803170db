// Package state is Tendril's internal-state model (SPEC §6.1) and the
// circuit breaker on stability (SPEC §6.2).
//
// Six values in [0,1] describe the agent's stance towards one actor: trust,
// curiosity, vigilance, attachment, stability and satisfaction. This is a
// numeric model for state management and safety control, not a claim of
// feelings. User messages are classified into stimuli (Classify); each
// stimulus moves the values by a per-persona delta matrix scaled by its
// intensity, and the values are clamped to [0,1] after every change. Between
// stimuli the values relax exponentially toward the persona's baseline; the
// relaxation is computed on read from an injected clock, with no timers:
//
//	v(t) = b + (v₀ − b) · 2^(−Δt / HalfLife)
//
// so after one half-life (default 30 min) half of the distance to baseline is
// gone. The function is deterministic for a given clock and monotone: |v−b|
// never grows and v never crosses b while decaying.
//
// Neutral messages. A message with no emotional cue (a greeting, an
// acknowledgement, bare thanks, a plain question or statement, a numbered
// test line) classifies as Neutral and moves no value; it only counts the
// turn. Only real cues produce stimuli.
//
// Saturation guard. A long one-sided conversation must not pin a value at a
// bound, and a long run of mild stimuli must not add up to a strong one.
// Three mechanisms, all recorded in the history:
//
//   - Habituation: a stimulus whose category already occurred n times among
//     the previous Guard.Window events (within one half-life) has its delta
//     scaled by Guard.Habituation^n (default 0.6ⁿ, n ≤ 6), so repeated
//     pressure has diminishing effect.
//   - Saturation target: a stimulus of category c at intensity I never
//     pushes value i past T = b + K·d·I, where d = Deltas[c][i], b the
//     baseline and K = Guard.Saturation (default 5). From baseline a single
//     stimulus gets its whole delta d·I (K ≥ 1); a value already at or
//     beyond T is left where it is (a mild stimulus cannot deepen a state
//     that a stronger one caused). The change's Note says when a value was
//     held.
//   - Floor recovery: when a value has sat within Guard.Margin (0.1) of 0 or 1,
//     on the far side of its baseline, for Guard.Turns (3) consecutive
//     stimulus turns, it is pulled half-way back toward baseline (cause
//     "floor-recovery").
//
// Hence stability can reach CRITICAL but cannot stay at 0 forever.
//
// Dynamics of a long run. Take stability (b = 0.75, half-life H = 30 min)
// and a run of one category at intensity I, one turn every p, so decay
// multiplies the distance to baseline by f = 2^(−p/H) between turns, and
// habituation settles at a = 0.6^n with n = min(6, ⌈H/p⌉−1) (n = 6 for
// p = 0). Without the target, the distance x below baseline right after a
// turn obeys x' = f·x + a·|d|·I, whose fixed point x* = a·|d|·I / (1−f)
// grows without bound as p → 0 (f → 1): that is how thousands of
// intensity-0.1 "uncertainty" turns once walked stability from 0.75 into
// CRITICAL. With the target the fixed point is
//
//	s* = max(T, b − a·|d|·I/(1−f)),  T = b − K·|d|·I,
//
// and, because decay only moves toward b > T and a stimulus never moves past
// T, s ≥ min(s₀, T) holds after every turn, for any pace or mix of paces.
// With several categories s stays above the lowest T among them (positive
// stimuli only raise it). Default persona, K = 5, I = 0.36 (one weak-ish
// cue) and I = 1:
//
//	uncertainty  |d| 0.04  T = 0.678 … 0.55  never below WarnEnter 0.5
//	loss         |d| 0.08  T = 0.606 … 0.35
//	frustration  |d| 0.10  T = 0.57  … 0.25
//	threat       |d| 0.15  T = 0.48  … 0     (floor recovery takes over)
//
// For "I'm not sure" (uncertainty, I = 0.6, T = 0.63): p = 0 or 1 s settles
// at the target 0.63 (the target binds for p ≲ 24 s, where a/(1−f) ≥ K);
// p = 1 min gives a = 0.6⁶, 1−f = 0.0228, s* = 0.701; p = 1 h gives a = 1,
// f = 0.25, s* = 0.718 after each turn and 0.742 before the next. All are
// above WarnEnter (0.5) and even WarnLeave (0.6). A crisis still trips the
// breaker: strong threat, frustration or loss cues (I near 1) have targets
// at or below CriticalEnter and reach them at today's speed, since the
// target only caps a delta, never shrinks one that stays above it.
//
// Persistence. The Engine holds the logic and no per-actor state; each
// Apply is one atomic read-modify-write through a Backend: FileBackend
// (Open; an append-only JSON Lines log per actor) or pgstate (PostgreSQL,
// shared by several instances). statetest.Exercise is the conformance
// suite both pass.
package state

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Dim names one of the six values.
type Dim int

// The six dimensions, in the order used by Vector.
const (
	Trust Dim = iota
	Curiosity
	Vigilance
	Attachment
	Stability
	Satisfaction
	NumDims
)

var dimNames = [NumDims]string{"trust", "curiosity", "vigilance", "attachment", "stability", "satisfaction"}

// String returns the lower-case name used in config and JSON, e.g. "stability".
func (d Dim) String() string {
	if d < 0 || d >= NumDims {
		return fmt.Sprintf("Dim(%d)", int(d))
	}
	return dimNames[d]
}

// ParseDim maps a name such as "trust" to its Dim.
func ParseDim(s string) (Dim, error) {
	for i, n := range dimNames {
		if n == strings.ToLower(strings.TrimSpace(s)) {
			return Dim(i), nil
		}
	}
	return 0, fmt.Errorf("unknown state value %q (want one of %s)", s, strings.Join(dimNames[:], ", "))
}

// Vector holds one number per Dim. As state values they lie in [0,1]; as
// deltas they lie in [−1,1]. JSON form is an object keyed by Dim names.
type Vector [NumDims]float64

// MarshalJSON writes {"trust":0.6,...} in Dim order, at full precision so a
// reload reproduces the exact values.
func (v Vector) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 128)
	b = append(b, '{')
	for i, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("state: %s is not finite", Dim(i))
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, dimNames[i]...)
		b = append(b, '"', ':')
		b = strconv.AppendFloat(b, x, 'g', -1, 64)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads an object keyed by Dim names; missing names are 0 and
// unknown names are an error.
func (v *Vector) UnmarshalJSON(b []byte) error {
	var m map[string]float64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	out, err := VectorFromMap(m, Vector{})
	if err != nil {
		return err
	}
	*v = out
	return nil
}

// VectorFromMap overlays m (keys are Dim names) onto base. Unknown keys and
// non-finite numbers are errors.
func VectorFromMap(m map[string]float64, base Vector) (Vector, error) {
	for k, x := range m {
		d, err := ParseDim(k)
		if err != nil {
			return base, err
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return base, fmt.Errorf("state value %s: not a finite number", k)
		}
		base[d] = x
	}
	return base, nil
}

// Map returns the vector as name → value.
func (v Vector) Map() map[string]float64 {
	m := make(map[string]float64, NumDims)
	for i := range v {
		m[dimNames[i]] = v[i]
	}
	return m
}

func clamp01(x float64) float64 {
	switch {
	case math.IsNaN(x):
		return 0
	case x < 0:
		return 0
	case x > 1:
		return 1
	}
	return x
}

// Category is a stimulus category (SPEC §6.1).
type Category string

// The stimulus categories. Frustration covers failure and pressure.
// Neutral is not a stimulus category: it is what Classify returns for a
// message with no emotional cue, and applying it moves no value.
const (
	Neutral     Category = "neutral"
	Connection  Category = "connection"
	Achievement Category = "achievement"
	Joy         Category = "joy"
	Uncertainty Category = "uncertainty"
	Threat      Category = "threat"
	Loss        Category = "loss"
	Frustration Category = "frustration"
)

// Categories lists every category in tie-break priority order: when two
// categories score equally the earlier one wins (safety-relevant first).
var Categories = []Category{Threat, Loss, Frustration, Uncertainty, Connection, Achievement, Joy}

func (c Category) valid() bool {
	for _, x := range Categories {
		if x == c {
			return true
		}
	}
	return false
}

// positive reports whether the category is a positive-valence stimulus.
func (c Category) positive() bool { return c == Connection || c == Achievement || c == Joy }

// Persona carries the per-persona baseline and delta matrix.
type Persona struct {
	Name string
	// Baseline is the resting value of each Dim, each in [0,1].
	Baseline Vector
	// Deltas gives, per category, the change applied at intensity 1; the
	// applied delta is Deltas[c] · intensity · habituation factor.
	Deltas map[Category]Vector
}

// DefaultPersona is the Sprout default: friendly, curious, calm.
func DefaultPersona() Persona {
	return Persona{
		Name: "default",
		//               trust curio vigil attach stab  satis
		Baseline: Vector{0.60, 0.60, 0.30, 0.40, 0.75, 0.60},
		Deltas: map[Category]Vector{
			Connection:  {+0.08, +0.02, -0.03, +0.10, +0.05, +0.05},
			Achievement: {+0.03, +0.03, -0.02, +0.02, +0.05, +0.10},
			Joy:         {+0.03, +0.04, -0.03, +0.03, +0.05, +0.08},
			Uncertainty: {-0.01, +0.06, +0.04, 0.00, -0.04, -0.02},
			Threat:      {-0.12, -0.03, +0.15, -0.05, -0.15, -0.05},
			Loss:        {0.00, -0.02, +0.03, +0.04, -0.08, -0.08},
			Frustration: {-0.05, -0.02, +0.06, -0.02, -0.10, -0.10},
		},
	}
}

// WithBaseline returns p with the named baseline values replaced, as read
// from config (state.baseline: {"stability": 0.8}).
func (p Persona) WithBaseline(m map[string]float64) (Persona, error) {
	b, err := VectorFromMap(m, p.Baseline)
	if err != nil {
		return p, err
	}
	p.Baseline = b
	return p, nil
}

func (p Persona) validate() error {
	for i, x := range p.Baseline {
		if x < 0 || x > 1 || math.IsNaN(x) {
			return fmt.Errorf("persona %q: baseline %s=%v outside [0,1]", p.Name, Dim(i), x)
		}
	}
	for c, v := range p.Deltas {
		if !c.valid() {
			return fmt.Errorf("persona %q: unknown category %q in delta matrix", p.Name, c)
		}
		for i, x := range v {
			if x < -1 || x > 1 || math.IsNaN(x) {
				return fmt.Errorf("persona %q: delta %s/%s=%v outside [-1,1]", p.Name, c, Dim(i), x)
			}
		}
	}
	return nil
}
