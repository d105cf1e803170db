package extract

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"time"
)

// TestLabelledSets scores the rules on the English and Korean labelled
// sets (testdata/*.tsv: text, expected strategy or "none"): precision is
// the share of utterances given a record whose first record has the
// expected strategy; recall the share of utterances expecting one that
// get it.
func TestLabelledSets(t *testing.T) {
	ref := time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC)
	for _, lang := range []string{"en", "ko"} {
		f, err := os.Open("testdata/" + lang + ".tsv")
		if err != nil {
			t.Fatal(err)
		}
		var tp, fp, fn int
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			text, want, _ := strings.Cut(line, "\t")
			cs := ExtractText("e", "user", text, ref)
			got := "none"
			if len(cs) > 0 {
				got = string(cs[0].Strategy)
			}
			switch {
			case got != "none" && got == want:
				tp++
			case got != "none":
				fp++
				t.Logf("%s: %q → %s, want %s", lang, text, got, want)
				if want != "none" {
					fn++
				}
			case want != "none":
				fn++
				t.Logf("%s: %q → none, want %s", lang, text, want)
			}
		}
		f.Close()
		p, r := float64(tp)/float64(tp+fp), float64(tp)/float64(tp+fn)
		t.Logf("%s: precision %.3f recall %.3f (tp %d fp %d fn %d)", lang, p, r, tp, fp, fn)
		if p < 0.8 || r < 0.8 {
			t.Errorf("%s: precision %.3f recall %.3f, want both ≥ 0.8", lang, p, r)
		}
	}
}

func TestRelativeDateInContent(t *testing.T) {
	ref := time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC) // a Monday
	for _, tc := range []struct{ text, date string }{
		{"I went to a support group yesterday", "2023-05-07"},
		{"어제 친구랑 등산 갔어요", "2023-05-07"},
		{"I adopted a puppy two weeks ago", "2023-04-24"},
		{"지난달에 텃밭을 시작했어요", "2023-04-01"},
	} {
		cs := ExtractText("e", "user", tc.text, ref)
		if len(cs) == 0 || cs[0].Metadata[KeyDate] != tc.date {
			t.Fatalf("%q: %+v, want date %s", tc.text, cs, tc.date)
		}
	}
}

// Two clauses on one topic in one utterance are one record, so the second
// does not supersede the first.
func TestSameTopicClausesMerge(t *testing.T) {
	cs := ExtractText("e", "user", "저는 유기농 비료만 사용해요. 화학 비료는 절대 안 써요.", time.Now())
	if len(cs) != 1 || !strings.Contains(cs[0].Content, "유기농") || !strings.Contains(cs[0].Content, "화학") {
		t.Fatalf("%+v", cs)
	}
}
