package memory

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Redacted replaces a secret in remembered text.
const Redacted = "[redacted]"

// secretPatterns match credentials that must never become memory: API keys
// and tokens by their documented prefixes, private keys, and a password or
// PIN stated in words. Card numbers are checked with Luhn separately.
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{16,}`),                             // OpenAI / Anthropic / Stripe-style keys
	regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_\-]{16,}`),                                   // Anthropic
	regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`),                                  // AWS access key IDs
	regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{30,}\b`),                                 // GitHub tokens
	regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9\-]{10,}`),                                // Slack tokens
	regexp.MustCompile(`\b\d{6,12}:[A-Za-z0-9_\-]{30,}\b`),                               // Telegram bot tokens
	regexp.MustCompile(`\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]+`), // JWTs
	regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)`),
}

// statedSecrets keep the words that name a secret and lose its value: the
// word after a connector (is, are, was, were, ":", "="; es, est, ist, é):
// "my password is hunter2" → "my password is [redacted]".
//
// Up to two words, then a phrase of one or two words after for, of, on,
// at, to or in (and the, my, …), may stand between a keyword and the
// connector, and stay: "the wifi password for the shed: GreenShed2024" →
// "the wifi password for the shed: [redacted]". They hold letters only:
// "password hunter2 is …" redacts hunter2 as below; for "password letmein
// is what I use" see redactStatedEnglish.
//
// "Secret" is too common a word to be a keyword by itself: it names a
// credential right before the connector ("my secret is PURPLEWOMBAT",
// which also redacts "the secret is patience") or through a credential
// noun (code, key, word, phrase, number) at most one word later ("my
// secret garden code is PURPLEWOMBAT"). So "the secret to good figs is
// water" and "the secret garden is lovely" stay whole.
//
// Without a connector the word right after a keyword is the value only if
// it holds a digit ("pin 1234", "password hunter2"): "password reset" and
// "pin the poster" stay.
//
// Korean: 비밀번호, 비번, 암호 or 핀번호, then 은/는/이/가 and a space or
// ":" or "=" before the value ("비밀번호는 qwerty123"); a value after only
// spaces, or glued to the keyword, must not start with Hangul, so 암호화폐,
// "비밀번호를 잊었어요" and "비밀번호 변경 완료" stay.
//
// Each regexp keeps ${1}${3} (statedKeep) and drops the value.
var statedSecrets = []*regexp.Regexp{
	regexp.MustCompile(`(?i)(\b(?:(?:` + statedKeywords + `)\b((?:\s+\pL+){0,2}?)` + statedOwner + `|` + statedSecret + `)` + statedLink + `)(\S+)` +
		`|(\b(?:` + statedKeywords + `|secrets?)\b\s+)(\S*\pN\S*)`),
	regexp.MustCompile(`((?:비밀번호|비번|암호|핀번호)(?:(?:은|는|이|가)?\s*[:：=]|(?:은|는|이|가)\s)\s*)(\S+)` +
		`|((?:비밀번호|비번|암호|핀번호)(?:은|는|이|가)?\s*)([^\s\p{Hangul}]\S*)`),
}

// statedKeep is the replacement template of statedSecrets[1], before
// Redacted; statedSecrets[0] is applied by redactStatedEnglish.
const statedKeep = "${1}${3}"

// redactStatedEnglish applies statedSecrets[0] match by match. After a
// word connector (is, was, …) a value that is an ordinary predicate
// (notPassword: "my password was stolen", "the pin is wrong") stays; and
// when words stand between the keyword and that connector, one that is
// not a noun that usually follows the keyword (secretNouns: manager,
// reset, …) is taken for the value instead: "password letmein is what I
// use" → "password [redacted] is what I use", while "my password manager
// is great" stays whole.
func redactStatedEnglish(text string) string {
	re := statedSecrets[0]
	var b strings.Builder
	last := 0
	for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
		b.WriteString(text[last:m[0]])
		last = m[1]
		if m[8] >= 0 { // keyword, then a value holding a digit
			b.WriteString(text[m[8]:m[9]])
			b.WriteString(Redacted)
			continue
		}
		head, value := text[m[2]:m[3]], text[m[6]:m[7]]
		// a word connector (is, was, …) rather than ":" or "="
		t := strings.TrimRightFunc(head, unicode.IsSpace)
		r, _ := utf8.DecodeLastRuneInString(t)
		wordLink := unicode.IsLetter(r)
		if !wordLink || !notPassword(value) {
			b.WriteString(head)
			b.WriteString(Redacted)
			continue
		}
		// The value is an ordinary word: keep it, and redact a word
		// between the keyword and the connector that is no usual noun.
		if m[4] >= 0 && m[5] > m[4] {
			mid := text[m[4]:m[5]]
			b.WriteString(text[m[2]:m[4]])
			for _, w := range strings.Fields(mid) {
				b.WriteByte(' ')
				if secretNouns[strings.ToLower(w)] {
					b.WriteString(w)
				} else {
					b.WriteString(Redacted)
				}
			}
			b.WriteString(text[m[5]:m[1]])
			continue
		}
		b.WriteString(text[m[0]:m[1]])
	}
	b.WriteString(text[last:])
	return b.String()
}

// notPassword reports whether a value after a word connector reads as an
// ordinary predicate rather than a secret: a lower-case word that is a
// function word or common adjective (predicateWords), or a past
// participle in -ed. A value with a digit, a capital or a symbol is a
// secret.
func notPassword(v string) bool {
	v = strings.TrimRight(v, ".,;!?")
	if v == "" {
		return false
	}
	for _, r := range v {
		if r != '-' && r != '\'' && !unicode.IsLower(r) {
			return false
		}
	}
	return predicateWords[v] || len(v) >= 5 && strings.HasSuffix(v, "ed")
}

// predicateWords are words that follow "my password is/was" as a
// statement about it, not as its value.
var predicateWords = setOf(`a an the my your our his her their its this that not no never still also just now
	too very so quite really always already being going what which where who how why when
	in on at for to from with about under same different new old easy hard weak strong wrong right
	correct incorrect invalid valid secure insecure safe unsafe long short simple complex
	stolen known shown taken written hidden forgotten broken gone lost mine yours ours theirs
	here there somewhere something nothing everywhere case-sensitive
	good great bad fine ok okay nice awesome terrible useful useless free expensive cheap
	open closed locked unlocked required needed optional empty blank set fixed due
	important personal private public shared unique random memorable impossible
	hard-coded temporary permanent different`)

// secretNouns are nouns that follow a secret's keyword ("password
// manager is …") and are no value.
var secretNouns = setOf(`manager managers reset resets field fields policy policies hint hints change changes
	requirement requirements rule rules vault vaults app apps prompt prompts box boxes
	protection login screen page form generator strength length expiry history recovery
	entry entries list file files book holder code codes number numbers`)

func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// Parts of statedSecrets[0].
const (
	statedKeywords = `pass\s?words?|passwd|passcodes?|passphrases?|pins?|pw|pwd|api[ _-]?keys?|tokens?|contraseñas?|mot de passe|passwort|senha`
	// statedOwner is "for the shed", "of my bank account".
	statedOwner = `(?:\s+(?:for|of|on|at|to|in)(?:\s+(?:the|my|our|your|his|her|their|this|that|a|an))?(?:\s+\pL+){1,2})?`
	// statedSecret is "secret", "secret code", "secret garden code for the vault".
	statedSecret = `secrets?\b(?:(?:\s+\pL+)?\s+(?:code|key|word|phrase|number)s?\b` + statedOwner + `)?`
	statedLink   = `(?:\s+(?:is|are|was|were|es|est|ist|é)(?:\s*[:：=]\s*|\s+)|\s*[:：=]\s*)`
)

// ssnRE matches US social security numbers (AAA-GG-SSSS).
var ssnRE = regexp.MustCompile(`\b\d{3}-\d{2}-\d{4}\b`)

var cardRE = regexp.MustCompile(`\b(?:\d[ \-]?){13,19}\b`)

// secretHints are, for each of secretPatterns, literals one of which any
// match contains: text with none of them is not searched (the regexps
// were most of a turn's recording cost).
var secretHints = [][]string{{"k-"}, {"sk-ant-"}, {"AKIA", "ASIA"}, {"_"}, {"xox"}, {":"}, {"eyJ"}, {"-----BEGIN "}}

// statedHints are the same for statedSecrets; the first is
// case-insensitive, so its hints are lower case and apply to ASCII text
// only (Unicode case folding maps other runes onto ASCII letters).
var statedHints = [][]string{{"pass", "pw", "pin", "secret", "api", "token", "senha"}, {"비밀번호", "비번", "암호", "핀번호"}}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// Redact removes secrets from text before it is stored as an event or a
// record, so memory never keeps or re-injects credentials. It reports
// whether anything was removed.
func Redact(text string) (string, bool) {
	out := text
	for i, re := range secretPatterns {
		if containsAny(out, secretHints[i]) {
			out = re.ReplaceAllString(out, Redacted)
		}
	}
	for i, re := range statedSecrets {
		run := containsAny(out, statedHints[i])
		if i == 0 {
			run = !isASCII(out) || containsAny(strings.ToLower(out), statedHints[i])
		}
		switch {
		case run && i == 0:
			out = redactStatedEnglish(out)
		case run:
			out = re.ReplaceAllString(out, statedKeep+Redacted)
		}
	}
	if strings.Contains(out, "-") {
		out = ssnRE.ReplaceAllString(out, Redacted)
	}
	if countDigits(out) < 13 {
		return out, out != text
	}
	out = cardRE.ReplaceAllStringFunc(out, func(m string) string {
		digits := strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, m)
		if len(digits) >= 13 && luhn(digits) {
			return Redacted
		}
		return m
	})
	return out, out != text
}

// countDigits counts the ASCII digits of s (\d in cardRE).
func countDigits(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			n++
		}
	}
	return n
}

// luhn reports whether digits pass the Luhn checksum (ISO/IEC 7812-1).
func luhn(digits string) bool {
	sum, double := 0, false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}
