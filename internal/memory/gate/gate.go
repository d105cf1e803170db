// Package gate is the importance gate ("Amygdala Pass", SPEC §4.4): a
// deterministic score in [0,1] for every candidate long-term record, and the
// decision it leads to — dropped, staged for human review, or stored.
//
// # Features
//
// Each feature is a number in [0,1] computed from the candidate's evidence
// text (the user's own words, not the normalised record content):
//
//   - Explicit (E): 1 when the candidate is a direct statement matched by an
//     extractor (Input.Direct), its strategy is user_preference or
//     procedural, or the text carries an explicit marker ("remember",
//     "always", "never", "only", "prefer", "call me", "기억", "항상", "절대",
//     "불러", …); 0.5 for a session summary or a first-person statement
//     without a marker ("I went…", "제가 …"); 0.25 otherwise.
//   - FirstPerson (P): 1 when the text has a first-person pronoun (I, me, my,
//     we, our; 저, 제, 나, 내, 우리, 저희) or the candidate is Direct; 0.5 for a
//     user-role Korean utterance without a pronoun (Korean drops subjects);
//     0 otherwise.
//   - Specificity (S): min(1, 0.5·n) where n counts named entities the
//     extractor found (Input.Entities: plants, places, names, domain terms),
//     numbers, dates and weekday/month names, and capitalised Latin words that
//     do not start a sentence.
//   - Novelty (N): 1 − the highest token Jaccard overlap between the text and
//     any existing record (Input.Existing); 1 when there are none.
//   - Urgency (U): 1 when an urgency or emotion word appears ("urgent",
//     "important", "allergic", "love", "hate", "worried", "급해", "중요",
//     "꼭", "알레르기", "걱정", …); 0 otherwise. Punctuation alone ("!") is
//     not emotion.
//   - Length (L): min(1, letters/20), counting letter runes, a Hangul
//     syllable as 2 (one syllable carries about two Latin letters).
//
// # Score
//
//	score = 0.35·E + 0.15·P + 0.15·S + 0.15·N + 0.10·U + 0.10·L
//
// rounded to 6 decimal places so that crafted feature vectors land exactly on
// the thresholds. The weights sum to 1, so the score is in [0,1].
//
// # Decision
//
// With the default Thresholds{Stage: 0.4, Store: 0.7}: score < 0.4 is
// dropped, 0.4 ≤ score < 0.7 is staged, score ≥ 0.7 is stored.
//
// # Rejections
//
// A candidate a person rejected in staging is remembered by
// memory.ContentHash of its content (NFKC, lower case, punctuation removed,
// white space collapsed, SHA-256) per actor, and never proposed again; the
// pipeline checks it before scoring.
package gate

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/tendrilai/tendril/internal/memory"
)

// Outcome is what the gate decides for a candidate.
type Outcome string

const (
	Dropped Outcome = "dropped" // score < Stage
	Staged  Outcome = "staged"  // Stage ≤ score < Store: human review
	Stored  Outcome = "stored"  // score ≥ Store
)

// Weights of the features; they sum to 1.
const (
	WeightExplicit    = 0.35
	WeightFirstPerson = 0.15
	WeightSpecificity = 0.15
	WeightNovelty     = 0.15
	WeightUrgency     = 0.10
	WeightLength      = 0.10
)

// Features are the gate's inputs, each in [0,1]. See the package comment.
type Features struct {
	Explicit    float64 `json:"explicit"`
	FirstPerson float64 `json:"firstPerson"`
	Specificity float64 `json:"specificity"`
	Novelty     float64 `json:"novelty"`
	Urgency     float64 `json:"urgency"`
	Length      float64 `json:"length"`
}

// Score is the weighted sum of the (clamped) features, rounded to 6 decimal
// places; always in [0,1].
func Score(f Features) float64 {
	s := WeightExplicit*clamp(f.Explicit) +
		WeightFirstPerson*clamp(f.FirstPerson) +
		WeightSpecificity*clamp(f.Specificity) +
		WeightNovelty*clamp(f.Novelty) +
		WeightUrgency*clamp(f.Urgency) +
		WeightLength*clamp(f.Length)
	return clamp(math.Round(s*1e6) / 1e6)
}

func clamp(x float64) float64 {
	if math.IsNaN(x) || x < 0 {
		return 0
	}
	if x > 1 {
		return 1
	}
	return x
}

// Thresholds are the decision boundaries; the zero value means the defaults
// (Stage 0.4, Store 0.7).
type Thresholds struct {
	Stage float64 // scores at or above it are staged
	Store float64 // scores at or above it are stored
}

// DefaultThresholds are SPEC §4.4's 0.4 and 0.7.
var DefaultThresholds = Thresholds{Stage: 0.4, Store: 0.7}

// Validate reports thresholds outside 0 ≤ Stage ≤ Store ≤ 1.
func (t Thresholds) Validate() error {
	if t.Stage < 0 || t.Store > 1 || t.Stage > t.Store || math.IsNaN(t.Stage) || math.IsNaN(t.Store) {
		return fmt.Errorf("gate thresholds: need 0 ≤ stage (%g) ≤ store (%g) ≤ 1", t.Stage, t.Store)
	}
	return nil
}

func (t Thresholds) orDefault() Thresholds {
	if t == (Thresholds{}) {
		return DefaultThresholds
	}
	return t
}

// Decide maps a score to an outcome: score < Stage is Dropped, Stage ≤ score
// < Store is Staged, score ≥ Store is Stored. The boundaries are exact.
func (t Thresholds) Decide(score float64) Outcome {
	t = t.orDefault()
	switch {
	case score >= t.Store:
		return Stored
	case score >= t.Stage:
		return Staged
	default:
		return Dropped
	}
}

// Decide is DefaultThresholds.Decide.
func Decide(score float64) Outcome { return DefaultThresholds.Decide(score) }

// Input describes one candidate to the gate.
type Input struct {
	// Text is the evidence: the words the candidate came from.
	Text string
	// Strategy of the candidate; "" or episodic for raw memory_write text.
	Strategy memory.Strategy
	// Role of the speaker: "user", "assistant", "tool" or "".
	Role string
	// Direct is set by extractors when a first-person statement pattern
	// matched ("I have…", "call me…", "항상 …해줘").
	Direct bool
	// Entities found by the extractor: plants, places, names, domain terms.
	Entities []string
	// Existing record contents the candidate is compared with for novelty.
	Existing []string
}

// Assess computes the features of in. It is pure and deterministic.
func Assess(in Input) Features {
	text := in.Text
	lower := strings.ToLower(text)
	words := Tokens(text)
	var f Features

	switch {
	case in.Direct || in.Strategy == memory.StrategyUserPreference || in.Strategy == memory.StrategyProcedural || hasMarker(lower, words, explicitMarkers):
		f.Explicit = 1
	case in.Strategy == memory.StrategySummary || firstPerson(words):
		f.Explicit = 0.5
	default:
		f.Explicit = 0.25
	}

	switch {
	case in.Direct || firstPerson(words):
		f.FirstPerson = 1
	case in.Role == "user" && hasHangulSyllableStr(text):
		f.FirstPerson = 0.5
	}

	n := len(in.Entities) + countSpecifics(text, words)
	f.Specificity = math.Min(1, 0.5*float64(n))

	f.Novelty = 1
	if len(in.Existing) > 0 && len(words) > 0 {
		best := 0.0
		for _, e := range in.Existing {
			if j := Jaccard(words, Tokens(e)); j > best {
				best = j
			}
		}
		f.Novelty = 1 - best
	}

	if hasMarker(lower, words, urgencyMarkers) {
		f.Urgency = 1
	}

	letters := 0
	for _, r := range text {
		switch {
		case isHangulSyllable(r):
			letters += 2
		case unicode.IsLetter(r):
			letters++
		}
	}
	f.Length = math.Min(1, float64(letters)/20)
	return f
}

// Evaluate assesses in, scores it and decides with t.
func (t Thresholds) Evaluate(in Input) (Features, float64, Outcome) {
	f := Assess(in)
	s := Score(f)
	return f, s, t.Decide(s)
}

// marker lists: Latin entries are whole words or phrases (matched on word
// boundaries); Hangul entries are substrings (Korean attaches particles).
var explicitMarkers = []string{
	"remember", "always", "never", "only", "prefer", "prefers", "preferred", "call me",
	"from now on", "please", "don't", "do not", "favourite", "favorite", "rather",
	"기억", "항상", "절대", "불러", "앞으로", "언제나", "선호", "좋아해", "싫어", "만 써", "만 사용", "해줘", "해 줘", "해주세요", "주세요",
}

var urgencyMarkers = []string{
	"urgent", "urgently", "asap", "important", "emergency", "critical", "allergic", "allergy",
	"love", "hate", "worried", "worry", "scared", "afraid", "dying", "died", "sick", "must",
	"급해", "급하", "중요", "꼭", "알레르기", "사랑", "걱정", "죽", "아파", "제발", "반드시", "위험",
}

var firstPersonWords = map[string]bool{
	"i": true, "i'm": true, "im": true, "i've": true, "i'd": true, "i'll": true, "me": true, "my": true,
	"mine": true, "myself": true, "we": true, "we're": true, "our": true, "ours": true, "us": true,
}

// Korean first person: exact tokens, or tokens starting with a pronoun
// plus particle.
var (
	koreanFirstPersonExact  = map[string]bool{"저": true, "제": true, "나": true, "내": true}
	koreanFirstPersonPrefix = []string{"저는", "저도", "제가", "저의", "저를", "저한테", "나는", "내가", "나도", "저희", "우리"}
)

func firstPerson(words []string) bool {
	for _, w := range words {
		if firstPersonWords[w] || koreanFirstPersonExact[w] {
			return true
		}
		for _, p := range koreanFirstPersonPrefix {
			if strings.HasPrefix(w, p) {
				return true
			}
		}
	}
	return false
}

func hasMarker(lower string, words []string, markers []string) bool {
	for _, m := range markers {
		if hasHangulSyllableStr(m) {
			if strings.Contains(lower, m) {
				return true
			}
			continue
		}
		if !strings.Contains(lower, m) {
			continue
		}
		if strings.Contains(m, " ") || strings.Contains(m, "'") {
			if containsPhrase(lower, m) {
				return true
			}
			continue
		}
		for _, w := range words {
			if w == m {
				return true
			}
		}
	}
	return false
}

func containsPhrase(lower, phrase string) bool {
	for i := 0; ; {
		j := strings.Index(lower[i:], phrase)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(phrase)
		okL := start == 0 || !isWordByte(lower[start-1])
		okR := end == len(lower) || !isWordByte(lower[end])
		if okL && okR {
			return true
		}
		i = start + 1
	}
}

func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '\''
}

var dateWords = map[string]bool{
	"today": true, "tomorrow": true, "yesterday": true, "monday": true, "tuesday": true, "wednesday": true,
	"thursday": true, "friday": true, "saturday": true, "sunday": true, "january": true, "february": true,
	"march": true, "april": true, "june": true, "july": true, "august": true, "september": true,
	"october": true, "november": true, "december": true, "weekend": true, "tonight": true,
	"오늘": true, "내일": true, "어제": true, "주말": true, "월요일": true, "화요일": true, "수요일": true,
	"목요일": true, "금요일": true, "토요일": true, "일요일": true,
}

// countSpecifics counts numbers, date words and capitalised Latin words that
// do not start a sentence.
func countSpecifics(text string, words []string) int {
	n := 0
	for _, w := range words {
		if dateWords[w] || hasDigit(w) {
			n++
		}
	}
	// Capitalised words not at a sentence start, and not "I".
	sentenceStart := true
	for _, raw := range strings.Fields(text) {
		r := []rune(raw)
		i := 0
		for i < len(r) && !unicode.IsLetter(r[i]) && !unicode.IsDigit(r[i]) {
			i++
		}
		if i < len(r) && unicode.IsUpper(r[i]) && !sentenceStart {
			w := strings.Trim(strings.ToLower(raw), ".,!?;:\"'()")
			if !firstPersonWords[w] && !strings.HasPrefix(w, "i'") {
				n++
			}
		}
		last := r[len(r)-1]
		sentenceStart = last == '.' || last == '!' || last == '?' || last == ':'
	}
	return n
}

func hasDigit(s string) bool {
	for _, r := range s {
		if unicode.IsDigit(r) {
			return true
		}
	}
	return false
}

func isHangulSyllable(r rune) bool { return r >= 0xAC00 && r <= 0xD7A3 }

func hasHangulSyllableStr(s string) bool {
	for _, r := range s {
		if isHangulSyllable(r) {
			return true
		}
	}
	return false
}

// Tokens splits s into lower-case word tokens (letters, digits and
// apostrophes), the unit of novelty and duplicate overlap.
func Tokens(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'')
	})
}

// TokenSet is the distinct tokens of a list, sorted, for JaccardSets.
func TokenSet(tokens []string) []string {
	s := slices.Clone(tokens)
	slices.Sort(s)
	return slices.Compact(s)
}

// JaccardSets is Jaccard(a, b) for a and b made by TokenSet: the same
// value, by one merge of the sorted sets and without allocating, for a
// caller comparing one set with many (consolidation's novelty).
func JaccardSets(a, b []string) float64 {
	inter := memory.CountCommon(a, b)
	union := len(a) + len(b) - inter
	if union == 0 {
		return 0
	}
	return float64(inter) / float64(union)
}

// Jaccard is |a∩b| / |a∪b| over the token sets; 0 when both are empty.
func Jaccard(a, b []string) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 0
	}
	sa := make(map[string]bool, len(a))
	for _, t := range a {
		sa[t] = true
	}
	sb := make(map[string]bool, len(b))
	inter := 0
	for _, t := range b {
		if sb[t] {
			continue
		}
		sb[t] = true
		if sa[t] {
			inter++
		}
	}
	union := len(sa) + len(sb) - inter
	if union == 0 {
		return 0
	}
	return float64(inter) / float64(union)
}
