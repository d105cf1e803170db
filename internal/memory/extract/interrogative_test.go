package extract

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// interrogativeByPatterns is Interrogative as the patterns alone state it,
// the reference the prefilters must agree with.
func interrogativeByPatterns(clause string) bool {
	c := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(clause), ".!?？"))
	if reAskKO.MatchString(c) {
		return true
	}
	c = strings.TrimSpace(reLeadEN.ReplaceAllString(c, ""))
	return reAskEN.MatchString(c) || askWh(strings.ToLower(c)) || reEmbeddedEN.MatchString(c) || reTagEN.MatchString(c)
}

// interrogativeCorpus is every clause of the English and Korean test sets,
// of LoCoMo's turns when the file is found (LOCOMO_DATA, or the shared
// data beside the repository), and strings built to reach each pattern's
// edges: folds (ſ, K), the tags, the lead-ins, RE2's \s.
func interrogativeCorpus(t testing.TB) []string {
	out := []string{
		"", "?", "혹시", "혹시 내일 시간 있어", "혹시\t괜찮으면", "혹시내일", "뭐였나요", "맥스인가요", "써도 될까요", "있습니까", "뭐였지 ",
		"I live in Portland right", "I live in Portland RIGHT", "that's correct", "it's fine isn't  it", "I did, didn't I", "am I not", "ain't it",
		"Bright", "incorrect", "upright", "so do I have a dog", "SO DO I have a dog", "ſo do I have a dog", "Btw is my car ready", "um, uh, do I own a car",
		"quick question do I have a meeting", "Just wondering: is my flight today", "Okay what is my name", "K what's up",
		"I wonder if it rains", "I WONDER WHETHER it rains", "not  sure if I can", "tell me what my dog is called", "Please remind me where I parked",
		"ſhow me what I said", "show me\twhen it was", "I know if it matters", "meet me there", "check whether the oven is off", "a lift", "whetherman",
		"What I love is gardening", "How many kids do I have", "whats my name", "Which of my dogs is called Max",
	}
	add := func(text string) {
		for _, cl := range clauses(text) {
			out = append(out, cl.text)
			for _, seg := range strings.Split(cl.text, ",") {
				out = append(out, seg)
			}
		}
	}
	for _, f := range []string{"testdata/en.tsv", "testdata/ko.tsv"} {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			text, _, _ := strings.Cut(sc.Text(), "\t")
			add(text)
		}
		fh.Close()
	}
	path := os.Getenv("LOCOMO_DATA")
	if path == "" {
		path = filepath.Join("..", "..", "..", "..", "shared", "data", "locomo", "locomo-dev.json")
	}
	if b, err := os.ReadFile(path); err == nil {
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		var walk func(any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				for k, x := range v {
					if s, ok := x.(string); ok && (k == "text" || k == "question") {
						add(s)
					} else {
						walk(x)
					}
				}
			case []any:
				for _, x := range v {
					walk(x)
				}
			}
		}
		walk(v)
	} else {
		t.Logf("LoCoMo not found (%v): test sets and edge strings only", err)
	}
	return out
}

// TestInterrogativeSameAsPatterns checks the prefilters: Interrogative
// answers as its patterns do on every clause of the corpus.
func TestInterrogativeSameAsPatterns(t *testing.T) {
	corpus := interrogativeCorpus(t)
	yes := 0
	for _, c := range corpus {
		want := interrogativeByPatterns(c)
		if got := Interrogative(c); got != want {
			t.Errorf("Interrogative(%q) = %v, the patterns say %v", c, got, want)
		}
		if want {
			yes++
		}
	}
	if yes == 0 || yes == len(corpus) {
		t.Fatalf("%d of %d clauses interrogative: the corpus does not exercise both answers", yes, len(corpus))
	}
	t.Logf("%d clauses, %d interrogative", len(corpus), yes)
}

func benchInterrogative(b *testing.B, f func(string) bool) {
	corpus := interrogativeCorpus(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, c := range corpus {
			f(c)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(corpus)), "ns/clause")
}

// BenchmarkInterrogative compares Interrogative with its patterns alone.
func BenchmarkInterrogative(b *testing.B) {
	b.Run("patterns", func(b *testing.B) { benchInterrogative(b, interrogativeByPatterns) })
	b.Run("prefiltered", func(b *testing.B) { benchInterrogative(b, Interrogative) })
}
