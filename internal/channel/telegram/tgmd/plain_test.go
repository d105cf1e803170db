package tgmd

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
)

func TestPlain(t *testing.T) {
	tests := []struct {
		name, md, want string
	}{
		{"link", "see [the docs](https://example.com/a_(b)) now", "see the docs (https://example.com/a_(b)) now"},
		{"links keep every URL", "[a](https://a.io) and [b](https://b.io/x?y=1&z=2)", "a (https://a.io) and b (https://b.io/x?y=1&z=2)"},
		{"link with title", `[a](https://a.io "T")`, "a (https://a.io) (T)"},
		{"label is the url", "[https://same.io/p](https://same.io/p)", "https://same.io/p"},
		{"empty label", "[](https://e.io)", "https://e.io"},
		{"mailto label", "[dana@x.org](mailto:dana@x.org)", "dana@x.org"},
		{"image", "![a plant](https://x.io/p.png)", "a plant (https://x.io/p.png)"},
		{"relative link", "[here](/local)", "here (/local)"},
		{"autolink", "<https://auto.io/x_y_>", "https://auto.io/x_y_"},
		{"email autolink", "<dana@example.com>", "dana@example.com"},
		{"bare url once", "go to https://bare.io/a_b_/c_(d) today", "go to https://bare.io/a_b_/c_(d) today"},
		{"bare url then emphasis", "https://bare.io/c*d* x", "https://bare.io/cd x"}, // * ends a bare URL
		{"bare www", "www.example.com/x", "www.example.com/x"},
		{"bold italic strike", "**bold** and *it* and __b2__ and _i2_ and ~~gone~~", "bold and it and b2 and i2 and gone"},
		{"nested emphasis", "***both*** and **bold *in* bold** and *it **b** it*", "both and bold in bold and it b it"},
		{"unclosed bold", "**bold to the end", "bold to the end"},
		{"unclosed bold mid", "this is **important and more", "this is important and more"},
		{"unclosed italic", "an *aside and _another", "an aside and another"},
		{"unmatched closers", "done** and done_ ok", "done and done ok"},
		{"mismatched", "**bold* x", "bold x"},
		{"literal asterisks", "2 * 3 = 6, 2*3 = 6, a * b", "2 * 3 = 6, 2*3 = 6, a * b"},
		{"double star between spaces", "x ** y", "x  y"},
		{"snake case", "snake_case_name and _ alone", "snake_case_name and _ alone"},
		{"escaped", `\*not bold\* and \_x\_ and 1\*2`, "*not bold* and _x_ and 1*2"},
		{"escaped doubled", "\\*\\* and \\_\\_ and \\`\\`\\`", "* and _ and `"},
		{"entities", "&copy; &amp; &#65; &ast;&ast;", "© & A *"},
		{"tilde", "~5 min, ~~struck~~ and ~~open", "~5 min, struck and open"},
		{"code span", "run `go test ./...` and `a**b`", "run go test ./... and a**b"},
		{"code span with backticks", "`` a ` b ``", "a ` b"},
		{"unclosed code span", "a `b c", "a b c"},
		{"code block", "```go\nx := a ** b\n```", "x := a ** b"},
		{"unclosed fence", "```\ncode here", "code here"},
		{"indented code", "    x := 1\n      y := 2", "x := 1\n  y := 2"},
		{"heading", "# Title **b**\n\ntext\n\nSub\n---", "Title b\n\ntext\n\nSub"},
		{"heading closing hashes", "## Two ##", "Two"},
		{"bullets", "- one\n- two\n  - nested\n* star", "• one\n• two\n   • nested\n\n• star"},
		{"ordered", "3. c\n4. d", "3. c\n4. d"},
		{"blockquote", "> quoted *text*\n> more\n\nafter", "│ quoted text\n│ more\n\nafter"},
		{"link in quote", "> see [x](https://q.io)", "│ see x (https://q.io)"},
		{"thematic break", "a\n\n---\n\nb", "a\n\n──────────\n\nb"},
		{"table with link", "| a | b |\n|---|---|\n| [l](https://t.io) | **y** |", "a                | b\n-----------------+--\nl (https://t.io) | y"},
		{"failed link", "[a](b c) and ![img](x y) and [keep] this", "a (b c) and img (x y) and [keep] this"},
		{"failed link escaped", `\[a\](b)`, "[a] (b)"},
		{"brackets then parens across emphasis", "*[a]*(b)", "[a] (b)"},
		{"raw html", "<span>**x**</span> & <b>y</b>", "<span>x</span> & <b>y</b>"},
		{"html block", "<div>\n**x** `y`\n</div>", "<div>\nx y\n</div>"},
		{"korean", "한국어 **굵게** 그리고 _기울임_, [링크](https://example.kr/경로)", "한국어 굵게 그리고 기울임, 링크 (https://example.kr/경로)"},
		{"korean unclosed", "**중요: 물을 주세요", "중요: 물을 주세요"},
		{"hard break", "line one\\\nline two  \nthree", "line one\nline two\nthree"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Plain(tt.md); got != tt.want {
				t.Errorf("Plain(%q)\n got %q\nwant %q", tt.md, got, tt.want)
			}
			checkPlain(t, tt.md)
		})
	}
}

// TestPlainMatchesHTML: outside links and quotes the plain text is exactly
// the visible text of the HTML.
func TestPlainMatchesHTML(t *testing.T) {
	for _, md := range []string{
		"**bold** *it* `code` and **unclosed",
		"# H\n\n- a\n- b\n\n1. c",
		"```go\nx := 1\n```\n\nafter **b** _i_ 2 * 3",
		"a [b](c d) e ![f](g h) [keep]",
		"| a | b |\n|---|---|\n| 1 | **2** |",
	} {
		if got, want := Plain(md), PlainText(Render(md)); got != want {
			t.Errorf("%q: Plain %q, HTML shows %q", md, got, want)
		}
	}
}

func TestPrepareSplitsLongText(t *testing.T) {
	var b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&b, "Paragraph %d has **bold** words, a [link %d](https://example.com/page/%d?q=%d) and `code`; 한국어 문장 %d.\n\n", i, i, i, i, i)
		if i%50 == 0 {
			b.WriteString("```\n" + strings.Repeat("code line\n", 20) + "```\n\n")
		}
	}
	md := b.String()
	rep := Prepare(md, MaxChunk)
	if len(rep.HTML) < 4 {
		t.Fatalf("%d HTML chunks", len(rep.HTML))
	}
	if want := Chunk(Render(md), MaxChunk); strings.Join(rep.HTML, "\x00") != strings.Join(want, "\x00") {
		t.Fatal("Prepare's HTML differs from Chunk(Render(md))")
	}
	plain := rep.PlainFrom(0)
	if len(plain) < len(rep.HTML) {
		t.Fatalf("%d plain chunks for %d HTML chunks; plain text is longer", len(plain), len(rep.HTML))
	}
	all := strings.Join(plain, "\n")
	for _, p := range plain {
		if n := UTF16Len(p); n > MaxChunk {
			t.Fatalf("plain chunk of %d UTF-16 units", n)
		}
		if strings.Contains(p, "**") || strings.Contains(p, "`") || strings.Contains(p, "](") {
			t.Fatalf("Markdown syntax in plain chunk: %.200q", p)
		}
	}
	for i := range 300 {
		u := fmt.Sprintf("https://example.com/page/%d?q=%d", i, i)
		if n := strings.Count(all, u+")"); n != 1 {
			t.Fatalf("URL %s appears %d times", u, n)
		}
		if !strings.Contains(all, fmt.Sprintf("Paragraph %d has bold words, a link %d (%s) and code; 한국어 문장 %d.", i, i, u, i)) {
			t.Fatalf("paragraph %d not intact in the plain chunks", i)
		}
	}
}

func TestPlainChunkCountsUTF16(t *testing.T) {
	md := strings.Repeat("🌱", 3000) // 6000 UTF-16 units, 3000 runes
	plain := Prepare(md, MaxChunk).PlainFrom(0)
	if len(plain) != 2 {
		t.Fatalf("got %d chunks, want 2", len(plain))
	}
	for _, p := range plain {
		if n := UTF16Len(p); n > MaxChunk {
			t.Fatalf("chunk of %d units", n)
		}
	}
}

// TestPlainChunksNeverCutURLs: at a small limit, every URL shorter than the
// limit arrives whole in one plain chunk, even with no spaces around it.
func TestPlainChunksNeverCutURLs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		var b strings.Builder
		var urls []string
		for i := range 40 {
			u := fmt.Sprintf("https://x.io/%s/%d", strings.Repeat("p", rng.IntN(40)), i)
			urls = append(urls, u)
			switch rng.IntN(4) {
			case 0:
				fmt.Fprintf(&b, "word%d [l](%s)", i, u)
			case 1:
				fmt.Fprintf(&b, "w%s", u) // not linkified: no boundary before it
			case 2:
				fmt.Fprintf(&b, " <%s>", u)
			default:
				fmt.Fprintf(&b, " %s,", u)
			}
			if rng.IntN(3) == 0 {
				b.WriteString(strings.Repeat(" more text", rng.IntN(8)))
			}
		}
		md := b.String()
		limit := 64 + rng.IntN(64)
		plain := Prepare(md, limit).PlainFrom(0)
		for _, p := range plain {
			if n := UTF16Len(p); n > limit {
				t.Fatalf("chunk of %d units over %d", n, limit)
			}
		}
		for i, u := range urls {
			if strings.HasPrefix(md[strings.Index(md, u)-1:], "w") {
				continue // part of a word, not a link
			}
			found := false
			for _, p := range plain {
				if strings.Contains(p, u) {
					found = true
				}
			}
			if !found {
				t.Fatalf("URL %d %s cut at limit %d:\n%q", i, u, limit, plain)
			}
		}
	}
}

// TestPlainFromMiddle: when Telegram accepts HTML[:k] and refuses HTML[k],
// PlainFrom(k) carries exactly the words of HTML[k:]: none lost, none
// repeated.
func TestPlainFromMiddle(t *testing.T) {
	var b strings.Builder
	for i := range 2000 {
		switch i % 7 {
		case 0:
			fmt.Fprintf(&b, "**w%d** ", i)
		case 3:
			fmt.Fprintf(&b, "[w%d](https://l.io/%d) ", i, i)
		case 5:
			fmt.Fprintf(&b, "`w%d` ", i)
		default:
			fmt.Fprintf(&b, "w%d ", i)
		}
		if i%40 == 39 {
			b.WriteString("\n\n")
		}
		if i%300 == 299 {
			b.WriteString("> quoted w-q\n\n")
		}
	}
	for _, limit := range []int{200, 1000, MaxChunk} {
		rep := Prepare(b.String(), limit)
		if len(rep.HTML) < 3 {
			t.Fatalf("limit %d: %d chunks", limit, len(rep.HTML))
		}
		for k := range rep.HTML {
			var html []string
			for _, h := range rep.HTML[k:] {
				html = append(html, PlainText(h))
			}
			want := wordRe.FindAllString(strings.Join(html, " "), -1)
			got := wordRe.FindAllString(strings.Join(rep.PlainFrom(k), " "), -1)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("limit %d, PlainFrom(%d):\n got %.300q\nwant %.300q", limit, k, got, want)
			}
		}
	}
}

var wordRe = regexp.MustCompile(`w\d+|w-q`)

func TestPlainFromHTML(t *testing.T) {
	tests := []struct{ in, want string }{
		{`<b>Approval needed</b> &amp; <code>x&lt;y</code>`, "Approval needed & x<y"},
		{`see <a href="https://x.io/?a=1&amp;b=2">this</a>.`, "see this (https://x.io/?a=1&b=2)."},
		{`<a href="https://x.io">https://x.io</a>`, "https://x.io"},
		{`<a href="https://x.io"></a>`, "https://x.io"},
	}
	for _, tt := range tests {
		if got := PlainFromHTML(tt.in); got != tt.want {
			t.Errorf("PlainFromHTML(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// checkPlain checks the plain rendering of md: no Markdown syntax in its
// prose ("**", "__", "```", "](" may appear only inside code and URLs,
// which are shown as written), every link's URL present, no letter or
// digit of the HTML's visible text lost (render_test.go checks the HTML
// keeps md's), and Prepare's messages within the limit with the same HTML
// as Chunk(Render(md)).
func checkPlain(t *testing.T, md string) {
	t.Helper()
	r := render(md, true)
	plain := string(r.pl.b)
	masked := []byte(plain)
	for _, s := range r.pl.spans {
		for i := s.start; i < s.end; i++ {
			masked[i] = 0
		}
	}
	for _, bad := range []string{"**", "__", "```", "]("} {
		if i := strings.Index(string(masked), bad); i >= 0 {
			t.Fatalf("Markdown syntax %q in plain text\nmarkdown %q\nplain    %q", bad, md, plain)
		}
	}
	for _, u := range linkURLs(md) {
		if !strings.Contains(plain, u) {
			t.Fatalf("URL %q lost\nmarkdown %q\nplain    %q", u, md, plain)
		}
	}
	want := alnumCounts(PlainText(Render(md)))
	got := alnumCounts(plain)
	for c, n := range want {
		if got[c] < n {
			t.Fatalf("lost %q: %d in markdown, %d in plain\nmarkdown %q\nplain    %q", c, n, got[c], md, plain)
		}
	}
	const limit = 64
	rep := Prepare(md, limit)
	if want := Chunk(Render(md), limit); strings.Join(rep.HTML, "\x00") != strings.Join(want, "\x00") {
		t.Fatalf("Prepare's HTML differs from Chunk(Render(md))\nmarkdown %q", md)
	}
	if Render(md) != removeEmptyPairs(Render(md)) {
		t.Fatalf("Render left an empty element: %q", Render(md))
	}
	var all strings.Builder
	for k := range rep.HTML {
		// PlainFrom(k) loses nothing HTML[k:] shows.
		var rest strings.Builder
		for _, h := range rep.HTML[k:] {
			rest.WriteString(PlainText(h))
		}
		got := alnumCounts(strings.Join(rep.PlainFrom(k), ""))
		for c, n := range alnumCounts(rest.String()) {
			if got[c] < n {
				t.Fatalf("PlainFrom(%d) lost %q: %d in HTML[%d:], %d in plain\nmarkdown %q\nhtml %q\nplain %q", k, c, n, k, got[c], md, rep.HTML[k:], rep.PlainFrom(k))
			}
		}
		for _, p := range rep.PlainFrom(k) {
			if n := UTF16Len(p); n > limit {
				t.Fatalf("plain chunk of %d units over %d: %q", n, limit, p)
			}
			if k == 0 {
				all.WriteString(p)
				all.WriteString("\n")
			}
		}
	}
	for _, u := range linkURLs(md) {
		if UTF16Len(u) < limit/2 && !strings.Contains(all.String(), u) {
			t.Fatalf("URL %q cut between plain chunks\nmarkdown %q\nchunks %q", u, md, rep.PlainFrom(0))
		}
	}
}

// linkURLs returns the URLs of md's links as goldmark parses them: those
// the plain text must show (an email autolink shows its address).
func linkURLs(md string) []string {
	src := []byte(strings.ToValidUTF8(md, "\uFFFD"))
	doc := sharedParser().Parse(text.NewReader(src))
	var urls []string
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		var dest []byte
		switch n := n.(type) {
		case *ast.Link:
			dest = n.Destination
		case *ast.Image:
			dest = n.Destination
		case *ast.AutoLink:
			urls = append(urls, string(n.Label(src)))
			return ast.WalkContinue, nil
		}
		if u := resolveURL(dest); u != "" {
			urls = append(urls, strings.TrimPrefix(u, "mailto:"))
		}
		return ast.WalkContinue, nil
	})
	return urls
}

func alnumCounts(s string) map[rune]int {
	m := map[rune]int{}
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			m[r]++
		}
	}
	return m
}

var plainSeeds = []string{
	"**unclosed bold with [a link](https://a.io/x) and `code`",
	"lone _ underscore and snake_case_var and _half and 2 * 3",
	"**bold inside** words**like**this and ** spaced **",
	"- a\n  - b\n    - c\n      1. d\n- [x](https://l.io)",
	"```html\n<script>**x**</script>\n```\n\n```\nunclosed",
	"[link (with) parens](https://en.wikipedia.org/wiki/Fig_(plant)) and [x](<https://a.b/c d>)",
	"> quote with `code` and [a](https://x.y) and\n> ```\n> fenced in quote\n> ```",
	"# H1 with `code` and **bold [link](https://e.com/**x**)**",
	"| a | b |\n|---|---|\n| `c` | **d** |\n| [e](https://t.io) | & |",
	"&copy; &ast;&ast; &#x2A;&#42; \\*\\* \\_\\_ \\`\\`\\` \\](x) &rsqb;&lpar;",
	"![img *alt*](https://x.y/i.png \"title\") [l](https://x.y \"t\") [](https://e.io)",
	"[a](b c) ![d](e f) [[g]](h i) [j]](k)",
	"Korean 한국어 **굵게** and emoji 🌱🌱 _기울임_ https://한국.kr/a_b_",
	"<div>**x** [a](b c)</div>\n\n<span>`y`</span> <a href=\"**\">",
	"https://bare.io/_a_/b **https://bold.io/x** (https://paren.io/a_(b)) www.w.io/*x*",
	"*[a]*(b) **]**(c) _[_d_]_(e)",
	"\x00 nul and \xff invalid utf8 ***",
}

func FuzzPlain(f *testing.F) {
	for _, md := range plainSeeds {
		f.Add(md)
	}
	f.Fuzz(func(t *testing.T, md string) {
		checkPlain(t, md)
	})
}

func TestPlainSeeds(t *testing.T) {
	for _, md := range plainSeeds {
		checkPlain(t, md)
	}
}

var plainPieces = []string{
	"word", "other", " ", " ", "\n", "\n\n", "_", "__", "*", "**", "***", "~", "~~", "`", "```", "```go\n", "\n```\n",
	"# ", "## ", "> ", "- ", "1. ", "   ", "[", "]", "](", ")", "(", "!", "https://ex.com/p_(q)", "<", ">", "&", "&amp;",
	"<dana@x.org>", "<b>", "</i>", "<div>", "|", "|---|", "\\", "[t](https://x.y)", "🌱", "한글", "\"",
	"<https://auto.link>", "&#42;", "&ast;", "---\n", "\t", "x_y_z", "a**b**c", "www.w.io", " https://b.io/_x_ ",
}

func TestPlainRandomMarkdown(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 17))
	n := 2000
	if testing.Short() {
		n = 200
	}
	for range n {
		var b strings.Builder
		for range 1 + rng.IntN(60) {
			b.WriteString(plainPieces[rng.IntN(len(plainPieces))])
		}
		checkPlain(t, b.String())
	}
}
