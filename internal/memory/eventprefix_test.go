package memory

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// eventPrefix is the regular expression splitEventPrefix implements.
var eventPrefix = regexp.MustCompile(`^\((\d{4}-\d{2}-\d{2})\) ([^:\n]{1,64}):(?:\s+|$)`)

// TestSplitEventPrefixMatchesRegexp checks splitEventPrefix against the
// regular expression on edge cases and on random strings built from the
// prefix's own pieces (digits, brackets, colons, whitespace, multibyte
// and invalid UTF-8, speakers near the 64-rune limit).
func TestSplitEventPrefixMatchesRegexp(t *testing.T) {
	cases := []string{
		"", "(2023-05-08) Caroline: hi", "(2023-05-08) assistant:", "(2023-05-08) assistant:x",
		"(2023-05-08) :x", "(2023-05-08) a\nb: x", "(2023-5-08) a: x", "(2023-05-08)a: x",
		"(2023-05-08) 캐롤라인: 안녕", "(2023-05-08) " + strings.Repeat("é", 64) + ": x",
		"(2023-05-08) " + strings.Repeat("é", 65) + ": x", "(2023-05-08) \xff\xfe: x",
		"(2023-05-08) a:\t\r\n x", "(2023-05-08) a:\u00a0x", "(2023-05-08) a:\v x",
	}
	pieces := []string{"(", ")", "2023-05-08", "-", "0", "9", " ", ":", "\n", "\t", "\v", "a", "assistant",
		"캐", "\xff", "é", strings.Repeat("x", 30)}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		var b strings.Builder
		if rng.IntN(2) == 0 {
			b.WriteString("(2023-05-08) ")
		}
		for range rng.IntN(8) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		cases = append(cases, b.String())
	}
	matched := 0
	for _, c := range cases {
		speaker, body, ok := splitEventPrefix(c)
		m := eventPrefix.FindStringSubmatchIndex(c)
		if ok != (m != nil) {
			t.Fatalf("%q: splitEventPrefix ok=%v, regexp match=%v", c, ok, m != nil)
		}
		if !ok {
			continue
		}
		matched++
		if speaker != c[m[4]:m[5]] || body != m[1] {
			t.Fatalf("%q: got speaker %q body %d, regexp %q %d", c, speaker, body, c[m[4]:m[5]], m[1])
		}
	}
	if matched < 1000 {
		t.Fatalf("weak draw: %d of %d matched", matched, len(cases))
	}
}

// TestFoldSpaceMatchesFields checks foldSpace against strings.Fields and
// Join on edge cases and random strings of words, ASCII and Unicode
// spaces (U+0085, U+00A0, U+3000), multibyte and invalid UTF-8.
func TestFoldSpaceMatchesFields(t *testing.T) {
	cases := []string{"", " ", "a", "a b", " a", "a ", "a  b", "a\tb", "a\nb", "한국어 답", "a\u00a0b", "a\u3000b",
		"a\u0085b", "\xffa b", "a \xff", "a\x85b"}
	pieces := []string{"a", "word", "한", "é", " ", "  ", "\t", "\n", "\r", "\v", "\f", "\u00a0", "\u3000", "\u0085", "\u2028", "\xff", "\xc2", "\x85"}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200000 {
		var b strings.Builder
		for range rng.IntN(8) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		cases = append(cases, b.String())
	}
	same := 0
	for _, c := range cases {
		want := strings.Join(strings.Fields(c), " ")
		got := foldSpace(c)
		if got != want {
			t.Fatalf("foldSpace(%q) = %q, want %q", c, got, want)
		}
		if c == want {
			same++
		}
	}
	if same < 1000 {
		t.Fatalf("weak draw: only %d of %d inputs were already folded (the fast path)", same, len(cases))
	}
}
