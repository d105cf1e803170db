package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrNotCanonicalizable is wrapped by every Canonical error.
var ErrNotCanonicalizable = errors.New("approval: JSON cannot be canonicalized")

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 256

// Canonical implements RFC 8785, the JSON Canonicalization Scheme (JCS).
// The input must be one strict RFC 8259 JSON value (surrounding whitespace
// allowed) that is also I-JSON (RFC 7493): object keys are unique, strings
// are valid Unicode (no lone surrogates, raw or escaped), and numbers are
// finite IEEE-754 doubles (a literal that overflows to ±Inf is rejected).
// The output has no insignificant whitespace, object members sorted by the
// UTF-16 code units of their keys, numbers in the ECMAScript
// Number.prototype.toString form (RFC 8785 §3.2.2.3) and strings escaped as
// RFC 8785 §3.2.2.2 prescribes. Errors wrap ErrNotCanonicalizable and give
// the byte offset.
func Canonical(in json.RawMessage) ([]byte, error) {
	v, err := parse(in)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(len(in))
	write(&b, v)
	return b.Bytes(), nil
}

func parse(in []byte) (*node, error) {
	p := parser{s: in}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.s) {
		return nil, p.errf("trailing data")
	}
	return v, nil
}

// without returns a shallow copy of object n minus member key.
func (n *node) without(key string) *node {
	c := *n
	c.obj = nil
	for _, m := range n.obj {
		if m.key != key {
			c.obj = append(c.obj, m)
		}
	}
	return &c
}

// ArgsHash is the hex SHA-256 of Canonical(args): the args_hash binding of
// SPEC §6.3. Empty args (nil or only whitespace) hash as "{}".
func ArgsHash(args json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	c, err := Canonical(args)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

type kind uint8

const (
	kNull kind = iota
	kBool
	kNum
	kStr
	kArr
	kObj
)

type member struct {
	key string
	val *node
}

type node struct {
	k   kind
	b   bool
	num float64
	str string
	arr []*node
	obj []member
}

type parser struct {
	s []byte
	i int
}

func (p *parser) errf(format string, a ...any) error {
	return fmt.Errorf("%w: offset %d: %s", ErrNotCanonicalizable, p.i, fmt.Sprintf(format, a...))
}

func (p *parser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (*node, error) {
	if depth > maxDepth {
		return nil, p.errf("nesting deeper than %d", maxDepth)
	}
	if p.i >= len(p.s) {
		return nil, p.errf("unexpected end of input")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return &node{k: kStr, str: s}, nil
	case c == 't':
		return p.lit("true", &node{k: kBool, b: true})
	case c == 'f':
		return p.lit("false", &node{k: kBool})
	case c == 'n':
		return p.lit("null", &node{k: kNull})
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		return nil, p.errf("unexpected character %q", c)
	}
}

func (p *parser) lit(word string, n *node) (*node, error) {
	if !bytes.HasPrefix(p.s[p.i:], []byte(word)) {
		return nil, p.errf("invalid literal")
	}
	p.i += len(word)
	return n, nil
}

func (p *parser) object(depth int) (*node, error) {
	p.i++ // {
	n := &node{k: kObj}
	seen := map[string]bool{}
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return n, nil
	}
	for {
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return nil, p.errf("expected object key")
		}
		at := p.i
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		if seen[k] {
			p.i = at
			return nil, p.errf("duplicate key %q", k)
		}
		seen[k] = true
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, p.errf("expected ':'")
		}
		p.i++
		p.ws()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.obj = append(n.obj, member{k, v})
		p.ws()
		if p.i >= len(p.s) {
			return nil, p.errf("unterminated object")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return n, nil
		default:
			return nil, p.errf("expected ',' or '}'")
		}
	}
}

func (p *parser) array(depth int) (*node, error) {
	p.i++ // [
	n := &node{k: kArr}
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return n, nil
	}
	for {
		p.ws()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.arr = append(n.arr, v)
		p.ws()
		if p.i >= len(p.s) {
			return nil, p.errf("unterminated array")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return n, nil
		default:
			return nil, p.errf("expected ',' or ']'")
		}
	}
}

func (p *parser) number() (*node, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.i < len(p.s) && p.s[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, p.errf("invalid number")
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, p.errf("invalid number: no digits after '.'")
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.errf("invalid number: no exponent digits")
		}
	}
	f, err := strconv.ParseFloat(string(p.s[start:p.i]), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		p.i = start
		return nil, p.errf("number %s is not a finite IEEE-754 double", p.s[start:min(len(p.s), start+40)])
	}
	return &node{k: kNum, num: f}, nil
}

func (p *parser) str() (string, error) {
	p.i++ // opening quote
	// Fast path: printable ASCII without escapes is the string itself.
	for j := p.i; j < len(p.s); j++ {
		c := p.s[j]
		if c == '"' {
			out := string(p.s[p.i:j])
			p.i = j + 1
			return out, nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
	}
	var b strings.Builder
	for {
		if p.i >= len(p.s) {
			return "", p.errf("unterminated string")
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return b.String(), nil
		case c == '\\':
			p.i++
			if p.i >= len(p.s) {
				return "", p.errf("unterminated escape")
			}
			e := p.s[p.i]
			p.i++
			switch e {
			case '"', '\\', '/':
				b.WriteByte(e)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) {
					if r >= 0xDC00 || p.i+6 > len(p.s) || p.s[p.i] != '\\' || p.s[p.i+1] != 'u' {
						return "", p.errf("lone surrogate \\u%04x", r)
					}
					p.i += 2
					r2, err := p.hex4()
					if err != nil {
						return "", err
					}
					d := utf16.DecodeRune(r, r2)
					if d == utf8.RuneError {
						return "", p.errf("invalid surrogate pair \\u%04x\\u%04x", r, r2)
					}
					r = d
				}
				b.WriteRune(r)
			default:
				return "", p.errf("invalid escape \\%c", e)
			}
		case c < 0x20:
			return "", p.errf("raw control character 0x%02x in string", c)
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.s[p.i:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.errf("invalid UTF-8")
			}
			b.WriteRune(r)
			p.i += size
		}
	}
}

func (p *parser) hex4() (rune, error) {
	if p.i+4 > len(p.s) {
		return 0, p.errf("short \\u escape")
	}
	v, err := strconv.ParseUint(string(p.s[p.i:p.i+4]), 16, 32)
	if err != nil {
		return 0, p.errf("bad \\u escape")
	}
	p.i += 4
	return rune(v), nil
}

func write(b *bytes.Buffer, n *node) {
	switch n.k {
	case kNull:
		b.WriteString("null")
	case kBool:
		if n.b {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case kNum:
		b.WriteString(FormatNumber(n.num))
	case kStr:
		writeString(b, n.str)
	case kArr:
		b.WriteByte('[')
		for i, e := range n.arr {
			if i > 0 {
				b.WriteByte(',')
			}
			write(b, e)
		}
		b.WriteByte(']')
	case kObj:
		ms := slices.Clone(n.obj)
		slices.SortFunc(ms, func(a, b member) int { return compareUTF16(a.key, b.key) })
		b.WriteByte('{')
		for i, m := range ms {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, m.key)
			b.WriteByte(':')
			write(b, m.val)
		}
		b.WriteByte('}')
	}
}

// writeString escapes per RFC 8785 §3.2.2.2: \" \\ \b \f \n \r \t, other
// code points below U+0020 as \u00xx (lower-case hex), everything else as
// literal UTF-8.
func writeString(b *bytes.Buffer, s string) {
	const hexd = "0123456789abcdef"
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b.WriteString(s[start:i])
		start = i + 1
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteString(`\u00`)
			b.WriteByte(hexd[c>>4])
			b.WriteByte(hexd[c&0xF])
		}
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

// compareUTF16 orders strings by their UTF-16 code units without
// allocating: UTF-8 byte order equals code-point order, which differs from
// UTF-16 order only between supplementary characters (surrogates D800–DFFF)
// and U+E000–U+FFFF.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return cmpInt(utf16Key(ra), utf16Key(rb))
		}
		a, b = a[na:], b[nb:]
	}
	return cmpInt(len(a), len(b))
}

// utf16Key maps a rune to its first UTF-16 code unit, widened so that ties
// between supplementary runes sharing a high surrogate still order by code
// point.
func utf16Key(r rune) int {
	if r >= 0x10000 {
		hi, lo := utf16.EncodeRune(r)
		return int(hi)<<16 | int(lo)
	}
	return int(r) << 16
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// FormatNumber formats a finite float64 as ECMAScript's
// Number.prototype.toString does (ECMA-262 §7.1.12.1), as RFC 8785 §3.2.2.3
// requires: shortest round-trip digits; plain notation for exponents in
// [-6, 21); otherwise d[.ddd]e±n. −0 is "0".
func FormatNumber(f float64) string {
	if f == 0 {
		return "0"
	}
	neg := f < 0
	if neg {
		f = -f
	}
	// Shortest digits and exponent: d.ddde±XX.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expS, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expS)
	k := len(digits)
	n := exp + 1 // value = 0.digits × 10^n
	var out string
	switch {
	case k <= n && n <= 21:
		out = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		out = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		out = "0." + strings.Repeat("0", -n) + digits
	default:
		sign := "+"
		if n-1 < 0 {
			sign = "-"
		}
		x := n - 1
		if x < 0 {
			x = -x
		}
		out = digits[:1]
		if k > 1 {
			out += "." + digits[1:]
		}
		out += "e" + sign + strconv.Itoa(x)
	}
	if neg {
		return "-" + out
	}
	return out
}
