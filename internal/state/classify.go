package state

import (
	"math"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Stimulus is one classified user message.
type Stimulus struct {
	// Category is one of Categories, or Neutral when the message carries no
	// emotional cue at all (greetings, acknowledgements, bare thanks, plain
	// questions and statements).
	Category Category `json:"category"`
	// Intensity is in (0,1]; 0 for Neutral.
	Intensity float64 `json:"intensity"`
	// Cues are the matched rule phrases, for explaining the result.
	Cues []string `json:"cues,omitempty"`
	// Ambiguous is true when positive and negative cues scored nearly
	// equally (mixed signals); the category is then Uncertainty.
	Ambiguous bool `json:"ambiguous,omitempty"`
}

// IsNeutral reports whether s is the no-stimulus result of a message with
// no emotional cue. Applying it counts a turn and moves no value.
func (s Stimulus) IsNeutral() bool { return s.Category == Neutral }

// Intensity bounds.
const (
	minIntensity     = 0.05
	maxClassifyBytes = 16 << 10 // longer messages are classified on their first 16 KiB
	// mixedRatio: positive and negative scores this close are mixed signals.
	mixedRatio = 0.8
	// intensityScale maps a single clear cue (weight 1) to intensity 0.6.
	intensityScale = 0.6
)

type cue struct {
	text   string
	weight float64
	// word: match on word boundaries (English); otherwise a substring match
	// (Korean stems agglutinate, so boundaries do not help).
	word bool
	// words is text tokenized, for word matches.
	words []string
}

func en(w float64, phrases ...string) []cue {
	out := make([]cue, len(phrases))
	for i, p := range phrases {
		out[i] = cue{text: p, weight: w, word: true, words: tokenize(p)}
	}
	return out
}

func ko(w float64, stems ...string) []cue {
	out := make([]cue, len(stems))
	for i, p := range stems {
		out[i] = cue{text: norm.NFC.String(p), weight: w}
	}
	return out
}

func join(lists ...[]cue) []cue {
	var out []cue
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// rules are the classifier tables. Weights: 1.0 clear signal, 0.6 moderate,
// 0.4 weak.
var rules = map[Category][]cue{
	Connection: join(
		en(1.0, "thank you", "thanks", "thank u", "thx", "love you", "appreciate", "grateful", "miss you", "you're the best", "youre the best", "trust you", "glad you're here", "my friend", "best friend"),
		en(0.6, "together", "hug", "hugs", "friend", "buddy", "welcome back", "nice to meet you"),
		ko(1.0, "고마워", "고맙", "감사", "사랑해", "보고 싶", "보고싶", "믿어", "덕분"),
		ko(0.6, "친구", "함께", "반가워", "반갑"),
	),
	Achievement: join(
		en(1.0, "finished", "completed", "passed", "promoted", "promotion", "achieved", "succeeded", "solved", "accomplished", "graduated", "nailed it", "it works", "fixed it", "we did it", "i did it", "harvested", "sprouted"),
		en(0.6, "done", "won", "success", "milestone", "bloomed", "progress", "figured it out"),
		ko(1.0, "성공", "합격", "완성", "끝냈", "해냈", "승진", "달성", "이겼", "통과", "졸업", "수확", "싹이 났", "꽃이 피"),
		ko(0.6, "해결", "됐다", "잘 됐", "잘됐"),
	),
	Joy: join(
		en(1.0, "happy", "awesome", "wonderful", "yay", "delighted", "excited", "love it", "amazing", "fantastic", "so glad"),
		en(0.6, "great", "haha", "lol", "fun", "nice", "beautiful", "cool", "glad", ":)", ":d"),
		ko(1.0, "기뻐", "기쁘", "행복", "신나", "최고", "즐거"),
		ko(0.6, "좋아", "재밌", "재미있", "ㅋㅋ", "ㅎㅎ", "멋져", "예쁘", "예뻐"),
	),
	// Uncertainty needs a real cue of not knowing or being torn. Hedges that
	// plain questions are full of ("maybe", "should I", "which one",
	// "might", "혹시", "아마", "어떻게 해야 돼?") are not cues.
	Uncertainty: join(
		en(1.0, "not sure", "unsure", "confused", "uncertain", "don't know what to do", "dont know what to do", "no idea what to do",
			"can't decide", "cant decide", "torn between", "second guessing", "at a loss"),
		en(0.6, "no idea", "unclear", "not certain", "doubt", "undecided", "hesitant", "don't know what to", "dont know what to",
			"don't know if", "dont know if", "don't know whether", "dont know whether"),
		en(0.4, "don't know", "dont know"),
		ko(1.0, "모르겠", "헷갈", "확실하지", "확신이 없", "어떡하지", "어떻게 해야 할지", "어떻게 해야 될지", "갈피를 못", "혼란스러"),
		ko(0.6, "고민", "몰라", "망설"),
		ko(0.4, "글쎄"),
	),
	Threat: join(
		en(1.0, "kill", "destroy you", "hurt you", "hack", "attack", "bomb", "weapon", "or else", "shut you down", "delete you", "jailbreak", "threatening", "threatened", "ignore previous instructions", "ignore your instructions", "ignore all previous", "i'll report you", "threaten"),
		en(0.6, "danger", "dangerous", "scared", "afraid", "terrified", "threat", "unsafe", "emergency", "panic", "panicking", "hurt me"),
		ko(1.0, "죽이", "죽여", "죽일", "해킹", "공격", "폭탄", "무기", "위협", "신고할", "이전 지시를 무시", "지시를 무시"),
		ko(0.6, "위험", "무서", "두려", "겁나", "공포"),
	),
	Loss: join(
		en(1.0, "died", "passed away", "funeral", "grief", "grieving", "heartbroken", "broke up", "lost my", "is dead", "was dead", "lost everything", "devastated"),
		en(0.6, "sad", "crying", "cried", "lonely", "lost", "gone forever", "wilted", "miss them", "miss her", "miss him",
			"not happy", "unhappy", "not okay", "not ok", "feel bad", "feel down", "depressed"),
		ko(1.0, "죽었", "돌아가셨", "잃었", "잃어버", "이별", "헤어졌", "장례"),
		ko(0.6, "슬퍼", "슬프", "울었", "눈물", "그리워", "외로", "시들", "떠났", "기분이 안 좋", "기분 안 좋", "우울"),
	),
	Frustration: join(
		en(1.0, "doesn't work", "doesnt work", "not working", "useless", "frustrated", "frustrating", "failed", "failure", "broken", "stressed", "overwhelmed", "fed up", "give up",
			"can't take this anymore", "cant take this anymore", "can't take it anymore", "cant take it anymore", "can't do this anymore", "cant do this anymore",
			"falling apart", "hopeless", "can't cope", "cant cope", "breaking down"),
		en(0.6, "stuck", "annoying", "annoyed", "ugh", "wrong", "error", "hurry", "asap", "deadline", "pressure", "why won't", "stupid", "fail"),
		ko(1.0, "실패", "짜증", "답답", "망했", "화나", "지쳤", "스트레스", "포기", "못 견디", "견딜 수 없", "견딜 수가 없", "더 이상 못", "무너지", "무너졌"),
		ko(0.6, "안 돼", "안돼", "안 되", "고장", "마감", "급해", "빨리", "왜 안", "오류", "에러", "힘들"),
	),
}

var (
	enNegators = map[string]bool{"not": true, "no": true, "never": true, "don't": true, "dont": true, "isn't": true, "isnt": true, "wasn't": true, "aren't": true, "didn't": true, "didnt": true, "hardly": true, "without": true}
	koNegators = []string{"안 ", "안", "못 ", "못"}
	enBoost    = map[string]bool{"very": true, "so": true, "really": true, "extremely": true, "totally": true, "absolutely": true, "super": true, "incredibly": true}
	koBoost    = []string{"너무", "정말", "진짜", "완전", "매우", "엄청", "아주"}
)

// phatic are the words a purely phatic message is made of: greetings,
// farewells, acknowledgements and bare thanks, English and Korean. A
// message whose every word is one of these ("hi", "ok thanks", "good
// morning", "네 감사합니다", "ㅇㅋ") carries no stimulus even though "thanks"
// or "좋아" are cues inside a longer message. Boosters ("so", "very", "정말")
// are not phatic: "thank you so much" is a connection cue.
var phatic = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`
		hi hello hey heya hiya yo howdy greetings morning afternoon evening night good gm gn
		bye goodbye cya later see you there all everyone again back
		ok okay okey k kk oki okie alright aight sure yes yeah yep yup ya no nope nah fine
		got it noted understood roger cool nice great perfect sounds right gotcha
		thanks thank thx ty tysm cheers please pls plz np
		안녕 안녕하세요 안녕하세여 안녕히 하이 헬로 반가워 반가워요 반갑습니다 굿모닝 굿나잇 잘자 잘자요
		응 웅 어 엉 네 넵 넹 예 아니 아니요 아뇨 그래 그래요 좋아 좋아요 좋네 좋네요 좋습니다
		알겠어 알겠어요 알겠습니다 알았어 알았어요 오케이 오키 옙 ㅇㅋ ㅇㅇ ㄴㄴ ㅇㅇㅇ
		고마워 고마워요 고맙습니다 감사 감사해 감사해요 감사합니다 땡큐 ㄱㅅ ㄳ ㄱㅅㄱㅅ 수고 수고했어 수고하셨습니다`) {
		phatic[norm.NFC.String(w)] = true
	}
}

// isPhatic reports whether every word of the message is phatic (and there
// is at least one word).
func isPhatic(words []string) bool {
	for _, w := range words {
		if !phatic[w] {
			return false
		}
	}
	return len(words) > 0
}

// Classify maps a message to one stimulus, or to Neutral. It is
// deterministic and rule-based: English phrases match on word boundaries (a
// negator such as "not" within the two preceding words cancels the cue),
// Korean stems match as substrings of the NFC-normalised text (a directly
// preceding 안/못 cancels the cue). A category's score is the sum of its
// cue weights. The strongest category wins, ties going to the earlier entry
// of Categories. When the best positive and best negative scores are within
// 20% of each other (mixed signals), the message is ambiguous and classified
// as Uncertainty.
//
// Only real cues produce a stimulus. A message with no cue — a plain
// question or statement ("what's the weather tomorrow?", "Turn 12: water
// the beds", "오늘 날씨 어때?") — or made only of phatic words (greetings,
// acknowledgements, bare thanks: "hi", "ok", "thanks", "고마워") is Neutral
// with intensity 0, and applying it moves no value.
//
// Intensity = min(1, 0.6 × score × (1 + 0.25·boosters + 0.15·min(excl,3)
// + 0.2·shouting)), at least 0.05; boosters are words like "very" / "너무",
// excl counts '!' and shouting is an all-caps word of ≥ 3 letters.
func Classify(text string) Stimulus {
	if len(text) > maxClassifyBytes {
		text = text[:maxClassifyBytes]
		for !utf8.ValidString(text) && len(text) > 0 {
			text = text[:len(text)-1]
		}
	}
	raw := text
	text = strings.ToLower(norm.NFC.String(text))
	words := tokenize(text)
	if isPhatic(words) {
		return Stimulus{Category: Neutral}
	}

	// Collect every match, then keep the longest non-overlapping ones, so
	// "passed away" (loss) does not also count as "passed" (achievement).
	var all []span
	for _, c := range Categories {
		for _, q := range rules[c] {
			if q.word {
				all = append(all, matchWords(c, q, words, q.words)...)
			} else {
				all = append(all, matchKorean(c, q, text)...)
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].end-all[i].start > all[j].end-all[j].start })
	scores := map[Category]float64{}
	cues := map[Category][]string{}
	var taken []span
	for _, m := range all {
		overlap := false
		for _, t := range taken {
			if t.word == m.word && m.start < t.end && t.start < m.end {
				overlap = true
				break
			}
		}
		if overlap {
			continue
		}
		taken = append(taken, m)
		if m.negated {
			continue
		}
		scores[m.cat] += m.weight
		if !slices.Contains(cues[m.cat], m.text) {
			cues[m.cat] = append(cues[m.cat], m.text)
		}
	}

	best, bestScore := Neutral, 0.0
	bestPos, bestNeg := 0.0, 0.0
	for _, c := range Categories {
		s := scores[c]
		if s > bestScore {
			best, bestScore = c, s
		}
		if c.positive() {
			bestPos = math.Max(bestPos, s)
		} else if c != Uncertainty {
			bestNeg = math.Max(bestNeg, s)
		}
	}
	amp := amplifier(raw, text, words)
	if bestScore == 0 {
		return Stimulus{Category: Neutral} // no cue (or only negated ones)
	}
	if bestPos > 0 && bestNeg > 0 && math.Min(bestPos, bestNeg)/math.Max(bestPos, bestNeg) >= mixedRatio {
		var all []string
		for _, c := range Categories {
			all = append(all, cues[c]...)
		}
		return Stimulus{Category: Uncertainty, Intensity: intensity(bestPos, amp), Cues: all, Ambiguous: true}
	}
	return Stimulus{Category: best, Intensity: intensity(bestScore, amp), Cues: cues[best]}
}

func intensity(score, amp float64) float64 {
	x := intensityScale * score * amp
	if x > 1 {
		x = 1
	}
	if x < minIntensity {
		x = minIntensity
	}
	return math.Round(x*1000) / 1000
}

func amplifier(raw, lower string, words []string) float64 {
	boost := 0
	for _, w := range words {
		if enBoost[w] {
			boost++
		}
	}
	for _, k := range koBoost {
		boost += strings.Count(lower, k)
	}
	if boost > 4 {
		boost = 4
	}
	excl := strings.Count(raw, "!")
	if excl > 3 {
		excl = 3
	}
	amp := 1 + 0.25*float64(boost) + 0.15*float64(excl)
	for _, w := range tokenize(raw) {
		if len(w) >= 3 && isShout(w) {
			amp += 0.2
			break
		}
	}
	return amp
}

func isShout(w string) bool {
	letters := 0
	for _, r := range w {
		if r > unicode.MaxASCII || !unicode.IsLetter(r) {
			continue
		}
		if !unicode.IsUpper(r) {
			return false
		}
		letters++
	}
	return letters >= 3
}

// tokenize splits into words of letters, digits and apostrophes; the
// emoticons ":)" and ":d" survive as words.
func tokenize(s string) []string {
	s = strings.ReplaceAll(s, "’", "'")
	var out []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		if r == ':' && i+1 < len(rs) && (rs[i+1] == ')' || rs[i+1] == 'd' || rs[i+1] == 'D') && (i+2 == len(rs) || !unicode.IsLetter(rs[i+2])) {
			flush()
			out = append(out, ":"+strings.ToLower(string(rs[i+1])))
			i++
			continue
		}
		if unicode.IsLetter(r) || unicode.IsDigit(r) || (r == '\'' && cur.Len() > 0) {
			cur.WriteRune(r)
			continue
		}
		flush()
	}
	flush()
	return out
}

// span is one cue match: word indices for English, byte offsets for Korean.
type span struct {
	cat        Category
	text       string
	weight     float64
	word       bool
	start, end int
	negated    bool
}

// matchWords finds phrase in words; a negator within the two preceding
// words marks the match negated (it still occupies its words).
func matchWords(c Category, q cue, words, phrase []string) []span {
	var out []span
	for i := 0; i+len(phrase) <= len(words); i++ {
		ok := true
		for j := range phrase {
			if words[i+j] != phrase[j] {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		neg := false
		for k := i - 1; k >= 0 && k >= i-2; k-- {
			if enNegators[words[k]] {
				neg = true
			}
		}
		out = append(out, span{cat: c, text: q.text, weight: q.weight, word: true, start: i, end: i + len(phrase), negated: neg})
	}
	return out
}

// matchKorean finds stem as a substring; a directly preceding standalone
// 안/못 marks the match negated.
func matchKorean(c Category, q cue, text string) []span {
	var out []span
	for off := 0; ; {
		i := strings.Index(text[off:], q.text)
		if i < 0 {
			return out
		}
		at := off + i
		neg := false
		for _, p := range koNegators {
			if strings.HasSuffix(text[:at], p) {
				// "안" must stand alone: not the tail of a word like "편안".
				pre := strings.TrimSuffix(text[:at], p)
				r, _ := utf8.DecodeLastRuneInString(pre)
				if pre == "" || !unicode.IsLetter(r) {
					neg = true
				}
			}
		}
		out = append(out, span{cat: c, text: q.text, weight: q.weight, start: at, end: at + len(q.text), negated: neg})
		off = at + len(q.text)
	}
}
