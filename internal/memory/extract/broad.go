package extract

import (
	"regexp"
	"strings"
	"unicode"

	"github.com/tendrilai/tendril/internal/memory"
)

// broadRules widen the rules to the ways people state facts, habits and
// standing instructions that the fixed patterns of baseRules and
// generalRules miss: health conditions, studies and work stated with
// other verbs, reports without a subject ("Just bought a used car"),
// habits ("I usually run before breakfast", "아침 먹기 전에 항상
// 조깅해"), standing rules given as conditions ("When I ask for recipes,
// list the ingredients first", "레시피 물어보면 재료부터 정리해 줘"), and
// Korean statements in every register that say something about the
// speaker, their people or their dates. They were written from a
// labelled set written by someone who had not seen the rules
// (testdata/*_dev.tsv) and are scored on another such set
// (testdata/*_heldout.tsv) that was not read while writing them. They run
// after the other rules, so a specific rule always wins; like
// generalRules they carry no topic (such facts accumulate, and none
// supersedes another), except the procedural ones, whose topic is their
// instruction.
var broadRules = []rule{
	// ---- PROCEDURAL, English
	// A rule given as a condition: "When I ask for recipes, list the
	// ingredients first", "Whenever I send you code, review it". The part
	// after the comma must be an imperative, not "I'd …" ("If I had a dog,
	// I'd call it Max" is no instruction).
	{memory.StrategyProcedural, "instruction", []string{"when", "every time", "each time", "if i"},
		re(`(?i)^(?:when(?:ever)?|every\s+time|each\s+time|if)\s+i\s+(?:ask|want|need|say|send|request|message|text|tell|share|give|mention)\b[^,]*,\s*(?:please\s+)?(\p{L}+)(.*)$`),
		func(m []string, _, lower string) (string, []string, bool) {
			v := strings.ToLower(m[1])
			if subjectWords[v] {
				return "", nil, false
			}
			return instructionTopic(lower, m[1]+m[2]), nil, true
		}},
	// An imperative about the assistant's own replies with a standing
	// marker: "Use bullet points whenever you summarize", "Keep your
	// replies under three sentences", "Give me metric units by default".
	{memory.StrategyProcedural, "instruction", []string{"whenever", "every time", "each time", "by default", "when you", "your repl", "your answer", "your respons", "your messag"},
		re(`(?i)^(?:please\s+)?(?:use|give|write|answer|reply|respond|format|list|include|add|show|keep|avoid|skip|put|start|end|begin|finish|call|address|mention|check|ask|sign|limit|cap)\b(.*?)\b(?:whenever|every\s+time|each\s+time|by\s+default|when(?:ever)?\s+you\b|your\s+(?:replies|reply|answers?|responses?|messages?|summaries))(.*)$`),
		func(m []string, _, lower string) (string, []string, bool) {
			if t, _ := topicOf(lower); t != "" {
				return t, nil, true
			}
			if reLength.MatchString(lower) {
				return "answer_length", nil, true
			}
			return instructionTopic(lower, m[1]+m[2]), nil, true
		}},

	// ---- USER_PREFERENCE, English
	// A habit: "I usually go for a run before breakfast", "I always take
	// the stairs". (baseRules already read "I only/always use …".)
	{memory.StrategyUserPreference, "preference", []string{"usually", "always", "normally", "typically", "often", "tend to", "never", "every morning", "every day", "every night", "every week"},
		re(`(?i)\bi\s+(?:usually|always|normally|typically|often|generally|tend\s+to|never|(?:also\s+)?(?:every|each)\s+(?:morning|day|night|evening|week|weekend)\s*,?)\s+(\p{L}+)\b\s*(.*)$`),
		func(m []string, _, lower string) (string, []string, bool) {
			return "", nil, !notHabit[strings.ToLower(m[1])]
		}},

	// ---- SEMANTIC, English
	// Health: conditions, intolerances, diagnoses.
	{memory.StrategySemantic, "fact", []string{"intoleran", "diabet", "pregnan", "celiac", "coeliac", "asthma", "diagnosed", "migraine", "arthritis", "adhd", "epilep", "eczema", "insomnia", "blood pressure", "bad back", "colorblind", "colourblind", "color-blind", "colour-blind", "deaf", "anemic", "anaemic"},
		re(`(?i)\bi(?:'m|\s+am)\s+(?:\p{L}+\s+){0,2}(?:intolerant|diabetic|pregnant|celiac|coeliac|asthmatic|colou?r-?blind|deaf|anemic|anaemic)\b` +
			`|(?:\bi\s+|^(?:just\s+)?)(?:was|got|'ve\s+been|have\s+been|been)\s+(?:just\s+|recently\s+|finally\s+|officially\s+)?diagnosed\s+with\s+\S` +
			`|\bi\s+(?:have|'ve\s+got|suffer\s+from|live\s+with|deal\s+with)\s+(?:type\s+\d\s+|mild\s+|severe\s+|chronic\s+|bad\s+|really\s+bad\s+)?(?:diabetes|asthma|celiac|coeliac|migraines?|arthritis|adhd|epilepsy|eczema|insomnia|high\s+blood\s+pressure|a\s+bad\s+back)\b`),
		func(_ []string, _, _ string) (string, []string, bool) { return "", nil, true }},
	// Study and work stage: "I'm in my final year of a nursing degree".
	{memory.StrategySemantic, "fact", []string{" year"},
		re(`(?i)\bi(?:'m|\s+am)\s+(?:now\s+|currently\s+)?in\s+(?:my\s+)?(?:first|second|third|fourth|fifth|final|last|senior|junior|\d+(?:st|nd|rd|th))\s+year\b`),
		func(_ []string, _, _ string) (string, []string, bool) { return "", nil, true }},
	// What the speaker does, stated with a present-tense verb: "We rent a
	// three-bedroom apartment in Mapo", "I teach maths at a high school".
	{memory.StrategySemantic, "activity", []string{"i ", "we "},
		re(`(?i)\b(?:i|we)\s+(?:also\s+|still\s+|now\s+|currently\s+)?(rent|study|major\s+in|teach|coach|volunteer|commute|drive|attend|lead|manage|run\s+a|run\s+an|run\s+my|run\s+our|share|care\s+for|look\s+after|train|practi[cs]e|play|speak)\b\s*(.{3,})$`),
		func(m []string, _, _ string) (string, []string, bool) { return "", nil, contentful(m[2]) }},
	// A report or plan without a subject: "Just bought a used Subaru last
	// Tuesday", "Flying to Lisbon on the 14th for a conference".
	{memory.StrategySemantic, "event", []string{"just ", "finally ", "recently "},
		re(`(?i)^(?:just|finally|recently)\s+(` + pastVerbs + `|\p{L}{2,}ed)\s+(.{3,})$`),
		func(m []string, _, _ string) (string, []string, bool) {
			return "", nil, !notEvent[strings.ToLower(m[1])] && contentful(m[2])
		}},
	{memory.StrategySemantic, "plan", []string{"flying", "heading", "driving", "moving", "leaving", "off to", "travelling", "traveling"},
		re(`(?i)^(?:(?:we're|i'm)\s+)?(?:flying|heading|driving|moving|leaving|off|travell?ing)\s+(?:out\s+|back\s+|home\s+)?(?:to|for|from)\s+(.{3,})$`),
		func(m []string, _, _ string) (string, []string, bool) { return "", nil, contentful(m[1]) }},

	// Length and tone without a verb: "no more than 2 paragraphs pls",
	// "be blunt with me, don't sugarcoat stuff"; a rule that names its
	// span anywhere ("keep it casual from now on"); a condition on the
	// assistant's replies first ("Whenever you mention a date, write it
	// in ISO format").
	{memory.StrategyProcedural, "instruction", []string{"no more than", "at most", "max", "under", "be ", "from now on", "going forward", "from here on", "moving forward", "whenever you", "every time you", "when you"},
		re(`(?i)^(?:no\s+more\s+than|at\s+most|max(?:imum)?|under)\s+(?:\d+|one|two|three|four|five)\s+(?:paragraphs?|sentences?|words?|lines?|bullets?|bullet\s+points?)\b` +
			`|^(?:please\s+)?(?:always\s+)?be\s+(?:more\s+|very\s+|super\s+)?(?:blunt|direct|honest|brief|concise|casual|formal|polite|gentle|straightforward|patient|succinct|frank)\b` +
			`|^(?:please\s+)?(?:keep|be|talk|speak|call|use|write|answer|reply|respond|stop|don't|do\s+not|always|never|address|treat)\b.*\b(?:from\s+now\s+on|going\s+forward|from\s+here\s+on|moving\s+forward)\b` +
			`|^(?:whenever|every\s+time|each\s+time|when)\s+you\s+[^,]{3,},\s*(?:please\s+)?(?:always\s+)?(use|give|write|answer|reply|format|list|include|add|show|keep|put|start|end|begin|mention|spell|say|convert|round|translate|ask|tell|check|remind)\b`),
		func(m []string, _, lower string) (string, []string, bool) {
			if t, _ := topicOf(lower); t != "" {
				return t, nil, true
			}
			if reLength.MatchString(lower) || strings.Contains(lower, "paragraph") {
				return "answer_length", nil, true
			}
			return "instruction:" + headWord(lower), nil, true
		}},
	// Likes, dislikes and types without a subject or with a fixed phrase:
	// "ugh hate mornings", "can't stand horror movies", "not a fan of
	// cilantro", "I'm more of a tea person", "jazz is my thing", "I'm a
	// night owl".
	{memory.StrategyUserPreference, "preference", []string{"love", "hate", "adore", "stand", "enjoy", "fan of", "person", "my thing", "my jam", "night owl", "early bird", "morning person"},
		re(`(?i)^(?:(?:ugh|honestly|tbh|lol|omg|man|so|also|and|but|really|totally|absolutely|kinda|seriously|i\s+mean)\s*,?\s+)*(?:really\s+|absolutely\s+|totally\s+)?(?:love|hate|adore|dislike|can't\s+stand|cannot\s+stand|don't\s+like|enjoy)\s+(.{3,})$` +
			`|\b(?:not\s+(?:a\s+|really\s+a\s+)?(?:big\s+|huge\s+)?fan\s+of|(?:i'm|i\s+am)\s+(?:a\s+)?(?:big\s+|huge\s+)?fan\s+of)\s+(.{2,})` +
			`|\b(?:i'm|i\s+am)\s+(?:totally\s+|definitely\s+|more\s+of\s+|really\s+)?an?\s+(night\s+owl|early\s+bird|morning\s+person|\p{L}+\s+person)\b` +
			`|\bis\s+(?:totally\s+|definitely\s+)?my\s+(?:thing|jam|favou?rite|fave)\b`),
		func(m []string, _, _ string) (string, []string, bool) {
			if obj := firstNonEmpty(m[1], m[2]); obj != "" && !contentful(obj) {
				return "", nil, false
			}
			return "", nil, true
		}},
	// A habit by its frequency: "hit the gym every morning at 6", "I do
	// yoga twice a week", "work out on weekends".
	{memory.StrategyUserPreference, "preference", []string{"every ", "twice", "once a", "times a", "on mondays", "on tuesdays", "on wednesdays", "on thursdays", "on fridays", "on saturdays", "on sundays", "on weekends", "weekdays"},
		re(`(?i)^(?:(?:i|we)\s+(?:also\s+)?)?(\p{L}+)\b.*\b(?:every\s+(?:morning|day|night|evening|week|weekend|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|(?:once|twice|\d+\s+times|three\s+times)\s+a\s+(?:day|week|month)|on\s+(?:mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|weekends|weekdays))\b`),
		func(m []string, _, lower string) (string, []string, bool) {
			v := strings.ToLower(m[1])
			return "", nil, !notHabit[v] && !subjectWords[v] && !strings.HasPrefix(lower, "my ") && !strings.HasPrefix(lower, "remind")
		}},
	// More facts: age, pets and people by name, origins, traits, a start
	// date, and reports without a subject that name what happened ("broke
	// my wrist skiing last weekend", "had my gallbladder removed in 2021").
	{memory.StrategySemantic, "fact", []string{"i'm", "i am", "name is", "from", "been a", "start", "handed", "got ", "have ", "'ve "},
		re(`(?i)\bi(?:'m|\s+am)\s+(?:\d{1,3}|turning\s+\d{1,3})(?:\s+years?\s+old|\s*yo)?\b` +
			`|\b(?:the|my|our)\s+(\p{L}+)'s\s+name\s+is\s+\p{L}` +
			`|\bi(?:'m|\s+am)\s+(?:originally|actually|also|born\s+and\s+raised)\s+from\s+\p{L}|\b(?:i\s+)?grew\s+up\s+in\s+\p{L}|\bi\s+was\s+born\s+in\s+\p{L}` +
			`|\bi(?:'ve|\s+have)\s+been\s+an?\s+\p{L}+(?:\s+\p{L}+)?\s+for\b` +
			`|\b(?:i|we)\s+(?:start|begin|graduate|retire)\s+(?:at|in|on|my|our|next|this)\b` +
			`|\bi(?:'m|\s+am)\s+(?:left|right)[-\s]?handed\b|\bi(?:'m|\s+am)\s+(?:an\s+only\s+child|a\s+twin|single|married|divorced|engaged|widowed|retired)\b` +
			`|\b(?:i|we)(?:'ve|\s+have)?\s+got\s+(?:a|an|two|three|four|\d+)\s+\p{L}+|\b(?:i|we)(?:'ve|\s+have)\s+(?:a|an|two|three|four|\d+)\s+(?:rabbits?|hamsters?|parrots?|birds?|fish|horses?|guinea\s+pigs?|snakes?|turtles?|lizards?|kids|children|sons?|daughters?|dogs?|cats?)\b`),
		func(_ []string, _, _ string) (string, []string, bool) { return "", nil, true }},
	{memory.StrategySemantic, "event", nil,
		re(`(?i)^(?:so\s+|ok\s+|okay\s+|well\s+|also\s+)?(` + pastVerbs + `|split\s+up|broke\s+up|quit|\p{L}{3,}ed)\s+((?:my|our|a|an|the|\d+)\b.{3,}|up\s+.{3,}|with\s+.{3,})$`),
		func(m []string, _, _ string) (string, []string, bool) {
			return "", nil, !notEvent[strings.ToLower(m[1])] && contentful(m[2])
		}},

	// ---- PROCEDURAL, Korean
	// An imperative about the assistant's replies: a topic-marked reply
	// noun ("답변은 … 해 주세요"), or a standing marker (나한테는, 앞으로,
	// 매번, "…물어보면", "…할 때는"), then a request ending.
	{memory.StrategyProcedural, "instruction", []string{"줘", "주세요", "마", "말해", "주실래요", "바랍니다", "부탁", "좋겠"},
		re(`^(.+?)\s*(?:해\s?줘요?|해\s?주세요|해\s?주실래요|줘요?|주세요|하지\s?마(?:세요|요)?|마세요|지\s?마|말아\s?줘요?|말아\s?주세요|말해(?:\s?줘|\s?주세요)?|주시기\s?바랍니다|해\s?주시면\s?좋겠어요|해\s?주면\s?좋겠어|부탁해요?|부탁드려요|부탁드립니다)(?:\s+(?:매번|항상|앞으로|제발|꼭))?$`),
		func(m []string, clause, lower string) (string, []string, bool) {
			if !reStandingKO.MatchString(clause) || reOneOffKO.MatchString(clause) {
				return "", nil, false
			}
			if reLengthKO.MatchString(clause) {
				return "answer_length", nil, true
			}
			return instructionTopic(lower, m[1]), nil, true
		}},

	// ---- USER_PREFERENCE, Korean
	// "제일 좋아하는 가수는 아이유예요"
	{memory.StrategyUserPreference, "preference", []string{"좋아하는"},
		re(`(?:제일|가장|젤)\s*좋아하는\s*(\S+?)(?:은|는|이|가)\s+(.+)$`),
		func(m []string, _, _ string) (string, []string, bool) {
			return "favourite:" + trimParticle(m[1]), nil, true
		}},
	// Likes and dislikes in every register: "고수 진짜 싫어", "공포 영화는
	// 질색이에요", "창가 자리가 좋더라", "지하철이 더 편해요", "집에서 뒹구는
	// 게 최고지", "…좋아하는데".
	{memory.StrategyUserPreference, "preference", []string{"싫", "질색", "극혐", "좋더라", "최고", "편해", "편하", "좋아", "선호", "나아", "별로야", "별로예요", "못 먹", "안 먹", "파"},
		re(`^(.+?)\s*(싫어(?:요)?|싫다|싫음|싫거든(?:요)?|질색(?:이에요|이야|입니다|이다)?|극혐|좋더라(?:고요)?|최고지|최고야|최고예요|최고다|최고|더\s*편해(?:요)?|편해요|편하더라(?:고요)?|편하다|좋아하는데(?:요)?|좋아하거든(?:요)?|좋아한다|좋아함|좋아해요|좋아해|선호(?:함|해|해요|합니다)|별로야|별로예요|못\s*먹어(?:요)?|안\s*먹어(?:요)?|게\s*좋아요?|게\s*나아요?|게\s*편해요?|파(?:예요|야|입니다|임))$`),
		func(m []string, clause, _ string) (string, []string, bool) {
			if reOthersKO.MatchString(clause) {
				return "", nil, false
			}
			h := headWord(reIntensifierKO.ReplaceAllString(m[1], " "))
			return "", nil, h != "" && !badObjectKO[h]
		}},
	// A habit: "아침 먹기 전에 항상 조깅해", "커피는 늘 아이스 아메리카노로
	// 마셔", "일요일 아침마다 요가를 해요".
	{memory.StrategyUserPreference, "preference", []string{"항상", "늘 ", "주로", "매일", "보통", "맨날", "자주", "마다", "요일", "올빼미", "아침형", "저녁형", "야행성"},
		re(`(?:^|\s)(?:항상|늘|주로|매일|보통|맨날|자주|\S+마다|[월화수목금토일]요일(?:이랑|과|와|엔|에는|마다))\s+(.+?[가-힣])$|(올빼미형|아침형|저녁형|야행성)`),
		func(m []string, clause, _ string) (string, []string, bool) {
			if reOthersKO.MatchString(clause) {
				return "", nil, false
			}
			if m[2] != "" {
				return "", nil, true
			}
			return "", nil, len([]rune(strings.ReplaceAll(m[1], " ", ""))) >= 2
		}},

	// ---- SEMANTIC, Korean
	// A name: "남친 이름은 지훈이야", "고양이 한 마리 키워요 이름은 두부".
	{memory.StrategySemantic, "fact", []string{"이름은", "이름이"},
		re(`(?:^|\s)(?:(\S+)\s+)?이름(?:은|이)\s+(\S+?)(?:이야|야|이에요|예요|입니다|이요|요|이고|고|임)?(?:\s|$)`),
		func(m []string, clause, _ string) (string, []string, bool) {
			return "", nil, !reOthersKO.MatchString(clause) && m[2] != "뭐" && m[2] != "뭐야" && m[2] != "뭐였지"
		}},
	// Keeping an animal or plant without an object particle: "고양이 한
	// 마리 키워요".
	{memory.StrategySemantic, "fact", []string{"키우", "키워", "키웁"},
		re(`(\S.*?)\s*(?:키워요|키우고\s*있어요|키웁니다|키워|키우고\s*있어|키운다)(?:\s|$)`),
		func(m []string, clause, _ string) (string, []string, bool) {
			return "", nil, headWord(m[1]) != "" && !reOthersKO.MatchString(clause)
		}},
	// A statement about the speaker, their people or their dates, in any
	// register: it names the speaker (저, 나, 저희, 우리, 제, 내), a person
	// of theirs, a date or a life event, and ends as a statement.
	{memory.StrategySemantic, "fact", nil,
		re(`^(.{3,}?)\s*(?:이에요|예요|에요|입니다|이야|야|이지|지|어요|아요|해요|워요|져요|가요|와요|돼요|있어요|있습니다|있어|있다|없어요|없어|습니다|니다|는데요?|[가-힣]데|거든요?|었다|았다|했다|였다|샀다|갔다|왔다|봤다|됐다|땄다|이다|중이야|중이에요|중입니다|중이다|됐어|했어|해|어|아|요|다)$`),
		func(m []string, clause, _ string) (string, []string, bool) {
			if reOthersKO.MatchString(clause) || reTransientKO.MatchString(clause) && !reLifeKO.MatchString(clause) {
				return "", nil, false
			}
			// Korean drops the subject: a statement with none is the
			// speaker's when it reports an event, a plan or a standing
			// fact (a past or progressive form, a date, a life noun);
			// otherwise it must name the speaker or theirs.
			if !reAboutSpeakerKO.MatchString(clause) && !reReportKO.MatchString(clause) {
				return "", nil, false
			}
			return "", nil, len([]rune(strings.ReplaceAll(m[1], " ", ""))) >= 4
		}},
	// The nominal ending of chat ("팀장 됨", "입학함", "부러짐"): a clause
	// ending in a syllable with final ㅁ that reports something.
	{memory.StrategySemantic, "event", []string{"됨", "함", "짐", "음", "임", "봄", "남", "감", "옴"},
		re(`^(.{3,}?[가-힣])$`),
		func(m []string, clause, _ string) (string, []string, bool) {
			r := []rune(clause)
			last := r[len(r)-1]
			if !isHangul(last) || (last-0xAC00)%28 != 16 || reOthersKO.MatchString(clause) || reTransientKO.MatchString(clause) && !reLifeKO.MatchString(clause) {
				return "", nil, false
			}
			return "", nil, (reAboutSpeakerKO.MatchString(clause) || reReportKO.MatchString(clause)) && len([]rune(strings.ReplaceAll(m[1], " ", ""))) >= 4
		}},
	// A life fact named by its noun whatever the ending: "요즘 퇴근하고 야간
	// 대학원 다녀 경영학 전공", "천식이 있어서 겨울에 뛰면 숨차요".
	{memory.StrategySemantic, "fact", nil,
		re(`(전공|학년|대학원|재학|졸업|입사|퇴사|이직|취직|천식|당뇨|고혈압|디스크|불면증|알레르기|불내증|임신|진단|수술|면허)`),
		func(_ []string, clause, _ string) (string, []string, bool) {
			return "", nil, !reOthersKO.MatchString(clause) && len([]rune(strings.ReplaceAll(clause, " ", ""))) >= 6
		}},
}

// subjectWords start a clause that is a statement, not an imperative.
var subjectWords = map[string]bool{"i": true, "i'd": true, "i'll": true, "i'm": true, "we": true, "we'd": true, "it": true, "it's": true, "that": true, "that's": true, "you": true, "you'd": true, "maybe": true, "then": true, "there": true}

// notHabit are verbs after "I usually/always/never" that state no habit.
var notHabit = map[string]bool{"have": true, "get": true, "feel": true, "think": true, "thought": true, "say": true, "said": true, "ask": true,
	"wonder": true, "know": true, "knew": true, "need": true, "want": true, "wanted": true, "wish": true, "forget": false, "be": true, "am": true,
	"was": true, "did": true, "mean": true, "meant": true, "hope": true, "try": false, "will": true, "would": true}

var (
	// reIntensifierKO: adverbs of degree, which are no object.
	reIntensifierKO = regexp.MustCompile(`(?:^|\s)(?:진짜|정말|너무|완전|엄청|제일|가장|아주|더|좀|넘)(?:\s|$)`)
	reLength        = regexp.MustCompile(`\b(?:under|below|within|at\s+most|less\s+than|shorter\s+than|no\s+more\s+than)\s+(?:\d+|one|two|three|four|five|ten)\b|\b(?:short|shorter|brief|concise)\b`)
	reLengthKO      = regexp.MustCompile(`(?:짧게|간단히|간단하게|간결하게|길게|자세히|자세하게|이내로|이하로|넘지\s*않게)`)
	// reStandingKO: the request is about the assistant's replies or holds
	// from now on.
	reStandingKO = regexp.MustCompile(`(?:답변|대답|답은|답을|응답|요약|설명은|이모티콘|이모지|반말|존댓말|말투|글머리|나한테는|저한테는|나에게는|저에게는|앞으로|항상|매번|언제나|늘\s|때마다|면\s|면$|할\s*때|하실\s*때)`)
	// reOneOffKO: a request about this message or today only.
	reOneOffKO = regexp.MustCompile(`(?:^|\s)(?:이|그|저)\s+(?:문장|글|메시지|사진|파일|거)|오늘|지금|내일|이번에?만|하나\s`)
	// reAboutSpeakerKO: the clause names the speaker, a person or animal
	// of theirs, a date, or a life event.
	reAboutSpeakerKO = regexp.MustCompile(`(?:^|\s)(?:저|전|저는|저도|제가|나|난|나는|나도|내가|저희|저희는|우리|우리는|제|내)(?:\s|$)|` +
		`(?:엄마|아빠|어머니|아버지|부모님|아들|딸|남편|아내|와이프|남자친구|여자친구|남친|여친|동생|언니|오빠|누나|형|할머니|할아버지|아이|애들|강아지|고양이)|` +
		`(?:지난|다음|어제|내일|작년|내년|올해|이번|요즘|최근|주말|\d+\s*월|\d+\s*일|\d+\s*년)|` +
		`(?:알레르기|학년|학과|전공|직장|회사|입사|퇴사|이사|결혼|기념일|생일|졸업|병원|진단|수술|임신|출장|여행|마라톤|유치원|학교|개발자|선생님|간호사|의사|살고\s*있|살아요|살아)`)
	// reLifeKO: a life event, which a passing word does not make passing.
	reLifeKO = regexp.MustCompile(`(?:알레르기|불내증|진단|수술|임신|부러|다쳐|다쳤|입원|병원|천식|당뇨|고혈압)`)
	// reReportKO: what makes a statement without a subject a report of
	// the speaker's life: a past or progressive form, a plan, a date, a
	// life noun, or 드디어 ("finally").
	reReportKO = regexp.MustCompile(`(?:었|았|했|였|됐|땄|샀|갔|왔|봤|났|졌|렸|중이|려고|거예요|거야|예정|드디어|처음|지난|다음|어제|내일|작년|내년|올해|이번|요즘|최근|\d+\s*[월일년]|` +
		`알레르기|불내증|학년|학과|전공|대학원|직장|회사|입사|퇴사|이사|결혼|기념일|생일|졸업|병원|진단|수술|임신|출장|면허|수준|할\s*줄|잘\s*해|못\s*해)`)
	// reTransientKO: a passing state, greeting or thanks.
	reTransientKO = regexp.MustCompile(`(?:피곤|졸려|졸리|배고|배불|심심|기분|바빠|바쁘|지쳐|짜증|덥|추워|춥|고마|감사|반가|안녕|좋은\s*아침|알겠)`)
	// reOthersKO: people in general, hearsay, a hypothetical or an
	// uncertain statement.
	reOthersKO = regexp.MustCompile(`(?:사람들은|사람들이|다들|대부분|누구나|애들은|요즘\s*애들|그러는데|그러던데|래요?$|대요?$|다더라|라더라|만약|다면|라면|모르겠|몰라|지도\s*몰|아마|언젠가|글쎄|지\s*말지|할까\s*말까|고민\s*중|것\s*같아|거\s*같아|텐데)`)
)

// reHypothetical: an English clause (in lower case) that states no fact
// because it is a hypothetical, an uncertainty or people in general.
var reHypothetical = regexp.MustCompile(`^(?:if|maybe|perhaps|possibly|someday|one\s+day|who\s+knows)\b|\b(?:not\s+sure|don't\s+know|do\s+not\s+know|no\s+idea|who\s+knows|someday|some\s+day|i\s+might|i\s+may|i'd\s+(?:call|name|get|buy|go|be|have|do|live|move))\b|^(?:lots\s+of|most|many|some)\s+people\b|\bpeople\s+(?:say|think|are)\b|\bforgot\s+(?:what|where|if|whether|how|who|when|why)\b|\bsaid\s+(?:i|you|we)\s+should\b|\b(?:told\s+me|said|says)\s+(?:that\s+)?(?:the|a|an|it|this|that|there)\b`)

// reOneOff: a request for this time only, which is no standing
// instruction ("Just this once, answer in French", "이번만 영어로 답해줘").
var reOneOff = regexp.MustCompile(`(?i)\b(?:just\s+this\s+once|this\s+time\s+only|only\s+this\s+time|just\s+for\s+(?:now|this|today)|for\s+this\s+(?:one|answer|message|question|reply))\b|이번(?:에)?만|이번\s*한\s*번만|오늘만|지금만`)

// reCourtesy: thanks, greetings and acknowledgements, which state
// nothing to remember ("고마워요, 정말 도움이 됐어요").
var reCourtesy = regexp.MustCompile(`(?i)^(?:thanks|thank\s+you|thx|ok|okay|lol|good\s+(?:morning|night|evening)|hi|hello|hey)\b|고마|감사합|감사해|감사드|반가워|반갑|안녕|좋은\s*아침|알겠|ㅋㅋ|ㅎㅎ`)

// Passing events: the everyday doings of the moment ("had ramen for
// lunch", "I burned the toast this morning", "어제 치킨 시켜 먹었어",
// "폰 배터리 5% 남았어") are reported in the same shapes as life events
// ("I broke my ankle last week", "어제 이사했어") but are nothing to
// remember. A clause is passing when it names an everyday activity or
// mishap and either a moment of the day or a past or present report of
// it, names no life event, and states no habit.
var (
	reEverydayEN = regexp.MustCompile(`\b(?:lunch|dinner|breakfast|brunch|snack|ate|ordered|takeout|pizza|ramen|toast|coffee|tea|nap|napped|laundry|dishes|cleaned|cleaning|vacuumed|groceries|walk|movie|show|episode|video|meme|tiktok|youtube|dream|dreamt|dreamed|bus|overslept|headache|stubbed|spilled|spilt|burned|burnt|phone|charger|battery|traffic|parking\s+ticket|weather|rain|shower|hair|nails|bored|tired|hungry|sleepy)\b`)
	reMomentEN   = regexp.MustCompile(`\b(?:today|this\s+(?:morning|afternoon|evening)|tonight|last\s+night|just\s+now|earlier|yesterday|just)\b|^(?:just\s+)?(?:saw|watched|had|ate|got|made|did|took|finished)\b|\bis\s+at\s+\d+\s*%`)
	reLifeEN     = regexp.MustCompile(`\b(?:broke|broken|tore|torn|sprained|fractured|surgery|hospital|diagnos\w*|promot\w*|hired|fired|laid\s+off|quit|moved|moving|adopt\w*|engaged|married|divorc\w*|pregnan\w*|born|passed\s+away|died|graduat\w*|bought\s+(?:a|an|our|my)\s+(?:car|house|home|flat|apartment)|new\s+job|allerg\w*)\b`)
	reHabitEN    = regexp.MustCompile(`\b(?:always|usually|normally|often|every|never|tend\s+to)\b`)
	reEverydayKO = regexp.MustCompile(`(?:먹었|먹고|시켜|라면|치킨|피자|커피|낮잠|빨래|설거지|청소|장\s*봤|산책|영화|드라마|영상|유튜브|꿈|버스|지각|배터리|충전|쏟|찧|두통|머리\s*아|심심|배고|졸려|피곤|날씨|비\s*와|비가)`)
	reMomentKO   = regexp.MustCompile(`(?:오늘|아침에|점심에|저녁에|방금|아까|어젯밤|어제|지금|었|았|했|봤|렸|졌|남았)`)
	reLifeKOPlus = regexp.MustCompile(`(?:이사|입사|퇴사|이직|승진|합격|입학|졸업|입양|결혼|약혼|출산|태어|부러|다쳐|다쳤|수술|입원|진단|임신|돌아가셨|차\s*샀|집\s*샀|알레르기)`)
	reHabitKO    = regexp.MustCompile(`(?:항상|늘|매일|맨날|보통|주로|자주|마다)`)
)

// passing reports whether clause is an everyday event of the moment. The
// English patterns read lower, the clause in lower case.
func passing(clause, lower string) bool {
	if strings.ContainsFunc(clause, isHangul) {
		return reEverydayKO.MatchString(clause) && reMomentKO.MatchString(clause) && !reLifeKOPlus.MatchString(clause) && !reHabitKO.MatchString(clause)
	}
	return reEverydayEN.MatchString(lower) && reMomentEN.MatchString(lower) && !reLifeEN.MatchString(lower) && !reHabitEN.MatchString(lower)
}

// reAcquaintance: a clause about an acquaintance's life ("My coworker got
// engaged last weekend") that does not involve the speaker says nothing
// about theirs; family and pets are the speaker's life and stay.
var reAcquaintance = regexp.MustCompile(`^(?:my|our)\s+(?:\p{L}+\s+)?(?:coworkers?|colleagues?|co-workers?|friends?|neighbou?rs?|boss|classmates?|roommates?|flatmates?)\b`)
var reSpeakerEN = regexp.MustCompile(`\b(?:i|me|i'm|i've|i'll|i'd|we|us|our)\b`)

// hypothetical reports whether a clause states something the speaker
// does not hold as fact (or only courtesy), in either language; procedural rules ignore it
// ("If I ask for recipes, list the ingredients first").
func hypothetical(clause, lower string) bool {
	if reHypothetical.MatchString(lower) || reCourtesy.MatchString(clause) || passing(clause, lower) {
		return true
	}
	if m := reAcquaintance.FindStringIndex(lower); m != nil && !reSpeakerEN.MatchString(lower[m[1]:]) {
		return true
	}
	return strings.ContainsFunc(clause, isHangul) && reOthersKO.MatchString(clause)
}

func isHangul(r rune) bool { return r >= 0xAC00 && r <= 0xD7A3 }

// tidyChat trims what chat adds after a statement and before its end:
// emoji and other symbols, ㅋㅋ/ㅎㅎ/ㅠㅠ runs, "!!", "~", and tails such
// as 참고로, fyi, tbh, lol, pls; and spells out the apostrophe-less
// English contractions of chat (im, ive, dont, cant) so the rules read
// them.
func tidyChat(clause string) string {
	s := strings.TrimSpace(clause)
	for {
		t := strings.TrimRightFunc(s, func(r rune) bool {
			return unicode.IsSpace(r) || unicode.Is(unicode.So, r) || unicode.Is(unicode.Sk, r) || r == 0xFE0F || r == 0x200D ||
				r == '!' || r == '~' || r == '.' || (r >= 0x3131 && r <= 0x318E) // Hangul jamo: ㅋ ㅎ ㅠ ㅜ
		})
		lower := strings.ToLower(t)
		for _, tail := range []string{" 참고로", " 암튼", " fyi", " tbh", " lol", " pls", " plz", " haha", " ㅎ"} {
			if strings.HasSuffix(lower, tail) {
				t = t[:len(t)-len(tail)]
				break
			}
		}
		if t == s {
			break
		}
		s = t
	}
	return reChatContraction.ReplaceAllStringFunc(s, func(w string) string {
		if v, ok := chatContractions[strings.ToLower(w)]; ok {
			return v
		}
		return w
	})
}

var reChatContraction = regexp.MustCompile(`(?i)\b(?:im|ive|dont|cant|wont|didnt|doesnt|isnt|wasnt|havent)\b`)

var chatContractions = map[string]string{"im": "I'm", "ive": "I've", "dont": "don't", "cant": "can't", "wont": "won't",
	"didnt": "didn't", "doesnt": "doesn't", "isnt": "isn't", "wasnt": "wasn't", "havent": "haven't"}
