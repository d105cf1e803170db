package tgmd

import (
	"html"
	"strings"
	"unicode/utf8"
)

// MaxChunk is the default chunk size in UTF-16 code units of visible text;
// Telegram's limit for a message is 4096 after entity parsing
// (https://core.telegram.org/bots/api#sendmessage), and we keep a margin.
const MaxChunk = 4000

type atomKind int

const (
	atomText atomKind = iota // one rune
	atomEntity
	atomOpen
	atomClose
)

// atom is one rune, entity or tag of the HTML, by byte offsets; it holds no
// pointers so large replies tokenize cheaply.
type atom struct {
	start, end int32
	kind       atomKind
	units      uint8 // visible UTF-16 units
	tag        tagID // for open and close tags
	ch         byte  // the byte of a one-byte text atom, else 0
}

type tagID uint8

const (
	tagOther tagID = iota
	tagPre
	tagCode
	tagBlockquote
	tagA
)

func tagIDOf(name string) tagID {
	switch name {
	case "pre":
		return tagPre
	case "code":
		return tagCode
	case "blockquote":
		return tagBlockquote
	case "a":
		return tagA
	}
	return tagOther
}

// tokenize splits Telegram HTML into runes, entities and tags. It trusts its
// input to be well formed (Render's output); unterminated tags or entities
// are treated as text.
func tokenize(s string) []atom {
	atoms := make([]atom, 0, len(s))
	for i := 0; i < len(s); {
		switch s[i] {
		case '<':
			if j := strings.IndexByte(s[i:], '>'); j > 0 {
				t := s[i : i+j+1]
				a := atom{start: int32(i), end: int32(i + j + 1), kind: atomOpen}
				if strings.HasPrefix(t, "</") {
					a.kind, a.tag = atomClose, tagIDOf(tagName(t[2:]))
				} else {
					a.tag = tagIDOf(tagName(t[1:]))
				}
				atoms = append(atoms, a)
				i += j + 1
				continue
			}
		case '&':
			if j := strings.IndexByte(s[i:], ';'); j > 0 && j <= 12 {
				atoms = append(atoms, atom{start: int32(i), end: int32(i + j + 1), kind: atomEntity, units: uint8(entityUnits(s[i : i+j+1]))})
				i += j + 1
				continue
			}
		}
		a := atom{start: int32(i), kind: atomText, units: 1}
		if c := s[i]; c < utf8.RuneSelf {
			a.ch = c
			i++
		} else {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r > 0xFFFF {
				a.units = 2
			}
			i += n
		}
		a.end = int32(i)
		atoms = append(atoms, a)
	}
	return atoms
}

func tagName(s string) string {
	end := strings.IndexAny(s, " >/\t\n")
	if end < 0 {
		end = len(s)
	}
	n := s[:end]
	for i := 0; i < len(n); i++ {
		if n[i] >= 'A' && n[i] <= 'Z' {
			return strings.ToLower(n)
		}
	}
	return n
}

// entityUnits is the UTF-16 length of the character an entity stands for.
func entityUnits(e string) int {
	switch e {
	case "&lt;", "&gt;", "&amp;", "&quot;":
		return 1
	}
	return UTF16Len(html.UnescapeString(e))
}

// UTF16Len returns the length of s in UTF-16 code units, the unit Telegram
// uses for message lengths and entity offsets.
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		if r > 0xFFFF {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// PlainText strips the tags from Telegram HTML and resolves its entities:
// the text a user sees, without any Markdown syntax.
func PlainText(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		switch s[i] {
		case '<':
			if j := strings.IndexByte(s[i:], '>'); j > 0 {
				i += j + 1
				continue
			}
		case '&':
			if j := strings.IndexByte(s[i:], ';'); j > 0 && j <= 12 {
				b.WriteString(html.UnescapeString(s[i : i+j+1]))
				i += j + 1
				continue
			}
		}
		j := strings.IndexAny(s[i+1:], "<&")
		if j < 0 {
			b.WriteString(s[i:])
			break
		}
		b.WriteString(s[i : i+1+j])
		i += 1 + j
	}
	return b.String()
}

type candidate struct {
	idx   int    // the chunk ends before atoms[idx]
	next  int    // the next chunk starts at atoms[next]
	units int    // visible units in the chunk if cut here
	stack []atom // open tags at idx
	ok    bool
}

// Chunk splits Telegram HTML into pieces of at most limit UTF-16 code units
// of visible text (Telegram counts UTF-16). Cuts never fall inside a tag or
// an entity; each piece closes the tags open at its end and the next re-opens
// them, so every piece is valid on its own. A pre block that fits in one
// piece is never cut; a longer one is cut at line ends into several closed
// pre blocks. Cuts prefer paragraph breaks, then line breaks, then spaces.
// Pieces with no visible text are dropped. limit < 16 is raised to 16.
func Chunk(s string, limit int) []string {
	chunks, _ := chunk(s, limit)
	return chunks
}

// chunk is Chunk, also returning where in s the content of each piece
// starts (the re-opened tags aside).
func chunk(s string, limit int) (chunks []string, starts []int) {
	limit = max(limit, 16)
	atoms := tokenize(s)
	// preLen[i] is the visible length of the pre element opened at atoms[i].
	smallPre := make([]bool, len(atoms)) // atoms inside a pre that fits in a chunk
	for i := 0; i < len(atoms); i++ {
		if atoms[i].kind != atomOpen || atoms[i].tag != tagPre {
			continue
		}
		units, depth, j := 0, 0, i
		for ; j < len(atoms); j++ {
			a := atoms[j]
			if a.kind == atomOpen && a.tag == tagPre {
				depth++
			} else if a.kind == atomClose && a.tag == tagPre {
				depth--
				if depth == 0 {
					break
				}
			}
			units += int(a.units)
		}
		if units <= limit {
			for k := i + 1; k <= j && k < len(atoms); k++ {
				smallPre[k] = true
			}
		}
	}

	start := 0
	var reopen []atom
	add := func(body, open []atom) {
		n := len(chunks)
		chunks = appendChunk(chunks, s, reopen, body, open)
		if len(chunks) > n {
			starts = append(starts, int(atoms[start].start))
		}
	}
	for start < len(atoms) {
		stack := append([]atom(nil), reopen...)
		var cands [5]candidate
		var fallback candidate
		units := 0
		end := -1
		for j := start; j < len(atoms); j++ {
			a := atoms[j]
			if j > start && !smallPre[j] {
				inPre := hasOpen(stack, tagPre)
				inCode := inPre || hasOpen(stack, tagCode)
				c := candidate{idx: j, next: j, units: units, stack: stack, ok: true}
				prio := -1
				switch {
				case a.kind == atomText && a.ch == '\n' && !inPre:
					c.next = j + 1
					prio = 3
					if j+1 < len(atoms) && atoms[j+1].ch == '\n' {
						prio = 4
					}
				case a.kind == atomOpen && (a.tag == tagPre || a.tag == tagBlockquote):
					prio = 3
				case a.kind == atomText && a.ch == '\n' && inPre:
					c.next = j + 1
					prio = 2
				case a.kind == atomText && a.ch == ' ' && !inCode:
					c.next = j + 1
					prio = 1
				case a.kind == atomText || a.kind == atomEntity:
					prio = 0
				}
				if prio >= 0 {
					cands[prio] = c
				}
				fallback = c
			}
			if units+int(a.units) > limit {
				end = j
				break
			}
			units += int(a.units)
			// stack is never modified in place: candidates share it.
			switch a.kind {
			case atomOpen:
				stack = append(stack[:len(stack):len(stack)], a)
			case atomClose:
				if len(stack) > 0 {
					stack = stack[: len(stack)-1 : len(stack)-1]
				}
			}
		}
		if end < 0 {
			add(atoms[start:], nil)
			break
		}
		cut := fallback
		found := false
		for p := 4; p >= 0 && !found; p-- {
			if cands[p].ok && cands[p].units >= limit/2 {
				cut, found = cands[p], true
			}
		}
		for p := 4; p >= 0 && !found; p-- {
			if cands[p].ok {
				cut, found = cands[p], true
			}
		}
		if !cut.ok { // cannot happen with limit >= 16; guard against a loop
			cut = candidate{idx: end, next: end, stack: stack, ok: true}
		}
		add(atoms[start:cut.idx], cut.stack)
		start = cut.next
		reopen = cut.stack
		// Leading blank lines of a piece outside pre carry nothing.
		for start < len(atoms) && atoms[start].ch == '\n' && !hasOpen(reopen, tagPre) {
			start++
		}
	}
	return chunks, starts
}

func hasOpen(stack []atom, tag tagID) bool {
	for _, a := range stack {
		if a.tag == tag {
			return true
		}
	}
	return false
}

func appendChunk(chunks []string, src string, reopen, body, open []atom) []string {
	visible := false
	for _, a := range body {
		if a.kind == atomEntity || a.kind == atomText && a.ch != ' ' && a.ch != '\n' && a.ch != '\t' && a.ch != '\r' {
			visible = true
			break
		}
	}
	if !visible {
		return chunks
	}
	var b strings.Builder
	for _, a := range reopen {
		b.WriteString(src[a.start:a.end])
	}
	if len(body) > 0 {
		b.WriteString(src[body[0].start:body[len(body)-1].end])
	}
	for i := len(open) - 1; i >= 0; i-- {
		b.WriteString("</" + tagName(src[open[i].start+1:open[i].end]) + ">")
	}
	out := removeEmptyPairs(b.String())
	return append(chunks, strings.TrimRightFunc(out, func(r rune) bool { return r == '\n' || r == ' ' }))
}

// removeEmptyPairs drops elements with no content, such as "<b></b>" left
// behind by re-opening tags around a cut.
func removeEmptyPairs(s string) string {
	if !strings.Contains(s, "></") {
		return s
	}
	// out holds the result; opens records, for each open tag still without
	// content, its name and where it starts in out.
	type open struct {
		name string
		at   int
	}
	out := make([]byte, 0, len(s))
	var opens []open
	empty := false // nothing written since the last open tag
	for i := 0; i < len(s); {
		if s[i] == '<' {
			if j := strings.IndexByte(s[i:], '>'); j > 0 {
				t := s[i : i+j+1]
				i += j + 1
				if strings.HasPrefix(t, "</") {
					name := tagName(t[2:])
					if empty && len(opens) > 0 && opens[len(opens)-1].name == name {
						out = out[:opens[len(opens)-1].at]
						opens = opens[:len(opens)-1]
						// The parent is empty again only if the pair was its
						// first content.
						empty = len(opens) > 0 && len(out) == opens[len(opens)-1].at+openLen(out, opens[len(opens)-1].at)
						continue
					}
					if len(opens) > 0 {
						opens = opens[:len(opens)-1]
					}
					out = append(out, t...)
					empty = false
					continue
				}
				opens = append(opens, open{tagName(t[1:]), len(out)})
				out = append(out, t...)
				empty = true
				continue
			}
		}
		out = append(out, s[i])
		i++
		empty = false
	}
	return string(out)
}

// openLen returns the length of the open tag starting at out[at].
func openLen(out []byte, at int) int {
	if j := strings.IndexByte(string(out[at:]), '>'); j >= 0 {
		return j + 1
	}
	return 0
}
