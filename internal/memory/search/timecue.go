package search

import (
	"regexp"
	"strings"
	"sync"
)

// whenQuestion matches questions that ask for a time: "when did…",
// "what year…", "how long ago…", and the Korean 언제/몇 년.
var whenQuestion = regexp.MustCompile(`(?i)(^|[^a-z])(when|what (year|month|day|date|time)|which (year|month|day)|how long ago|since when)([^a-z]|$)|언제|몇\s*(년|월|일)`)

// timeWords are tokens that by themselves mark a time expression.
var timeWords = map[string]bool{}

// timeUnits follow "last", "next" and "this" in a time expression.
var timeUnits = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`yesterday today tonight tomorrow ago recently lately weekend weekends
		monday tuesday wednesday thursday friday saturday sunday january february march april june july
		august september october november december week weeks month months year years summer winter
		spring autumn`) {
		timeWords[w] = true
	}
	for _, w := range strings.Fields(`night morning week weekend month year summer winter spring fall
		monday tuesday wednesday thursday friday saturday sunday`) {
		timeUnits[w] = true
	}
}

// koreanTime matches Korean time expressions.
var koreanTime = regexp.MustCompile(`어제|오늘|내일|지난|작년|올해|주말|[0-9]+\s*(년|월|일)`)

// IsWhenQuestion reports whether a query asks when something happened.
func IsWhenQuestion(q string) bool { return cuesOf(q)&cueWhen != 0 }

// HasTimeExpression reports whether text mentions a time: relative days
// ("yesterday", "last week", "3 weeks ago"), weekdays, months, seasons,
// years 1900–2099, or Korean forms (어제, 지난, 2023년).
func HasTimeExpression(text string) bool {
	// Tokenize's tokens, scanned without keeping them (this runs for
	// every document an index adds, and every reload adds many).
	found := false
	prev := ""
	scanTokens(text, func(t string, _ bool) {
		switch {
		case found:
		case timeWords[t],
			(prev == "last" || prev == "next" || prev == "this") && timeUnits[t],
			len(t) == 4 && (strings.HasPrefix(t, "19") || strings.HasPrefix(t, "20")) && t[2] >= '0' && t[2] <= '9' && t[3] >= '0' && t[3] <= '9':
			found = true
		}
		prev = t
	})
	if found {
		return true
	}
	for i := 0; i < len(text); i++ {
		if text[i] >= 0x80 {
			return koreanTime.MatchString(text)
		}
	}
	return false
}

var aggregateQuestion = regexp.MustCompile(`(?i)\b(how many|what (are|were)|what \w+s (has|have|does|do|did)|which \w+s (has|have|does|do|did))\b|\b(both|all|ever|times)\b`)

// IsAggregateQuestion reports whether q asks for several things at once
// ("What activities has Melanie done?", "How many times…", "What are…",
// "both", "all", "ever"): questions whose evidence is usually spread over
// several turns and sessions.
func IsAggregateQuestion(q string) bool { return cuesOf(q)&cueAggregate != 0 }

var listQuestion = regexp.MustCompile(`(?i)\b(how many|what (are|were)|(what|which)( [\w/+'.-]+){0,3}s (has|have|does|do|did)|(what|where) (has|have)|(types|kinds|sorts) of|in what ways)\b|\b(both|all|ever|times)\b`)

// IsListQuestion is IsAggregateQuestion widened: a plural up to four
// words after "what"/"which" ("What LGBTQ+ events has…", "What
// European countries has…"), "what/where has|have" (the present perfect
// of things done over time: "Where has Melanie camped?"), "types/kinds/
// sorts of", "in what ways". Written after reading LoCoMo's development
// multi-hop questions (issue 16 round 6), for the re-ranker's list_*
// features.
func IsListQuestion(q string) bool { return cuesOf(q)&cueList != 0 }

// A query's cues: which of the question patterns above it matches.
const (
	cueWhen = 1 << iota
	cueAggregate
	cueList
)

// cueCache holds the cues of recent queries: one search asks each
// question of its query several times (first stage, features, per scope),
// and each is a regular expression. Bounded: it starts over when full.
var cueCache = struct {
	sync.Mutex
	m map[string]uint8
}{m: map[string]uint8{}}

const cueCacheSize = 1024

// cuesOf returns q's cues, from the cache when it has them.
func cuesOf(q string) uint8 {
	cueCache.Lock()
	c, ok := cueCache.m[q]
	cueCache.Unlock()
	if ok {
		return c
	}
	if whenQuestion.MatchString(strings.TrimSpace(q)) {
		c |= cueWhen
	}
	if aggregateQuestion.MatchString(q) {
		c |= cueAggregate
	}
	if listQuestion.MatchString(q) {
		c |= cueList
	}
	if len(q) <= 1024 { // the key is kept; long texts are not worth it
		cueCache.Lock()
		if len(cueCache.m) >= cueCacheSize {
			clear(cueCache.m)
		}
		cueCache.m[strings.Clone(q)] = c
		cueCache.Unlock()
	}
	return c
}
