// Package tgmd turns Markdown (as a model writes it) into the HTML subset the
// Telegram Bot API accepts with parse_mode=HTML, or into plain text for
// sending without a parse mode, and splits either into messages.
//
// Rendering walks goldmark's AST (CommonMark plus the GFM table,
// strikethrough and linkify extensions); no regular expressions touch the
// Markdown. The HTML uses only the tags b, i, u, s, code, pre, a, blockquote
// and <pre><code class="language-x">, obeys the Bot API nesting rules
// (https://core.telegram.org/bots/api#formatting-options: nothing inside code
// or pre, no a or code inside blockquote, no nested a or blockquote) and
// escapes everything else with the only named entities Telegram knows:
// &lt; &gt; &amp; &quot;.
//
// One walk writes the HTML and the plain text together (see Prepare), so
// both make the same decisions about the same AST: the plain text is the
// HTML's visible text, except that a link keeps its URL as "label (url)"
// (a label that is the URL itself is written once) and quoted lines start
// with "│ ".
//
// Markdown syntax that goldmark leaves as literal text — an unclosed
// "**bold", a stray backtick, "[label](bad url)" — is dropped from both
// outputs, by these rules applied to prose (never to code or URLs):
//
//   - a run of two or more * or _, or of two or more ~, is dropped;
//   - a single * or _ that could only open or only close emphasis ("*word",
//     "word_") is dropped; one between spaces ("2 * 3", "_ alone") or inside
//     a word ("2*3", "snake_case") is kept as a literal;
//   - a single ~ is kept ("~5 min"); backticks are dropped;
//   - in "[label](x)" that did not parse as a link, "[" (and an image's "!")
//     are dropped and "](" becomes " (";
//   - a backslash-escaped or entity-written character is the writer's
//     literal and is kept, except that the same one of * _ ` ~ is never
//     written twice in a row and "](" never appears ("] (" instead).
//
// Bare URLs are links (linkify), so emphasis is never parsed inside them.
package tgmd

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// sharedParser is built once; goldmark parsers keep per-parse state in the
// parse context, so one parser serves concurrent calls.
var sharedParser = sync.OnceValue(newParser)

// newParser builds a CommonMark parser with GFM tables, strikethrough and
// linkify. Link reference definitions are deliberately not recognised: a
// model's stray "[x]: y" line would otherwise vanish from the reply.
func newParser() parser.Parser {
	return parser.NewParser(
		parser.WithBlockParsers(parser.DefaultBlockParsers()...),
		parser.WithInlineParsers(parser.DefaultInlineParsers()...),
		parser.WithInlineParsers(util.Prioritized(extension.NewStrikethroughParser(), 500)),
		parser.WithInlineParsers(util.Prioritized(extension.NewLinkifyParser(), 999)),
		parser.WithParagraphTransformers(util.Prioritized(extension.NewTableParagraphTransformer(), 200)),
		parser.WithASTTransformers(util.Prioritized(extension.NewTableASTTransformer(), 0)),
	)
}

// render parses markdown and walks it once. With plain set it also writes
// the plain text; the HTML is the same either way.
func render(markdown string, plain bool) *renderer {
	src := []byte(strings.ToValidUTF8(markdown, "\uFFFD"))
	doc := sharedParser().Parse(text.NewReader(src))
	r := newRenderer(src, plain)
	r.blocks(doc, 0)
	return r
}

// Render converts Markdown to Telegram HTML. Invalid UTF-8 is replaced with
// U+FFFD. The result is one string; use Chunk to split it for sendMessage,
// or Prepare for HTML messages with their plain-text fallback.
func Render(markdown string) string {
	return strings.TrimSpace(render(markdown, false).buf.String())
}

// Plain converts Markdown to the plain text Prepare's fallback sends: the
// visible text of Render with links as "label (url)" and no Markdown
// syntax. The result is one string; Prepare splits it into messages.
func Plain(markdown string) string {
	return strings.TrimSpace(string(render(markdown, true).pl.b))
}

// kind classifies plain text: prose is cleaned of Markdown syntax, code and
// URLs are written as they are, and URLs are never cut between messages.
type kind uint8

const (
	prose kind = iota
	verbatim
	urlText
)

// tag is an open HTML element: its name and the exact opening text, so it
// can be closed and re-opened around content that may not nest inside it.
// An element is written only when content arrives (written), so elements
// with no content never appear.
type tag struct {
	name    string
	open    string
	written bool
}

type renderer struct {
	src   []byte
	buf   bytes.Buffer // HTML
	stack []tag
	pl    *plainOut // nil when only HTML is wanted
	// last is the last rune of the plain text (the same decisions are
	// taken with and without pl); '\n' at the start.
	last rune
	// drop holds the source offsets of the "[" and "!" of "[label](x)"
	// that did not parse as a link, for the current block.
	drop  map[int]bool
	quote int // blockquote depth
}

func newRenderer(src []byte, plain bool) *renderer {
	r := &renderer{src: src, last: '\n'}
	if plain {
		r.pl = &plainOut{lineStart: true}
	}
	return r
}

func (r *renderer) open(name, open string) {
	r.stack = append(r.stack, tag{name: name, open: open})
}

func (r *renderer) close() {
	t := r.stack[len(r.stack)-1]
	r.stack = r.stack[:len(r.stack)-1]
	if t.written {
		r.tagHTML("</" + t.name + ">")
	}
}

// flush writes the open tags still waiting for content.
func (r *renderer) flush() {
	for i := range r.stack {
		if !r.stack[i].written {
			r.stack[i].written = true
			r.tagHTML(r.stack[i].open)
		}
	}
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

// tagHTML writes markup that only the HTML has.
func (r *renderer) tagHTML(s string) {
	if r.pl != nil {
		r.pl.mark(r.buf.Len())
	}
	r.buf.WriteString(s)
}

// emit writes visible text to both outputs: escaped in the HTML, as it is
// in the plain text.
func (r *renderer) emit(s string, k kind) {
	if s == "" {
		return
	}
	r.flush()
	if r.pl == nil {
		escaper.WriteString(&r.buf, s)
	} else {
		for i := 0; i < len(s); {
			_, n := utf8.DecodeRuneInString(s[i:])
			r.pl.mark(r.buf.Len())
			if n == 1 && strings.IndexByte(`&<>"`, s[i]) >= 0 {
				r.buf.WriteString(escaper.Replace(s[i : i+1]))
			} else {
				r.buf.WriteString(s[i : i+n])
			}
			r.pl.write(s[i:i+n], k)
			i += n
		}
	}
	r.last, _ = utf8.DecodeLastRuneInString(s)
}

// plainOnly writes text only the plain output has, such as a link's URL.
func (r *renderer) plainOnly(s string, k kind) {
	if s == "" {
		return
	}
	if r.pl != nil {
		for i := 0; i < len(s); {
			_, n := utf8.DecodeRuneInString(s[i:])
			r.pl.mark(r.buf.Len())
			r.pl.write(s[i:i+n], k)
			i += n
		}
	}
	r.last, _ = utf8.DecodeLastRuneInString(s)
}

// literal writes a character the writer escaped (\* or &ast;): kept, but the
// same one of * _ ` ~ never twice in a row, and never "](".
func (r *renderer) literal(s string) {
	if len(s) == 1 && strings.IndexByte("*_`~", s[0]) >= 0 && r.last == rune(s[0]) {
		return
	}
	if strings.HasPrefix(s, "(") && r.last == ']' {
		r.emit(" ", prose)
	}
	r.emit(s, prose)
}

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
			r.emit("\n\n", prose)
		}
		first = false
		r.block(c, depth)
	}
}

func (r *renderer) block(n ast.Node, depth int) {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		r.inlineBlock(n)
	case *ast.Heading:
		r.open("b", "<b>")
		r.inlineBlock(n)
		r.close()
	case *ast.ThematicBreak:
		r.emit("──────────", prose)
	case *ast.FencedCodeBlock:
		lang := ""
		if n.Info != nil {
			lang = languageOf(n.Info.Segment.Value(r.src))
		}
		r.codeBlock(string(r.lines(n)), lang)
	case *ast.CodeBlock:
		r.codeBlock(string(r.lines(n)), "")
	case *ast.Blockquote:
		r.quote++
		if r.pl != nil {
			r.pl.quote = r.quote
		}
		if r.inside("blockquote") {
			r.blocks(n, depth) // Telegram forbids nested blockquotes.
		} else {
			r.open("blockquote", "<blockquote>")
			r.blocks(n, depth)
			r.close()
		}
		r.quote--
		if r.pl != nil {
			r.pl.quote = r.quote
		}
	case *ast.List:
		r.list(n, depth)
	case *ast.HTMLBlock:
		b := r.lines(n)
		if n.HasClosure() {
			b = append(b, n.ClosureLine.Value(r.src)...)
		}
		r.proseBytes(bytes.TrimRight(b, "\n"), true)
	case *east.Table:
		r.table(n)
	default:
		// Unknown block: keep its text.
		if n.Type() == ast.TypeBlock && n.HasChildren() {
			r.blocks(n, depth)
		} else if n.HasChildren() {
			r.inlineBlock(n)
		} else if n.Type() == ast.TypeBlock {
			r.emit(string(bytes.TrimRight(r.lines(n), "\n")), verbatim)
		}
	}
}

// inlineBlock renders the inline content of a paragraph-like block.
func (r *renderer) inlineBlock(n ast.Node) {
	r.drop = r.failedLinks(n)
	r.inlines(n)
	r.drop = nil
}

func (r *renderer) codeBlock(code, lang string) {
	code = strings.TrimRight(code, "\n")
	if strings.TrimSpace(code) == "" {
		return
	}
	r.breakout(func() {
		r.open("pre", "<pre>")
		if lang != "" {
			r.open("code", `<code class="language-`+lang+`">`)
		}
		r.emit(code, verbatim)
		if lang != "" {
			r.close()
		}
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
				r.emit("\n", prose)
			} else {
				r.emit("\n\n", prose)
			}
		}
		r.emit(indent, prose)
		if l.IsOrdered() {
			r.emit(strconv.Itoa(num+i)+". ", prose)
		} else {
			r.emit("• ", prose)
		}
		first := true
		for c := item.FirstChild(); c != nil; c = c.NextSibling() {
			if !first {
				if _, nested := c.(*ast.List); nested || l.IsTight {
					r.emit("\n", prose)
				} else {
					r.emit("\n\n", prose)
				}
				if _, nested := c.(*ast.List); !nested {
					r.emit(indent+"   ", prose)
				}
			}
			first = false
			r.block(c, depth+1)
		}
		i++
	}
}

// table renders a GFM table as aligned monospace text in a pre block. The
// cells are plain text, so links keep their URLs.
func (r *renderer) table(t *east.Table) {
	var rows [][]string
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []string
		for cell := row.FirstChild(); cell != nil; cell = cell.NextSibling() {
			sub := &renderer{src: r.src, last: '\n', pl: &plainOut{noMarks: true}}
			sub.inlineBlock(cell)
			cells = append(cells, string(sub.pl.b))
		}
		// GFM drops cells beyond the header's count; keep their text.
		if raw := r.rawCells(row.Pos()); len(raw) > len(cells) && len(cells) > 0 {
			for _, c := range raw[len(cells):] {
				sub := &renderer{src: r.src, last: '\n', pl: &plainOut{noMarks: true}}
				sub.proseBytes([]byte(c), false)
				cells = append(cells, string(sub.pl.b))
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
	r.codeBlock(b.String(), "")
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

func (r *renderer) inlines(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		r.inline(c)
	}
}

func (r *renderer) inline(n ast.Node) {
	switch n := n.(type) {
	case *ast.Text:
		if n.IsRaw() {
			r.emit(string(n.Segment.Value(r.src)), verbatim)
		} else {
			r.prose(r.src, n.Segment.Start, n.Segment.Stop, false, r.drop)
		}
		if n.HardLineBreak() || n.SoftLineBreak() {
			r.emit("\n", prose)
		}
	case *ast.String:
		if n.IsRaw() || n.IsCode() {
			r.emit(string(n.Value), verbatim)
		} else {
			r.proseBytes(n.Value, false)
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
			r.emit(string(b), verbatim) // code may not nest in these: keep the text.
			return
		}
		r.breakout(func() {
			r.open("code", "<code>")
			r.emit(string(b), verbatim)
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
		r.link(n.Destination, func() { r.inlines(n) }, n.Title, false)
	case *ast.Image:
		label := func() {
			if n.HasChildren() {
				r.inlines(n)
			} else {
				r.emit("image", prose)
			}
		}
		r.link(n.Destination, label, n.Title, false)
	case *ast.AutoLink:
		label := n.Label(r.src)
		dest := n.URL(r.src)
		if n.AutoLinkType == ast.AutoLinkEmail && !bytes.HasPrefix(bytes.ToLower(dest), []byte("mailto:")) {
			dest = append([]byte("mailto:"), dest...)
		}
		r.link(dest, func() { r.emit(string(label), urlText) }, nil, true)
	case *ast.RawHTML:
		for i := range n.Segments.Len() {
			seg := n.Segments.At(i)
			r.prose(r.src, seg.Start, seg.Stop, true, r.drop)
		}
	default:
		r.inlines(n)
	}
}

// link writes <a href> when the destination is an absolute URL Telegram
// accepts and links may nest here; otherwise "label (url)". The plain text
// always has "label (url)", or the URL once when the label is the URL (an
// autolink or a bare URL). An empty label is replaced by the destination.
func (r *renderer) link(dest []byte, label func(), title []byte, auto bool) {
	u := resolveURL(dest)
	start := r.buf.Len()
	var pstart int
	if r.pl != nil {
		pstart = len(r.pl.b)
	}
	labelText := func() string { return strings.TrimSpace(PlainText(string(r.buf.Bytes()[start:]))) }
	nested := r.inside("a") || r.inside("blockquote")
	switch {
	case u == "" && len(bytes.TrimSpace(dest)) == 0:
		label()
	case u == "":
		// Not a URL Telegram links (relative, javascript:, spaces): keep it as text.
		label()
		d := resolveDest(dest)
		if labelText() == "" {
			r.emit(d, urlText)
			break
		}
		r.emit(" (", prose)
		r.emit(d, urlText)
		r.emit(")", prose)
	case auto:
		if !nested {
			r.open("a", `<a href="`+escapeString(u)+`">`)
		}
		label()
		if !nested {
			r.close()
		}
	default:
		if !nested {
			r.open("a", `<a href="`+escapeString(u)+`">`)
		}
		label()
		lt := labelText()
		switch {
		case lt == "":
			r.emit(u, urlText)
		case sameURL(lt, u):
			if r.pl != nil {
				r.pl.markURL(pstart)
			}
		case nested:
			r.emit(" (", prose)
			r.emit(u, urlText)
			r.emit(")", prose)
		}
		if !nested {
			r.close()
			if lt != "" && !sameURL(lt, u) {
				r.plainOnly(" (", prose)
				r.plainOnly(u, urlText)
				r.plainOnly(")", prose)
			}
		}
	}
	if len(title) > 0 {
		r.emit(" (", prose)
		r.proseBytes(title, false)
		r.emit(")", prose)
	}
}

// sameURL reports whether a link's visible label already is its URL.
func sameURL(label, u string) bool {
	return label == u || "mailto:"+label == u
}

// resolveURL returns the unescaped destination when its scheme is one
// Telegram links accept (http, https, tg, mailto), else "".
func resolveURL(dest []byte) string {
	u := resolveDest(dest)
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

// resolveDest resolves backslash escapes and entity references in a link
// destination and trims it.
func resolveDest(dest []byte) string {
	var b bytes.Buffer
	b.Write(util.UnescapePunctuations(dest))
	return strings.TrimSpace(string(util.ResolveEntityNames(util.ResolveNumericReferences(b.Bytes()))))
}

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

// Escape escapes s for Telegram HTML text or attribute values using only the
// entities Telegram supports.
func Escape(s string) string { return escaper.Replace(s) }

func escapeString(s string) string { return escaper.Replace(s) }

// trimLeftLen is the length of s's leading white space, as TrimSpace cuts.
func trimLeftLen(s []byte) int {
	return len(s) - len(bytes.TrimLeftFunc(s, unicode.IsSpace))
}
