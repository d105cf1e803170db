package search

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// tokenizeRunes is Tokenize as it was before its ASCII fast path: a
// rune-by-rune scan through unicode (the reference for TestTokenizeSame).
func tokenizeRunes(text string) []string {
	var out []string
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			out = append(out, b.String())
			b.Reset()
		}
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(unicode.ToLower(r))
		case (r == '\'' || r == '’') && b.Len() > 0:
			next := text[i+size:]
			if strings.HasPrefix(next, "s") && (len(next) == 1 || !isWordByte(next[1])) {
				flush()
				i += size + 1
				continue
			}
			flush()
		default:
			flush()
		}
		i += size
	}
	flush()
	return out
}

var tokenizeCases = []string{
	"", "a", "A", "Caroline's painting", "don't", "it's", "'s", "x's", "x'S", "O'Brien's dog’s", "caroline’s",
	"Ünïcödé ÀB straße", "비료를 샀어요", "naïve café", "ABC'", "abc’", "1990s", "ʼs", "\xe2\x80", "a\xffb", "İstanbul",
	"K ǅ ǈ", "end with '", "tab\tnew\nline", "MiXeD123cAsE", "’s", "l'été",
}

// TestTokenizeSame checks Tokenize against the rune-by-rune reference on
// fixed cases and on random strings over a mixed alphabet.
func TestTokenizeSame(t *testing.T) {
	cases := slices.Clone(tokenizeCases)
	alpha := []string{"a", "Z", "s", "S", "0", "9", " ", "'", "’", ".", "-", "é", "É", "İ", "비", "료", "\xe2", "\x80", "ǅ", "\n", "ß", "ʼ"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(24) {
			b.WriteString(alpha[rng.IntN(len(alpha))])
		}
		cases = append(cases, b.String())
	}
	for _, c := range cases {
		if got, want := Tokenize(c), tokenizeRunes(c); !slices.Equal(got, want) {
			t.Fatalf("Tokenize(%q) = %q, want %q", c, got, want)
		}
	}
}

// TestTermsOfJoin: the terms of texts joined by a newline or a space are
// the texts' terms end to end (what Analyzed.ContextTerms relies on), for
// fixed cases and random strings, with and without stemming.
func TestTermsOfJoin(t *testing.T) {
	parts := slices.Clone(tokenizeCases)
	alpha := []string{"a", "Z", "s", "S", "0", " ", "'", "’", ".", "é", "비", "료를", "\xe2", "\x80", "the", "painting", "fertilisers", "\n"}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(alpha[rng.IntN(len(alpha))])
		}
		parts = append(parts, b.String())
	}
	for _, an := range []Analyzer{DefaultParams().Analyzer, {}, {Stem: true, KeepStopWords: true, NoBigrams: true}} {
		for i := range parts {
			p, q := parts[i], parts[(i*7+1)%len(parts)]
			for _, sep := range []string{"\n", " "} {
				if got, want := an.Terms(p+sep+q), slices.Concat(an.Terms(p), an.Terms(q)); !slices.Equal(got, want) {
					t.Fatalf("%+v: Terms(%q+%q+%q) = %q, want %q", an, p, sep, q, got, want)
				}
			}
		}
	}
}

// TestAddAnalyzedSame: an index built with AddAnalyzed from each text's
// terms ranks and explains exactly as one built with Add.
func TestAddAnalyzedSame(t *testing.T) {
	turns := []string{
		"I painted a sunrise by the lake yesterday", "That's lovely! What colours did you use?",
		"Mostly blues; Caroline's idea", "I went to the LGBTQ support group last week", "It was 7 May 2023",
		"비료를 샀어요", "The fertiliser arrived", "", "We'll hike next month with the kids",
	}
	p := DefaultParams()
	p.TimeBoost = 0.2
	a, b := NewIndex(p), NewIndex(p)
	an := p.Analyzer
	for i, text := range turns {
		var ctx []string
		var ctxTerms [][]string
		if i > 0 {
			ctx, ctxTerms = append(ctx, turns[i-1]), append(ctxTerms, an.Terms(turns[i-1]))
		}
		if i+1 < len(turns) {
			ctx, ctxTerms = append(ctx, turns[i+1]), append(ctxTerms, an.Terms(turns[i+1]))
		}
		d := Doc{Text: text, Context: strings.Join(ctx, "\n"), Speaker: []string{"Caroline", "Melanie"}[i%2], Date: "8 May 2023 Monday", Group: "s1", Key: fmt.Sprint(i)}
		if x, y := a.Add(d), b.AddAnalyzed(Analyzed{Doc: d, TextTerms: an.Terms(text), ContextTerms: ctxTerms}); x != y {
			t.Fatalf("doc %d: Add %d, AddAnalyzed %d", i, x, y)
		}
	}
	for _, q := range []string{"painting lake", "what did Caroline paint", "when did Melanie go to the support group", "fertilizer", "비료", "hike kids", "colours"} {
		g, w := b.Search(q, nil, 10), a.Search(q, nil, 10)
		if len(g) == 0 || len(g) != len(w) {
			t.Fatalf("%q: %d results, want %d (> 0)", q, len(g), len(w))
		}
		for i := range g {
			if g[i].Doc != w[i].Doc || g[i].Score != w[i].Score || g[i].Explain != w[i].Explain {
				t.Fatalf("%q rank %d: %d %v %s, want %d %v %s", q, i, g[i].Doc, g[i].Score, g[i].Explain, w[i].Doc, w[i].Score, w[i].Explain)
			}
		}
	}
}

// TestCountTermsSameAsTerms: CountTerms counts what Terms returns, for
// English (stemmed and not), Korean (bigrams) and mixed text, whichever
// terms are wanted.
func TestCountTermsSameAsTerms(t *testing.T) {
	texts := []string{
		"Caroline's watering the tomatoes; she watered them yesterday and waters daily.",
		"I'm fertilising the roses with organic fertilizers — the fertiliser is organic!",
		"저는 유기농 비료만 사용해요. 화학 비료는 절대 안 써요.",
		"Skies, skis, dying, lying, gently, ugly, early, only: Snowball's exceptions. A b c x.",
		"Café crème at the Zoë's 42nd birthday; running ran runs.",
		"",
	}
	for _, an := range []Analyzer{{Stem: true}, {}, {Stem: true, KeepStopWords: true}, {Stem: true, NoBigrams: true}} {
		for _, text := range texts {
			terms := an.Terms(text)
			want := map[string]int{}
			for _, term := range terms {
				want[term]++
			}
			counts := map[string]int{}
			for term := range want {
				counts[term] = 0
			}
			counts["zzznotthere"] = 0
			if n := an.CountTerms(text, counts); n != len(terms) {
				t.Errorf("%+v %q: %d terms, Terms has %d", an, text, n, len(terms))
			}
			for term, c := range want {
				if counts[term] != c {
					t.Errorf("%+v %q: %q counted %d, Terms has %d", an, text, term, counts[term], c)
				}
			}
			if counts["zzznotthere"] != 0 {
				t.Errorf("unwanted term counted")
			}
		}
	}
}

// TestStemCacheBounded: the process-wide stem cache stays within
// stemCacheMax entries however many distinct words pass (it starts over
// when full), and still caches what comes after.
func TestStemCacheBounded(t *testing.T) {
	for i := range stemCacheMax + 5000 {
		stem(fmt.Sprintf("zq%dwords", i))
	}
	n := 0
	stemCache.Range(func(_, _ any) bool { n++; return true })
	if n > stemCacheMax || n == 0 {
		t.Fatalf("stem cache holds %d entries after %d distinct words; want 1–%d", n, stemCacheMax+5000, stemCacheMax)
	}
	stem("gardening")
	if v, ok := stemCache.Load("gardening"); !ok || v.(string) != "garden" {
		t.Fatalf("a word stemmed after the cache started over is not cached: %v %v", v, ok)
	}
}
