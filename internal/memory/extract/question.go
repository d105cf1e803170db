package extract

import (
	"regexp"
	"strings"
)

// Questions are not statements. A user asking about themselves ("Do I
// live in Portland?") must not become a record, let alone one that
// supersedes what they said ("I live in Seattle"). But a sentence often
// states something and asks something ("I'm allergic to bees, is lavender
// safe?"), and a request to the assistant carries a statement ("Could you
// remember that my dog is called Rex"): only the question part is
// dropped. statementOf does that per clause: it strips a request or
// mention lead-in, splits the clause at commas, colons, semicolons and
// dashes, and drops every segment that is a question (by its form, or the
// last one of a sentence that ended with a question mark).

// statementOf returns what cl states: its text without question
// segments, or "" when nothing is left.
func statementOf(cl clause) string {
	text, question := strings.TrimSpace(cl.text), cl.question
	if rest, ok := stripRequest(text); ok {
		// the question mark belongs to the request
		return rest
	}
	if question && strings.ContainsFunc(text, isHangul) {
		// "저 땅콩 알레르기 있는데 간식 좀 추천해 줄래요?": the statement
		// before a connective (-는데, -거든) is kept, the question dropped.
		if ix := reConnectiveKO.FindAllStringIndex(text, -1); len(ix) > 0 {
			left := strings.TrimSpace(text[:ix[len(ix)-1][1]])
			if !Interrogative(left) {
				return left
			}
		}
	}
	idx := reSegment.FindAllStringIndex(text, -1)
	if len(idx) == 0 {
		if !question && reNotAskForm.MatchString(text) {
			return text
		}
		if question || Interrogative(text) {
			return ""
		}
		return text
	}
	var kept []string
	start := 0
	for i := 0; i <= len(idx); i++ {
		end := len(text)
		if i < len(idx) {
			end = idx[i][0]
		}
		seg := strings.TrimSpace(text[start:end])
		if i < len(idx) {
			start = idx[i][1]
		}
		if seg == "" || Interrogative(seg) || question && i == len(idx) {
			continue
		}
		kept = append(kept, seg)
	}
	if len(kept) == len(idx)+1 {
		return text // nothing dropped: the clause as written
	}
	return strings.Join(kept, ", ")
}

// reNotAskForm: statements, without a question mark, that look like a
// question's form: "Had my gallbladder removed in 2021" (a participle
// after "had my/a/the", not "Had you …"), and Korean verbs whose stem
// ends in 나, which reads as the question ending -나요 ("첫째 태어나요",
// "친구 만나요", "일이 끝나요").
var reNotAskForm = regexp.MustCompile(`(?i)^had\s+(?:my|our|a|an|the|\d+)\s+\S+(?:\s+\S+)?\s+(?:\p{L}+ed|done|taken|out|removed|fixed|cut)\b|(?:태어|만|떠|끝|지|일어|헤어|자라|빠져)나요$`)

// reConnectiveKO ends a Korean clause that a question follows in the same
// sentence: -는데/-은데/-인데 ("있는데"), -거든.
var reConnectiveKO = regexp.MustCompile(`(?:[가-힣]데|거든)(?:요)?,?`)

// reSegment separates the segments of a clause.
var reSegment = regexp.MustCompile(`\s*[,:;，：；]\s*|\s+[—–-]+\s+`)

var (
	// reRequestEN: a request to remember, or a mention, before the
	// statement it carries ("Could you remember that …", "Did you know
	// …", "Did I mention …", "Have I told you …").
	reRequestEN = regexp.MustCompile(`(?i)^(?:(?:please\s+)?(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:remember|note|keep\s+in\s+mind|bear\s+in\s+mind|make\s+a\s+note)(?:\s+(?:that|of))?` +
		`|did\s+you\s+know(?:\s+that)?|did\s+i\s+(?:mention|tell\s+you)(?:\s+that)?|have\s+i\s+(?:mentioned|told\s+you)(?:\s+that)?)\s+(.{3,})$`)
	// reInstructEN: a standing instruction phrased as a question ("Will
	// you always answer in Korean"): the instruction is kept.
	reInstructEN = regexp.MustCompile(`(?i)^(?:can|could|would|will)\s+you\s+(?:please\s+)?((?:always|never)\s+.{3,})$`)
	// reRequestKO: a statement followed by a request to remember it
	// ("내 강아지 이름은 렉스야 기억해 줄래?").
	reRequestKO = regexp.MustCompile(`^(.{2,}?)[\s,]*(?:이거\s*|그거\s*|꼭\s*)?(?:기억해|기억해\s*줘|기억해\s*줄래|기억해\s*줄래요|기억해\s*주세요|기억해\s*줘요|메모해\s*줘|메모해\s*주세요|알아\s*둬|알아\s*두세요)$`)
)

// stripRequest returns the statement a request carries, and whether there
// was such a request.
func stripRequest(text string) (string, bool) {
	for _, re := range []*regexp.Regexp{reRequestEN, reInstructEN, reRequestKO} {
		if m := re.FindStringSubmatch(text); m != nil {
			return strings.TrimSpace(m[1]), true
		}
	}
	return "", false
}

var (
	// reAskEN is an English question without its question mark: an
	// auxiliary or modal verb before its subject ("Do I have a dog", "Is my
	// sister named Alice"; not "Do not use …" nor "Have a nice day"; "have
	// my sister water the roses" is an instruction), or a request to the
	// assistant ("Can you remind me …").
	reAskEN = regexp.MustCompile(`(?i)^(?:(?:do|does|did|is|are|am|was|were|has|had|can|could|will|would|should|shall|may|might|must)(?:n't)?\s+(?:i|my|me|we|our|you|your|he|his|she|her|it|its|they|their|there|this|that|these|those|the)` +
		`|have(?:n't)?\s+(?:i|we|you|he|she|it|they|there))\b`)
	// reEmbeddedEN is a question inside a statement: "I wonder if …",
	// "Tell me whether …", "Not sure if …", "Remind me what …".
	reEmbeddedEN = regexp.MustCompile(`(?i)\b(?:wonder(?:ing)?|forgot|forget|not\s+sure|unsure|no\s+idea|tell\s+me|remind\s+me|ask(?:ing)?|check|know)\s+(?:if|whether)\b` +
		`|^(?:please\s+)?(?:tell|remind|show)\s+me\s+(?:what|where|who|when|which|why|how)\b`)
	// reTagEN is a statement turned into a question by a tag ("I live in
	// Portland right", "…, don't I").
	reTagEN = regexp.MustCompile(`(?i)(?:\bright|\bcorrect|\bisn't\s+it|\bdon't\s+i|\bdidn't\s+i|\baren't\s+i|\bam\s+i\s+not|\bain't\s+it)$`)
	// reLeadEN: discourse markers before a question ("So do I …", "Btw
	// is my …", "Quick question do I …").
	reLeadEN = regexp.MustCompile(`(?i)^(?:(?:so|and|but|also|then|btw|by\s+the\s+way|um+|uh+|erm|hey|hi|oh|ok|okay|well|wait|hmm+|anyway|quick\s+question|just\s+wondering|actually|sorry|now)\b[\s,.:!]*)+`)
	// reAskKO is a Korean interrogative ending without a question mark
	// ("뭐였나요", "써도 될까요", "있습니까", "뭐였지", "맥스인가요"), or a
	// clause opening with 혹시 ("perhaps…?").
	reAskKO = regexp.MustCompile(`(?:나요|까요|습니까|입니까|을까|할까|는지요|인지요|였지|었지|았지|뭐지|뭐야|뭐예요|뭐에요|어디야|어디예요|언제야|누구야|인가요|은가요|는가요|던가요|던가|뭔가요|였더라|었더라|뭐더라|뭐니|뭐냐)$|^혹시\s`)
	whWords = map[string]bool{"what": true, "where": true, "when": true, "who": true, "whom": true, "whose": true, "which": true, "why": true, "how": true,
		"what's": true, "where's": true, "who's": true, "how's": true, "when's": true, "whats": true, "wheres": true, "whos": true, "hows": true}
	auxWords = map[string]bool{"do": true, "does": true, "did": true, "is": true, "are": true, "am": true, "was": true, "were": true, "have": true, "has": true, "had": true,
		"can": true, "could": true, "will": true, "would": true, "should": true, "shall": true, "may": true, "might": true, "must": true}
	// subjWords after a wh-word make it a statement: "When I was a kid …",
	// "What I love is …", "Where my sister lives is far".
	subjWords = map[string]bool{"i": true, "we": true, "you": true, "he": true, "she": true, "it": true, "they": true,
		"my": true, "our": true, "your": true, "his": true, "her": true, "their": true}
)

// askWh reports a wh-question: a wh-word before an auxiliary, directly
// ("What is my dog called", "Whats my dog called") or within a few words
// that do not start with a subject ("How many kids do I have", "What kind
// of dog do I have", "Which of my dogs is called Max").
func askWh(lower string) bool {
	w := strings.Fields(lower)
	if len(w) < 2 || !whWords[w[0]] {
		return false
	}
	if contractedWh[w[0]] {
		return true // what's, whats, where's …
	}
	if subjWords[w[1]] {
		return false
	}
	for _, x := range w[1:min(len(w), 5)] {
		if auxWords[x] {
			return true
		}
	}
	return false
}

// contractedWh are wh-words with "is" joined on, with or without the
// apostrophe.
var contractedWh = map[string]bool{"what's": true, "where's": true, "who's": true, "how's": true, "when's": true, "whats": true, "wheres": true, "whos": true, "hows": true}

// Interrogative reports whether a clause (or a segment of one) without a
// question mark is still a question by its form (reAskEN, askWh,
// reEmbeddedEN, reTagEN after any reLeadEN lead-in; reAskKO), so that the
// rules read it as no statement about the speaker.
//
// It runs on every clause the rules read, so the patterns that Go's
// regexp would try at every position of the clause (the end-anchored
// reAskKO and reTagEN, the unanchored reEmbeddedEN) run only when a
// necessary condition holds (askKO, mayTagEN, mayEmbedEN); the result is
// the patterns' (TestInterrogativeSameAsPatterns).
func Interrogative(clause string) bool {
	c := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(clause), ".!?？"))
	if askKO(c) {
		return true
	}
	if mayLeadEN(c) {
		c = strings.TrimSpace(reLeadEN.ReplaceAllString(c, ""))
	}
	return reAskEN.MatchString(c) || askWh(strings.ToLower(c)) ||
		mayEmbedEN(c) && reEmbeddedEN.MatchString(c) || mayTagEN(c) && reTagEN.MatchString(c)
}

// askKOEndings are reAskKO's endings, and askKO is reAskKO without the
// regexp: an ending at the end of c, or 혹시 and RE2's \s ([\t\n\f\r ])
// at its start.
var askKOEndings = []string{"나요", "까요", "습니까", "입니까", "을까", "할까", "는지요", "인지요", "였지", "었지", "았지", "뭐지", "뭐야", "뭐예요", "뭐에요", "어디야", "어디예요", "언제야", "누구야", "인가요", "은가요", "는가요", "던가요", "던가", "뭔가요", "였더라", "었더라", "뭐더라", "뭐니", "뭐냐"}

func askKO(c string) bool {
	if rest, ok := strings.CutPrefix(c, "혹시"); ok && rest != "" && strings.IndexByte("\t\n\f\r ", rest[0]) >= 0 {
		return true
	}
	if len(c) < 3 || c[len(c)-1] < 0x80 { // every ending is Hangul
		return false
	}
	for _, e := range askKOEndings {
		if strings.HasSuffix(c, e) {
			return true
		}
	}
	return false
}

// mayLeadEN: reLeadEN matches only at a letter that starts one of its
// lead-ins (s, a, b, t, u, e, h, o, w, q, j, n) or at a byte outside ASCII.
func mayLeadEN(c string) bool {
	if c == "" {
		return false
	}
	switch c[0] | 0x20 {
	case 's', 'a', 'b', 't', 'u', 'e', 'h', 'o', 'w', 'q', 'j', 'n':
		return true
	}
	return c[0] >= 0x80 // ſ (U+017F) and K (U+212A) fold to s and k
}

// mayTagEN: every reTagEN tag ends in t or i (right, correct, isn't it,
// don't i, am i not …), neither of which has another case fold.
func mayTagEN(c string) bool {
	if c == "" {
		return false
	}
	b := c[len(c)-1] | 0x20
	return b == 't' || b == 'i'
}

// mayEmbedEN: reEmbeddedEN's first branch needs "if" or "whether", and its
// second (anchored) a clause that opens with p, t, r or s (or ſ, outside
// ASCII) and holds "me"; none of these letters but s folds outside ASCII.
func mayEmbedEN(c string) bool {
	if containsFold(c, "if") || containsFold(c, "whether") {
		return true
	}
	if c == "" {
		return false
	}
	switch c[0] | 0x20 {
	case 'p', 't', 'r', 's':
	default:
		if c[0] < 0x80 {
			return false
		}
	}
	return containsFold(c, "me")
}

// containsFold reports whether s contains the lower-case ASCII word w in
// any ASCII case.
func containsFold(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		if s[i]|0x20 != w[0] {
			continue
		}
		j := 1
		for j < len(w) && s[i+j]|0x20 == w[j] {
			j++
		}
		if j == len(w) {
			return true
		}
	}
	return false
}
