package extract

import (
	"regexp"
	"strings"

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
			`|\bi\s+(?:was|got|'ve\s+been|have\s+been)\s+(?:just\s+|recently\s+|finally\s+|officially\s+)?diagnosed\s+with\s+\S` +
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

	// ---- PROCEDURAL, Korean
	// An imperative about the assistant's replies: a topic-marked reply
	// noun ("답변은 … 해 주세요"), or a standing marker (나한테는, 앞으로,
	// 매번, "…물어보면", "…할 때는"), then a request ending.
	{memory.StrategyProcedural, "instruction", []string{"줘", "주세요", "마", "말해", "주실래요"},
		re(`^(.+?)\s*(?:해\s?줘요?|해\s?주세요|해\s?주실래요|줘요?|주세요|하지\s?마(?:세요|요)?|마세요|지\s?마|말아\s?줘요?|말아\s?주세요|말해(?:\s?줘|\s?주세요)?)$`),
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
	{memory.StrategyUserPreference, "preference", []string{"싫", "질색", "좋더라", "최고", "편해", "편하", "좋아하", "별로야", "별로예요", "못 먹", "안 먹"},
		re(`^(.+?)\s*(싫어(?:요)?|싫다|싫거든(?:요)?|질색(?:이에요|이야|입니다|이다)?|좋더라(?:고요)?|최고지|최고야|최고예요|최고다|최고|더\s*편해(?:요)?|편해요|편하더라(?:고요)?|편하다|좋아하는데(?:요)?|좋아하거든(?:요)?|좋아한다|별로야|별로예요|못\s*먹어(?:요)?|안\s*먹어(?:요)?)$`),
		func(m []string, clause, _ string) (string, []string, bool) {
			if reOthersKO.MatchString(clause) {
				return "", nil, false
			}
			h := headWord(reIntensifierKO.ReplaceAllString(m[1], " "))
			return "", nil, h != "" && !badObjectKO[h]
		}},
	// A habit: "아침 먹기 전에 항상 조깅해", "커피는 늘 아이스 아메리카노로
	// 마셔", "일요일 아침마다 요가를 해요".
	{memory.StrategyUserPreference, "preference", []string{"항상", "늘 ", "주로", "매일", "보통", "맨날", "자주", "마다"},
		re(`(?:^|\s)(?:항상|늘|주로|매일|보통|맨날|자주|\S+마다)\s+(.+?)(?:해요|해|합니다|한다|어요|아요|워요|셔요|셔|어|아|요|다)$`),
		func(m []string, clause, _ string) (string, []string, bool) {
			if reOthersKO.MatchString(clause) {
				return "", nil, false
			}
			return "", nil, len([]rune(strings.ReplaceAll(m[1], " ", ""))) >= 2
		}},

	// ---- SEMANTIC, Korean
	// A statement about the speaker, their people or their dates, in any
	// register: it names the speaker (저, 나, 저희, 우리, 제, 내), a person
	// of theirs, a date or a life event, and ends as a statement.
	{memory.StrategySemantic, "fact", nil,
		re(`^(.{3,}?)\s*(?:이에요|예요|에요|입니다|이야|야|이지|지|어요|아요|해요|워요|져요|가요|와요|돼요|있어요|있습니다|있어|있다|없어요|없어|습니다|니다|는데요?|거든요?|었다|았다|했다|였다|샀다|갔다|왔다|봤다|됐다|이다|중이야|중이에요|중입니다|중이다|됐어|했어|해|어|아|요|다)$`),
		func(m []string, clause, _ string) (string, []string, bool) {
			if !reAboutSpeakerKO.MatchString(clause) || reOthersKO.MatchString(clause) || reTransientKO.MatchString(clause) && !reLifeKO.MatchString(clause) {
				return "", nil, false
			}
			return "", nil, len([]rune(strings.ReplaceAll(m[1], " ", ""))) >= 4
		}},
}

// subjectWords start a clause that is a statement, not an imperative.
var subjectWords = map[string]bool{"i": true, "i'd": true, "i'll": true, "i'm": true, "we": true, "we'd": true, "it": true, "it's": true, "that": true, "that's": true, "you": true, "you'd": true, "maybe": true, "then": true, "there": true}

// notHabit are verbs after "I usually/always/never" that state no habit.
var notHabit = map[string]bool{"have": true, "get": true, "feel": true, "think": true, "thought": true, "say": true, "said": true, "ask": true,
	"wonder": true, "know": true, "knew": true, "need": true, "want": true, "wanted": true, "wish": true, "forget": false, "be": true, "am": true,
	"was": true, "do": true, "did": true, "mean": true, "meant": true, "hope": true, "try": false, "will": true, "would": true}

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
	reLifeKO = regexp.MustCompile(`(?:알레르기|불내증|진단|수술|임신|부러|다쳐|다쳤|입원|병원)`)
	// reTransientKO: a passing state, greeting or thanks.
	reTransientKO = regexp.MustCompile(`(?:피곤|졸려|졸리|배고|배불|심심|기분|바빠|바쁘|지쳐|짜증|덥|추워|춥|고마|감사|반가|안녕|좋은\s*아침|알겠|ㅋㅋ|ㅎㅎ)`)
	// reOthersKO: people in general, hearsay, a hypothetical or an
	// uncertain statement.
	reOthersKO = regexp.MustCompile(`(?:사람들은|사람들이|다들|대부분|누구나|그러는데|그러던데|래요?$|대요?$|다더라|라더라|만약|다면|라면|모르겠|몰라|지도\s*몰|아마|언젠가|글쎄)`)
)

// reHypothetical: an English clause that states no fact because it is a
// hypothetical, an uncertainty or people in general.
var reHypothetical = regexp.MustCompile(`(?i)^(?:if|maybe|perhaps|possibly|someday|one\s+day|who\s+knows)\b|\b(?:not\s+sure|don't\s+know|do\s+not\s+know|no\s+idea|who\s+knows|someday|some\s+day|i\s+might|i\s+may|i'd\s+(?:call|name|get|buy|go|be|have|do|live|move))\b|^(?:lots\s+of|most|many|some)\s+people\b|\bpeople\s+(?:say|think|are)\b`)

// reCourtesy: thanks, greetings and acknowledgements, which state
// nothing to remember ("고마워요, 정말 도움이 됐어요").
var reCourtesy = regexp.MustCompile(`(?i)^(?:thanks|thank\s+you|thx|ok|okay|lol|good\s+(?:morning|night|evening)|hi|hello|hey)\b|고마|감사합|감사해|감사드|반가워|반갑|안녕|좋은\s*아침|알겠|ㅋㅋ|ㅎㅎ`)

// hypothetical reports whether a clause states something the speaker
// does not hold as fact (or only courtesy), in either language; procedural rules ignore it
// ("If I ask for recipes, list the ingredients first").
func hypothetical(clause, lower string) bool {
	if reHypothetical.MatchString(lower) || reCourtesy.MatchString(clause) {
		return true
	}
	return strings.ContainsFunc(clause, isHangul) && reOthersKO.MatchString(clause)
}

func isHangul(r rune) bool { return r >= 0xAC00 && r <= 0xD7A3 }
