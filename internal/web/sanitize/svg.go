package sanitize

import (
	"io"
	"regexp"
	"strings"

	"golang.org/x/net/html"
)

// svgElements maps the tokenizer's lower-case element names to their SVG
// spelling. Anything absent is dropped with its whole subtree, except the
// unwrap set below.
var svgElements = map[string]string{
	"svg": "svg", "g": "g", "defs": "defs", "title": "title", "desc": "desc", "use": "use",
	"path": "path", "rect": "rect", "circle": "circle", "ellipse": "ellipse", "line": "line",
	"polyline": "polyline", "polygon": "polygon", "text": "text", "tspan": "tspan",
	"lineargradient": "linearGradient", "radialgradient": "radialGradient", "stop": "stop",
	"clippath": "clipPath", "mask": "mask", "marker": "marker",
	"animate": "animate", "animatetransform": "animateTransform", "set": "set",
}

// svgUnwrap are dropped but their children kept (a link's picture stays,
// the link goes: no external navigation from the whiteboard).
var svgUnwrap = map[string]bool{"a": true, "switch": true}

// textElements may hold character data.
var textElements = map[string]bool{"title": true, "desc": true, "text": true, "tspan": true}

var presentation = []string{
	"id", "transform", "fill", "fill-opacity", "fill-rule", "stroke", "stroke-width", "stroke-opacity",
	"stroke-linecap", "stroke-linejoin", "stroke-dasharray", "stroke-dashoffset", "stroke-miterlimit",
	"opacity", "clip-path", "clip-rule", "mask", "marker-start", "marker-mid", "marker-end",
	"font-family", "font-size", "font-weight", "font-style", "text-anchor", "dominant-baseline",
	"letter-spacing", "visibility", "display", "color", "vector-effect", "paint-order",
}

// svgAttrs lists, per element, the allowed attributes (lower-case as the
// tokenizer gives them) on top of presentation attributes.
var svgAttrs = map[string][]string{
	"svg":              {"viewbox", "width", "height", "preserveaspectratio", "version", "x", "y"},
	"g":                nil,
	"defs":             nil,
	"title":            nil,
	"desc":             nil,
	"use":              {"href", "xlink:href", "x", "y", "width", "height"},
	"path":             {"d", "pathlength"},
	"rect":             {"x", "y", "width", "height", "rx", "ry"},
	"circle":           {"cx", "cy", "r"},
	"ellipse":          {"cx", "cy", "rx", "ry"},
	"line":             {"x1", "y1", "x2", "y2"},
	"polyline":         {"points"},
	"polygon":          {"points"},
	"text":             {"x", "y", "dx", "dy", "rotate", "textlength", "lengthadjust"},
	"tspan":            {"x", "y", "dx", "dy", "rotate", "textlength", "lengthadjust"},
	"lineargradient":   {"x1", "y1", "x2", "y2", "gradientunits", "gradienttransform", "spreadmethod"},
	"radialgradient":   {"cx", "cy", "r", "fx", "fy", "fr", "gradientunits", "gradienttransform", "spreadmethod"},
	"stop":             {"offset", "stop-color", "stop-opacity"},
	"clippath":         {"clippathunits"},
	"mask":             {"x", "y", "width", "height", "maskunits", "maskcontentunits"},
	"marker":           {"viewbox", "refx", "refy", "markerwidth", "markerheight", "markerunits", "orient", "preserveaspectratio"},
	"animate":          {"attributename", "from", "to", "by", "values", "dur", "begin", "end", "repeatcount", "repeatdur", "fill", "keytimes", "keysplines", "calcmode", "additive", "accumulate"},
	"animatetransform": {"attributename", "type", "from", "to", "by", "values", "dur", "begin", "end", "repeatcount", "repeatdur", "fill", "keytimes", "calcmode", "additive", "accumulate"},
	"set":              {"attributename", "to", "dur", "begin", "end", "repeatcount", "fill"},
}

// attrCase restores SVG's camelCase attribute names.
var attrCase = map[string]string{
	"viewbox": "viewBox", "preserveaspectratio": "preserveAspectRatio", "pathlength": "pathLength",
	"textlength": "textLength", "lengthadjust": "lengthAdjust", "gradientunits": "gradientUnits",
	"gradienttransform": "gradientTransform", "spreadmethod": "spreadMethod", "clippathunits": "clipPathUnits",
	"maskunits": "maskUnits", "maskcontentunits": "maskContentUnits", "refx": "refX", "refy": "refY",
	"markerwidth": "markerWidth", "markerheight": "markerHeight", "markerunits": "markerUnits",
	"attributename": "attributeName", "repeatcount": "repeatCount", "repeatdur": "repeatDur",
	"keytimes": "keyTimes", "keysplines": "keySplines", "calcmode": "calcMode",
}

// animatable are the only attributes an animation may target: never href,
// xlink:href, style or an event handler.
var animatable = map[string]bool{
	"opacity": true, "fill": true, "stroke": true, "fill-opacity": true, "stroke-opacity": true,
	"stroke-width": true, "stroke-dashoffset": true, "r": true, "cx": true, "cy": true, "x": true, "y": true,
	"width": true, "height": true, "rx": true, "ry": true, "transform": true, "offset": true,
	"stop-color": true, "d": true, "points": true, "visibility": true,
}

var (
	idRE      = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)
	localRef  = regexp.MustCompile(`^#([A-Za-z][A-Za-z0-9_-]{0,63})$`)
	urlRef    = regexp.MustCompile(`^url\(['"]?#([A-Za-z][A-Za-z0-9_-]{0,63})['"]?\)$`)
	timingRE  = regexp.MustCompile(`^(indefinite|[0-9.]+(ms|s|min|h)?)(;\s*[0-9.]+(ms|s|min|h)?)*$`)
	allowAttr = map[string]map[string]bool{}
)

func init() {
	for el, list := range svgAttrs {
		m := map[string]bool{}
		for _, a := range presentation {
			m[a] = true
		}
		for _, a := range list {
			m[a] = true
		}
		allowAttr[el] = m
	}
}

// SVGOptions tune SVG.
type SVGOptions struct {
	// IDPrefix is prepended to every id and local reference so an SVG
	// cannot clobber or target page elements; default "svg-".
	IDPrefix string
}

// SVG rebuilds untrusted SVG markup from an allow-list. The first element
// must be <svg> (an XML declaration, doctype and comments may precede it);
// everything after the root closes is dropped. The output has no scripts, no
// event handlers, no foreignObject, no style, no external references (href
// and url() only as local #id references, ids prefixed), no javascript: or
// data: URLs, and animations only of a fixed set of presentation
// attributes, never href. Errors: ErrNotSVG, ErrTooLarge.
func SVG(src string) (string, error) { return SVGWith(src, SVGOptions{}) }

// SVGWith is SVG with options.
func SVGWith(src string, o SVGOptions) (string, error) {
	if len(src) > MaxInput {
		return "", errTooLarge(len(src))
	}
	if o.IDPrefix == "" {
		o.IDPrefix = "svg-"
	}
	z := html.NewTokenizer(strings.NewReader(src))
	var out strings.Builder
	var st openStack
	rooted, done := false, false
	closeTo := func(i int) {
		for len(st.s) > i {
			e := st.pop()
			if e.emit {
				out.WriteString("</" + svgElements[e.name] + ">")
			}
		}
		if rooted && len(st.s) == 0 {
			done = true
		}
	}
	for !done {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			if z.Err() != io.EOF {
				return "", z.Err()
			}
			done = true
		case html.TextToken:
			if !rooted || st.dropped() {
				continue
			}
			text := string(z.Text())
			if len(st.s) > 0 && textElements[st.s[len(st.s)-1].name] {
				out.WriteString(html.EscapeString(text))
			} else if strings.TrimSpace(text) == "" {
				out.WriteString(html.EscapeString(text))
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			name := tok.Data
			if !rooted {
				if name != "svg" {
					return "", ErrNotSVG
				}
				rooted = true
			}
			self := tt == html.SelfClosingTagToken
			if len(st.s) >= maxDepth {
				done = true // too deep: truncate here (keeps the work linear)
				continue
			}
			if st.dropped() {
				if !self {
					st.push(open{name: name, drop: true})
				}
				continue
			}
			if svgUnwrap[name] {
				if !self {
					st.push(open{name: name})
				}
				continue
			}
			canon, ok := svgElements[name]
			attrs, keep := svgAttributes(name, tok.Attr, o.IDPrefix)
			if !ok || !keep {
				if !self {
					st.push(open{name: name, drop: true})
				}
				continue
			}
			out.WriteString("<" + canon)
			if name == "svg" && len(st.s) == 0 {
				out.WriteString(` xmlns="http://www.w3.org/2000/svg"`)
			}
			for _, a := range attrs {
				out.WriteString(" " + a[0] + `="` + html.EscapeString(a[1]) + `"`)
			}
			out.WriteString(">")
			if self {
				out.WriteString("</" + canon + ">")
				if len(st.s) == 0 {
					done = true
				}
				continue
			}
			st.push(open{name: name, emit: true})
		case html.EndTagToken:
			name, _ := z.TagName()
			for i := len(st.s) - 1; i >= 0; i-- {
				if st.s[i].name == string(name) {
					closeTo(i)
					break
				}
			}
		}
		// Comments, doctypes, processing instructions and CDATA are dropped.
	}
	if !rooted {
		return "", ErrNotSVG
	}
	closeTo(0)
	return out.String(), nil
}

// svgAttributes filters an element's attributes. keep is false when the
// element itself must go (an animation of a forbidden attribute).
func svgAttributes(el string, in []html.Attribute, prefix string) (out [][2]string, keep bool) {
	allowed := allowAttr[el]
	seen := map[string]bool{}
	isAnim := el == "animate" || el == "animatetransform" || el == "set"
	target := ""
	for _, a := range in {
		key := a.Key
		if a.Namespace != "" {
			key = a.Namespace + ":" + a.Key
		}
		if !allowed[key] || seen[key] || dangerous(a.Val) {
			continue
		}
		val := a.Val
		switch key {
		case "id":
			if !idRE.MatchString(val) {
				continue
			}
			val = prefixed(prefix, val)
		case "href", "xlink:href":
			m := localRef.FindStringSubmatch(strings.TrimSpace(val))
			if m == nil {
				continue
			}
			key, val = "href", "#"+prefixed(prefix, m[1])
			if seen["href"] {
				continue
			}
		case "attributename":
			target = strings.TrimSpace(val)
			if !animatable[target] {
				return nil, false
			}
			val = target
		case "begin", "end", "dur", "repeatdur":
			if !timingRE.MatchString(strings.TrimSpace(val)) {
				continue
			}
		default:
			v, ok := rewriteURLs(val, prefix)
			if !ok {
				continue
			}
			val = v
		}
		seen[key] = true
		name := key
		if c, ok := attrCase[key]; ok {
			name = c
		}
		out = append(out, [2]string{name, val})
	}
	if isAnim && target == "" && el != "animatetransform" {
		return nil, false
	}
	if el == "animatetransform" && target != "" && target != "transform" {
		return nil, false
	}
	return out, true
}

// rewriteURLs allows url() only as a whole-value local reference
// url(#id), rewritten with the id prefix; any other url( rejects the value.
func rewriteURLs(v, prefix string) (string, bool) {
	c := cleanValue(v)
	if !strings.Contains(c, "url(") && !strings.Contains(c, "url\\") {
		return v, true
	}
	m := urlRef.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil {
		return "", false
	}
	return "url(#" + prefixed(prefix, m[1]) + ")", true
}

// prefixed adds prefix unless id already has it (so sanitizing twice is a
// no-op; an id that starts with the prefix cannot name a page element).
func prefixed(prefix, id string) string {
	if strings.HasPrefix(id, prefix) {
		return id
	}
	return prefix + id
}
