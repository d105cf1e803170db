package state

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Causes recorded in Change.Cause.
const (
	CauseStimulus      = "stimulus"       // a classified user message
	CauseFloorRecovery = "floor-recovery" // the saturation guard pulled a value back
	CauseBreaker       = "breaker"        // the breaker level changed
)

// ErrInvalidActor is returned for an empty, oversize (> 256 bytes), non-UTF-8
// or control-character actor ID.
var ErrInvalidActor = errors.New("state: invalid actor id")

// Guard configures the saturation guard (see the package comment).
type Guard struct {
	// Habituation is the factor applied per earlier same-category event in
	// the window, in (0,1]; 1 disables habituation. Default 0.6.
	Habituation float64
	// Window is how many previous events are looked at. Default 6.
	Window int
	// Saturation bounds how far one stimulus can carry a value: a stimulus
	// of category c at intensity I never pushes value i past its saturation
	// target b[i] + Saturation·Deltas[c][i]·I (b the baseline), so a run of
	// one category at one intensity settles at most Saturation single
	// deltas from baseline, whatever the pace. At least 1 (a single
	// stimulus from baseline always gets its whole delta). Default 5; 0
	// means the default.
	Saturation float64
	// Margin is the distance to 0 or 1 that counts as saturated. Default 0.1.
	Margin float64
	// Turns is how many consecutive saturated turns trigger floor recovery.
	// Default 3.
	Turns int
}

// DefaultGuard returns the documented defaults.
func DefaultGuard() Guard {
	return Guard{Habituation: 0.6, Window: 6, Saturation: 5, Margin: 0.1, Turns: 3}
}

// Options configure an Engine. Zero fields take their defaults.
type Options struct {
	Persona  Persona       // DefaultPersona()
	HalfLife time.Duration // 30 min; the decay half-life
	Breaker  Breaker       // DefaultBreaker() when all fields are zero
	Guard    Guard         // DefaultGuard() when all fields are zero
	// HistoryLimit bounds the changes kept per actor. Default 200.
	HistoryLimit int
	// Now is the clock; default time.Now. Tests inject a fake.
	Now func() time.Time
	// NoSync is FileOptions.NoSync for the backend Open creates (New
	// ignores it): appends and compactions are not fsynced, so a power cut
	// may lose the last changes (a torn last line is ignored on load). An
	// fsync costs milliseconds to tens of ms per turn, so the server sets
	// it: state is derived data, not something the user said.
	NoSync bool
}

// Change is one recorded change of an actor's state with its cause.
type Change struct {
	At    time.Time `json:"at"`
	Turn  int       `json:"turn"`
	Cause string    `json:"cause"`
	// Stimulus, Intensity, Habituation and Cues are set for CauseStimulus.
	Stimulus    Category `json:"stimulus,omitempty"`
	Intensity   float64  `json:"intensity,omitempty"`
	Habituation float64  `json:"habituation,omitempty"`
	Cues        []string `json:"cues,omitempty"`
	// Decay is how far lazy decay had moved the values since the previous
	// change, applied just before Delta.
	Decay Vector `json:"decay"`
	// Delta is the change actually applied (after clamping).
	Delta Vector `json:"delta"`
	// Values are the values right after the change.
	Values Vector `json:"values"`
	Level  Level  `json:"level"`
	// Note explains breaker and recovery changes, e.g. "WARNING → CRITICAL",
	// and stimulus changes whose delta the saturation target held back, e.g.
	// "stability held at saturation floor 0.630".
	Note string `json:"note,omitempty"`
}

// Event is what one Observe did. For a Neutral stimulus Before == After.
type Event struct {
	ActorID   string   `json:"actor_id"`
	Turn      int      `json:"turn"`
	Stimulus  Stimulus `json:"stimulus"`
	Before    Vector   `json:"before"` // decayed values before the stimulus
	After     Vector   `json:"after"`
	PrevLevel Level    `json:"prev_level"`
	Level     Level    `json:"level"`
	Changes   []Change `json:"changes"` // the history records this event appended
}

// Snapshot is an actor's state as of Snapshot.At, decay applied.
type Snapshot struct {
	ActorID  string    `json:"actor_id"`
	Persona  string    `json:"persona"`
	At       time.Time `json:"at"`
	Values   Vector    `json:"values"`
	Baseline Vector    `json:"baseline"`
	Level    Level     `json:"level"`
	// TurnsInCritical counts turns spent in CRITICAL since it was entered.
	TurnsInCritical int `json:"turns_in_critical"`
	// Turns counts Observe calls for this actor, Neutral ones included.
	Turns     int       `json:"turns"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// History is oldest first.
	History []Change `json:"history"`
}

// Engine computes the state of every actor and persists it through a
// Backend. It holds no per-actor state of its own: every Apply is one
// Backend.Update (an atomic read-modify-write), so several engines may
// share a backend that serialises updates across processes (pgstate).
// It is safe for concurrent use.
type Engine struct {
	b    Backend
	opts Options
}

// Open returns an Engine persisting under dir through a FileBackend (one
// append-only log per actor; see NewFileBackend), creating dir if needed.
// Options.NoSync is passed to the backend. See New for the validation of
// opts.
func Open(dir string, opts Options) (*Engine, error) {
	b, err := NewFileBackend(dir, FileOptions{NoSync: opts.NoSync})
	if err != nil {
		return nil, err
	}
	return New(b, opts)
}

// New returns an Engine persisting through b. Options are validated:
// baseline and deltas in range, consistent breaker thresholds, and a
// stability baseline above Breaker.WarnLeave (otherwise WARNING could never
// clear by decay). Options.NoSync is ignored (it belongs to the file
// backend).
func New(b Backend, opts Options) (*Engine, error) {
	if b == nil {
		return nil, errors.New("state: nil backend")
	}
	if opts.Persona.Deltas == nil && opts.Persona.Baseline == (Vector{}) {
		name := opts.Persona.Name
		opts.Persona = DefaultPersona()
		if name != "" {
			opts.Persona.Name = name
		}
	}
	if opts.Persona.Name == "" {
		opts.Persona.Name = "default"
	}
	if opts.HalfLife <= 0 {
		opts.HalfLife = 30 * time.Minute
	}
	if opts.Breaker == (Breaker{}) {
		opts.Breaker = DefaultBreaker()
	}
	if opts.Guard == (Guard{}) {
		opts.Guard = DefaultGuard()
	}
	if opts.Guard.Saturation == 0 {
		opts.Guard.Saturation = DefaultGuard().Saturation
	}
	if opts.HistoryLimit <= 0 {
		opts.HistoryLimit = 200
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := opts.Persona.validate(); err != nil {
		return nil, err
	}
	if err := opts.Breaker.Validate(); err != nil {
		return nil, err
	}
	g := opts.Guard
	if !(g.Habituation > 0 && g.Habituation <= 1) || g.Window < 0 || !(g.Saturation >= 1) || math.IsInf(g.Saturation, 0) || !(g.Margin >= 0 && g.Margin < 0.5) || g.Turns < 1 {
		return nil, fmt.Errorf("state: saturation guard %+v out of range (habituation in (0,1], window ≥ 0, saturation ≥ 1 and finite, margin in [0,0.5), turns ≥ 1)", g)
	}
	if b := opts.Persona.Baseline[Stability]; b <= opts.Breaker.WarnLeave {
		return nil, fmt.Errorf("state: stability baseline %v must exceed breaker warnLeave %v", b, opts.Breaker.WarnLeave)
	}
	return &Engine{b: b, opts: opts}, nil
}

// Options returns the effective options (defaults filled in).
func (e *Engine) Options() Options { return e.opts }

// Backend returns the backend the engine persists through.
func (e *Engine) Backend() Backend { return e.b }

func validActor(id string) error {
	if id == "" || len(id) > 256 || !utf8.ValidString(id) {
		return fmt.Errorf("%w: %q", ErrInvalidActor, id)
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %q", ErrInvalidActor, id)
		}
	}
	return nil
}

// fresh is the record of an actor with nothing stored.
func (e *Engine) fresh(actor string) Record {
	return Record{ActorID: actor, Values: e.opts.Persona.Baseline}
}

// sane clamps values read from a store to [0,1].
func sane(r *Record) {
	for i := range r.Values {
		r.Values[i] = clamp01(r.Values[i])
	}
}

// Decay returns v relaxed toward baseline b over dt with the given
// half-life: b + (v−b)·2^(−dt/halfLife). dt ≤ 0 returns v unchanged.
func Decay(v, b Vector, dt, halfLife time.Duration) Vector {
	if dt <= 0 || halfLife <= 0 {
		return v
	}
	f := math.Exp2(-float64(dt) / float64(halfLife))
	var out Vector
	for i := range v {
		out[i] = clamp01(b[i] + (v[i]-b[i])*f)
	}
	return out
}

func (e *Engine) decayed(st *Record, now time.Time) Vector {
	if st.UpdatedAt.IsZero() {
		return st.Values
	}
	return Decay(st.Values, e.opts.Persona.Baseline, now.Sub(st.UpdatedAt), e.opts.HalfLife)
}

// Observe classifies text as the stimulus of turn for actorID, applies it
// and persists the result. Each call counts as one turn for the CRITICAL
// cooldown, including a Neutral one (a message with no emotional cue),
// which moves no value and records no change unless decay alone moved the
// breaker level. turn is recorded as the cause's turn number only.
func (e *Engine) Observe(ctx context.Context, actorID string, turn int, text string) (Event, error) {
	return e.Apply(ctx, actorID, turn, Classify(text))
}

// Apply is Observe with an already-classified stimulus. The category must be
// one of Categories with an intensity in (0,1], or Neutral with intensity 0.
//
// A Neutral turn counts the turn (Snapshot.Turns, and the CRITICAL
// cooldown), lets the breaker re-evaluate the decayed stability, and
// changes nothing else: no value moves, the habituation window and the
// saturation counters are untouched, and the history gains an entry only
// for a breaker transition (cause "breaker", with the decay that caused
// it). Its Event has Before == After and usually no Changes.
func (e *Engine) Apply(ctx context.Context, actorID string, turn int, s Stimulus) (Event, error) {
	if err := ctx.Err(); err != nil {
		return Event{}, err
	}
	if err := validActor(actorID); err != nil {
		return Event{}, err
	}
	neutral := s.Category == Neutral
	switch {
	case neutral:
		if s.Intensity != 0 {
			return Event{}, fmt.Errorf("state: neutral stimulus with intensity %v (want 0)", s.Intensity)
		}
	case !s.Category.valid():
		return Event{}, fmt.Errorf("state: unknown stimulus category %q", s.Category)
	case !(s.Intensity > 0 && s.Intensity <= 1):
		return Event{}, fmt.Errorf("state: stimulus intensity %v outside (0,1]", s.Intensity)
	}
	var ev Event
	err := e.b.Update(ctx, actorID, e.opts.HistoryLimit, func(cur Record, ok bool) (Record, []Change, error) {
		if !ok {
			cur = e.fresh(actorID)
		} else if cur.ActorID != actorID {
			return Record{}, nil, fmt.Errorf("state: store holds actor %q under %q", cur.ActorID, actorID)
		}
		sane(&cur)
		next, evt := e.step(cur, actorID, turn, s)
		ev = evt
		return next, evt.Changes, nil
	})
	if err != nil {
		return Event{}, err
	}
	return ev, nil
}

// step is one turn of the dynamics on st (which it owns), as documented on
// Apply; it returns the next record and the event. It is a pure function
// of st, its arguments and the clock, so a backend may call it again after
// a conflict.
func (e *Engine) step(st Record, actorID string, turn int, s Stimulus) (Record, Event) {
	neutral := s.Category == Neutral
	st.Recent = slices.Clone(st.Recent)
	if turn <= 0 {
		turn = st.Turns + 1 // the actor's next turn
	}

	now := e.opts.Now()
	if now.Before(st.UpdatedAt) {
		now = st.UpdatedAt // a clock that went backwards does not un-decay
	}
	b := e.opts.Breaker
	before := e.decayed(&st, now)
	decay := sub(before, st.Values) // attached to the first change recorded
	ev := Event{ActorID: actorID, Turn: turn, Stimulus: s, Before: before, PrevLevel: st.Level}

	// Decay alone may have moved the level (evaluated at turn start).
	if lv := b.Next(st.Level, st.TurnsInCritical, before[Stability]); lv != st.Level {
		ev.Changes = append(ev.Changes, Change{At: now, Turn: turn, Cause: CauseBreaker, Decay: decay, Values: before, Level: lv,
			Note: fmt.Sprintf("%s → %s (stability %.3f after decay)", st.Level, lv, before[Stability])})
		decay = Vector{}
		st.Level = lv
		if lv == Critical {
			st.TurnsInCritical = 0
		}
	}
	if st.Level == Critical {
		st.TurnsInCritical++
	}

	after := before
	stimIdx := len(ev.Changes)
	if !neutral {
		after = e.stimulate(&st, &ev, s, before, decay, now, turn)
		decay = Vector{}
	}

	lv := b.Next(st.Level, st.TurnsInCritical, after[Stability])
	for i := stimIdx; i < len(ev.Changes); i++ {
		ev.Changes[i].Level = st.Level
	}
	if lv != st.Level {
		note := fmt.Sprintf("%s → %s (stability %.3f", st.Level, lv, after[Stability])
		if neutral {
			note += " after decay"
		}
		if st.Level == Critical {
			note += fmt.Sprintf(", %d turns in CRITICAL", st.TurnsInCritical)
		}
		ev.Changes = append(ev.Changes, Change{At: now, Turn: turn, Cause: CauseBreaker, Decay: decay, Values: after, Level: lv, Note: note + ")"})
		if lv == Critical {
			st.TurnsInCritical = 0
		}
		st.Level = lv
	}
	if st.Level != Critical {
		st.TurnsInCritical = 0
	}

	// A neutral turn that recorded nothing keeps Values and UpdatedAt as
	// they were: decay stays a function of the time since the last recorded
	// change, and the next change's Decay covers all of it.
	if !neutral || len(ev.Changes) > 0 {
		st.Values = after
		st.UpdatedAt = now
	}
	st.Turns++
	if !neutral {
		st.Recent = append(st.Recent, RecentStimulus{Category: s.Category, At: now})
		// Only the last Guard.Window entries are ever read (habituation).
		if w := e.opts.Guard.Window; len(st.Recent) > w {
			st.Recent = st.Recent[len(st.Recent)-w:]
		}
		if len(st.Recent) == 0 {
			st.Recent = nil
		}
	}
	ev.After = after
	ev.Level = st.Level
	return st, ev
}

// stimulate applies the non-neutral stimulus s to the decayed values
// before: habituation, the saturation target, then floor recovery. It
// appends the stimulus change (carrying decay) and any floor-recovery
// changes to ev and updates st's saturation counters; it returns the new
// values.
func (e *Engine) stimulate(st *Record, ev *Event, s Stimulus, before, decay Vector, now time.Time, turn int) Vector {
	g := e.opts.Guard
	base := e.opts.Persona.Baseline

	// Habituation.
	n := 0
	start := max(0, len(st.Recent)-g.Window)
	for _, r := range st.Recent[start:] {
		if r.Category == s.Category && now.Sub(r.At) < e.opts.HalfLife {
			n++
		}
	}
	factor := math.Pow(g.Habituation, float64(n))

	// Delta, held at the saturation target (see the package comment).
	after := before
	d := e.opts.Persona.Deltas[s.Category]
	var held []string
	for i := range after {
		v, delta := after[i], d[i]*s.Intensity*factor
		target := clamp01(base[i] + g.Saturation*d[i]*s.Intensity)
		next := v + delta
		if (delta < 0 && next < target) || (delta > 0 && next > target) {
			bound := "floor"
			if delta > 0 {
				bound = "ceiling"
			}
			if (delta < 0 && v <= target) || (delta > 0 && v >= target) {
				next = v // already at or past the target: not deepened
				held = append(held, fmt.Sprintf("%s already at or past saturation %s %.3f", Dim(i), bound, target))
			} else {
				next = target
				held = append(held, fmt.Sprintf("%s held at saturation %s %.3f", Dim(i), bound, target))
			}
		}
		after[i] = clamp01(next)
	}
	ch := Change{At: now, Turn: turn, Cause: CauseStimulus, Stimulus: s.Category,
		Intensity: s.Intensity, Habituation: round6(factor), Cues: s.Cues, Decay: decay, Delta: sub(after, before), Values: after}
	if len(held) > 0 {
		ch.Note = strings.Join(held, "; ")
	}
	ev.Changes = append(ev.Changes, ch)

	// Floor recovery.
	for i := range after {
		low := after[i] < g.Margin && base[i] >= g.Margin
		high := after[i] > 1-g.Margin && base[i] <= 1-g.Margin
		if !low && !high {
			st.Saturated[i] = 0
			continue
		}
		st.Saturated[i]++
		if st.Saturated[i] >= g.Turns {
			prev := after
			after[i] = clamp01(after[i] + (base[i]-after[i])/2)
			st.Saturated[i] = 0
			ev.Changes = append(ev.Changes, Change{At: now, Turn: turn, Cause: CauseFloorRecovery, Delta: sub(after, prev), Values: after,
				Note: fmt.Sprintf("%s saturated for %d turns; pulled half-way to baseline %.2f", Dim(i), g.Turns, base[i])})
		}
	}
	return after
}

func sub(a, b Vector) Vector {
	var out Vector
	for i := range a {
		out[i] = a[i] - b[i]
	}
	return out
}

func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// Snapshot returns actorID's state now: decayed values, the breaker level
// (re-evaluated on the decayed stability without persisting), and the
// history, oldest first. An actor never observed is at baseline in NORMAL.
// Errors: ErrInvalidActor, ctx.Err(), or the backend's read error.
func (e *Engine) Snapshot(ctx context.Context, actorID string) (Snapshot, error) {
	return e.snapshot(ctx, actorID, true)
}

func (e *Engine) snapshot(ctx context.Context, actorID string, history bool) (Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return Snapshot{}, err
	}
	if err := validActor(actorID); err != nil {
		return Snapshot{}, err
	}
	st, hist, ok, err := e.b.Load(ctx, actorID, history)
	if err != nil {
		return Snapshot{}, err
	}
	if !ok {
		st, hist = e.fresh(actorID), nil
	} else if st.ActorID != actorID {
		return Snapshot{}, fmt.Errorf("state: store holds actor %q under %q", st.ActorID, actorID)
	}
	sane(&st)
	if len(hist) > e.opts.HistoryLimit {
		hist = hist[len(hist)-e.opts.HistoryLimit:]
	}
	now := e.opts.Now()
	if now.Before(st.UpdatedAt) {
		now = st.UpdatedAt
	}
	v := e.decayed(&st, now)
	return Snapshot{
		ActorID: actorID, Persona: e.opts.Persona.Name, At: now, Values: v, Baseline: e.opts.Persona.Baseline,
		Level:           e.opts.Breaker.Next(st.Level, st.TurnsInCritical, v[Stability]),
		TurnsInCritical: st.TurnsInCritical, Turns: st.Turns, UpdatedAt: st.UpdatedAt,
		History: append([]Change{}, hist...),
	}, nil
}

// Level returns actorID's breaker level now (see Snapshot). It reads the
// record only, not the history.
func (e *Engine) Level(ctx context.Context, actorID string) (Level, error) {
	s, err := e.snapshot(ctx, actorID, false)
	return s.Level, err
}

// Actors lists the actors with stored state, sorted bytewise. An actor
// that was only read (Snapshot, Level) has none.
func (e *Engine) Actors(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out, err := e.b.Actors(ctx)
	if err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

// Forget deletes the actor's stored state and history: the actor starts
// again from the persona's baseline. Nothing stored is not an error.
func (e *Engine) Forget(ctx context.Context, actorID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validActor(actorID); err != nil {
		return err
	}
	return e.b.Forget(ctx, actorID)
}
