// Package tgmd turns Markdown (as a model writes it) into the HTML subset the
// Telegram Bot API accepts with parse_mode=HTML, and splits it into messages.
//
// Rendering walks goldmark's AST (CommonMark plus the GFM table and
// strikethrough extensions); no regular expressions touch the Markdown. The
// output uses only the tags b, i, u, s, code, pre, a, blockquote and
// <pre><code class="language-x">, obeys the Bot API nesting rules
// (https://core.telegram.org/bots/api#formatting-options: nothing inside code
// or pre, no a or code inside blockquote, no nested a or blockquote) and
// escapes everything else with the only named entities Telegram knows:
// &lt; &gt; &amp; &quot;.
package tgmd

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// newParser builds a CommonMark parser with GFM tables and strikethrough.
// Link reference definitions are deliberately not recognised: a model's
// stray "[x]: y" line would otherwise vanish from the reply.
// sharedParser is built once; goldmark parsers keep per-parse state in
// the parse context, so one parser serves concurrent calls.
var sharedParser = sync.OnceValue(newParser)

func newParser() parser.Parser {
	return parser.NewParser(
		parser.WithBlockParsers(parser.DefaultBlockParsers()...),
		parser.WithInlineParsers(parser.DefaultInlineParsers()...),
		parser.WithInlineParsers(util.Prioritized(extension.NewStrikethroughParser(), 500)),
		parser.WithParagraphTransformers(util.Prioritized(extension.NewTableParagraphTransformer(), 200)),
		parser.WithASTTransformers(util.Prioritized(extension.NewTableASTTransformer(), 0)),
	)
}

// Render converts Markdown to Telegram HTML. Invalid UTF-8 is replaced with
// U+FFFD. The result is one string; use Chunk to split it for sendMessage.
func Render(markdown string) string {
	src := []byte(strings.ToValidUTF8(markdown, "\uFFFD"))
	doc := sharedParser().Parse(text.NewReader(src))
	r := &renderer{src: src}
	r.blocks(doc, 0)
	return removeEmptyPairs(strings.TrimSpace(r.buf.String()))
}

// tag is an open HTML element: its name and the exact opening text, so it
// can be closed and re-opened around content that may not nest inside it.
type tag struct {
	name string
	open string
}

type renderer struct {
	src   []byte
	buf   bytes.Buffer
	stack []tag
}

func (r *renderer) open(name, open string) {
	r.buf.WriteString(open)
	r.stack = append(r.stack, tag{name, open})
}

func (r *renderer) close() {
	t := r.stack[len(r.stack)-1]
	r.stack = r.stack[:len(r.stack)-1]
	r.buf.WriteString("</" + t.name + ">")
}

func (r *renderer) inside(name string) bool {
	for _, t := range r.stack {
		if t.name == name {
			return true
		}
	}
	return false
}

// breakout closes every open element, runs f at top level, and re-opens
// them: pre and code may not sit inside any other entity.
func (r *renderer) breakout(f func()) {
	saved := append([]tag(nil), r.stack...)
	for len(r.stack) > 0 {
		r.close()
	}
	f()
	for _, t := range saved {
		r.open(t.name, t.open)
	}
}

// text writes Markdown text: backslash escapes and entity references are
// resolved, then <, >, & and " are escaped.
func (r *renderer) text(b []byte) { html.DefaultWriter.Write(bufWriter{&r.buf}, b) }

// raw writes b verbatim as text, escaped.
func (r *renderer) raw(b []byte) { html.DefaultWriter.RawWrite(bufWriter{&r.buf}, b) }

// bufWriter adapts bytes.Buffer to goldmark's util.BufWriter.
type bufWriter struct{ *bytes.Buffer }

func (bufWriter) Buffered() int { return 0 }
func (bufWriter) Flush() error  { return nil }

func (r *renderer) rawString(s string) { r.raw([]byte(s)) }

func (r *renderer) lines(n ast.Node) []byte {
	var b bytes.Buffer
	ls := n.Lines()
	for i := range ls.Len() {
		seg := ls.At(i)
		b.Write(seg.Value(r.src))
	}
	return b.Bytes()
}

// blocks renders the block children of n separated by blank lines. depth is
// the list nesting level, used for indentation.
func (r *renderer) blocks(n ast.Node, depth int) {
	first := true
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if !first {
			r.buf.WriteString("\n\n")
		}
		first = false
		r.block(c, depth)
	}
}

func (r *renderer) block(n ast.Node, depth int) {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		r.inlines(n)
	case *ast.Heading:
		r.open("b", "<b>")
		r.inlines(n)
		r.close()
	case *ast.ThematicBreak:
		r.buf.WriteString("──────────")
	case *ast.FencedCodeBlock:
		lang := ""
		if n.Info != nil {
			lang = languageOf(n.Info.Segment.Value(r.src))
		}
		r.codeBlock(r.lines(n), lang)
	case *ast.CodeBlock:
		r.codeBlock(r.lines(n), "")
	case *ast.Blockquote:
		if r.inside("blockquote") {
			r.blocks(n, depth) // Telegram forbids nested blockquotes.
			return
		}
		r.open("blockquote", "<blockquote>")
		r.blocks(n, depth)
		r.close()
	case *ast.List:
		r.list(n, depth)
	case *ast.HTMLBlock:
		b := r.lines(n)
		if n.HasClosure() {
			b = append(b, n.ClosureLine.Value(r.src)...)
		}
		r.raw(bytes.TrimRight(b, "\n"))
	case *east.Table:
		r.table(n)
	default:
		// Unknown block: keep its text.
		if n.Type() == ast.TypeBlock && n.HasChildren() {
			r.blocks(n, depth)
		} else if n.HasChildren() {
			r.inlines(n)
		} else if n.Type() == ast.TypeBlock {
			r.raw(bytes.TrimRight(r.lines(n), "\n"))
		}
	}
}

func (r *renderer) codeBlock(code []byte, lang string) {
	code = bytes.TrimRight(code, "\n")
	if len(bytes.TrimSpace(code)) == 0 {
		return
	}
	r.breakout(func() {
		if lang != "" {
			r.open("pre", "<pre>")
			r.open("code", `<code class="language-`+lang+`">`)
			r.raw(code)
			r.close()
			r.close()
			return
		}
		r.open("pre", "<pre>")
		r.raw(code)
		r.close()
	})
}

// languageOf takes the first word of a fence info string and keeps it only
// when it is a plain identifier such as go, c++, objective-c or c#.
func languageOf(info []byte) string {
	f := strings.Fields(string(info))
	if len(f) == 0 || len(f[0]) > 32 {
		return ""
	}
	for _, c := range f[0] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("+-_.#", c)) {
			return ""
		}
	}
	return f[0]
}

func (r *renderer) list(l *ast.List, depth int) {
	num := l.Start
	indent := strings.Repeat("   ", depth)
	i := 0
	for item := l.FirstChild(); item != nil; item = item.NextSibling() {
		if i > 0 {
			if l.IsTight {
				r.buf.WriteString("\n")
			} else {
				r.buf.WriteString("\n\n")
			}
		}
		r.buf.WriteString(indent)
		if l.IsOrdered() {
			r.buf.WriteString(strconv.Itoa(num+i) + ". ")
		} else {
			r.buf.WriteString("• ")
		}
		first := true
		for c := item.FirstChild(); c != nil; c = c.NextSibling() {
			if !first {
				if _, nested := c.(*ast.List); nested || l.IsTight {
					r.buf.WriteString("\n")
				} else {
					r.buf.WriteString("\n\n")
				}
				if _, nested := c.(*ast.List); !nested {
					r.buf.WriteString(indent + "   ")
				}
			}
			first = false
			r.block(c, depth+1)
		}
		i++
	}
}

// table renders a GFM table as aligned monospace text in a pre block.
func (r *renderer) table(t *east.Table) {
	var rows [][]string
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []string
		for cell := row.FirstChild(); cell != nil; cell = cell.NextSibling() {
			cells = append(cells, r.plain(cell))
		}
		// GFM drops cells beyond the header's count; keep their text.
		if raw := r.rawCells(row.Pos()); len(raw) > len(cells) && len(cells) > 0 {
			for _, c := range raw[len(cells):] {
				sub := &renderer{src: r.src}
				sub.text([]byte(c))
				cells = append(cells, PlainText(sub.buf.String()))
			}
		}
		rows = append(rows, cells)
	}
	var widths []int
	for _, row := range rows {
		for i, c := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for ri, row := range rows {
		if ri > 0 {
			b.WriteString("\n")
		}
		for i, c := range row {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(c)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)))
			}
		}
		if ri == 0 && len(rows) > 1 {
			b.WriteString("\n")
			for i, w := range widths {
				if i > 0 {
					b.WriteString("-+-")
				}
				b.WriteString(strings.Repeat("-", max(w, 1)))
			}
		}
	}
	r.codeBlock([]byte(b.String()), "")
}

// rawCells splits the source line starting at pos on unescaped pipes.
func (r *renderer) rawCells(pos int) []string {
	if pos < 0 || pos >= len(r.src) {
		return nil
	}
	line := r.src[pos:]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	s := strings.TrimSpace(string(line))
	s = strings.TrimPrefix(s, "|")
	if strings.HasSuffix(s, "|") && !strings.HasSuffix(s, `\|`) {
		s = s[:len(s)-1]
	}
	var cells []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '|' && (i == 0 || s[i-1] != '\\') {
			cells = append(cells, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(cells, strings.TrimSpace(s[start:]))
}

// plain returns the visible text of inline content, unescaped.
func (r *renderer) plain(n ast.Node) string {
	sub := &renderer{src: r.src}
	sub.inlines(n)
	return PlainText(sub.buf.String())
}

func (r *renderer) inlines(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		r.inline(c)
	}
}

func (r *renderer) inline(n ast.Node) {
	switch n := n.(type) {
	case *ast.Text:
		if n.IsRaw() {
			r.raw(n.Segment.Value(r.src))
		} else {
			r.text(n.Segment.Value(r.src))
		}
		if n.HardLineBreak() || n.SoftLineBreak() {
			r.buf.WriteString("\n")
		}
	case *ast.String:
		if n.IsRaw() || n.IsCode() {
			r.raw(n.Value)
		} else {
			r.text(n.Value)
		}
	case *ast.CodeSpan:
		var b []byte
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			switch t := c.(type) {
			case *ast.Text:
				v := t.Segment.Value(r.src)
				if bytes.HasSuffix(v, []byte("\n")) {
					b = append(b, v[:len(v)-1]...)
					b = append(b, ' ')
					continue
				}
				b = append(b, v...)
			case *ast.String:
				b = append(b, t.Value...)
			}
		}
		if r.inside("blockquote") || r.inside("a") {
			r.raw(b) // code may not nest in these: keep the text.
			return
		}
		r.breakout(func() {
			r.open("code", "<code>")
			r.raw(b)
			r.close()
		})
	case *ast.Emphasis:
		name := "i"
		if n.Level >= 2 {
			name = "b"
		}
		r.open(name, "<"+name+">")
		r.inlines(n)
		r.close()
	case *east.Strikethrough:
		r.open("s", "<s>")
		r.inlines(n)
		r.close()
	case *ast.Link:
		r.link(n.Destination, func() { r.inlines(n) }, n.Title)
	case *ast.Image:
		label := func() {
			if n.HasChildren() {
				r.inlines(n)
			} else {
				r.buf.WriteString("image")
			}
		}
		r.link(n.Destination, label, n.Title)
	case *ast.AutoLink:
		label := n.Label(r.src)
		dest := n.URL(r.src)
		if n.AutoLinkType == ast.AutoLinkEmail && !bytes.HasPrefix(bytes.ToLower(dest), []byte("mailto:")) {
			dest = append([]byte("mailto:"), dest...)
		}
		r.link(dest, func() { r.raw(label) }, nil)
	case *ast.RawHTML:
		for i := range n.Segments.Len() {
			seg := n.Segments.At(i)
			r.raw(seg.Value(r.src))
		}
	default:
		r.inlines(n)
	}
}

// link writes <a href> when the destination is an absolute URL Telegram
// accepts and links may nest here; otherwise it writes "label (url)".
func (r *renderer) link(dest []byte, label func(), title []byte) {
	u := resolveURL(dest)
	labelled := func() {
		start := r.buf.Len()
		label()
		if strings.TrimSpace(PlainText(string(r.buf.Bytes()[start:]))) == "" {
			r.text(dest)
		}
	}
	switch {
	case u == "" && len(bytes.TrimSpace(dest)) == 0:
		label()
	case u == "":
		// Not a URL Telegram links (relative, javascript:, spaces): keep it as text.
		labelled()
		r.buf.WriteString(" (")
		r.text(dest)
		r.buf.WriteString(")")
	case r.inside("a") || r.inside("blockquote"):
		label()
		r.buf.WriteString(" (")
		r.rawString(u)
		r.buf.WriteString(")")
	default:
		r.open("a", `<a href="`+escapeString(u)+`">`)
		labelled()
		r.close()
	}
	if len(title) > 0 {
		r.buf.WriteString(" (")
		r.text(title)
		r.buf.WriteString(")")
	}
}

// resolveURL returns the unescaped destination when its scheme is one
// Telegram links accept (http, https, tg, mailto), else "".
func resolveURL(dest []byte) string {
	var b bytes.Buffer
	b.Write(util.UnescapePunctuations(dest))
	u := string(util.ResolveEntityNames(util.ResolveNumericReferences(b.Bytes())))
	u = strings.TrimSpace(u)
	if strings.ContainsAny(u, " \n\t\"<>") {
		return ""
	}
	l := strings.ToLower(u)
	for _, p := range []string{"http://", "https://", "tg://", "mailto:"} {
		if strings.HasPrefix(l, p) && len(u) > len(p) {
			return u
		}
	}
	return ""
}

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

// Escape escapes s for Telegram HTML text or attribute values using only the
// entities Telegram supports.
func Escape(s string) string { return escaper.Replace(s) }

func escapeString(s string) string { return escaper.Replace(s) }
