package main

import (
	"strings"
	"testing"
)

// Text shown on a terminal cannot drive it or disguise itself: escapes,
// BEL and bidirectional controls are quoted; newlines, tabs and ordinary
// Unicode (Korean) pass.
func TestTermWriterQuotesControls(t *testing.T) {
	var b strings.Builder
	in := "title\x1b]0;PWNED\x07 clear\x1b[2J rtl\u202eevil\u2066 ok 비료\n\tnext"
	if _, err := termWriter(&b).Write([]byte(in)); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, bad := range []string{"\x1b", "\x07", "\u202e", "\u2066"} {
		if strings.Contains(got, bad) {
			t.Fatalf("%q passed through: %q", bad, got)
		}
	}
	for _, want := range []string{`\x1b]0;PWNED\x07`, `\u202e`, "비료\n\tnext"} {
		if !strings.Contains(got, want) {
			t.Fatalf("want %q in %q", want, got)
		}
	}
	if got := oneLine("a\u202eb\nc"); got != `a\u202eb; c` {
		t.Fatalf("oneLine: %q", got)
	}
}
