package search

import (
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Granularity is how precise a resolved time expression is.
type Granularity int

// Granularities of a Resolved time, finest first.
const (
	Day Granularity = iota
	Week
	Month
	Year
)

// Resolved is a relative time expression resolved against a reference
// date (the date of the session or event it was said in).
type Resolved struct {
	// Expr is the expression as written ("last Tuesday", "2주 전").
	Expr string
	// Start is the first day of the resolved span (UTC midnight).
	Start time.Time
	// Granularity says whether the span is a day, a week (7 days from
	// Start), a calendar month or a calendar year.
	Granularity Granularity
}

// Words renders the span as searchable words in LoCoMo's date style:
// "7 May 2023" (day), "week of 1 May 2023" (week), "April 2023" (month),
// "2022" (year).
func (r Resolved) Words() string {
	switch r.Granularity {
	case Week:
		return "week of " + r.Start.Format("2 January 2006")
	case Month:
		return r.Start.Format("January 2006")
	case Year:
		return r.Start.Format("2006")
	}
	return r.Start.Format("2 January 2006")
}

var weekdays = map[string]time.Weekday{
	"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday, "wednesday": time.Wednesday,
	"thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday,
	"일요일": time.Sunday, "월요일": time.Monday, "화요일": time.Tuesday, "수요일": time.Wednesday,
	"목요일": time.Thursday, "금요일": time.Friday, "토요일": time.Saturday,
}

var numberWords = map[string]int{
	"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
	"eight": 8, "nine": 9, "ten": 10, "couple": 2, "a couple of": 2, "a few": 3, "few": 3, "several": 3,
	"한": 1, "두": 2, "세": 3, "네": 4, "다섯": 5, "여섯": 6, "일곱": 7, "여덟": 8, "아홉": 9, "열": 10, "몇": 3,
}

var (
	reRelEN = regexp.MustCompile(`(?i)\b(?:(day\s+before\s+yesterday|yesterday|last\s+night|tonight|today|this\s+morning|tomorrow)` +
		`|(last|this|next|past)\s+(week(?:end)?|month|year|summer|winter|spring|fall|autumn|sunday|monday|tuesday|wednesday|thursday|friday|saturday)` +
		`|(\d+|a\s+couple\s+of|a\s+few|an?|one|two|three|four|five|six|seven|eight|nine|ten|few|several)\s+(day|week|month|year)s?\s+ago)\b`)
	// reRelENAt is reRelEN anchored at the start of its input (relENAt).
	reRelENAt = regexp.MustCompile(`^(?:` + reRelEN.String() + `)`)
	reRelKO   = regexp.MustCompile(`(그저께|그제|어제|오늘|내일|모레|재작년|작년|지난해|올해|내년|이번\s*주|지난\s*주말|지난\s*주|다음\s*주|지난\s*달|이번\s*달|다음\s*달)` +
		`|지난\s*(일요일|월요일|화요일|수요일|목요일|금요일|토요일)` +
		`|([0-9]+|한|두|세|네|다섯|여섯|일곱|여덟|아홉|열|몇)\s*(일|주|주일|달|개월|년)\s*전`)
)

func midnight(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

func monday(t time.Time) time.Time {
	d := (int(t.Weekday()) + 6) % 7 // Monday = 0
	return t.AddDate(0, 0, -d)
}

func monthStart(t time.Time, add int) time.Time {
	return time.Date(t.Year(), t.Month()+time.Month(add), 1, 0, 0, 0, 0, time.UTC)
}

func yearStart(t time.Time, add int) time.Time {
	return time.Date(t.Year()+add, 1, 1, 0, 0, 0, 0, time.UTC)
}

// lastWeekday is the latest day before ref (exclusive) falling on wd.
func lastWeekday(ref time.Time, wd time.Weekday) time.Time {
	d := (int(ref.Weekday()) - int(wd) + 7) % 7
	if d == 0 {
		d = 7
	}
	return ref.AddDate(0, 0, -d)
}

// ResolveRelative finds relative time expressions in text, English and
// Korean ("yesterday", "last Tuesday", "two weeks ago", "last month",
// "어제", "지난주", "3일 전", "작년"), and resolves each against ref (the
// date the text was said; only its UTC calendar date counts). Seasons
// resolve to their year. Absolute dates are not expressions and are left
// alone. The result is in order of appearance; nil when there are none.
func ResolveRelative(text string, ref time.Time) []Resolved {
	if ref.IsZero() {
		return nil
	}
	day := midnight(ref)
	var out []Resolved
	nonASCII := hasNonASCII(text)
	if !nonASCII && !mayHoldRelEN(text) {
		return nil
	}
	if nonASCII {
		out = appendResolvedEN(out, text, day)
	} else {
		// the expression is only tried where a match can start
		// (relENStarts): the same matches, at a fraction of the positions
		end := 0
		for _, st := range relENStarts(text) {
			if st < end {
				continue
			}
			if m := reRelENAt.FindStringSubmatch(text[st:]); m != nil {
				end = st + len(m[0])
				if r, ok := resolveEN(m, day); ok {
					out = append(out, r)
				}
			}
		}
	}
	if nonASCII {
		for _, m := range reRelKO.FindAllStringSubmatch(text, -1) {
			if r, ok := resolveKO(m, day); ok {
				out = append(out, r)
			}
		}
	}
	return out
}

func appendResolvedEN(out []Resolved, text string, day time.Time) []Resolved {
	for _, m := range reRelEN.FindAllStringSubmatch(text, -1) {
		if r, ok := resolveEN(m, day); ok {
			out = append(out, r)
		}
	}
	return out
}

// relENStarts returns, in increasing order, the positions of ASCII text
// where a match of reRelEN can start: the starts of the word holding a
// relENWords key word (in any letter case) and of the four words before
// it, a word being a run of \w characters ([0-9A-Za-z_]). Every match of
// reRelEN starts at a word start, holds a key word, and spans at most
// three words before the word holding it ("a couple of days"), separated
// by spaces. Trying reRelENAt at these positions in order, skipping those
// inside the previous match, finds exactly FindAllStringSubmatch's
// matches: at a word start \b holds in text[st:] as in the text, and the
// text after st is the same (TestRelENStartsExact).
func relENStarts(text string) []int {
	var out []int
	last := -1 // the word start last handled
	for i := 0; i < len(text); i++ {
		if !relENWordAt(text, i) {
			continue
		}
		start := i
		for start > 0 && isRegexpWord(text[start-1]) {
			start--
		}
		if start == last {
			continue // another key word in the same word
		}
		last = start
		starts := [5]int{start}
		n := 1
		for j := start; n < 5; n++ { // four words back
			for j > 0 && !isRegexpWord(text[j-1]) {
				j--
			}
			if j == 0 {
				break
			}
			for j > 0 && isRegexpWord(text[j-1]) {
				j--
			}
			starts[n] = j
		}
		for k := n - 1; k >= 0; k-- {
			if len(out) == 0 || starts[k] > out[len(out)-1] {
				out = append(out, starts[k])
			} else if starts[k] < out[len(out)-1] {
				// an earlier word than one listed: insert in order
				p := sort.SearchInts(out, starts[k])
				if p == len(out) || out[p] != starts[k] {
					out = slices.Insert(out, p, starts[k])
				}
			}
		}
	}
	return out
}

func foldHasPrefix(s, w string) bool {
	for j := 0; j < len(w); j++ {
		if s[j]|0x20 != w[j] {
			return false
		}
	}
	return true
}

// isRegexpWord reports whether c is in regexp's \w ([0-9A-Za-z_]).
func isRegexpWord(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// relENWords are words one of which every match of reRelEN holds ("day"
// covers yesterday, today and the weekdays; "night" tonight; "ago" the
// "n units ago" branch).
var relENWords = []string{"day", "night", "morning", "tomorrow", "week", "month", "year",
	"summer", "winter", "spring", "fall", "autumn", "ago"}

// mayHoldRelEN reports whether ASCII text holds one of relENWords in any
// case: when it does not, reRelEN cannot match and is not run (most turns;
// the regular expression was most of an index build's cost). Non-ASCII
// text always runs it, since (?i) also folds characters such as U+017F.
func mayHoldRelEN(text string) bool {
	for i := 0; i < len(text); i++ {
		if relENWordAt(text, i) {
			return true
		}
	}
	return false
}

// relENByFirst holds relENWords by first letter ('a' at 0).
var relENByFirst = func() (t [26][]string) {
	for _, w := range relENWords {
		t[w[0]-'a'] = append(t[w[0]-'a'], w)
	}
	return t
}()

// relENWordAt reports whether one of relENWords starts at text[i], in any
// letter case. One pass over a text with this check at each byte replaces
// a scan of the whole text per word (BenchmarkResolveRelative).
func relENWordAt(text string, i int) bool {
	c := text[i] | 0x20 // only A–Z and a–z land in a..z
	if c < 'a' || c > 'z' {
		return false
	}
	for _, w := range relENByFirst[c-'a'] {
		if len(text)-i >= len(w) && foldHasPrefix(text[i:], w) {
			return true
		}
	}
	return false
}

func hasNonASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return true
		}
	}
	return false
}

func count(s string) (int, bool) {
	s = strings.ToLower(strings.Join(strings.Fields(s), " "))
	if n, err := strconv.Atoi(s); err == nil {
		return n, n > 0 && n < 1000
	}
	n, ok := numberWords[s]
	return n, ok
}

func ago(day time.Time, n int, unit string) (Resolved, bool) {
	switch unit {
	case "day", "일":
		return Resolved{Start: day.AddDate(0, 0, -n), Granularity: Day}, true
	case "week", "주", "주일":
		return Resolved{Start: monday(day.AddDate(0, 0, -7*n)), Granularity: Week}, true
	case "month", "달", "개월":
		return Resolved{Start: monthStart(day, -n), Granularity: Month}, true
	case "year", "년":
		return Resolved{Start: yearStart(day, -n), Granularity: Year}, true
	}
	return Resolved{}, false
}

func resolveEN(m []string, day time.Time) (Resolved, bool) {
	var r Resolved
	ok := true
	switch w := strings.ToLower(strings.Join(strings.Fields(m[1]), " ")); {
	case w == "yesterday" || w == "last night":
		r = Resolved{Start: day.AddDate(0, 0, -1), Granularity: Day}
	case w == "day before yesterday":
		r = Resolved{Start: day.AddDate(0, 0, -2), Granularity: Day}
	case w == "today" || w == "tonight" || w == "this morning":
		r = Resolved{Start: day, Granularity: Day}
	case w == "tomorrow":
		r = Resolved{Start: day.AddDate(0, 0, 1), Granularity: Day}
	case m[2] != "":
		rel, unit := strings.ToLower(m[2]), strings.ToLower(m[3])
		step := map[string]int{"last": -1, "past": -1, "this": 0, "next": 1}[rel]
		switch unit {
		case "week":
			r = Resolved{Start: monday(day).AddDate(0, 0, 7*step), Granularity: Week}
		case "weekend":
			sat := lastWeekday(day.AddDate(0, 0, 1), time.Saturday) // this week's or the latest Saturday
			if step < 0 {
				sat = lastWeekday(day, time.Saturday)
			} else if step > 0 {
				sat = day.AddDate(0, 0, (int(time.Saturday)-int(day.Weekday())+7)%7)
				if sat.Equal(day) {
					sat = sat.AddDate(0, 0, 7)
				}
			}
			r = Resolved{Start: sat, Granularity: Day}
		case "month":
			r = Resolved{Start: monthStart(day, step), Granularity: Month}
		case "year", "summer", "winter", "spring", "fall", "autumn":
			r = Resolved{Start: yearStart(day, step), Granularity: Year}
		default:
			wd := weekdays[unit]
			switch step {
			case -1:
				r = Resolved{Start: lastWeekday(day, wd), Granularity: Day}
			case 0:
				r = Resolved{Start: monday(day).AddDate(0, 0, (int(wd)+6)%7), Granularity: Day}
			default:
				r = Resolved{Start: lastWeekday(day.AddDate(0, 0, 7), wd), Granularity: Day}
			}
		}
	case m[4] != "":
		n, okN := count(m[4])
		if !okN {
			return Resolved{}, false
		}
		r, ok = ago(day, n, strings.ToLower(m[5]))
	default:
		return Resolved{}, false
	}
	r.Expr = m[0]
	return r, ok
}

func resolveKO(m []string, day time.Time) (Resolved, bool) {
	var r Resolved
	ok := true
	w := strings.Join(strings.Fields(m[1]), "")
	switch {
	case w == "어제":
		r = Resolved{Start: day.AddDate(0, 0, -1), Granularity: Day}
	case w == "그저께" || w == "그제":
		r = Resolved{Start: day.AddDate(0, 0, -2), Granularity: Day}
	case w == "오늘":
		r = Resolved{Start: day, Granularity: Day}
	case w == "내일":
		r = Resolved{Start: day.AddDate(0, 0, 1), Granularity: Day}
	case w == "모레":
		r = Resolved{Start: day.AddDate(0, 0, 2), Granularity: Day}
	case w == "작년" || w == "지난해":
		r = Resolved{Start: yearStart(day, -1), Granularity: Year}
	case w == "재작년":
		r = Resolved{Start: yearStart(day, -2), Granularity: Year}
	case w == "올해":
		r = Resolved{Start: yearStart(day, 0), Granularity: Year}
	case w == "내년":
		r = Resolved{Start: yearStart(day, 1), Granularity: Year}
	case w == "이번주":
		r = Resolved{Start: monday(day), Granularity: Week}
	case w == "지난주":
		r = Resolved{Start: monday(day).AddDate(0, 0, -7), Granularity: Week}
	case w == "지난주말":
		r = Resolved{Start: lastWeekday(day, time.Saturday), Granularity: Day}
	case w == "다음주":
		r = Resolved{Start: monday(day).AddDate(0, 0, 7), Granularity: Week}
	case w == "지난달":
		r = Resolved{Start: monthStart(day, -1), Granularity: Month}
	case w == "이번달":
		r = Resolved{Start: monthStart(day, 0), Granularity: Month}
	case w == "다음달":
		r = Resolved{Start: monthStart(day, 1), Granularity: Month}
	case m[2] != "":
		r = Resolved{Start: lastWeekday(day, weekdays[m[2]]), Granularity: Day}
	case m[3] != "":
		n, okN := count(m[3])
		if !okN {
			return Resolved{}, false
		}
		r, ok = ago(day, n, m[4])
	default:
		return Resolved{}, false
	}
	r.Expr = m[0]
	return r, ok
}
