package sanitize

import "testing"

func TestEscapeBidi(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                     "plain",
		"שלום":                      "שלום", // right-to-left letters are text, not controls
		"a\u202eb":                  `a\u202eb`,
		"\u200e\u200f\u202a\u2069x": `\u200e\u200f\u202a\u2069x`,
		"\u2029\u2065\u206a\u202f":  "\u2029\u2065\u206a\u202f", // neighbours of the ranges
		"\xff\u202e\xe2\x80":        "\xff\\u202e\xe2\x80",      // invalid UTF-8 stays as it is
	} {
		if got := EscapeBidi(in); got != want {
			t.Errorf("EscapeBidi(%q) = %q, want %q", in, got, want)
		}
	}
}
