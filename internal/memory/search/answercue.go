package search

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Answer types: what kind of thing a question asks for, the classic
// question-answering taxonomy cut to the types a turn's surface shows
// (numbers, people, places, reasons). A question of a type and a turn
// carrying a cue of that type give the re-ranker's answer_cue feature;
// dates are the time_cue feature's.
const (
	CueNumber uint8 = 1 << iota // a digit or a number word: "three", "twice", "a dozen"
	CuePerson                   // a kinship or role word, or a capitalised word inside a sentence
	CuePlace                    // a place noun, or "in/at/to/from/near" before a capitalised word
	CueReason                   // "because", "so that", "inspired", 때문, 그래서 …
)

var (
	numberQuestion = regexp.MustCompile(`(?i)\bhow (many|much|long|old|often|far|big|tall)\b|\bwhat (number|age|percentage|amount)\b|몇|얼마`)
	personQuestion = regexp.MustCompile(`(?i)^\W*(who|whom|whose)\b|\b(with|to|for|from) whom\b|\bwho (is|was|are|were|did|does|has|have)\b|누구|누가`)
	placeQuestion  = regexp.MustCompile(`(?i)^\W*where\b|\bwhere (did|does|do|is|was|are|were|has|have|will|would)\b|\b(what|which) (city|country|state|place|town|countries|cities|places|restaurant|park|school|store)\b|어디`)
	reasonQuestion = regexp.MustCompile(`(?i)^\W*why\b|\bwhy (did|does|do|is|was|are|were|has|have|would)\b|\bwhat (made|makes|inspired|inspires|motivated|motivates|led|caused|prompted)\b|\bfor what reason\b|왜|무슨 이유`)
)

// AnswerType returns the Cue* bits of what q asks for (0: none
// recognised). A question may ask for more than one ("who … and why").
func AnswerType(q string) uint8 {
	var t uint8
	if numberQuestion.MatchString(q) {
		t |= CueNumber
	}
	if personQuestion.MatchString(q) {
		t |= CuePerson
	}
	if placeQuestion.MatchString(q) {
		t |= CuePlace
	}
	if reasonQuestion.MatchString(q) {
		t |= CueReason
	}
	return t
}

var (
	cueNumberWords = wordSet(`one two three four five six seven eight nine ten eleven twelve thirteen fourteen
		fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety
		hundred hundreds thousand thousands million dozen dozens once twice thrice couple half first second
		third fourth fifth 한 두 세 다섯 여섯 일곱 여덟 아홉 열 스무 백 천 만`)
	personWords = wordSet(`mom mum mother dad father parent parents sister sisters brother brothers sibling
		siblings husband wife partner spouse boyfriend girlfriend son sons daughter daughters kid kids child
		children baby grandma grandmother grandpa grandfather grandparents aunt uncle cousin cousins niece
		nephew friend friends buddy bestie boss coworker coworkers colleague colleagues neighbor neighbour
		neighbors neighbours teacher mentor coach doctor therapist roommate family 엄마 아빠 어머니 아버지 언니
		오빠 누나 형 동생 남편 아내 친구 아들 딸 선생님 할머니 할아버지 가족 동료`)
	placeWords = wordSet(`park beach city town country state village museum school college university campus
		church temple home house apartment lake river mountain mountains forest trail restaurant cafe
		coffee shop store mall gym library office hospital studio theater theatre stadium hotel airport
		abroad downtown island camp campsite center centre club bar garden farm zoo 집 학교 회사 공원 바다 산
		식당 카페 병원 도서관 시내 해외`)
	reasonWords = wordSet(`because cause caused since reason reasons why inspired inspire inspiring
		motivated motivation wanted hoping hope so helps helped thanks 때문 때문에 그래서 덕분 덕분에 위해`)
	placePreps = wordSet(`in at to from near visited visiting`)
)

// inSet reports whether w is in set, or, for a word outside ASCII
// (Korean, whose particles attach to the noun: "엄마가", "학교에서"),
// whether a prefix of w of two runes or more is.
func inSet(set map[string]bool, w string) bool {
	if set[w] {
		return true
	}
	if w == "" || w[0] < 0x80 {
		return false
	}
	runes := 0
	for i := range w {
		if runes >= 2 && set[w[:i]] {
			return true
		}
		runes++
	}
	return false
}

func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// answerCues returns the Cue* bits of the answer types text shows. A
// capitalised word counts only inside a sentence (not after ". ", "! ",
// "? " or at the start), so "Yesterday I went" shows no name, and "I"
// never counts.
func answerCues(text string) uint8 {
	var cues uint8
	sentenceStart := true
	prevPrep := false
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			if r == '.' || r == '!' || r == '?' || r == '\n' {
				sentenceStart = true
			}
			if !unicode.IsSpace(r) && r != ',' {
				prevPrep = false
			}
			i += n
			continue
		}
		j := i
		for j < len(text) {
			r2, n2 := utf8.DecodeRuneInString(text[j:])
			if !unicode.IsLetter(r2) && !unicode.IsDigit(r2) && r2 != '\'' {
				break
			}
			j += n2
		}
		word := text[i:j]
		lower := strings.ToLower(word)
		if k := strings.IndexByte(lower, '\''); k > 0 {
			lower = lower[:k]
		}
		if unicode.IsDigit(r) || inSet(cueNumberWords, lower) {
			cues |= CueNumber
		}
		if inSet(personWords, lower) {
			cues |= CuePerson
		}
		if inSet(placeWords, lower) {
			cues |= CuePlace
		}
		if inSet(reasonWords, lower) {
			cues |= CueReason
		}
		if unicode.IsUpper(r) && word != "I" && !strings.HasPrefix(word, "I'") {
			if !sentenceStart {
				cues |= CuePerson
			}
			if prevPrep {
				cues |= CuePlace
			}
		}
		prevPrep = placePreps[lower]
		sentenceStart = false
		i = j
	}
	return cues
}
