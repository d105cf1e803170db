package memindex

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEmbedTextCutsAtACharacter(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
	}{
		{"short", "has a fig tree"},
		{"ascii", strings.Repeat("a", 3*MaxEmbedBytes)},
		{"korean", strings.Repeat("무화과", MaxEmbedBytes)},
		{"exact", strings.Repeat("b", MaxEmbedBytes)},
	} {
		got := EmbedText(tc.in)
		if len(got) > MaxEmbedBytes || !utf8.ValidString(got) || !strings.HasPrefix(tc.in, got) {
			t.Errorf("%s: %d bytes, valid %v, prefix %v", tc.name, len(got), utf8.ValidString(got), strings.HasPrefix(tc.in, got))
		}
		if len(tc.in) <= MaxEmbedBytes && got != tc.in {
			t.Errorf("%s: cut a text that fits", tc.name)
		}
		if len(tc.in) > MaxEmbedBytes && len(got) < MaxEmbedBytes-utf8.UTFMax {
			t.Errorf("%s: cut to %d bytes, more than needed", tc.name, len(got))
		}
	}
}
