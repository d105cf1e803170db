package search

import (
	"regexp"
	"strings"
)

// whenQuestion matches questions that ask for a time: "when did…",
// "what year…", "how long ago…", and the Korean 언제/몇 년.
var whenQuestion = regexp.MustCompile(`(?i)(^|[^a-z])(when|what (year|month|day|date|time)|which (year|month|day)|how long ago|since when)([^a-z]|$)|언제|몇\s*(년|월|일)`)

// timeExpression matches temporal expressions in a turn: relative days and
// weeks, weekdays, months, years, "ago", "last/next/this <unit>".
var timeExpression = regexp.MustCompile(`(?i)\b(yesterday|today|tonight|tomorrow|ago|recently|lately|last (night|week|weekend|month|year|summer|winter|spring|fall|friday|saturday|sunday|monday|tuesday|wednesday|thursday)|next (week|weekend|month|year)|this (morning|week|weekend|month|year|summer|winter|spring|fall)|(mon|tues|wednes|thurs|fri|satur|sun)day|january|february|march|april|june|july|august|september|october|november|december|(19|20)\d\d|weeks?|months?|years?|weekend|summer|winter|spring|autumn)\b|어제|오늘|내일|지난|작년|올해|주말|[0-9]+\s*(년|월|일)`)

// IsWhenQuestion reports whether a query asks when something happened.
func IsWhenQuestion(q string) bool { return whenQuestion.MatchString(strings.TrimSpace(q)) }

// HasTimeExpression reports whether text mentions a time.
func HasTimeExpression(text string) bool { return timeExpression.MatchString(text) }
