package extract

import (
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/tendrilai/tendril/internal/memory"
)

// rule is one pattern. build returns the topic and whether the match is a
// real statement (guards against "I have a question", "좋아요!").
type rule struct {
	strategy memory.Strategy
	kind     string   // metadata type
	need     []string // the lower-cased clause must contain one of these before the regexp runs
	re       *regexp.Regexp
	build    func(m []string, clause, lower string) (topic string, entities []string, ok bool)
}

func re(s string) *regexp.Regexp { return regexp.MustCompile(s) }

// rules are tried in order; the first match wins for a clause. Procedural
// before preference before semantic, English before Korean; the broad
// statement rules (general.go) come last so a specific rule always wins.
var rules = slices.Concat(baseRules, generalRules, broadRules)

var baseRules = []rule{
	// ---- PROCEDURAL, English
	{memory.StrategyProcedural, "instruction", []string{" in "}, re(`(?i)\b(?:answer|reply|respond|talk|write|speak|explain|chat)(?:\s+to\s+me)?\s+(?:only\s+)?in\s+(\p{L}+)`),
		func(m []string, _, lower string) (string, []string, bool) {
			l := findTerms(strings.ToLower(m[1]), languages)
			if len(l) == 0 {
				return "", nil, false
			}
			return "language", canonNames(l), true
		}},
	{memory.StrategyProcedural, "instruction", []string{"keep", "make"}, re(`(?i)\b(?:keep|make)\s+(?:your\s+|the\s+|all\s+|my\s+)?(?:answers?|replies|reply|responses?|messages?|explanations?)\s+(?:\p{L}+\s+)?(short|shorter|brief|concise|long|longer|detailed|simple)\b`),
		func(m []string, _, _ string) (string, []string, bool) { return "answer_length", nil, true }},
	{memory.StrategyProcedural, "instruction", []string{"metric", "imperial", "celsius", "fahrenheit"}, re(`(?i)\b(?:use|give\s+me|show\s+me|tell\s+me)\s+(?:the\s+)?(?:\p{L}+\s+)?(metric|imperial|celsius|fahrenheit)\b`),
		func(m []string, _, _ string) (string, []string, bool) { return "units", nil, true }},
	{memory.StrategyProcedural, "instruction", []string{"from now on", "going forward", "future"}, re(`(?i)^(?:please\s+|also\s+|and\s+)?(?:from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?future)\s*,?\s+(.{3,})$`),
		func(m []string, _, lower string) (string, []string, bool) {
			return instructionTopic(lower, m[1]), nil, true
		}},
	{memory.StrategyProcedural, "instruction", []string{"always", "never", "don't", "do not", "stop"}, re(`(?i)^(?:please\s+|also\s+|and\s+)?(always|never|don't|do\s+not|stop)\s+(\p{L}+)(.*)$`),
		func(m []string, _, lower string) (string, []string, bool) {
			if notInstruction[strings.ToLower(m[2])] {
				return "", nil, false
			}
			return instructionTopic(lower, m[2]+m[3]), nil, true
		}},
	{memory.StrategyProcedural, "instruction", []string{"you to"}, re(`(?i)\bi\s+(?:want|need|would\s+like|'d\s+like)\s+you\s+to\s+(?:always\s+|never\s+)?(\p{L}+)(.*)$`),
		func(m []string, _, lower string) (string, []string, bool) {
			return instructionTopic(lower, m[1]+m[2]), nil, true
		}},

	// ---- USER_PREFERENCE, English
	{memory.StrategyUserPreference, "preference", []string{"call me", "go by", "address me"}, re(`(?i)\b(?:please\s+)?(?:call\s+me|i\s+go\s+by|address\s+me\s+as)\s+(\p{L}[\p{L}'\-]*)`),
		func(m []string, _, _ string) (string, []string, bool) {
			if stopNames[strings.ToLower(m[1])] {
				return "", nil, false
			}
			return "name", []string{m[1]}, true
		}},
	{memory.StrategyUserPreference, "preference", []string{"only", "always", "exclusively", "usually", "mostly", "generally", "normally"}, re(`(?i)\bi\s+(?:only|always|exclusively|usually|mostly|generally|normally)\s+(use|grow|buy|water|drink|eat|read|plant|feed|choose|pick|wear|cook|shop|take|order|go\s+with|listen\s+to|watch)\b\s*(.*)$`),
		func(m []string, _, lower string) (string, []string, bool) {
			verb := strings.ToLower(strings.Join(strings.Fields(m[1]), " "))
			return objectTopic(lower, m[2], verb), nil, true
		}},
	{memory.StrategyUserPreference, "preference", []string{"like", "love", "enjoy", "prefer", "adore", "hate", "dislike", "despise", "stand", "use", "avoid", "eat", "want"}, re(`(?i)\bi\s+(?:really\s+|do\s+|just\s+|absolutely\s+|totally\s+|much\s+)?(like|love|enjoy|prefer|adore|hate|dislike|despise|can't\s+stand|cannot\s+stand|don't\s+like|do\s+not\s+like|don't\s+use|do\s+not\s+use|never\s+use|avoid|don't\s+eat|do\s+not\s+eat|don't\s+want|do\s+not\s+want)\s+(.+)$`),
		func(m []string, _, lower string) (string, []string, bool) {
			obj := strings.ToLower(strings.TrimSpace(m[2]))
			fs := strings.Fields(obj)
			if len(fs) == 0 || badObject[fs[0]] || headWord(obj) == "" {
				return "", nil, false
			}
			return objectTopic(lower, m[2], "likes"), nil, true
		}},
	{memory.StrategyUserPreference, "preference", []string{"favourite", "favorite", "go-to"}, re(`(?i)\bmy\s+(?:all[-\s]time\s+)?(?:favou?rite|go-to)\s+(\p{L}+)(?:\s+\p{L}+)?\s+(?:is|are)\s+(.+)$`),
		func(m []string, _, _ string) (string, []string, bool) {
			return "favourite:" + strings.ToLower(m[1]), nil, true
		}},
	{memory.StrategyUserPreference, "preference", []string{"rather", "prefer"}, re(`(?i)\bi(?:'d|\s+would)\s+(?:much\s+|far\s+|really\s+|definitely\s+|honestly\s+|always\s+)?(?:rather|prefer)\s+(.+)$`),
		func(m []string, _, lower string) (string, []string, bool) {
			if headWord(m[1]) == "" {
				return "", nil, false
			}
			return objectTopic(lower, m[1], "prefer"), nil, true
		}},

	// ---- SEMANTIC, English
	{memory.StrategySemantic, "fact", []string{"name", "called"}, re(`(?i)\b(?:my\s+name\s+is|my\s+name's|i'm\s+called|i\s+am\s+called)\s+(\p{L}[\p{L}'\-]*)`),
		func(m []string, _, _ string) (string, []string, bool) {
			return "name", []string{m[1]}, !stopNames[strings.ToLower(m[1])]
		}},
	{memory.StrategySemantic, "fact", []string{"live", "living", "reside", "based", "from", "moved"}, re(`(?i)\b(?:i|we)(?:\s+now)?\s+(?:live|am\s+living|'m\s+living|are\s+living|'re\s+living|reside|am\s+based|'m\s+based|are\s+based|'re\s+based)\s+in\s+(.+)$|\bi(?:'m|\s+am)\s+from\s+(.+)$|\bi(?:\s+just|\s+recently|'ve|\s+have)?\s+moved\s+to\s+(.+)$`),
		func(m []string, _, lower string) (string, []string, bool) {
			place := firstNonEmpty(m[1:]...)
			ents := canonNames(findTerms(lower, places))
			if len(ents) == 0 {
				if n := capitalised(place); n != "" {
					ents = []string{n}
				}
			}
			return "location", ents, headWord(place) != ""
		}},
	{memory.StrategySemantic, "fact", []string{"vegetarian", "vegan", "pescatarian", "allergic"}, re(`(?i)\bi(?:'m|\s+am)\s+(vegetarian|vegan|pescatarian|allergic\s+to\s+.+)$`),
		func(m []string, _, lower string) (string, []string, bool) {
			if strings.HasPrefix(strings.ToLower(m[1]), "allergic") {
				return "allergy:" + headWord(m[1]), nil, true
			}
			return "diet", nil, true
		}},
	{memory.StrategySemantic, "fact", []string{"have", "'ve got", "own", "grow", "keep", "planted", "raise"}, re(`(?i)\b(?:i|we)\s+(?:also\s+|now\s+|still\s+)?(?:have|'ve\s+got|have\s+got|own|grow|keep|planted|raise|am\s+growing|'m\s+growing|are\s+growing|'re\s+growing)\s+(.+)$`),
		func(m []string, _, lower string) (string, []string, bool) { return hasTopic(lower, m[1]) }},
	{memory.StrategySemantic, "fact", []string{"work", "i'm a", "i am a"}, re(`(?i)\bi\s+work\s+(?:as|at|in|for)\s+(.+)$|\bi(?:'m|\s+am)\s+an?\s+(\p{L}+(?:\s+\p{L}+)?)$`),
		func(m []string, _, _ string) (string, []string, bool) {
			obj := firstNonEmpty(m[1:]...)
			fs := strings.Fields(strings.ToLower(obj))
			if len(fs) == 0 || notIdentity[fs[0]] {
				return "", nil, false
			}
			return "occupation", nil, headWord(obj) != ""
		}},
	{memory.StrategySemantic, "fact", []string{"my ", "our "}, re(`(?i)\b(?:my|our)\s+((?:\p{L}+[\s-]+){0,2}?\p{L}+)\s+(?:is|are|was|were|has|have|gets?|faces?|needs?)\s+(.+)$`),
		func(m []string, _, lower string) (string, []string, bool) {
			h := headWord(m[1])
			if h == "" || stopHeads[h] {
				return "", nil, false
			}
			return "my:" + h, nil, true
		}},
	// Third person, as an agent writes notes with memory_write.
	{memory.StrategyUserPreference, "preference", []string{"user "}, re(`(?i)(?:^|\bthat\s+|:\s*)(?:the\s+)?user\s+(?:really\s+|only\s+|always\s+)*(likes|loves|prefers|hates|dislikes|uses|avoids)\s+(.+)$`),
		func(m []string, _, lower string) (string, []string, bool) {
			return objectTopic(lower, m[2], "likes"), nil, true
		}},
	{memory.StrategySemantic, "fact", []string{"user "}, re(`(?i)(?:^|\bthat\s+|:\s*)(?:the\s+)?user\s+(?:now\s+)?(?:lives\s+in|is\s+based\s+in|moved\s+to)\s+(.+)$`),
		func(m []string, _, lower string) (string, []string, bool) {
			return "location", canonNames(findTerms(lower, places)), true
		}},
	{memory.StrategySemantic, "fact", []string{"user "}, re(`(?i)(?:^|\bthat\s+|:\s*)(?:the\s+)?user\s+(?:also\s+)?(?:has|owns|grows|keeps|planted)\s+(.+)$`),
		func(m []string, _, lower string) (string, []string, bool) { return hasTopic(lower, m[1]) }},

	// ---- PROCEDURAL, Korean
	{memory.StrategyProcedural, "instruction", []string{"로"}, re(`(한국어|한국말|영어|일본어|중국어|스페인어|프랑스어|불어|독일어)로\s*(?:만\s*)?(?:답|대답|말|얘기|이야기|설명|써|작성|응답)`),
		func(m []string, _, lower string) (string, []string, bool) {
			return "language", canonNames(findTerms(m[1], languages)), true
		}},
	{memory.StrategyProcedural, "instruction", []string{"짧", "간단", "간결", "길게", "자세"}, re(`(짧게|간단히|간단하게|간결하게|짧고|길게|자세히|자세하게)\s*(?:좀\s*)?(?:답|대답|말|설명|써|작성|얘기)|(?:답|대답|답변|설명)(?:은|을|는)?\s*(?:좀\s*)?(?:항상\s*)?(짧게|간단히|간단하게|간결하게|길게|자세히|자세하게)`),
		func(m []string, _, _ string) (string, []string, bool) { return "answer_length", nil, true }},
	{memory.StrategyProcedural, "instruction", []string{"앞으로", "항상", "늘", "언제나", "매번", "절대", "꼭"}, re(`^(?:앞으로(?:는)?|항상|늘|언제나|매번|절대로?|꼭)\s+(.+?)\s*(?:해\s?줘요?|해\s?주세요|해\s?줄래|줘요?|주세요|하세요|해요|하지\s?마(?:세요|요)?|마세요|말아\s?줘|말아\s?주세요)$`),
		func(m []string, _, lower string) (string, []string, bool) {
			return instructionTopic(lower, m[1]), nil, true
		}},

	// ---- USER_PREFERENCE, Korean
	{memory.StrategyUserPreference, "preference", []string{"라고"}, re(`(\S+?)(?:이)?라고\s*(?:불러|부르)`),
		func(m []string, _, _ string) (string, []string, bool) {
			n := strings.TrimPrefix(m[1], "저를")
			return "name", []string{n}, n != "" && n != "뭐" && n != "이렇게"
		}},
	{memory.StrategyUserPreference, "preference", []string{"만"}, re(`(\S.*?)만\s*(?:써요|써|씁니다|쓰고\s*있어요|사용해요|사용합니다|사용해|사용하고\s*있어요|먹어요|먹습니다|키워요|줘요|줍니다|사요|삽니다|마셔요|마셔|먹어)`),
		func(m []string, _, lower string) (string, []string, bool) {
			return objectTopic(lower, m[1], "uses"), nil, headWord(m[1]) != ""
		}},
	{memory.StrategyUserPreference, "preference", []string{"좋아", "선호", "싫어"}, re(`(\S.*?)(?:을|를|은|는|이|가)?\s*(?:정말|진짜|너무|제일|가장|아주|별로|안)?\s*(좋아해요|좋아해|좋아합니다|좋아하는\s*편이에요|선호해요|선호합니다|선호해|싫어해요|싫어해|싫어합니다|싫어요|안\s*좋아해요)`),
		func(m []string, _, lower string) (string, []string, bool) {
			h := headWord(m[1])
			if h == "" || badObjectKO[h] {
				return "", nil, false
			}
			return objectTopic(lower, m[1], "likes"), nil, true
		}},
	{memory.StrategyUserPreference, "preference", []string{"안"}, re(`(\S.*?)(?:을|를|은|는)?\s*(?:절대\s*)?안\s*(?:써요|씁니다|사용해요|사용합니다|먹어요|먹습니다)`),
		func(m []string, _, lower string) (string, []string, bool) {
			return objectTopic(lower, m[1], "uses"), nil, headWord(m[1]) != ""
		}},

	// ---- SEMANTIC, Korean
	{memory.StrategySemantic, "fact", []string{"이름"}, re(`제\s*이름은\s*(\S+?)(?:이에요|예요|입니다|이야|야|이요|요)?$`),
		func(m []string, _, _ string) (string, []string, bool) { return "name", []string{m[1]}, true }},
	{memory.StrategySemantic, "fact", []string{"살", "이사", "출신", "거주"}, re(`(\S+?)(?:에|에서)\s*(?:살아요|살고\s*있어요|살고\s*있습니다|삽니다|살아|살고\s*있어|거주해요|거주합니다|거주하고\s*있어요)|(\S+?)(?:으로|로)\s*이사(?:했어요|했습니다|왔어요|갔어요|했어)|(\S+?)\s*출신이(?:에요|야|고)|(\S+?)\s*출신입니다`),
		func(m []string, _, lower string) (string, []string, bool) {
			p := trimParticle(firstNonEmpty(m[1:]...))
			ents := canonNames(findTerms(lower, places))
			if len(ents) == 0 && p != "" {
				ents = []string{p}
			}
			return "location", ents, p != ""
		}},
	{memory.StrategySemantic, "fact", []string{"있"}, re(`(\S.*?)(?:이|가)\s*(?:있어요|있습니다|있어|있는데요?|있거든요)`),
		func(m []string, _, lower string) (string, []string, bool) { return hasTopic(lower, m[1]) }},
	{memory.StrategySemantic, "fact", []string{"키우", "키워", "키웁", "기르", "길러", "재배", "심었"}, re(`(\S.*?)(?:을|를)\s*(?:키워요|키우고\s*있어요|키웁니다|키우고\s*있습니다|기르고\s*있어요|길러요|재배해요|재배하고\s*있어요|심었어요|심었습니다)`),
		func(m []string, _, lower string) (string, []string, bool) {
			t, e, ok := hasTopic(lower, m[1])
			if !ok && headWord(m[1]) != "" {
				return "has:" + headWord(m[1]), e, true
			}
			return t, e, ok
		}},
	{memory.StrategySemantic, "fact", []string{"제"}, re(`(?:^|\s)제\s+(\S+?)(?:은|는|이|가)\s+(.+)$`),
		func(m []string, _, _ string) (string, []string, bool) {
			h := trimParticle(m[1])
			if stopHeadsKO[h] {
				return "", nil, false
			}
			return "my:" + h, nil, true
		}},
	{memory.StrategySemantic, "fact", []string{"저는"}, re(`저는\s+(.+?)(?:이에요|예요|입니다)$`),
		func(m []string, clause, _ string) (string, []string, bool) {
			// "저는 커피보다 차 파예요" (I'm team tea) is a preference
			return "occupation", nil, headWord(m[1]) != "" && !strings.HasSuffix(clause, "파예요") && !strings.HasSuffix(clause, "파입니다")
		}},
}

var notInstruction = map[string]bool{"mind": true, "worry": true, "know": true, "care": true, "think": true, "be": true, "forget": false, "bother": true, "panic": true}

var stopNames = map[string]bool{"that": true, "it": true, "this": true, "me": true, "anytime": true, "later": true, "back": true, "when": true, "if": true, "please": true, "tomorrow": true}

var badObject = map[string]bool{"it": true, "that": true, "this": true, "them": true, "you": true, "to": true, "when": true, "how": true, "what": true, "your": true, "so": true, "the": false}

var badObjectKO = map[string]bool{"그거": true, "그것": true, "이거": true, "저거": true, "네": true, "응": true, "정말": true, "진짜": true, "너무": true, "아주": true, "저": true, "나": true, "저는": true, "그게": true}

var notIdentity = map[string]bool{"night": true, "morning": true, "early": true, "bit": true, "little": true, "lot": true, "tad": true, "big": true, "huge": true, "bit,": true, "few": true, "good": true, "great": true, "new": false}

var stopHeads = map[string]bool{"question": true, "questions": true, "problem": true, "point": true, "guess": true, "bad": true, "idea": true, "answer": true, "friend": false}

var stopHeadsKO = map[string]bool{"질문": true, "생각": true, "문제": true, "말": true, "얘기": true, "의견": true}

var stopHas = map[string]bool{"question": true, "questions": true, "problem": true, "idea": true, "feeling": true, "doubt": true, "clue": true,
	"time": true, "moment": true, "minute": true, "second": true, "chance": true, "point": true, "to": true, "been": true, "no": true, "fun": true}

// family are the relatives a user says they have ("I have two older
// brothers").
var family = []string{"brother", "brothers", "sister", "sisters", "sibling", "siblings", "son", "sons", "daughter", "daughters", "kids", "children", "twins", "grandkids", "grandchildren", "형제", "자매", "남매", "아들", "딸"}

var pets = []string{"dog", "dogs", "cat", "cats", "puppy", "kitten", "chickens", "bees", "beehive", "강아지", "고양이", "반려견", "반려묘", "닭", "벌통"}

// hasTopic accepts a possession only when it names something specific — a
// plant, garden term, pet, number or allergy — so "I have a question" and
// "시간이 있어요" are not facts.
func hasTopic(lower, obj string) (string, []string, bool) {
	objL := strings.ToLower(strings.TrimSpace(obj))
	if objL == "" {
		return "", nil, false
	}
	for _, w := range strings.Fields(objL) {
		if stopWords[w] && w != "to" {
			continue
		}
		if stopHas[strings.Trim(w, ".,!?")] {
			return "", nil, false
		}
		break
	}
	if ps := findTerms(objL, plants); len(ps) > 0 {
		return "has:" + ps[0].canon, nil, true
	}
	if g := hasGardenTerm(objL); len(g) > 0 {
		return "has:" + g[0], g, true
	}
	for _, p := range pets {
		if containsForm(objL, p) {
			return "has:" + p, nil, true
		}
	}
	for _, p := range family {
		if containsForm(objL, p) {
			return "has:" + p, nil, true
		}
	}
	if strings.Contains(objL, "알레르기") || strings.Contains(objL, "allerg") {
		return "allergy:" + headWord(strings.ReplaceAll(objL, "알레르기", "")), nil, true
	}
	for _, r := range objL {
		if unicode.IsDigit(r) {
			h := headWord(objL)
			return "has:" + h, nil, h != "" && !stopHas[h]
		}
	}
	return "", nil, false
}

// objectTopic is the single-valued topic of the clause when the lexicon
// knows one (fertiliser, watering, …), else verb:head-of-object.
func objectTopic(lower, obj, verb string) string {
	if t, _ := topicOf(lower); t != "" {
		return t
	}
	if ps := findTerms(strings.ToLower(obj), plants); len(ps) > 0 {
		return verb + ":" + ps[0].canon
	}
	return verb + ":" + headWord(obj)
}

func instructionTopic(lower, rest string) string {
	if t, _ := topicOf(lower); t != "" {
		return t
	}
	if l := findTerms(lower, languages); len(l) > 0 {
		return "language"
	}
	return "instruction:" + headWord(rest)
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

func capitalised(s string) string {
	for _, w := range strings.Fields(s) {
		w = strings.Trim(w, ".,!?;:\"'()")
		if r := []rune(w); len(r) > 0 && unicode.IsUpper(r[0]) {
			return w
		}
	}
	return ""
}

// matchClause runs the rules over one clause.
func matchClause(clause, role string) (Candidate, bool) {
	clause = tidyChat(clause)
	if clause == "" || len(clause) > 600 {
		return Candidate{}, false
	}
	lower := strings.ToLower(clause)
	// Only the user speaks for the user: other roles are read for
	// third-person "the user …" statements alone.
	onlyThird := role != "user" && role != ""
	if onlyThird && !strings.Contains(lower, "user ") {
		return Candidate{}, false
	}
	hangul, latin := scripts(clause)
	// hypothetical and one-off are properties of the clause: each is
	// decided once, when a rule of its kind first needs it.
	hyp, oneOff := -1, -1
	isHyp := func() bool {
		if hyp < 0 {
			hyp = 0
			if hypothetical(clause, lower) {
				hyp = 1
			}
		}
		return hyp == 1
	}
	isOneOff := func() bool {
		if oneOff < 0 {
			oneOff = 0
			if reOneOff.MatchString(clause) {
				oneOff = 1
			}
		}
		return oneOff == 1
	}
	for i, r := range rules {
		if !needed(lower, r.need) || (ruleHangul[i] && !hangul) || (!ruleHangul[i] && !latin) || (onlyThird && !isThirdPerson(r)) {
			continue
		}
		m := r.re.FindStringSubmatch(clause)
		if m == nil {
			continue
		}
		if r.strategy != memory.StrategyProcedural && isHyp() || r.strategy == memory.StrategyProcedural && isOneOff() {
			continue
		}
		topic, ents, ok := r.build(m, clause, lower)
		if !ok {
			continue
		}
		return newCandidate(r.strategy, r.kind, clause, lower, topic, ents), true
	}
	return Candidate{}, false
}

func newCandidate(s memory.Strategy, kind, clause, lower, topic string, ents []string) Candidate {
	md := map[string]any{KeyType: kind}
	ps := findTerms(lower, plants)
	section := ""
	if _, sec := topicOf(lower); sec != "" {
		section = sec
	}
	switch {
	case section != "":
	case topic == "name" || topic == "location" || topic == "occupation" || topic == "diet" || strings.HasPrefix(topic, "allergy:"):
		section = "profile"
	case topic == "language":
		section = "style"
	case len(ps) > 0 || len(hasGardenTerm(lower)) > 0:
		section = "garden"
	default:
		section = "general"
	}
	md[KeySection] = section
	if len(ps) > 0 {
		md[KeyPlants] = canonNames(ps)
	}
	topic = strings.TrimSpace(topic)
	if strings.HasSuffix(topic, ":") {
		topic = ""
	}
	if topic != "" {
		md[KeyTopic] = topic
	}
	// Entities for the gate: extractor entities, plants, places, domain terms.
	var es []string
	seen := map[string]bool{}
	add := func(xs ...string) {
		for _, x := range xs {
			if x != "" && !seen[strings.ToLower(x)] {
				seen[strings.ToLower(x)] = true
				es = append(es, x)
			}
		}
	}
	add(ents...)
	add(canonNames(ps)...)
	add(canonNames(findTerms(lower, places))...)
	if t, _ := topicOf(lower); t != "" && t != "answer_length" {
		add(t)
	}
	add(hasGardenTerm(lower)...)
	return Candidate{
		Strategy: s,
		Content:  cleanContent(clause),
		Topic:    topic,
		Metadata: md,
		Evidence: clause,
		Direct:   true,
		Entities: es,
	}
}

func needed(lower string, need []string) bool {
	for _, n := range need {
		if strings.Contains(lower, n) {
			return true
		}
	}
	return len(need) == 0
}

func scripts(s string) (hangul, latin bool) {
	for _, r := range s {
		switch {
		case r >= 0xAC00 && r <= 0xD7A3:
			hangul = true
		case r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'):
			latin = true
		}
	}
	return
}

// ruleHangul marks Korean rules: they are skipped for clauses without
// Hangul, as English rules are for clauses without Latin letters.
var ruleHangul = func() []bool {
	out := make([]bool, len(rules))
	for i, r := range rules {
		out[i] = isHangulStr(r.re.String())
	}
	return out
}()

func isThirdPerson(r rule) bool { return len(r.need) == 1 && r.need[0] == "user " }
