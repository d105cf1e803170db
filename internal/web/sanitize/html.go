package sanitize

import (
	"io"
	"net/url"
	"regexp"
	"strings"

	"golang.org/x/net/html"
)

// htmlAllowed are the formatting elements HTML keeps (the output of a
// Markdown renderer); all other tags are removed and their text kept,
// except htmlDropSubtree, whose content goes too.
var htmlAllowed = map[string]bool{
	"p": true, "br": true, "hr": true, "b": true, "strong": true, "i": true, "em": true, "u": true,
	"s": true, "del": true, "code": true, "pre": true, "blockquote": true, "ul": true, "ol": true,
	"li": true, "h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true,
	"table": true, "thead": true, "tbody": true, "tr": true, "th": true, "td": true, "a": true,
}

var htmlVoid = map[string]bool{"br": true, "hr": true}

var htmlDropSubtree = map[string]bool{
	"script": true, "style": true, "iframe": true, "object": true, "embed": true, "template": true,
	"noscript": true, "noembed": true, "noframes": true, "svg": true, "math": true, "textarea": true,
	"select": true, "title": true, "head": true, "xmp": true, "plaintext": true, "frameset": true,
	"frame": true, "applet": true, "audio": true, "video": true, "canvas": true, "form": true,
}

var langClass = regexp.MustCompile(`^language-[A-Za-z0-9+#_-]{1,32}$`)

// HTML rebuilds untrusted HTML (model output, or its Markdown rendering)
// keeping only simple formatting: p br hr b strong i em u s del code pre
// blockquote ul ol li h1–h6 table thead tbody tr th td, and a with an
// http, https or mailto href (given rel="nofollow noopener noreferrer" and
// target="_blank"). The only other attribute is class="language-x" on code.
// Text is re-escaped; scripts, styles, frames, SVG and MathML are removed
// with their content; other unknown tags are removed and their text kept.
// Input over MaxInput bytes is escaped as plain text instead.
func HTML(src string) string {
	if len(src) > MaxInput {
		return html.EscapeString(src[:MaxInput])
	}
	z := html.NewTokenizer(strings.NewReader(src))
	var out strings.Builder
	var st openStack
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			if z.Err() == io.EOF {
				for i := len(st.s) - 1; i >= 0; i-- {
					if st.s[i].emit {
						out.WriteString("</" + st.s[i].name + ">")
					}
				}
			}
			return out.String()
		case html.TextToken:
			if !st.dropped() {
				out.WriteString(html.EscapeString(string(z.Text())))
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			name := tok.Data
			self := tt == html.SelfClosingTagToken || htmlVoid[name]
			if len(st.s) >= maxDepth {
				// Too deep: truncate here (keeps the work linear).
				for len(st.s) > 0 {
					if e := st.pop(); e.emit {
						out.WriteString("</" + e.name + ">")
					}
				}
				return out.String()
			}
			if st.dropped() || htmlDropSubtree[name] {
				if !self {
					st.push(open{name: name, drop: true})
				}
				continue
			}
			if !htmlAllowed[name] {
				continue // tag removed, text kept; its end tag is ignored
			}
			out.WriteString("<" + name)
			for _, a := range htmlAttributes(name, tok.Attr) {
				out.WriteString(" " + a[0] + `="` + html.EscapeString(a[1]) + `"`)
			}
			out.WriteString(">")
			if !self {
				st.push(open{name: name, emit: true})
			}
		case html.EndTagToken:
			n, _ := z.TagName()
			name := string(n)
			for i := len(st.s) - 1; i >= 0; i-- {
				if st.s[i].name == name {
					for len(st.s) > i {
						e := st.pop()
						if e.emit {
							out.WriteString("</" + e.name + ">")
						}
					}
					break
				}
			}
		}
	}
}

func htmlAttributes(el string, in []html.Attribute) [][2]string {
	var out [][2]string
	switch el {
	case "a":
		for _, a := range in {
			if a.Key == "href" && a.Namespace == "" && safeLink(a.Val) {
				out = append(out, [2]string{"href", a.Val},
					[2]string{"rel", "nofollow noopener noreferrer"}, [2]string{"target", "_blank"})
				break
			}
		}
	case "code":
		for _, a := range in {
			if a.Key == "class" && langClass.MatchString(a.Val) {
				out = append(out, [2]string{"class", a.Val})
				break
			}
		}
	}
	return out
}

// safeLink accepts absolute http, https and mailto URLs only.
func safeLink(v string) bool {
	if dangerous(v) || v != strings.TrimSpace(v) {
		return false
	}
	u, err := url.Parse(v)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "http", "https":
		return u.Host != ""
	case "mailto":
		return u.Opaque != ""
	}
	return false
}
