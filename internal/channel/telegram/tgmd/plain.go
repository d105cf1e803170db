package tgmd

import (
	"html"
	"sort"
	"strings"
	"unicode/utf8"
)

// quotePrefix starts every plain-text line inside a blockquote.
const quotePrefix = "│ "

// plainOut is the plain text a renderer writes alongside the HTML.
type plainOut struct {
	b []byte
	// marks pair offsets in the HTML with offsets in b: everything written
	// before marks[i].h in the HTML is written before marks[i].p here.
	marks     []mark
	spans     []span // code and URL runs of b, in order
	noMarks   bool
	quote     int // blockquote depth
	lineStart bool
}

type mark struct{ h, p int }

// span is a run of b that is not prose: code or a URL.
type span struct {
	start, end int
	url        bool
}

func (o *plainOut) mark(h int) {
	if o.noMarks {
		return
	}
	p := len(o.b)
	if n := len(o.marks); n > 0 && o.marks[n-1] == (mark{h, p}) {
		return
	}
	o.marks = append(o.marks, mark{h, p})
}

// write appends s, one rune, of kind k.
func (o *plainOut) write(s string, k kind) {
	if o.lineStart && o.quote > 0 && s != "\n" {
		o.b = append(o.b, quotePrefix...)
	}
	o.lineStart = s == "\n"
	start := len(o.b)
	o.b = append(o.b, s...)
	if k == prose {
		return
	}
	url := k == urlText
	if n := len(o.spans); n > 0 && o.spans[n-1].end == start && o.spans[n-1].url == url {
		o.spans[n-1].end = len(o.b)
		return
	}
	o.spans = append(o.spans, span{start, len(o.b), url})
}

// markURL makes b[from:] one URL span.
func (o *plainOut) markURL(from int) {
	for len(o.spans) > 0 && o.spans[len(o.spans)-1].start >= from {
		o.spans = o.spans[:len(o.spans)-1]
	}
	if len(o.b) > from {
		o.spans = append(o.spans, span{from, len(o.b), true})
	}
}

// at maps an offset in the HTML to the plain text written before it.
func (o *plainOut) at(h int) int {
	i := sort.Search(len(o.marks), func(i int) bool { return o.marks[i].h > h }) - 1
	if i < 0 {
		return 0
	}
	return o.marks[i].p
}

// Reply is a Markdown reply ready to send: Telegram HTML messages and, in
// case Telegram refuses one, the same content as plain text.
type Reply struct {
	// HTML holds the messages for parse_mode HTML, each with at most limit
	// UTF-16 units of visible text (see Chunk).
	HTML  []string
	plain string
	from  []int  // offset in plain of the content of HTML[k]
	urls  []span // URL runs of plain
	limit int
}

// Prepare renders markdown once into HTML messages (exactly
// Chunk(Render(markdown), limit)) and the matching plain text (Plain).
func Prepare(markdown string, limit int) *Reply {
	limit = max(limit, 16)
	r := render(markdown, true)
	hl := trimLeftLen(r.buf.Bytes())
	pl := trimLeftLen(r.pl.b)
	rep := &Reply{plain: strings.TrimSpace(string(r.pl.b)), limit: limit}
	clamp := func(p int) int { return min(max(p-pl, 0), len(rep.plain)) }
	for _, s := range r.pl.spans {
		if s := (span{clamp(s.start), clamp(s.end), s.url}); s.url && s.end > s.start {
			rep.urls = append(rep.urls, s)
		}
	}
	var starts []int
	rep.HTML, starts = chunk(strings.TrimSpace(r.buf.String()), limit)
	for k, h := range starts {
		p := 0
		if k > 0 {
			p = max(rep.urlStart(clamp(r.pl.at(h+hl))), rep.from[k-1])
		}
		rep.from = append(rep.from, p)
	}
	return rep
}

// urlStart moves p to the start of the URL it falls inside, if any.
func (r *Reply) urlStart(p int) int {
	if s, ok := spanAt(r.urls, p); ok {
		return s.start
	}
	return p
}

// spanAt finds the span with start < p < end.
func spanAt(spans []span, p int) (span, bool) {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].end > p })
	if i < len(spans) && spans[i].start < p {
		return spans[i], true
	}
	return span{}, false
}

// PlainFrom returns plain-text messages carrying the content of HTML[k:]:
// what to send instead when Telegram refuses HTML[k]. Each has at most the
// limit's UTF-16 units; cuts prefer blank lines, then line ends, then
// spaces, and fall inside a URL only when the URL alone is over the limit.
func (r *Reply) PlainFrom(k int) []string {
	if k < 0 || k >= len(r.from) {
		return nil
	}
	return chunkPlain(r.plain, r.from[k], r.urls, r.limit)
}

// chunkPlain splits s[start:] into pieces of at most limit UTF-16 units.
func chunkPlain(s string, start int, urls []span, limit int) []string {
	var out []string
	add := func(p string) {
		p = strings.TrimLeft(strings.TrimRight(p, " \t\r\n"), "\r\n")
		if strings.TrimSpace(p) != "" {
			out = append(out, p)
		}
	}
	for start < len(s) {
		type cand struct{ at, next, units int }
		var cands [4]cand // by priority: any rune, space, line end, blank line
		var ok [4]bool
		units, end := 0, len(s)
		for i := start; i < len(s); {
			c, n := utf8.DecodeRuneInString(s[i:])
			u := 1
			if c > 0xFFFF {
				u = 2
			}
			if i > start {
				if _, in := spanAt(urls, i); !in {
					prio, next := 0, i
					switch {
					case c == '\n' && strings.HasPrefix(s[i:], "\n\n"):
						prio, next = 3, i+1
					case c == '\n':
						prio, next = 2, i+1
					case c == ' ':
						prio, next = 1, i+1
					}
					cands[prio], ok[prio] = cand{i, next, units}, true
				}
			}
			if units+u > limit {
				end = i
				break
			}
			units += u
			i += n
		}
		if end == len(s) {
			add(s[start:])
			break
		}
		cut, found := cand{end, end, units}, false
		for p := 3; p >= 0 && !found; p-- {
			if ok[p] && cands[p].units >= limit/2 {
				cut, found = cands[p], true
			}
		}
		for p := 3; p >= 0 && !found; p-- {
			if ok[p] {
				cut, found = cands[p], true
			}
		}
		add(s[start:cut.at])
		start = cut.next
	}
	return out
}

// PlainFromHTML is the plain text of Telegram HTML for sending without a
// parse mode: tags are stripped, entities resolved, and a link whose label
// is not its URL is written "label (url)".
func PlainFromHTML(s string) string {
	var b strings.Builder
	type link struct {
		href string
		at   int
	}
	var links []link
	for i := 0; i < len(s); {
		switch s[i] {
		case '<':
			if j := strings.IndexByte(s[i:], '>'); j > 0 {
				t := s[i : i+j+1]
				i += j + 1
				switch {
				case strings.HasPrefix(t, "</"):
					if tagName(t[2:]) == "a" && len(links) > 0 {
						l := links[len(links)-1]
						links = links[:len(links)-1]
						label := strings.TrimSpace(b.String()[l.at:])
						switch {
						case l.href == "" || sameURL(label, l.href):
						case label == "":
							b.WriteString(l.href)
						default:
							b.WriteString(" (" + l.href + ")")
						}
					}
				case tagName(t[1:]) == "a":
					links = append(links, link{hrefOf(t), b.Len()})
				}
				continue
			}
		case '&':
			if j := strings.IndexByte(s[i:], ';'); j > 0 && j <= 12 {
				b.WriteString(html.UnescapeString(s[i : i+j+1]))
				i += j + 1
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// hrefOf returns the href attribute of an <a> start tag.
func hrefOf(t string) string {
	_, v, ok := strings.Cut(t, `href="`)
	if !ok {
		return ""
	}
	v, _, _ = strings.Cut(v, `"`)
	return html.UnescapeString(v)
}
