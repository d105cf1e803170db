// Package sanitize rebuilds untrusted model output for the dashboard
// (SPEC §6.4). Nothing is filtered with regular expressions: input is
// tokenized with golang.org/x/net/html, and a fresh document is written from
// the tokens that pass an allow-list of elements and attributes, with every
// text and attribute value re-escaped.
package sanitize

import (
	"errors"
	"fmt"
	"html"
	"strings"
)

// Errors returned by SVG.
var (
	ErrNotSVG   = errors.New("sanitize: input has no <svg> root element")
	ErrTooLarge = errors.New("sanitize: input too large")
)

// MaxInput is the largest input accepted, in bytes.
const MaxInput = 512 << 10

// maxDepth bounds element nesting (allowed and dropped elements alike);
// input nested deeper is truncated at that point.
const maxDepth = 64

// Text escapes s for use as HTML text or a quoted attribute value: & < > " '.
func Text(s string) string { return html.EscapeString(s) }

func errTooLarge(n int) error { return fmt.Errorf("%w: %d bytes (max %d)", ErrTooLarge, n, MaxInput) }

// cleanValue normalises an attribute value for inspection: lower-case, with
// whitespace, control characters and NULs removed (browsers ignore them in
// URL schemes: "java\tscript:").
func cleanValue(v string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(v) {
		if r <= ' ' || r == 0x7f || r == '\u00a0' || r == '\ufeff' || (r >= 0x200b && r <= 0x200f) {
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// dangerous reports values no attribute may carry.
func dangerous(v string) bool {
	c := cleanValue(v)
	for _, bad := range []string{"javascript:", "vbscript:", "data:", "livescript:", "expression(", "@import", "-moz-binding", "behavior:", "\\", "<", ">"} {
		if strings.Contains(c, bad) {
			return true
		}
	}
	return false
}
