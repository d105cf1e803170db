package tgmd_test

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/tendrilai/tendril/internal/channel/telegram/telegramtest"
	"github.com/tendrilai/tendril/internal/channel/telegram/tgmd"
)

func TestRender(t *testing.T) {
	tests := []struct {
		name, md, want string
	}{
		{"bold italic", "**bold** and *it* and ~~gone~~", "<b>bold</b> and <i>it</i> and <s>gone</s>"},
		{"heading", "# Title\n\ntext", "<b>Title</b>\n\ntext"},
		{"escape", "a < b && c > d \"q\"", "a &lt; b &amp;&amp; c &gt; d &quot;q&quot;"},
		{"lone underscores", "snake_case_name and _ alone", "snake_case_name and _ alone"},
		{"stars inside words", "2**3**4 un**frigging**believable", "2<b>3</b>4 un<b>frigging</b>believable"},
		{"bullets", "- one\n- two\n  - nested", "• one\n• two\n   • nested"},
		{"numbers", "3. c\n4. d", "3. c\n4. d"},
		{"code fence with html", "```html\n<b>x</b> & y\n```", "<pre><code class=\"language-html\">&lt;b&gt;x&lt;/b&gt; &amp; y</code></pre>"},
		{"code fence no lang", "```\nplain\n```", "<pre>plain</pre>"},
		{"inline code in bold", "**use `go test` now**", "<b>use </b><code>go test</code><b> now</b>"},
		{"link", "[docs](https://example.com/a_(b))", "<a href=\"https://example.com/a_(b)\">docs</a>"},
		{"relative link", "[here](/local)", "here (/local)"},
		{"javascript link", "[x](javascript:alert(1))", "x (javascript:alert(1))"},
		{"empty label", "[](https://e.com)", "<a href=\"https://e.com\">https://e.com</a>"},
		{"image", "![a plant](https://example.com/p.png)", "<a href=\"https://example.com/p.png\">a plant</a>"},
		{"email autolink", "<dana@example.com>", "<a href=\"mailto:dana@example.com\">dana@example.com</a>"},
		{"raw html", "hi <span onclick=x>there</span>", "hi &lt;span onclick=x&gt;there&lt;/span&gt;"},
		{"blockquote", "> quoted *text*", "<blockquote>quoted <i>text</i></blockquote>"},
		{"nested blockquote", "> a\n>> b", "<blockquote>a\n\nb</blockquote>"},
		{"link in quote", "> see [x](https://e.com)", "<blockquote>see x (https://e.com)</blockquote>"},
		{"table", "| a | bb |\n|---|---|\n| 1 | 2 |", "<pre>a | bb\n--+---\n1 | 2</pre>"},
		{"entity", "&copy; &amp; &#65;", "© &amp; A"},
		{"backslash", `\*not bold\*`, "*not bold*"},
		{"ref definition kept", "[a]: https://x.com", "[a]: <a href=\"https://x.com\">https://x.com</a>"},
		{"bare url", "see https://x.com/a_b_(c) now", "see <a href=\"https://x.com/a_b_(c)\">https://x.com/a_b_(c)</a> now"},
		{"unclosed bold", "**bold and `tick", "bold and tick"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tgmd.Render(tt.md)
			if got != tt.want {
				t.Errorf("Render(%q)\n got %q\nwant %q", tt.md, got, tt.want)
			}
			if _, err := telegramtest.ValidateHTML(got); err != nil {
				t.Errorf("invalid Telegram HTML %q: %v", got, err)
			}
		})
	}
}

func TestChunkLongCodeBlock(t *testing.T) {
	var b strings.Builder
	b.WriteString("intro\n\n```go\n")
	for i := range 900 {
		b.WriteString("fmt.Println(\"line ")
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString("\")\n")
	}
	b.WriteString("```\n\nafter")
	chunks := tgmd.Chunk(tgmd.Render(b.String()), tgmd.MaxChunk)
	if len(chunks) < 5 {
		t.Fatalf("got %d chunks, want the ~25000-char code block split into several", len(chunks))
	}
	for i, c := range chunks {
		checkChunk(t, c)
		if i > 0 && i < len(chunks)-1 && !strings.HasPrefix(c, `<pre><code class="language-go">`) {
			t.Errorf("chunk %d does not reopen the pre block: %.60q", i, c)
		}
	}
}

func TestChunkKeepsSmallCodeBlockWhole(t *testing.T) {
	md := strings.Repeat("word ", 700) + "\n\n```\n" + strings.Repeat("code line\n", 200) + "```"
	chunks := tgmd.Chunk(tgmd.Render(md), tgmd.MaxChunk)
	if len(chunks) != 2 {
		t.Fatalf("got %d chunks, want 2 (prose, then the whole code block)", len(chunks))
	}
	if !strings.HasPrefix(chunks[1], "<pre>") || strings.Count(chunks[1], "code line") != 200 {
		t.Errorf("code block was split: %.80q", chunks[1])
	}
}

func TestChunkReopensTags(t *testing.T) {
	md := "**" + strings.Repeat("bold words ", 800) + "end**"
	chunks := tgmd.Chunk(tgmd.Render(md), 1000)
	if len(chunks) < 8 {
		t.Fatalf("got %d chunks", len(chunks))
	}
	for _, c := range chunks {
		checkChunkLimit(t, c, 1000)
		if !strings.HasPrefix(c, "<b>") || !strings.HasSuffix(c, "</b>") {
			t.Errorf("chunk not wrapped in reopened bold: %.40q…%q", c, c[max(0, len(c)-10):])
		}
	}
}

func TestChunkCountsUTF16(t *testing.T) {
	md := strings.Repeat("🌱", 3000) // 6000 UTF-16 units, 3000 runes
	chunks := tgmd.Chunk(tgmd.Render(md), tgmd.MaxChunk)
	if len(chunks) != 2 {
		t.Fatalf("got %d chunks, want 2", len(chunks))
	}
	for _, c := range chunks {
		checkChunk(t, c)
	}
}

func checkChunk(t *testing.T, c string) { t.Helper(); checkChunkLimit(t, c, tgmd.MaxChunk) }

func checkChunkLimit(t *testing.T, c string, limit int) {
	t.Helper()
	text, err := telegramtest.ValidateHTML(c)
	if err != nil {
		t.Fatalf("chunk rejected: %v\n%q", err, c)
	}
	if n := tgmd.UTF16Len(text); n > limit {
		t.Fatalf("chunk has %d UTF-16 units, limit %d", n, limit)
	}
}

var allowedTag = regexp.MustCompile(`^</?(b|i|u|s|code|pre|a|blockquote)( href="[^"]*"| class="language-[^"]+")?>$`)
var tagRe = regexp.MustCompile(`<[^>]*>`)

// checkProperty renders md, chunks it and checks every chunk validates, uses
// only the allowed tags, and that no letter or digit of md is lost.
func checkProperty(t *testing.T, md string) {
	t.Helper()
	html := tgmd.Render(md)
	chunks := tgmd.Chunk(html, tgmd.MaxChunk)
	var all strings.Builder
	for _, c := range chunks {
		text, err := telegramtest.ValidateHTML(c)
		if err != nil {
			t.Fatalf("chunk rejected: %v\nmarkdown %q\nchunk %q", err, md, c)
		}
		if n := tgmd.UTF16Len(text); n > tgmd.MaxChunk {
			t.Fatalf("chunk has %d UTF-16 units", n)
		}
		for _, tag := range tagRe.FindAllString(c, -1) {
			if !allowedTag.MatchString(tag) {
				t.Fatalf("tag %q not allowed (markdown %q)", tag, md)
			}
		}
		all.WriteString(text)
		for _, m := range attrRe.FindAllStringSubmatch(c, -1) {
			all.WriteString(" " + m[1])
		}
	}
	want := alnumCounts(stripUnkeepable(strings.ToValidUTF8(md, "\uFFFD")))
	got := alnumCounts(unescape(all.String()))
	for r, n := range want {
		if got[r] < n {
			t.Fatalf("lost %q: %d in markdown, %d in output\nmarkdown %q\nhtml %q", r, n, got[r], md, html)
		}
	}
}

var attrRe = regexp.MustCompile(`(?:href|class)="([^"]*)"`)

func unescape(s string) string {
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&", "&quot;", `"`).Replace(s)
}

// entityRe and fenceInfoRe match Markdown the renderer rightly consumes:
// entity references (resolved to their character) and code-fence info
// strings past the language word.
var listNumberRe = regexp.MustCompile(`\d+[.)]`) // ordered lists are renumbered
var entityRe = regexp.MustCompile(`&#?[A-Za-z0-9]+;`)
var fenceInfoRe = regexp.MustCompile("(?m)^( {0,3}(?:>\\s*)*(?:[-*+]|\\d+[.)])?\\s*)(`{3,}|~{3,})[^\\n]*$")

func stripUnkeepable(md string) string {
	md = entityRe.ReplaceAllString(md, "")
	md = listNumberRe.ReplaceAllString(md, "")
	return fenceInfoRe.ReplaceAllString(md, "$1$2")
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

var adversarial = []string{
	"lone _ underscore and snake_case_var and _half",
	"**bold inside** words**like**this and ** spaced **",
	"- a\n  - b\n    - c\n      1. d\n      2. e\n- f",
	"<dana@example.com> and <not an email> and <b>raw</b>",
	"```html\n<script>alert('x')</script>\n&amp; <b>\n```",
	"[link (with) parens](https://en.wikipedia.org/wiki/Fig_(plant)) and [x](<https://a.b/c d>)",
	"> quote with `code` and [a](https://x.y) and\n> ```\n> fenced in quote\n> ```",
	"# H1 with `code` and **bold [link](https://e.com/**x**)**",
	"| a | b |\n|---|---|\n| `c` | **d** |\n| <e> | & |",
	"* * *\n\n***\n\n___",
	"&copy; &notanentity; &#x1F331; &#0; & &amp",
	"```\nunclosed fence\n<html>",
	"text\\\nhard break  \nand soft\nline",
	"![img *alt*](https://x.y/i.png \"title\") [l](https://x.y \"t\")",
	"~~strike **bold** _it_~~ ~single~",
	"1) one\n2) two\n\n10. ten",
	"[](https://empty.label) [nolink]",
	"`` code with ` backtick `` and ` ` and `unclosed",
	"<!-- comment --> <?pi?> <![CDATA[x]]>",
	"Korean 한국어 **굵게** and emoji 🌱🌱 _기울임_",
	"\x00 nul and \xff invalid utf8",
	"> > > deep quote\n> > **b**",
	"    indented code <x>\n    more",
	"- [ ] task\n- [x] done",
	"Setext\n===\n\nSub\n---",
	"**a `b` c** _d `e` f_ [g `h`](https://i.j)",
	"line\n\n\n\n\nmany blank lines",
}

func TestRenderAdversarial(t *testing.T) {
	for _, md := range adversarial {
		checkProperty(t, md)
	}
}

func TestRenderRandomMarkdown(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	n := 400
	if testing.Short() {
		n = 50
	}
	for range n {
		checkProperty(t, randomMarkdown(rng, 1+rng.IntN(60)))
	}
}

func TestRenderLongReplies(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for range 5 {
		var b strings.Builder
		for b.Len() < 20000 {
			b.WriteString(randomMarkdown(rng, 20))
			b.WriteString("\n\n")
		}
		checkProperty(t, b.String())
	}
	checkProperty(t, strings.Repeat("x", 20000))
	checkProperty(t, "**"+strings.Repeat("y ", 10000)+"**")
	checkProperty(t, "```\n"+strings.Repeat("z", 20000)+"\n```")
	checkProperty(t, strings.Repeat("&<>\"", 5000))
}

var pieces = []string{
	"word", "other", " ", " ", "\n", "\n\n", "_", "__", "*", "**", "~~", "`", "```", "```go\n", "\n```\n",
	"# ", "## ", "> ", "- ", "1. ", "   ", "[", "](", ")", "(", "https://ex.com/p_(q)", "<", ">", "&", "&amp;",
	"<dana@x.org>", "<b>", "</i>", "|", "|---|", "\\", "!", "[t](https://x.y)", "🌱", "한글", "\"", "'",
	"<https://auto.link>", "&#128512;", "---\n", "\t", "x_y_z", "a**b**c", "<pre>", "</code>",
}

func randomMarkdown(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

func FuzzRender(f *testing.F) {
	for _, md := range adversarial {
		f.Add(md)
	}
	f.Fuzz(func(t *testing.T, md string) {
		checkProperty(t, md)
	})
}

func TestRenderConcurrent(t *testing.T) {
	done := make(chan string)
	for i := range 8 {
		go func() { done <- tgmd.Render(adversarial[i%len(adversarial)] + "\n\n**x** [l](https://a.b)") }()
	}
	for range 8 {
		if _, err := telegramtest.ValidateHTML(<-done); err != nil {
			t.Error(err)
		}
	}
}

// TestChunkSmallLimits stresses cutting: random Markdown chunked at small
// limits must give valid pieces within the limit that keep every letter and
// digit of the unchunked HTML.
func TestChunkSmallLimits(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	n := 300
	if testing.Short() {
		n = 40
	}
	for range n {
		md := randomMarkdown(rng, 20+rng.IntN(200))
		html := tgmd.Render(md)
		limit := 16 + rng.IntN(200)
		want := alnumCounts(tgmd.PlainText(html))
		got := map[rune]int{}
		for _, c := range tgmd.Chunk(html, limit) {
			text, err := telegramtest.ValidateHTML(c)
			if err != nil {
				t.Fatalf("limit %d: chunk rejected: %v\nchunk %q\nhtml %q", limit, err, c, html)
			}
			if u := tgmd.UTF16Len(text); u > limit {
				t.Fatalf("chunk of %d units over limit %d: %q", u, limit, c)
			}
			for r, k := range alnumCounts(text) {
				got[r] += k
			}
		}
		for r, k := range want {
			if got[r] != k {
				t.Fatalf("limit %d: %q appears %d times in chunks, %d in html %q\nchunks %q", limit, r, got[r], k, html, tgmd.Chunk(html, limit))
			}
		}
	}
}
