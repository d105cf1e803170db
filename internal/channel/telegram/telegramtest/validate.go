package telegramtest

import (
	"errors"
	"fmt"
	"html"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxMessageUnits is Telegram's sendMessage text limit: 4096 UTF-16 code
// units after entity parsing (https://core.telegram.org/bots/api#sendmessage).
const MaxMessageUnits = 4096

// ErrParseEntities prefixes every HTML error, as Telegram's description
// "Bad Request: can't parse entities: ..." does.
var ErrParseEntities = errors.New("Bad Request: can't parse entities")

// ValidateHTML checks s the way Telegram checks text sent with
// parse_mode=HTML (https://core.telegram.org/bots/api#html-style), and
// returns the visible text. It rejects unknown tags and attributes, end tags
// that do not match, unclosed tags, a bare < or &, entities other than
// &lt; &gt; &amp; &quot; and numeric ones, nesting the Bot API forbids
// (anything inside code or pre except pre>code, pre or code inside another
// entity, a or blockquote nested in a or blockquote), links without an
// absolute http(s)/tg/mailto URL, invalid UTF-8, empty text and text longer
// than 4096 UTF-16 units.
func ValidateHTML(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", errors.New("Bad Request: text must be encoded in UTF-8")
	}
	fail := func(format string, a ...any) (string, error) {
		return "", fmt.Errorf("%w: %s", ErrParseEntities, fmt.Sprintf(format, a...))
	}
	type open struct {
		name     string
		textSeen bool // visible text or a tag since it opened
	}
	var stack []open
	has := func(names ...string) bool {
		for _, o := range stack {
			for _, n := range names {
				if o.name == n {
					return true
				}
			}
		}
		return false
	}
	var text strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		switch c {
		case '<':
			end := strings.IndexByte(s[i:], '>')
			if end < 0 {
				return fail("Unclosed start tag at byte offset %d", i)
			}
			raw := s[i+1 : i+end]
			if strings.HasPrefix(raw, "/") {
				name := strings.ToLower(strings.TrimSpace(raw[1:]))
				if len(stack) == 0 {
					return fail("Unexpected end tag at byte offset %d", i)
				}
				top := stack[len(stack)-1]
				if canonical(name) != top.name {
					return fail("Unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", i, top.name, name)
				}
				stack = stack[:len(stack)-1]
				i += end + 1
				continue
			}
			name, attrs, err := parseTag(raw)
			if err != nil {
				return fail("%s at byte offset %d", err, i)
			}
			cn := canonical(name)
			if cn == "" {
				return fail("Unsupported start tag \"%s\" at byte offset %d", name, i)
			}
			if err := checkAttrs(cn, name, attrs); err != nil {
				return fail("%s at byte offset %d", err, i)
			}
			if len(stack) > 0 {
				top := &stack[len(stack)-1]
				switch {
				case top.name == "pre" && cn == "code" && !top.textSeen && len(stack) == 1:
				case has("pre", "code"):
					return fail("Can't nest \"%s\" inside pre or code at byte offset %d", name, i)
				case cn == "pre":
					return fail("pre must not be nested at byte offset %d", i)
				case cn == "code" && has("b", "i", "u", "s", "tg-spoiler", "a", "blockquote", "tg-emoji"):
					return fail("code must not be nested at byte offset %d", i)
				case (cn == "a" || cn == "tg-emoji" || cn == "blockquote") && has("a", "blockquote", "tg-emoji"):
					return fail("\"%s\" must not be nested at byte offset %d", name, i)
				}
				top.textSeen = true
			}
			if _, ok := attrs["class"]; cn == "code" && ok && (len(stack) == 0 || stack[len(stack)-1].name != "pre") {
				return fail("Language class is allowed only on code inside pre at byte offset %d", i)
			}
			stack = append(stack, open{name: cn})
			i += end + 1
		case '&':
			end := strings.IndexByte(s[i:], ';')
			if end < 0 || end > 12 {
				return fail("Character entity expected at byte offset %d", i)
			}
			ent := s[i : i+end+1]
			r, ok := entity(ent)
			if !ok {
				return fail("Unsupported HTML entity \"%s\" at byte offset %d", ent, i)
			}
			text.WriteRune(r)
			if len(stack) > 0 {
				stack[len(stack)-1].textSeen = true
			}
			i += end + 1
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			text.WriteRune(r)
			if len(stack) > 0 {
				stack[len(stack)-1].textSeen = true
			}
			i += n
		}
	}
	if len(stack) > 0 {
		return fail("Can't find end tag corresponding to start tag \"%s\"", stack[len(stack)-1].name)
	}
	out := text.String()
	if strings.TrimSpace(out) == "" {
		return "", errors.New("Bad Request: message text is empty")
	}
	if n := utf16Len(out); n > MaxMessageUnits {
		return "", fmt.Errorf("Bad Request: message is too long (%d UTF-16 units)", n)
	}
	return out, nil
}

// canonical maps Telegram's tag aliases to one name; "" means unsupported.
func canonical(name string) string {
	switch name {
	case "b", "strong":
		return "b"
	case "i", "em":
		return "i"
	case "u", "ins":
		return "u"
	case "s", "strike", "del":
		return "s"
	case "tg-spoiler", "span":
		return "tg-spoiler"
	case "a", "code", "pre", "blockquote", "tg-emoji":
		return name
	}
	return ""
}

func parseTag(raw string) (string, map[string]string, error) {
	if raw == "" {
		return "", nil, errors.New("Empty tag")
	}
	n := 0
	for n < len(raw) && (raw[n] >= 'a' && raw[n] <= 'z' || raw[n] >= 'A' && raw[n] <= 'Z' || raw[n] >= '0' && raw[n] <= '9' || raw[n] == '-') {
		n++
	}
	if n == 0 {
		return "", nil, errors.New("Expected tag name")
	}
	name := strings.ToLower(raw[:n])
	attrs := map[string]string{}
	rest := raw[n:]
	for {
		rest = strings.TrimLeft(rest, " \t\n")
		if rest == "" || rest == "/" {
			return name, attrs, nil
		}
		k := 0
		for k < len(rest) && rest[k] != '=' && rest[k] != ' ' && rest[k] != '\t' && rest[k] != '\n' {
			k++
		}
		key := strings.ToLower(rest[:k])
		rest = rest[k:]
		if !strings.HasPrefix(rest, "=") {
			attrs[key] = ""
			continue
		}
		rest = rest[1:]
		var val string
		switch {
		case strings.HasPrefix(rest, `"`) || strings.HasPrefix(rest, "'"):
			q := rest[:1]
			e := strings.Index(rest[1:], q)
			if e < 0 {
				return "", nil, errors.New("Unclosed attribute value")
			}
			val = rest[1 : 1+e]
			rest = rest[2+e:]
		default:
			e := strings.IndexAny(rest, " \t\n")
			if e < 0 {
				e = len(rest)
			}
			val = rest[:e]
			rest = rest[e:]
		}
		if strings.Contains(val, "<") {
			return "", nil, errors.New("Unescaped < in attribute value")
		}
		if strings.Contains(val, "&") {
			for j := 0; j < len(val); j++ {
				if val[j] != '&' {
					continue
				}
				e := strings.IndexByte(val[j:], ';')
				if e < 0 {
					return "", nil, errors.New("Character entity expected in attribute value")
				}
				if _, ok := entity(val[j : j+e+1]); !ok {
					return "", nil, fmt.Errorf("Unsupported HTML entity %q in attribute value", val[j:j+e+1])
				}
			}
		}
		attrs[key] = html.UnescapeString(val)
	}
}

func checkAttrs(cn, name string, attrs map[string]string) error {
	for k, v := range attrs {
		switch {
		case cn == "a" && k == "href":
			if !validURL(v) {
				return fmt.Errorf("Wrong URL %q in link", v)
			}
		case cn == "code" && k == "class":
			if !strings.HasPrefix(v, "language-") || len(v) == len("language-") {
				return fmt.Errorf("Unsupported class %q on code", v)
			}
		case cn == "tg-spoiler" && name == "span" && k == "class" && v == "tg-spoiler":
		case cn == "tg-emoji" && k == "emoji-id":
		case cn == "blockquote" && k == "expandable":
		default:
			return fmt.Errorf("Unsupported attribute %q on \"%s\"", k, name)
		}
	}
	if cn == "a" {
		if _, ok := attrs["href"]; !ok {
			return errors.New("Link without href")
		}
	}
	if name == "span" && attrs["class"] != "tg-spoiler" {
		return errors.New("Unsupported span")
	}
	return nil
}

func validURL(u string) bool {
	l := strings.ToLower(u)
	for _, p := range []string{"http://", "https://", "tg://", "mailto:"} {
		if strings.HasPrefix(l, p) && len(u) > len(p) && !strings.ContainsAny(u, " \n\t") {
			return true
		}
	}
	return false
}

// entity resolves one of the entities Telegram accepts.
func entity(e string) (rune, bool) {
	switch e {
	case "&lt;":
		return '<', true
	case "&gt;":
		return '>', true
	case "&amp;":
		return '&', true
	case "&quot;":
		return '"', true
	}
	if !strings.HasPrefix(e, "&#") || len(e) < 4 {
		return 0, false
	}
	num := e[2 : len(e)-1]
	base := 10
	if num[0] == 'x' || num[0] == 'X' {
		num, base = num[1:], 16
	}
	v, err := strconv.ParseUint(num, base, 32)
	if err != nil || v == 0 || v > utf8.MaxRune || (v >= 0xD800 && v <= 0xDFFF) {
		return 0, false
	}
	return rune(v), true
}

func utf16Len(s string) int {
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
