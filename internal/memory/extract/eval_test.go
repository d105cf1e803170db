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
//
// en and ko were written beside the rules. The *_dev, *_dev2, *_dev3 (60,
// 80 and 70 lines: passing events against life events), *_heldout (60)
// and *_heldout2 (80, 45 % look-alike negatives) sets were written
// afterwards by someone who had not seen the rules or the first sets; the
// dev sets were then read to find what the rules missed, the held-out sets
// only scored, so their figures are what the rules do on text nobody
// tuned them to. Each set has its floor, set
// just under what the rules reach, so that a change that loses ground
// fails here.
func TestLabelledSets(t *testing.T) {
	ref := time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC)
	for _, set := range []struct {
		name       string
		minP, minR float64
	}{
		{"en", 0.8, 0.8}, {"ko", 0.8, 0.8},
		{"en_dev", 0.95, 0.95}, {"ko_dev", 0.95, 0.95},
		{"en_dev2", 0.95, 0.95}, {"ko_dev2", 0.95, 0.95},
		{"en_dev3", 0.95, 0.95}, {"ko_dev3", 0.95, 0.95},
		{"en_heldout", 0.9, 0.8}, {"ko_heldout", 0.9, 0.75},
		{"en_heldout2", 0.9, 0.85}, {"ko_heldout2", 0.8, 0.7},
	} {
		lang := set.name
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
		if p < set.minP || r < set.minR {
			t.Errorf("%s: precision %.3f recall %.3f, want ≥ %.2f and ≥ %.2f", lang, p, r, set.minP, set.minR)
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
