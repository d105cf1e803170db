package extract

import (
	"strings"

	"github.com/tendrilai/tendril/internal/memory"
)

// generalRules catch the facts a user states about themselves, their
// people, places, plans and dates beyond the fixed patterns of baseRules:
// things they did ("I went to a support group yesterday"), are doing ("I'm
// researching adoption agencies"), plan ("we're going camping next month")
// and say about the people and animals in their life ("my kids love the
// beach"). They carry no topic: such facts accumulate rather than
// contradict one another, so consolidation never lets one supersede
// another (duplicates still merge). Metadata type is "event", "activity",
// "plan" or "person".
var generalRules = []rule{
	// ---- English
	{memory.StrategySemantic, "plan", []string{"going to", "gonna", "planning", "thinking", "hoping", "about to", "looking forward", "plan", "intend", "hope", "decided", "want to", "'ll", " will "},
		re(`(?i)\b(?:i|we)(?:'m|\s+am|'re|\s+are)\s+(?:also\s+|really\s+|so\s+)?(?:going\s+to|gonna|planning\s+(?:to|on)|thinking\s+(?:of|about)|hoping\s+to|about\s+to|looking\s+forward\s+to)\s+(.{3,})$` +
			`|\b(?:i|we)\s+(?:also\s+|really\s+)?(?:plan|intend|hope|decided|'ve\s+decided|have\s+decided|want|wanna)\s+to\s+(.{3,})$` +
			`|\b(?:i|we)(?:'ll|\s+will)\s+(?:be\s+)?(.{3,})$`),
		func(m []string, _, _ string) (string, []string, bool) {
			return "", nil, contentful(firstNonEmpty(m[1:]...))
		}},
	{memory.StrategySemantic, "event", []string{"i ", "we ", "i'", "we'"},
		re(`(?i)\b(?:i|we)\s+(?:just\s+|recently\s+|finally\s+|also\s+|actually\s+|even\s+|already\s+|once\s+|last\s+\p{L}+\s+|really\s+|totally\s+|both\s+|all\s+)?` +
			`(` + pastVerbs + `|\p{L}{2,}ed)\b\s*(.*)$` +
			`|\b(?:i|we)(?:'ve|\s+have)\s+(?:been\s+|just\s+|recently\s+|finally\s+|always\s+|also\s+|never\s+|already\s+|really\s+)*(\p{L}{3,}(?:ed|en|ne|wn|ht|ung|ot|un|ad|ing)|busy|into)\b\s*(.*)$` +
			`|^(?:just\s+|finally\s+|recently\s+)?(` + pastVerbs + `)\s+(.{3,})$`),
		func(m []string, clause, _ string) (string, []string, bool) {
			if v := strings.ToLower(firstNonEmpty(m[1], m[3], m[5])); notEvent[v] {
				return "", nil, false
			}
			return "", nil, contentful(firstNonEmpty(m[2], m[4], m[6])) || contentful(clause) && len(strings.Fields(clause)) >= 5
		}},
	{memory.StrategyUserPreference, "preference", []string{"my favo", "my hobb", "my passion", "my dream", "my goal", "faves", "one of my"},
		re(`(?i)\bmy\s+(?:main\s+|biggest\s+|all[-\s]time\s+|favou?rite\s+|big\s+|true\s+)?(favou?rites?|faves?|hobby|hobbies|passions?|dreams?|goals?)\b`),
		func(m []string, clause, _ string) (string, []string, bool) {
			return "", nil, contentful(clause) && len(strings.Fields(clause)) >= 4
		}},
	{memory.StrategySemantic, "activity", []string{"i'm", "i am", "we're", "we are", "into", "passionate", "interested", "working", "learning"},
		re(`(?i)\b(?:i|we)(?:'m|\s+am|'re|\s+are)\s+(?:currently\s+|now\s+|still\s+|really\s+|also\s+|so\s+|very\s+|actually\s+)?` +
			`(?:(\p{L}{3,}ing)\s+(.{3,})|(?:busy|thrilled|excited|proud|happy|grateful|lucky|glad|stoked|pumped|into|passionate\s+about|interested\s+in|keen\s+on|fond\s+of|part\s+of|a\s+member\s+of|involved\s+in)\s+(.{3,}))$`),
		func(m []string, _, _ string) (string, []string, bool) {
			v := strings.ToLower(m[1])
			if notActivity[v] {
				return "", nil, false
			}
			return "", nil, contentful(firstNonEmpty(m[2], m[3]))
		}},
	{memory.StrategySemantic, "person", []string{"my ", "our "},
		re(`(?i)\b(?:my|our)\s+(?:\p{L}+\s+)?(wife|husband|partner|sons?|daughters?|kids?|children|child|mom|mum|mother|dad|father|parents|sisters?|brothers?|siblings?|friends?|family|grandma|grandmother|grandpa|grandfather|grandkids|aunt|uncle|cousins?|niece|nephew|boyfriend|girlfriend|fianc[eé]e?|dogs?|cats?|pets?|puppy|kitten|team|boss|colleagues?|coworkers?|neighbou?rs?|mentor|students?|classmates?|band|group|club)\b\s*(.{3,})$`),
		func(m []string, _, _ string) (string, []string, bool) {
			return "", []string{strings.ToLower(m[1])}, contentful(m[2])
		}},

	// ---- Korean (honorific -요/-습니다 and casual -어/-았어 endings)
	{memory.StrategySemantic, "plan", []string{"거예요", "거에요", "겁니다", "거야", "예정", "계획", "려고"},
		re(`(\S.*?)\s*(?:거예요|거에요|겁니다|거야|예정이에요|예정입니다|예정이야|계획이에요|계획입니다|계획이야|려고\s*해요|려고\s*합니다|려고\s*해|려고요)$`),
		func(m []string, _, _ string) (string, []string, bool) {
			return "", nil, headWord(m[1]) != "" && len([]rune(m[1])) >= 3
		}},
	{memory.StrategySemantic, "person", []string{"제 ", "저희", "우리", "내 ", "제", "내"},
		re(`(?:^|\s)(?:제|저희|우리|내)\s*(아내|남편|아들|딸|아이들|아이|애들|엄마|어머니|아빠|아버지|부모님|언니|오빠|누나|형|동생|친구들|친구|가족|할머니|할아버지|강아지|고양이|남자친구|여자친구|동료|상사|이웃)(?:은|는|이|가|도|랑|와|하고)?\s+(.{2,})$`),
		func(m []string, _, _ string) (string, []string, bool) { return "", []string{m[1]}, true }},
	{memory.StrategySemantic, "event", []string{"었", "았", "했", "였", "갔", "왔", "봤", "샀", "났", "웠", "췄", "쳤", "썼", "됐"},
		re(`(\S.*?[가-힣])\s*(?:었어요|았어요|했어요|였어요|었습니다|았습니다|했습니다|였습니다|었어|았어|했어|였어|었죠|았죠|했죠|었거든요|았거든요|했거든요|었는데요|았는데요|했는데요)$|(\S.*?)(갔어요|왔어요|봤어요|샀어요|만났어요|났어요|웠어요|췄어요|쳤어요|썼어요|됐어요|갔습니다|왔습니다|봤습니다|샀습니다|갔어|왔어|봤어|샀어)$`),
		func(m []string, clause, _ string) (string, []string, bool) {
			body := firstNonEmpty(m[1], m[2])
			return "", nil, len([]rune(strings.ReplaceAll(body, " ", ""))) >= 4 && headWord(body) != ""
		}},
}

// pastVerbs are irregular (and common) past-tense verbs of things people
// report having done.
const pastVerbs = `went|saw|got|made|took|ran|met|read|won|began|found|gave|wrote|built|lost|spent|had|did|drew|sang|` +
	`grew|taught|sold|left|flew|drove|swam|heard|spoke|came|bought|brought|caught|felt|kept|knew|led|paid|put|` +
	`sent|sat|stood|told|thought|wore|woke|threw|rode|hung|fought|fed|fell|forgot|chose|broke|learnt|became|` +
	`signed\s+up|picked\s+up|took\s+up|came\s+back|split\s+up|broke\s+up|quit|tore|hurt`

// notEvent are verbs after "I" that do not report something done.
var notEvent = map[string]bool{"need": true, "used": true, "guess": false, "thought": true, "knew": true, "felt": true,
	"had": false, "been": true, "seen": false, "wanted": true, "wished": true, "hoped": true, "wondered": true, "noticed": false,
	"loved": false, "liked": false, "agreed": true, "meant": true, "supposed": true, "asked": true, "said": true, "told": false}

// notActivity are -ing words after "I'm" that do not state an activity.
var notActivity = map[string]bool{"going": true, "thinking": true, "feeling": true, "getting": true, "trying": true, "saying": true,
	"wondering": true, "asking": true, "kidding": true, "sorry": true, "doing": true, "being": true, "hoping": true, "planning": true,
	"looking": true, "talking": true, "telling": true}

// contentful reports whether an object phrase names something: at least
// one word that is not a stop word or pronoun, and not only "it"/"that".
func contentful(obj string) bool {
	fs := strings.Fields(strings.ToLower(obj))
	n := 0
	for _, w := range fs {
		w = strings.Trim(w, ".,!?;:\"'()")
		if w == "" || stopWords[w] || badObject[w] || generalStop[w] {
			continue
		}
		n++
	}
	return n >= 1 && len(obj) >= 4
}

var generalStop = map[string]bool{"me": true, "us": true, "him": true, "her": true, "there": true, "here": true, "yeah": true,
	"so": true, "much": true, "lot": true, "well": true, "too": true, "again": true, "out": true, "up": true, "back": true, "sure": true}
