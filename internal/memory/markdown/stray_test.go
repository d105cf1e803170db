package markdown

import (
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// Lines a person appends after an entry (past the blank line that ends
// it) or puts before the first heading belong to no entry: each run is a
// warning naming the file and its first line, and no record or event takes
// them in. Texts with paragraphs still round-trip, and entries written
// before blank lines were escaped keep reading to the next heading.
func TestParseStrayLines(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	a := rec("mem_a", "likes figs\nand plums in summer", t0)
	file := string(Render("u1", []memory.Record{a}, nil, nil)["semantic.md"])
	// Render writes 8 lines: actor comment, "# Semantic memory", blank,
	// heading, metadata, 2 lines of text, blank: the next line is 9.
	if n := strings.Count(file, "\n"); n != 8 {
		t.Fatalf("rendered %d lines, want 8:\n%s", n, file)
	}
	ev := memory.Event{ID: "ev_1", SessionID: "s1", Role: "user", Text: "water the figs", Timestamp: t0}
	day := string(FileHeader("u1", "Episodic log 2026-03-01")) + string(FormatEvent(ev))
	old := strings.Replace(string(FormatRecord(rec("mem_old", "first paragraph", t0))), "-->\nfirst paragraph\n",
		"-->\nfirst paragraph\n\nsecond paragraph\n", 1)
	old = strings.Replace(old, `,"format":2`, "", 1)
	if strings.Contains(old, `"format"`) {
		t.Fatalf("could not make an older entry of %q", old)
	}

	for _, tc := range []struct {
		name, file, data string
		content          string // of the one record or event
		warnings         []string
	}{
		{name: "appended after the last entry", file: "semantic.md",
			data:    file + "TODO ask about the roses\nsee notes\n\nanother stray\n",
			content: a.Content,
			warnings: []string{
				`semantic.md:9: 2 lines (to line 10) ignored, they belong to no entry: text after the end of record mem_a (a blank line ends an entry's text; write a blank line inside it as a lone "\")`,
				`semantic.md:12: line ignored, it belongs to no entry: text after the end of record mem_a (a blank line ends an entry's text; write a blank line inside it as a lone "\")`,
			}},
		{name: "before the first heading", file: "semantic.md",
			data:     strings.Replace(file, "# Semantic memory\n", "# Semantic memory\nmy own notes\n", 1),
			content:  a.Content,
			warnings: []string{`semantic.md:3: line ignored, it belongs to no entry: text before the first "## " heading (start a "## " section to make a record of it)`}},
		{name: "an event's text runs to the next heading", file: "episodic/2026-03-01.md",
			data:    day + "\\## not a heading\n\nsecond paragraph\n",
			content: ev.Text + "\n\n## not a heading\n\nsecond paragraph"},
		{name: "text goes on without a blank line", file: "semantic.md",
			data:    strings.TrimSuffix(file, "\n") + "and apricots\n\n",
			content: a.Content + "\nand apricots"},
		{name: "a blank line between metadata and text", file: "semantic.md",
			data:    strings.Replace(file, "-->\nlikes figs", "-->\n\nlikes figs", 1),
			content: a.Content},
		{name: "an entry written before the rule reads to the next heading", file: "semantic.md",
			data:    string(FileHeader("u1", "Semantic memory")) + old,
			content: "first paragraph\n\nsecond paragraph"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := semDefaults
			d.File = tc.file
			p := Parse([]byte(tc.data), d)
			var got []string
			for _, r := range p.Records {
				got = append(got, r.Content)
			}
			for _, e := range p.Events {
				got = append(got, e.Text)
			}
			if len(got) != 1 || got[0] != tc.content {
				t.Errorf("texts %q, want [%q]", got, tc.content)
			}
			if strings.Join(p.Warnings, "\n") != strings.Join(tc.warnings, "\n") {
				t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(p.Warnings, "\n"), strings.Join(tc.warnings, "\n"))
			}
		})
	}
}

// A text with paragraphs and lines that look like structure is written so
// that it reads back whole, with no warning, and appending an entry after it
// leaves both intact.
func TestParagraphsRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	a := rec("mem_a", "Garden plan\n\nFigs by the wall.\n   \n## not a heading\n\\\n\nend", t0)
	b := rec("mem_b", "\n\nstarts after blank lines", t0)
	data := append(Render("u1", []memory.Record{a}, nil, nil)["semantic.md"], FormatRecord(b)...)
	p := Parse(data, semDefaults)
	if len(p.Warnings) > 0 || len(p.Records) != 2 {
		t.Fatalf("parsed %+v", p)
	}
	if p.Records[0].Content != a.Content || p.Records[1].Content != "starts after blank lines" {
		t.Fatalf("contents %q, %q", p.Records[0].Content, p.Records[1].Content)
	}
	ev := memory.Event{ID: "ev_1", Text: "Hi!\n\nTwo questions:\n\n1. roses\n2. figs", Timestamp: t0}
	if out := string(FormatEvent(ev)); strings.Contains(out, "\n\\\n") || strings.Contains(out, `"format"`) {
		t.Fatalf("an event is written as plain Markdown, its blank lines as they are:\n%s", out)
	}
	p = Parse(append(FileHeader("u1", "Episodic log"), FormatEvent(ev)...), Defaults{File: "episodic/2026-03-01.md"})
	if len(p.Warnings) > 0 || len(p.Events) != 1 || p.Events[0].Text != ev.Text {
		t.Fatalf("event parsed %+v", p)
	}
}
