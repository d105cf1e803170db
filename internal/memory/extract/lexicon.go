package extract

import (
	"sort"
	"strings"
	"unicode"
)

// term is one lexicon entry: surface forms (English lower case, Korean) and
// the canonical English name used in metadata and topic keys.
type term struct {
	canon string
	forms []string
}

// plants is the small plant lexicon behind metadata "plants".
var plants = []term{
	{"tomato", []string{"tomato", "tomatoes", "토마토", "방울토마토"}},
	{"fig", []string{"fig", "figs", "fig tree", "fig trees", "무화과", "무화과나무"}},
	{"petunia", []string{"petunia", "petunias", "페튜니아", "피튜니아"}},
	{"rose", []string{"rose", "roses", "장미"}},
	{"basil", []string{"basil", "바질"}},
	{"lettuce", []string{"lettuce", "상추"}},
	{"pepper", []string{"pepper", "peppers", "chilli", "chili", "chillies", "고추", "피망", "파프리카"}},
	{"strawberry", []string{"strawberry", "strawberries", "딸기"}},
	{"cucumber", []string{"cucumber", "cucumbers", "오이"}},
	{"lemon", []string{"lemon tree", "lemon", "lemons", "레몬"}},
	{"apple", []string{"apple tree", "apple trees", "사과나무"}},
	{"blueberry", []string{"blueberry", "blueberries", "블루베리"}},
	{"mint", []string{"mint", "민트", "박하"}},
	{"rosemary", []string{"rosemary", "로즈마리"}},
	{"lavender", []string{"lavender", "라벤더"}},
	{"orchid", []string{"orchid", "orchids", "난초", "호접란"}},
	{"succulent", []string{"succulent", "succulents", "다육이", "다육식물"}},
	{"cactus", []string{"cactus", "cacti", "선인장"}},
	{"monstera", []string{"monstera", "몬스테라"}},
	{"sunflower", []string{"sunflower", "sunflowers", "해바라기"}},
	{"potato", []string{"potato", "potatoes", "감자"}},
	{"garlic", []string{"garlic", "마늘"}},
	{"onion", []string{"onion", "onions", "양파"}},
	{"perilla", []string{"perilla", "깻잎", "들깨"}},
	{"cabbage", []string{"cabbage", "cabbages", "배추", "양배추"}},
	{"hydrangea", []string{"hydrangea", "hydrangeas", "수국"}},
	{"tulip", []string{"tulip", "tulips", "튤립"}},
	{"zucchini", []string{"zucchini", "courgette", "courgettes", "애호박", "호박"}},
	{"olive", []string{"olive tree", "olive", "olives", "올리브"}},
	{"bonsai", []string{"bonsai", "분재"}},
	{"herb", []string{"herb", "herbs", "허브"}},
}

// places is a small gazetteer; capitalised English words also count as
// named entities in the gate.
var places = []term{
	{"Busan", []string{"busan", "부산"}}, {"Seoul", []string{"seoul", "서울"}},
	{"Incheon", []string{"incheon", "인천"}}, {"Daegu", []string{"daegu", "대구"}},
	{"Daejeon", []string{"daejeon", "대전"}}, {"Gwangju", []string{"gwangju", "광주"}},
	{"Ulsan", []string{"ulsan", "울산"}}, {"Jeju", []string{"jeju", "제주", "제주도"}},
	{"Suwon", []string{"suwon", "수원"}}, {"Gyeonggi", []string{"gyeonggi", "경기도"}},
	{"Tokyo", []string{"tokyo", "도쿄"}}, {"Osaka", []string{"osaka", "오사카"}},
	{"London", []string{"london", "런던"}}, {"New York", []string{"new york", "뉴욕"}},
	{"Seattle", []string{"seattle", "시애틀"}}, {"Sydney", []string{"sydney", "시드니"}},
}

// languages answer the "language" topic.
var languages = []term{
	{"Korean", []string{"korean", "한국어", "한국말", "한글"}},
	{"English", []string{"english", "영어"}},
	{"Japanese", []string{"japanese", "일본어"}},
	{"Chinese", []string{"chinese", "중국어"}},
	{"Spanish", []string{"spanish", "스페인어"}},
	{"French", []string{"french", "프랑스어", "불어"}},
	{"German", []string{"german", "독일어"}},
}

// topics maps domain terms to single-valued topic keys used for
// contradiction detection, with the section they belong to.
type topicTerm struct {
	topic, section string
	forms          []string
}

var topics = []topicTerm{
	{"fertiliser", "garden", []string{"fertiliser", "fertilisers", "fertilizer", "fertilizers", "compost", "manure", "plant food", "비료", "퇴비", "거름"}},
	{"pest_control", "garden", []string{"pesticide", "pesticides", "insecticide", "neem oil", "spray", "sprays", "농약", "살충제", "방제"}},
	{"watering", "garden", []string{"watering", "water them", "water it", "drip irrigation", "물주기", "물 주", "관수"}},
	{"soil", "garden", []string{"soil", "potting mix", "흙", "토양", "상토", "배양토"}},
	{"answer_length", "style", []string{"short", "shorter", "brief", "concise", "long", "longer", "detailed", "짧게", "짧은", "간단히", "간단하게", "간결하게", "길게", "자세히", "자세하게"}},
	{"units", "style", []string{"metric", "imperial", "celsius", "fahrenheit", "섭씨", "화씨"}},
	{"emoji", "style", []string{"emoji", "emojis", "이모지", "이모티콘"}},
	{"diet", "profile", []string{"vegetarian", "vegan", "채식", "비건"}},
}

// gardenTerms add specificity and the "garden" section without a topic.
var gardenTerms = []string{
	"raised bed", "raised beds", "drainage", "greenhouse", "balcony", "allotment", "garden", "pot", "pots",
	"planter", "south-facing", "north-facing", "mulch", "trellis", "seedling", "seedlings",
	"화단", "텃밭", "배수", "온실", "베란다", "발코니", "정원", "화분", "남향", "북향", "멀칭", "모종",
}

// match is one lexicon hit.
type match struct{ canon, form string }

// findTerms returns the canonical names of all terms that occur in text,
// longest form first so "fig tree" wins over "fig". Latin forms match on
// word boundaries; Hangul forms match as substrings (particles attach).
func findTerms(lower string, lex []term) []match {
	var out []match
	seen := map[string]bool{}
	for _, t := range lex {
		for _, f := range t.forms {
			if containsForm(lower, f) {
				if !seen[t.canon] {
					seen[t.canon] = true
					out = append(out, match{t.canon, f})
				}
				break
			}
		}
	}
	return out
}

// init orders every term's forms longest first, once.
func init() {
	for _, lex := range [][]term{plants, places, languages} {
		for _, t := range lex {
			sort.SliceStable(t.forms, func(i, j int) bool { return len(t.forms[i]) > len(t.forms[j]) })
		}
	}
}

func containsForm(lower, f string) bool {
	if isHangulStr(f) {
		return strings.Contains(lower, f)
	}
	for i := 0; ; {
		j := strings.Index(lower[i:], f)
		if j < 0 {
			return false
		}
		s, e := i+j, i+j+len(f)
		if (s == 0 || !isWordByte(lower[s-1])) && (e == len(lower) || !isWordByte(lower[e])) {
			return true
		}
		i = s + 1
	}
}

func isWordByte(b byte) bool { return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }

func isHangulStr(s string) bool {
	for _, r := range s {
		if r >= 0xAC00 && r <= 0xD7A3 {
			return true
		}
	}
	return false
}

func canonNames(ms []match) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.canon)
	}
	return out
}

// topicOf returns the single-valued topic and section of lower, or "".
func topicOf(lower string) (topic, section string) {
	for _, t := range topics {
		for _, f := range t.forms {
			if containsForm(lower, f) {
				return t.topic, t.section
			}
		}
	}
	return "", ""
}

func hasGardenTerm(lower string) []string {
	var out []string
	for _, f := range gardenTerms {
		if containsForm(lower, f) {
			out = append(out, f)
		}
	}
	return out
}

// headWord is a short, stable key for an object phrase: its last content
// word, lower case, with Korean particles trimmed. "a big red tractor" →
// "tractor".
func headWord(phrase string) string {
	ws := strings.FieldsFunc(strings.ToLower(phrase), func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-')
	})
	for i := len(ws) - 1; i >= 0; i-- {
		w := trimParticle(ws[i])
		if w != "" && !stopWords[w] {
			return w
		}
	}
	return ""
}

var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "some": true, "my": true, "of": true, "to": true, "in": true,
	"on": true, "for": true, "with": true, "and": true, "or": true, "it": true, "them": true, "that": true,
	"this": true, "these": true, "those": true, "very": true, "really": true, "too": true, "now": true,
	"please": true, "just": true, "only": true, "always": true, "at": true, "all": true, "any": true,
}

var particles = []string{"에서는", "에서", "으로는", "으로", "에게", "한테", "이랑", "까지", "부터", "처럼", "은", "는", "이", "가", "을", "를", "에", "로", "와", "과", "도", "만", "랑", "의"}

func trimParticle(w string) string {
	if !isHangulStr(w) {
		return w
	}
	for _, p := range particles {
		if strings.HasSuffix(w, p) && len(w) > len(p) {
			return strings.TrimSuffix(w, p)
		}
	}
	return w
}
