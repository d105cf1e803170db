package gate

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tendrilai/tendril/internal/memory"
)

func TestDecideBoundaries(t *testing.T) {
	tests := []struct {
		score float64
		want  Outcome
	}{
		{0, Dropped},
		{0.399999, Dropped},
		{math.Nextafter(0.4, 0), Dropped},
		{0.4, Staged},
		{0.5, Staged},
		{0.699999, Staged},
		{math.Nextafter(0.7, 0), Staged},
		{0.7, Stored},
		{0.700001, Stored},
		{1, Stored},
	}
	for _, tt := range tests {
		if got := Decide(tt.score); got != tt.want {
			t.Errorf("Decide(%v) = %s, want %s", tt.score, got, tt.want)
		}
	}
}

func TestCustomThresholds(t *testing.T) {
	th := Thresholds{Stage: 0.25, Store: 0.5}
	for s, want := range map[float64]Outcome{0.2499: Dropped, 0.25: Staged, 0.4999: Staged, 0.5: Stored} {
		if got := th.Decide(s); got != want {
			t.Errorf("Decide(%v) = %s, want %s", s, got, want)
		}
	}
	if got := (Thresholds{}).Decide(0.4); got != Staged {
		t.Errorf("zero Thresholds must mean the defaults, got %s", got)
	}
	for _, bad := range []Thresholds{{Stage: 0.8, Store: 0.7}, {Stage: -0.1, Store: 0.7}, {Stage: 0.4, Store: 1.1}, {Stage: math.NaN(), Store: 0.7}} {
		if bad.Validate() == nil {
			t.Errorf("Validate(%+v) = nil, want an error", bad)
		}
	}
	if err := DefaultThresholds.Validate(); err != nil {
		t.Fatal(err)
	}
}

// Crafted feature vectors whose weighted sums land exactly on, and just
// beside, the thresholds: the rounding in Score keeps float error from
// moving a score across a boundary.
func TestScoreExactBoundaries(t *testing.T) {
	tests := []struct {
		name string
		f    Features
		want float64
		out  Outcome
	}{
		{"P+N+U = 0.4", Features{FirstPerson: 1, Novelty: 1, Urgency: 1}, 0.4, Staged},
		{"just under 0.4", Features{FirstPerson: 1, Novelty: 1, Urgency: 0.99}, 0.399, Dropped},
		{"E+P+U+L = 0.7", Features{Explicit: 1, FirstPerson: 1, Urgency: 1, Length: 1}, 0.7, Stored},
		{"just under 0.7", Features{Explicit: 1, FirstPerson: 1, Urgency: 1, Length: 0.99}, 0.699, Staged},
		{"E+N+S·2/3 = 0.6", Features{Explicit: 1, Novelty: 1, Specificity: 2.0 / 3}, 0.6, Staged},
		{"all ones", Features{1, 1, 1, 1, 1, 1}, 1, Stored},
		{"all zero", Features{}, 0, Dropped},
		{"clamped", Features{Explicit: 5, FirstPerson: -3, Novelty: math.NaN()}, 0.35, Dropped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Score(tt.f)
			if s != tt.want {
				t.Fatalf("Score = %.17g, want %v", s, tt.want)
			}
			if got := Decide(s); got != tt.out {
				t.Fatalf("Decide(%v) = %s, want %s", s, got, tt.out)
			}
		})
	}
}

func TestNoiseScoresBelowStage(t *testing.T) {
	for _, s := range []string{"ok", "OK!", "haha", "thanks!", "thank you", "lol", "ㅋㅋ", "ㅋㅋㅋㅋ", "네", "넵", "ㅎㅎ", "응", "좋아요", "hmm", "yes", "감사합니다"} {
		for _, role := range []string{"user", "assistant"} {
			f := Assess(Input{Text: s, Role: role})
			if sc := Score(f); sc >= 0.4 {
				t.Errorf("%q (%s) scored %.3f %+v, want < 0.4", s, role, sc, f)
			}
		}
	}
}

func TestAssessFeatures(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want Features
	}{
		{"explicit marker", Input{Text: "Remember that I water at 6am"}, Features{Explicit: 1, FirstPerson: 1, Specificity: 0.5, Novelty: 1, Length: 1}},
		{"preference strategy", Input{Text: "organic only", Strategy: memory.StrategyUserPreference}, Features{Explicit: 1, Novelty: 1, Length: 0.55}},
		{"direct korean", Input{Text: "부산에 살아요", Role: "user", Direct: true, Entities: []string{"Busan"}}, Features{Explicit: 1, FirstPerson: 1, Specificity: 0.5, Novelty: 1, Length: 0.6}},
		{"korean pronoun drop", Input{Text: "어제 비가 왔어요", Role: "user"}, Features{Explicit: 0.25, FirstPerson: 0.5, Specificity: 0.5, Novelty: 1, Length: 0.7}},
		{"summary", Input{Text: "the weather", Strategy: memory.StrategySummary}, Features{Explicit: 0.5, Novelty: 1, Length: 0.5}},
		{"urgency", Input{Text: "urgent: frost tonight"}, Features{Explicit: 0.25, Specificity: 0.5, Novelty: 1, Urgency: 1, Length: 0.9}},
		{"capitalised names", Input{Text: "Met Jin and Mina in Busan"}, Features{Explicit: 0.25, Specificity: 1, Novelty: 1, Length: 1}},
		{"novelty", Input{Text: "fig tree pruning", Existing: []string{"fig tree watering"}}, Features{Explicit: 0.25, Novelty: 0.5, Length: 0.7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Assess(tt.in)
			if !closeF(got, tt.want) {
				t.Fatalf("Assess = %+v\nwant     %+v", got, tt.want)
			}
		})
	}
}

func closeF(a, b Features) bool {
	eq := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return eq(a.Explicit, b.Explicit) && eq(a.FirstPerson, b.FirstPerson) && eq(a.Specificity, b.Specificity) &&
		eq(a.Novelty, b.Novelty) && eq(a.Urgency, b.Urgency) && eq(a.Length, b.Length)
}

func TestJaccardAndTokens(t *testing.T) {
	if got := Tokens("I only use ORGANIC fertiliser!"); len(got) != 5 || got[3] != "organic" {
		t.Fatalf("Tokens = %q", got)
	}
	tests := []struct {
		a, b string
		want float64
	}{
		{"a b c", "a b c", 1},
		{"a b", "c d", 0},
		{"i only use organic fertiliser", "i only use chemical fertiliser", 4.0 / 6},
		{"", "", 0},
	}
	for _, tt := range tests {
		if got := Jaccard(Tokens(tt.a), Tokens(tt.b)); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("Jaccard(%q,%q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func FuzzAssess(f *testing.F) {
	for _, s := range []string{"I only use organic fertiliser", "진이라고 불러줘", "", "ㅋㅋ", "A. B. C!", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc := Score(Assess(Input{Text: s, Role: "user", Existing: []string{s}}))
		if sc < 0 || sc > 1 || math.IsNaN(sc) {
			t.Fatalf("score %v out of [0,1]", sc)
		}
	})
}

func TestJaccardSetsMatchesJaccard(t *testing.T) {
	vocab := []string{"a", "b", "c", "d", "e", "fig", "fig", "비료", "Z", ""}
	rng := rand.New(rand.NewPCG(3, 4))
	draw := func() []string {
		s := make([]string, rng.IntN(12))
		for i := range s {
			s[i] = vocab[rng.IntN(len(vocab))]
		}
		return s
	}
	for range 20000 {
		a, b := draw(), draw()
		if got, want := JaccardSets(TokenSet(a), TokenSet(b)), Jaccard(a, b); got != want {
			t.Fatalf("JaccardSets(%q, %q) = %v, Jaccard = %v", a, b, got, want)
		}
	}
}
