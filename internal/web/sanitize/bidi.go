package sanitize

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// IsBidi reports the Unicode bidirectional formatting characters: the
// marks U+200E and U+200F, the embeddings and overrides U+202A–U+202E and
// the isolates U+2066–U+2069 (Unicode UAX #9). Inside a name, an ID or a
// tool's arguments they reorder how the line displays, and so can disguise
// what the stored text says (Trojan Source, CVE-2021-42574).
func IsBidi(r rune) bool {
	return r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// EscapeBidi writes each bidirectional formatting character of s (IsBidi)
// as its \uXXXX escape (lower-case hex, as JSON writes it) and leaves the
// rest of s byte for byte as it is (invalid UTF-8 included), so the text
// displays in the order it is stored. In valid JSON such characters occur
// only inside strings, where the escape means the same character. It
// returns s itself when s holds none.
func EscapeBidi(s string) string {
	if !strings.ContainsFunc(s, IsBidi) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if IsBidi(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
