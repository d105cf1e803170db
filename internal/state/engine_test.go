package state

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is an injected fake clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func openTest(t *testing.T, dir string, c *clock, mod func(*Options)) *Engine {
	t.Helper()
	o := Options{Now: c.Now, NoSync: true}
	if mod != nil {
		mod(&o)
	}
	e, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var ctx = context.Background()

func TestValuesStayInUnitInterval(t *testing.T) {
	msgs := []string{"thank you!!!", "I'M SO SO SCARED, KILL BOMB ATTACK!!!", "it failed again, useless", "my dog died",
		"we did it, finished!!", "maybe?", "haha amazing", "고마워 정말 정말", "죽여버릴 거야!!!", "짜증나 실패", "hello"}
	for seed := uint64(1); seed <= 8; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		c := newClock()
		e := fastEngine(t, c) // dynamics only: no file I/O
		for turn := 1; turn <= 120; turn++ {
			if r.IntN(4) == 0 {
				c.Add(time.Duration(r.IntN(7200)) * time.Second)
			}
			var ev Event
			var err error
			if r.IntN(3) == 0 {
				// extreme stimuli straight through Apply
				cat := Categories[r.IntN(len(Categories))]
				ev, err = e.Apply(ctx, "a", turn, Stimulus{Category: cat, Intensity: 1})
			} else {
				ev, err = e.Observe(ctx, "a", turn, msgs[r.IntN(len(msgs))])
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range []Vector{ev.Before, ev.After} {
				for i, x := range v {
					if !(x >= 0 && x <= 1) {
						t.Fatalf("seed %d turn %d: %s = %v outside [0,1]", seed, turn, Dim(i), x)
					}
				}
			}
		}
	}
}

func TestDecayMonotoneAndDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := 0; n < 500; n++ {
		var v, b Vector
		for i := range v {
			v[i], b[i] = r.Float64(), r.Float64()
		}
		hl := time.Duration(1+r.IntN(3600)) * time.Second
		prev := v
		for k := 1; k <= 50; k++ {
			dt := time.Duration(k*k) * time.Second
			cur := Decay(v, b, dt, hl)
			if cur != Decay(v, b, dt, hl) {
				t.Fatal("decay not deterministic")
			}
			for i := range cur {
				if math.Abs(cur[i]-b[i]) > math.Abs(prev[i]-b[i])+1e-12 {
					t.Fatalf("decay moved away from baseline: %v → %v (b=%v)", prev[i], cur[i], b[i])
				}
				if (v[i]-b[i])*(cur[i]-b[i]) < -1e-12 {
					t.Fatalf("decay crossed baseline: v=%v cur=%v b=%v", v[i], cur[i], b[i])
				}
			}
			prev = cur
		}
	}
	// Exactly one half-life halves the distance.
	got := Decay(Vector{1}, Vector{0}, time.Hour, time.Hour)[0]
	if math.Abs(got-0.5) > 1e-12 {
		t.Fatalf("one half-life: got %v want 0.5", got)
	}
}

func TestEngineDecayOnRead(t *testing.T) {
	c := newClock()
	e := openTest(t, t.TempDir(), c, func(o *Options) { o.HalfLife = time.Hour })
	ev, err := e.Apply(ctx, "a", 1, Stimulus{Category: Threat, Intensity: 1})
	if err != nil {
		t.Fatal(err)
	}
	base := e.Options().Persona.Baseline[Stability]
	s0 := ev.After[Stability]
	c.Add(time.Hour)
	s1, _ := e.Snapshot(ctx, "a")
	s1b, _ := e.Snapshot(ctx, "a")
	if s1.Values != s1b.Values {
		t.Fatal("two reads at the same instant differ")
	}
	want := base + (s0-base)/2
	if math.Abs(s1.Values[Stability]-want) > 1e-9 {
		t.Fatalf("after one half-life stability = %v, want %v", s1.Values[Stability], want)
	}
	c.Add(100 * time.Hour)
	s2, _ := e.Snapshot(ctx, "a")
	if math.Abs(s2.Values[Stability]-base) > 1e-9 {
		t.Fatalf("after long decay stability = %v, want baseline %v", s2.Values[Stability], base)
	}
}

func TestBreakerThresholdsExact(t *testing.T) {
	b := DefaultBreaker()
	tests := []struct {
		from Level
		tic  int
		s    float64
		want Level
	}{
		{Normal, 0, 0.5, Normal},
		{Normal, 0, math.Nextafter(0.5, 0), Warning},
		{Normal, 0, 0.3, Warning},
		{Normal, 0, math.Nextafter(0.3, 0), Critical},
		{Warning, 0, 0.6, Warning},
		{Warning, 0, math.Nextafter(0.6, 1), Normal},
		{Warning, 0, 0.3, Warning},
		{Warning, 0, math.Nextafter(0.3, 0), Critical},
		{Critical, 3, 0.45, Critical},
		{Critical, 3, math.Nextafter(0.45, 1), Warning},
		{Critical, 2, 0.99, Critical},
		{Critical, 3, math.Nextafter(0.6, 1), Normal},
		{Critical, 3, 0.6, Warning},
		{Critical, 100, 0.0, Critical},
	}
	for _, tt := range tests {
		if got := b.Next(tt.from, tt.tic, tt.s); got != tt.want {
			t.Errorf("Next(%s, %d, %v) = %s, want %s", tt.from, tt.tic, tt.s, got, tt.want)
		}
	}
}

func TestBreakerNoFlapping(t *testing.T) {
	b := DefaultBreaker()
	r := rand.New(rand.NewPCG(9, 9))
	bands := []struct {
		lo, hi float64
		levels []Level
	}{
		{0.5, 0.6, []Level{Normal, Warning}}, // the WARNING hysteresis band
		{0.3, 0.45, []Level{Warning, Critical}},
		{0.5, 1, []Level{Normal}},
		{0.3, 0.6, []Level{Warning}},
		{0, 0.45, []Level{Critical}},
	}
	for _, band := range bands {
		for _, start := range band.levels {
			lv := start
			for i := 0; i < 10000; i++ {
				s := band.lo + r.Float64()*(band.hi-band.lo)
				if i%2 == 0 {
					s = band.lo
				} else if i%3 == 0 {
					s = band.hi
				}
				lv = b.Next(lv, r.IntN(10), s)
				if lv != start {
					t.Fatalf("band [%v,%v] from %s: level changed to %s at s=%v", band.lo, band.hi, start, lv, s)
				}
			}
		}
	}
}

func TestCriticalCooldown(t *testing.T) {
	c := newClock()
	e := openTest(t, t.TempDir(), c, nil)
	turn := 0
	for {
		turn++
		ev, err := e.Apply(ctx, "a", turn, Stimulus{Category: Threat, Intensity: 1})
		if err != nil {
			t.Fatal(err)
		}
		if ev.Level == Critical {
			break
		}
		if turn > 50 {
			t.Fatal("never reached CRITICAL")
		}
	}
	entered := turn
	// Now flood with strong positive stimuli and a long wait between turns:
	// stability is far above 0.45, yet the level must stay CRITICAL until 3
	// turns were spent in it.
	for {
		c.Add(24 * time.Hour)
		if lv, _ := e.Level(ctx, "a"); lv != Critical && turn-entered < 3 {
			t.Fatalf("read after %d turns in CRITICAL returned %s", turn-entered, lv)
		}
		turn++
		ev, err := e.Apply(ctx, "a", turn, Stimulus{Category: Connection, Intensity: 1})
		if err != nil {
			t.Fatal(err)
		}
		if ev.Level != Critical {
			if turn-entered < 3 {
				t.Fatalf("CRITICAL cleared after %d turns", turn-entered)
			}
			break
		}
	}
	if got := turn - entered; got != 3 {
		t.Fatalf("cleared after %d turns, want exactly 3 (stability was far above the leave threshold)", got)
	}
	// The changes record the breaker transitions with causes.
	snap, _ := e.Snapshot(ctx, "a")
	var notes []string
	for _, ch := range snap.History {
		if ch.Cause == CauseBreaker {
			notes = append(notes, ch.Note)
		}
	}
	if len(notes) < 2 || !strings.Contains(notes[len(notes)-1], "CRITICAL → ") {
		t.Fatalf("breaker history = %q", notes)
	}
}

func TestSaturationGuard(t *testing.T) {
	c := newClock()
	e := fastEngine(t, c)
	g := e.Options().Guard
	low := 0
	maxLow := 0
	recovered := false
	cats := []Category{Threat, Frustration, Loss}
	for turn := 1; turn <= 300; turn++ {
		c.Add(5 * time.Second) // a fast, one-sided conversation: decay barely helps
		ev, err := e.Apply(ctx, "a", turn, Stimulus{Category: cats[turn%3], Intensity: 1})
		if err != nil {
			t.Fatal(err)
		}
		if ev.After[Stability] < g.Margin {
			low++
		} else {
			low = 0
		}
		maxLow = max(maxLow, low)
		for _, ch := range ev.Changes {
			if ch.Cause == CauseFloorRecovery {
				recovered = true
			}
		}
	}
	if maxLow >= g.Turns {
		t.Fatalf("stability stayed below %v for %d consecutive turns (guard allows %d)", g.Margin, maxLow, g.Turns-1)
	}
	if !recovered {
		t.Fatal("no floor recovery recorded")
	}
	// Habituation: the same category repeated has diminishing effect.
	e2 := openTest(t, t.TempDir(), c, nil)
	var deltas []float64
	for turn := 1; turn <= 4; turn++ {
		ev, _ := e2.Apply(ctx, "b", turn, Stimulus{Category: Frustration, Intensity: 0.5})
		deltas = append(deltas, -ev.Changes[0].Delta[Stability])
	}
	for i := 1; i < len(deltas); i++ {
		if !(deltas[i] < deltas[i-1]) {
			t.Fatalf("repeated frustration deltas not diminishing: %v", deltas)
		}
	}
}

func TestPersistAndReopen(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	e := openTest(t, dir, c, nil)
	actor := "telegram:12345/../../x"
	for i := 1; i <= 5; i++ {
		if _, err := e.Observe(ctx, actor, i, "this is useless, it failed"); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := e.Snapshot(ctx, actor)
	e2 := openTest(t, dir, c, nil)
	got, err := e2.Snapshot(ctx, actor)
	if err != nil {
		t.Fatal(err)
	}
	if got.Values != want.Values || got.Level != want.Level || len(got.History) != len(want.History) || got.Turns != 5 {
		t.Fatalf("after reopen: %+v\nwant %+v", got, want)
	}
	// The hostile actor ID stayed inside dir.
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || strings.Contains(ents[0].Name(), "/") || !strings.HasSuffix(ents[0].Name(), ".jsonl") {
		t.Fatalf("dir entries: %v", ents)
	}
	actors, _ := e2.Actors(ctx)
	if len(actors) != 1 || actors[0] != actor {
		t.Fatalf("Actors = %q", actors)
	}
	h := got.History[len(got.History)-1]
	if h.Turn != 5 || h.Cause == "" {
		t.Fatalf("last change lacks cause: %+v", h)
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	e := openTest(t, dir, c, nil)
	for _, a := range []string{"", "a\x00b", strings.Repeat("x", 300), "\xff"} {
		if _, err := e.Observe(ctx, a, 1, "hi"); err == nil {
			t.Errorf("actor %q accepted", a)
		}
	}
	if _, err := e.Apply(ctx, "a", 1, Stimulus{Category: "rage", Intensity: 1}); err == nil {
		t.Error("unknown category accepted")
	}
	for _, in := range []float64{0, -1, 1.5, math.NaN()} {
		if _, err := e.Apply(ctx, "a", 1, Stimulus{Category: Joy, Intensity: in}); err == nil {
			t.Errorf("intensity %v accepted", in)
		}
	}
	// A corrupt file is an error, and is not overwritten: an old-format
	// file, and a log whose damaged line is followed by another.
	corrupt := map[string]string{
		legacyName("z"): "{not json",
		LogName("y"):    "{not json\n" + `{"rec":{"actor_id":"y"}}` + "\n",
		LogName("x"):    `{"rec":{"actor_id":"someone-else"}}` + "\n",
	}
	for name, body := range corrupt {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o600)
		actor := strings.TrimSuffix(strings.TrimSuffix(name, ".jsonl"), ".json")
		if _, err := e.Observe(ctx, actor, 1, "hi"); err == nil {
			t.Fatalf("corrupt state file %s accepted", name)
		}
		if _, err := e.Snapshot(ctx, actor); err == nil {
			t.Fatalf("corrupt state file %s read", name)
		}
		if b, _ := os.ReadFile(p); string(b) != body {
			t.Fatalf("corrupt file %s overwritten", name)
		}
	}
	// Invalid options.
	if _, err := Open(t.TempDir(), Options{Breaker: Breaker{WarnEnter: 0.6, WarnLeave: 0.5, CriticalEnter: 0.3, CriticalLeave: 0.45}}); err == nil {
		t.Error("leave < enter accepted")
	}
	p2 := DefaultPersona()
	p2.Baseline[Stability] = 0.55
	if _, err := Open(t.TempDir(), Options{Persona: p2}); err == nil {
		t.Error("stability baseline below warnLeave accepted")
	}
	if _, err := DefaultPersona().WithBaseline(map[string]float64{"joy": 1}); err == nil {
		t.Error("unknown baseline key accepted")
	}
}

func TestConcurrentActors(t *testing.T) {
	c := newClock()
	e := openTest(t, t.TempDir(), c, nil)
	var wg sync.WaitGroup
	for a := 0; a < 4; a++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			actor := "actor-" + string(rune('a'+a))
			for turn := 1; turn <= 10; turn++ {
				if _, err := e.Observe(ctx, actor, turn, "thanks, that worked"); err != nil {
					t.Error(err)
				}
				if _, err := e.Snapshot(ctx, actor); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	actors, _ := e.Actors(ctx)
	for _, a := range actors {
		s, _ := e.Snapshot(ctx, a)
		if s.Turns != 10 {
			t.Fatalf("%s: %d turns, want 10", a, s.Turns)
		}
	}
	if len(actors) != 4 {
		t.Fatalf("actors %v", actors)
	}
}

// TestBreakerTransitionsProperty drives the engine with random stimuli and
// clock jumps and checks every level change it reports against the SPEC
// §6.2 table: entries strictly below, exits strictly above, CRITICAL only
// left after ≥ 3 turns in it.
func TestBreakerTransitionsProperty(t *testing.T) {
	b := DefaultBreaker()
	visits := map[Level]int{}
	for seed := uint64(1); seed <= 6; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		c := newClock()
		e := fastEngine(t, c)
		level, enteredAt := Normal, 0
		for turn := 1; turn <= 150; turn++ {
			if r.IntN(5) == 0 {
				c.Add(time.Duration(r.IntN(3600)) * time.Second)
			}
			cat := Categories[r.IntN(len(Categories))]
			if r.IntN(2) == 0 {
				cat = Threat // bias toward pressure so CRITICAL is visited
			}
			ev, err := e.Apply(ctx, "a", turn, Stimulus{Category: cat, Intensity: 0.2 + 0.8*r.Float64()})
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range ev.Changes {
				if ch.Cause != CauseBreaker {
					continue
				}
				s := ch.Values[Stability]
				switch {
				case ch.Level == Critical && level != Critical:
					if !(s < b.CriticalEnter) {
						t.Fatalf("seed %d turn %d: entered CRITICAL at %v", seed, turn, s)
					}
					enteredAt = turn
				case level == Critical && ch.Level != Critical:
					if !(s > b.CriticalLeave) || turn-enteredAt < b.CooldownTurns {
						t.Fatalf("seed %d turn %d: left CRITICAL at %v after %d turns", seed, turn, s, turn-enteredAt)
					}
				case level == Normal && ch.Level == Warning:
					if !(s < b.WarnEnter) {
						t.Fatalf("seed %d turn %d: entered WARNING at %v", seed, turn, s)
					}
				case level == Warning && ch.Level == Normal:
					if !(s > b.WarnLeave) {
						t.Fatalf("seed %d turn %d: left WARNING at %v", seed, turn, s)
					}
				}
				level = ch.Level
				visits[level]++
			}
			if ev.Level != level {
				t.Fatalf("seed %d turn %d: event level %s but transitions say %s", seed, turn, ev.Level, level)
			}
		}
	}
	if visits[Critical] == 0 || visits[Warning] == 0 || visits[Normal] == 0 {
		t.Fatalf("random walk did not visit every level: %v", visits)
	}
}

func TestForgetResetsToBaseline(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 1; i <= 5; i++ {
		e.Observe(ctx, "a/../b", i, "this is useless, everything failed again, I give up")
	}
	if err := e.Forget(ctx, "a/../b"); err != nil {
		t.Fatal(err)
	}
	e2, _ := Open(dir, Options{NoSync: true})
	snap, err := e2.Snapshot(ctx, "a/../b")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Turns != 0 || len(snap.History) != 0 {
		t.Fatalf("state survived forget: %+v", snap)
	}
	if acts, _ := e2.Actors(ctx); len(acts) != 0 {
		t.Fatalf("actors after forget: %v", acts)
	}
}
