package tgmd

import (
	"strconv"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/util"
)

// prose writes the text src[start:stop] (a Text segment, or a raw HTML
// segment when raw is set): backslash escapes and entity references are
// resolved (unless raw), and the Markdown syntax goldmark left as text is
// dropped by the rules in the package comment. drop holds the offsets in
// src of the "[" and "!" of failed links.
func (r *renderer) prose(src []byte, start, stop int, raw bool, drop map[int]bool) {
	from := start // src[from:i] is ordinary text not yet written
	flushTo := func(i int) {
		if i > from {
			r.emit(string(src[from:i]), prose)
		}
	}
	for i := start; i < stop; {
		c := src[i]
		switch {
		case !raw && c == '\\' && i+1 < stop && util.IsPunct(src[i+1]):
			flushTo(i)
			r.literal(string(src[i+1 : i+2]))
			i += 2
			from = i
		case !raw && c == '&':
			s, n := entityAt(src[i:stop])
			if n == 0 {
				i++
				continue
			}
			flushTo(i)
			r.literal(s)
			i += n
			from = i
		case c == 0:
			flushTo(i)
			r.emit("\uFFFD", prose)
			i++
			from = i
		case c == '*' || c == '_' || c == '~' || c == '`':
			j := i
			for j < stop && src[j] == c {
				j++
			}
			flushTo(i)
			if keepRun(src, i, j, raw) {
				r.literal(string(c))
			}
			i = j
			from = i
		case (c == '[' || c == '!') && drop[i]:
			flushTo(i)
			i++
			from = i
		case c == ']' && i+1 < len(src) && src[i+1] == '(':
			flushTo(i)
			r.emit(" ", prose)
			i++
			from = i
		case c == '(':
			flushTo(i)
			from = i
			if r.last == ']' {
				r.emit(" ", prose)
			}
			i++
		default:
			i++
		}
	}
	flushTo(stop)
}

// proseBytes writes b, which is not a slice of the source, as prose.
func (r *renderer) proseBytes(b []byte, raw bool) {
	sc := bracketScanner{src: b}
	sc.scan(0, len(b), raw)
	r.prose(b, 0, len(b), raw, sc.drop)
}

// keepRun decides whether the run of one delimiter character src[i:j],
// which goldmark left as text, is a literal worth keeping. It looks at the
// whole run in the source, as goldmark did when it scanned the delimiter.
func keepRun(src []byte, i, j int, raw bool) bool {
	c := src[i]
	if c == '`' {
		return false
	}
	rs, re := i, j
	for rs > 0 && src[rs-1] == c && (raw || !escapedAt(src, rs-1)) {
		rs--
	}
	for re < len(src) && src[re] == c {
		re++
	}
	if re-rs >= 2 {
		return false
	}
	if c == '~' {
		return true
	}
	before, after := '\n', '\n'
	if rs > 0 {
		before, _ = utf8.DecodeLastRune(src[:rs])
	}
	if re < len(src) {
		after, _ = utf8.DecodeRune(src[re:])
	}
	left, right := flanking(before, after)
	return left == right
}

// flanking reports whether a delimiter run between before and after is
// left- and right-flanking (https://spec.commonmark.org/0.31.2/#left-flanking-delimiter-run),
// as goldmark's parser.ScanDelimiter computes it.
func flanking(before, after rune) (left, right bool) {
	bp, bw := util.IsPunctRune(before), util.IsSpaceRune(before)
	ap, aw := util.IsPunctRune(after), util.IsSpaceRune(after)
	left = !aw && (!ap || bw || bp)
	right = !bw && (!bp || aw || ap)
	return left, right
}

// escapedAt reports whether src[k] is backslash-escaped.
func escapedAt(src []byte, k int) bool {
	n := 0
	for k-1-n >= 0 && src[k-1-n] == '\\' {
		n++
	}
	return n%2 == 1
}

// entityAt resolves the entity reference at the start of b (b[0] is '&')
// the way goldmark's HTML writer does, returning its characters and length,
// or n == 0 when b does not start with one.
func entityAt(b []byte) (s string, n int) {
	if len(b) > 2 && b[1] == '#' {
		base, digits := 10, 2
		if b[2] == 'x' || b[2] == 'X' {
			base, digits = 16, 3
		}
		j := digits
		for j < len(b) && (base == 16 && util.IsHexDecimal(b[j]) || base == 10 && util.IsNumeric(b[j])) {
			j++
		}
		if j == digits || j >= len(b) || b[j] != ';' || base == 16 && j-digits >= 7 || base == 10 && j-digits >= 8 {
			return "", 0
		}
		v, _ := strconv.ParseUint(string(b[digits:j]), base, 32)
		return string(util.ToValidRune(rune(v))), j + 1
	}
	j := 1
	for j < len(b) && util.IsAlphaNumeric(b[j]) {
		j++
	}
	if j == 1 || j >= len(b) || b[j] != ';' {
		return "", 0
	}
	e, ok := util.LookUpHTML5EntityByName(string(b[1:j]))
	if !ok {
		return "", 0
	}
	return string(e.Characters), j + 1
}

// failedLinks finds, in the text of the inline block n, each "[label](x)"
// that did not parse as a link, and returns the offsets of its "[" (and of
// an image's "!") so that prose drops them.
func (r *renderer) failedLinks(n ast.Node) map[int]bool {
	sc := bracketScanner{src: r.src}
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.CodeSpan, *ast.AutoLink:
			return ast.WalkSkipChildren, nil
		case *ast.Text:
			if !c.IsRaw() {
				sc.scan(c.Segment.Start, c.Segment.Stop, false)
			}
		case *ast.RawHTML:
			for i := range c.Segments.Len() {
				seg := c.Segments.At(i)
				sc.scan(seg.Start, seg.Stop, true)
			}
		}
		return ast.WalkContinue, nil
	})
	return sc.drop
}

// bracketScanner pairs unescaped brackets across the text segments of a
// block, in source order.
type bracketScanner struct {
	src   []byte
	opens []int
	drop  map[int]bool
}

func (sc *bracketScanner) scan(start, stop int, raw bool) {
	src := sc.src
	for i := start; i < stop; i++ {
		switch c := src[i]; {
		case !raw && c == '\\' && i+1 < stop && util.IsPunct(src[i+1]):
			i++
		case c == '[':
			sc.opens = append(sc.opens, i)
		case c == ']':
			if len(sc.opens) == 0 {
				continue
			}
			o := sc.opens[len(sc.opens)-1]
			sc.opens = sc.opens[:len(sc.opens)-1]
			if i+1 < len(src) && src[i+1] == '(' {
				if sc.drop == nil {
					sc.drop = map[int]bool{}
				}
				sc.drop[o] = true
				if o > 0 && src[o-1] == '!' && (raw || !escapedAt(src, o-1)) {
					sc.drop[o-1] = true
				}
			}
		}
	}
}
