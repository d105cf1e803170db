// Package search is Tendril's model-free ranking engine for memory: an
// in-memory inverted index with BM25F over several fields (the text, the
// neighbouring turns, the speaker and the date), Snowball stemming,
// speaker awareness, time cues for "when" questions and optional
// pseudo-relevance feedback. Every result explains its score.
//
// It knows nothing of records or namespaces; the memory stores build one
// Index per actor and pass an allow mask so that filters apply before
// ranking and corpus statistics never mix actors.
package search

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// Analyzer turns text into index terms.
type Analyzer struct {
	// Stem applies the Snowball (Porter2) English stemmer to Latin tokens.
	Stem bool
	// KeepStopWords keeps English stop words (they are dropped by default).
	KeepStopWords bool
	// NoBigrams disables Hangul character bigrams (Korean has no spaces
	// between stem and particle, so "비료를" must still match "비료").
	NoBigrams bool
}

// Tokenize splits text into lowercase tokens of Unicode letters and digits.
// Apostrophes inside a word are dropped ("caroline's" → "carolines" is
// avoided: the possessive "'s" is cut off).
func Tokenize(text string) []string {
	var out []string
	scanTokens(text, func(t string, owned bool) {
		if !owned {
			t = strings.Clone(t)
		}
		out = append(out, t)
	})
	return out
}

// scanTokens calls emit with each token of text, in order (Tokenize's
// tokens). A token with owned false is a substring of text (its bytes
// were already lowercase ASCII): emit clones it to keep it. ASCII bytes
// take a fast path; any other rune goes through unicode, so the tokens are
// a rune-by-rune scan's (TestTokenizeSame).
func scanTokens(text string, emit func(tok string, owned bool)) {
	var stack [64]byte
	buf := stack[:0]
	start := -1 // with buf empty: text[start:i] is the current token, already lowercase
	flush := func(i int) {
		switch {
		case len(buf) > 0:
			emit(string(buf), true)
			buf = buf[:0]
		case start >= 0:
			emit(text[start:i], false)
		}
		start = -1
	}
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
				if len(buf) > 0 {
					buf = append(buf, c)
				} else if start < 0 {
					start = i
				}
				i++
				continue
			case c >= 'A' && c <= 'Z':
				if start >= 0 {
					buf = append(buf, text[start:i]...)
					start = -1
				}
				buf = append(buf, c+'a'-'A')
				i++
				continue
			case c == '\'' && (len(buf) > 0 || start >= 0):
				// possessive or contraction: "caroline's" → "caroline", "don't" → "don"+"t"
				next := text[i+1:]
				if strings.HasPrefix(next, "s") && (len(next) == 1 || !isWordByte(next[1])) {
					flush(i)
					i += 2
					continue
				}
				flush(i)
			default:
				flush(i)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if start >= 0 {
				buf = append(buf, text[start:i]...)
				start = -1
			}
			buf = utf8.AppendRune(buf, unicode.ToLower(r))
		case r == '’' && (len(buf) > 0 || start >= 0):
			next := text[i+size:]
			if strings.HasPrefix(next, "s") && (len(next) == 1 || !isWordByte(next[1])) {
				flush(i)
				i += size + 1
				continue
			}
			flush(i)
		default:
			flush(i)
		}
		i += size
	}
	flush(len(text))
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// IsStopWord reports whether the lowercase token is an English stop word
// (the Snowball English stop list).
func IsStopWord(tok string) bool { return english.IsStopWord(tok) }

// Terms analyses text into index terms, in order, with repeats.
func (a Analyzer) Terms(text string) []string {
	out := make([]string, 0, len(text)/5+1)
	scanTokens(text, func(t string, owned bool) {
		if !a.KeepStopWords && IsStopWord(t) {
			return
		}
		ascii := !owned || isASCIIWord(t) // a substring of text is lowercase ASCII
		if !ascii && isHangul(t) {
			out = append(out, t)
			if !a.NoBigrams {
				out = append(out, hangulBigrams(t)...)
			}
			return
		}
		switch {
		case a.Stem && ascii:
			t = stem(t) // a new string or the cache's, never text's bytes
		case !owned:
			t = strings.Clone(t)
		}
		out = append(out, t)
	})
	return out
}

// stemCache memoises Snowball stems (vocabularies are Zipfian, so a few
// thousand words make most of any text). It is process-wide, so its size
// is bounded on its own: when it reaches stemCacheMax entries it starts
// over empty, and the words in use come back at their next use. (It used
// to stop growing at 200,000 entries, about 35 MB of heap outside every
// budget, which text of random words fills in a few messages; and once
// full of them it never held the words in use again.)
var (
	stemCache    sync.Map
	stemCacheLen atomic.Int64
)

// stemCacheMax bounds stemCache: about 150 bytes of heap per entry
// (measured with 240,000 distinct words), so at most about 7 MB.
const stemCacheMax = 48 << 10

func stem(t string) string {
	if v, ok := stemCache.Load(t); ok {
		return v.(string)
	}
	t = strings.Clone(t) // t may be a substring of a document: neither the cache nor the stem keeps it
	s := english.Stem(americanize(t), true)
	if stemCacheLen.Add(1) > stemCacheMax {
		stemCache.Clear()
		stemCacheLen.Store(1)
	}
	if _, loaded := stemCache.LoadOrStore(t, s); loaded {
		stemCacheLen.Add(-1)
	}
	return s
}

// iseSuffixes are British -ise forms; americanize maps them to -ize so
// "fertiliser" and "fertilizers" share a stem.
var iseSuffixes = []string{"isations", "isation", "isers", "ising", "ised", "iser", "ises", "ise"}

// americanize rewrites a British -ise/-isation ending of words of 7+
// letters to -ize/-ization (applied to documents and queries alike).
func americanize(t string) string {
	if len(t) < 7 {
		return t
	}
	for _, suf := range iseSuffixes {
		if strings.HasSuffix(t, suf) {
			return t[:len(t)-len(suf)] + "iz" + suf[2:]
		}
	}
	return t
}

func isASCIIWord(t string) bool {
	for i := 0; i < len(t); i++ {
		if t[i] >= 0x80 {
			return false
		}
	}
	return true
}

func isHangul(t string) bool {
	for _, r := range t {
		if unicode.Is(unicode.Hangul, r) {
			return true
		}
	}
	return false
}

// hangulBigrams returns the overlapping two-rune grams of a token of two
// or more runes, prefixed so they never collide with whole tokens.
func hangulBigrams(t string) []string {
	rs := []rune(t)
	if len(rs) < 2 {
		return nil
	}
	out := make([]string, 0, len(rs)-1)
	for i := 0; i+1 < len(rs); i++ {
		out = append(out, "#"+string(rs[i:i+2]))
	}
	return out
}

// CountTerms analyses text as Terms does and returns how many terms it
// holds (len(Terms(text))), adding to counts[t] one per occurrence of each
// term t already a key of counts. It allocates nothing for a term that is
// not wanted: an ASCII token is stemmed only when its first byte begins a
// wanted term (Snowball's English stemmer, and americanize, keep a word's
// first letter: "dying" is "die", so the second may change).
func (a Analyzer) CountTerms(text string, counts map[string]int) int {
	var first [256]bool
	for t := range counts {
		if t != "" {
			first[t[0]] = true
		}
	}
	n := 0
	scanTokens(text, func(t string, owned bool) {
		if !a.KeepStopWords && IsStopWord(t) {
			return
		}
		ascii := !owned || isASCIIWord(t)
		if !ascii && isHangul(t) {
			n++
			if _, ok := counts[t]; ok {
				counts[t]++
			}
			if !a.NoBigrams {
				for _, g := range hangulBigrams(t) {
					n++
					if _, ok := counts[g]; ok {
						counts[g]++
					}
				}
			}
			return
		}
		n++
		if a.Stem && ascii {
			if !first[t[0]] {
				return
			}
			t = stem(t)
		}
		if _, ok := counts[t]; ok {
			counts[t]++
		}
	})
	return n
}
