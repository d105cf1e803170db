package sanitize

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

func corpus(t testing.TB) []string {
	b, err := os.ReadFile("testdata/xss.txt")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(b), "\n%%\n")
	var out []string
	for _, blk := range blocks[1:] { // the first block is the header comment
		if p := strings.TrimRight(blk, "\n"); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// inspect parses out as a browser would (HTML parser, SVG as foreign
// content) and reports anything executable or external.
func inspect(t *testing.T, label, out string, svg bool) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(out))
	if err != nil {
		t.Fatalf("%s: output does not parse: %v", label, err)
	}
	allowed := map[string]bool{"html": true, "head": true, "body": true}
	if svg {
		for k := range svgElements {
			allowed[k] = true
		}
	} else {
		for k := range htmlAllowed {
			allowed[k] = true
		}
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			name := strings.ToLower(n.Data)
			if !allowed[name] {
				t.Errorf("%s: element <%s> survived in %q", label, n.Data, out)
			}
			for _, a := range n.Attr {
				key := strings.ToLower(a.Key)
				if a.Namespace != "" {
					key = a.Namespace + ":" + key
				}
				v := cleanValue(a.Val)
				switch {
				case strings.HasPrefix(key, "on"):
					t.Errorf("%s: event handler %s survived", label, key)
				case key == "style" || key == "src" || key == "srcdoc" || key == "action" || key == "formaction" || key == "background":
					t.Errorf("%s: attribute %s survived", label, key)
				case strings.Contains(v, "javascript:") || strings.Contains(v, "vbscript:") || strings.Contains(v, "data:"):
					t.Errorf("%s: script/data URL in %s=%q", label, key, a.Val)
				case strings.HasSuffix(key, "href"):
					if svg && !strings.HasPrefix(a.Val, "#svg-") {
						t.Errorf("%s: external SVG href %q", label, a.Val)
					}
					if !svg && !(strings.HasPrefix(v, "https://") || strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "mailto:")) {
						t.Errorf("%s: link href %q", label, a.Val)
					}
				case strings.Contains(v, "url(") && !strings.HasPrefix(v, "url(#svg-"):
					t.Errorf("%s: external url() in %s=%q", label, key, a.Val)
				case key == "attributename" && !animatable[a.Val]:
					t.Errorf("%s: animation of %q survived", label, a.Val)
				case key == "id" && svg && !strings.HasPrefix(a.Val, "svg-"):
					t.Errorf("%s: unprefixed id %q", label, a.Val)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
}

func TestXSSCorpus(t *testing.T) {
	payloads := corpus(t)
	if len(payloads) < 40 {
		t.Fatalf("corpus has %d payloads, want ≥ 40", len(payloads))
	}
	for i, p := range payloads {
		for _, in := range []string{p, "<svg>" + p + "</svg>"} {
			out, err := SVG(in)
			if err != nil {
				if !errors.Is(err, ErrNotSVG) {
					t.Errorf("payload %d: SVG error %v", i, err)
				}
				continue
			}
			inspect(t, "svg#"+itoa(i), out, true)
			again, err := SVG(out)
			if err != nil || again != out {
				t.Errorf("payload %d: SVG not idempotent:\n%s\n%s (%v)", i, out, again, err)
			}
		}
		out := HTML(p)
		inspect(t, "html#"+itoa(i), out, false)
		if again := HTML(out); again != out {
			t.Errorf("payload %d: HTML not idempotent:\n%s\n%s", i, out, again)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestSVGKeepsDrawings(t *testing.T) {
	tests := []struct{ in, want string }{
		{
			`<?xml version="1.0"?><!-- a plant --><svg viewBox="0 0 100 100" width="100"><defs><linearGradient id="leaf" x1="0" y1="0" x2="1" y2="1"><stop offset="0" stop-color="#3a3"/></linearGradient></defs><path d="M10 10 L90 90" fill="url(#leaf)" stroke="green"/><use href="#leaf"/><text x="5" y="95" font-size="8">basil &amp; mint</text></svg>`,
			`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 100" width="100"><defs><linearGradient id="svg-leaf" x1="0" y1="0" x2="1" y2="1"><stop offset="0" stop-color="#3a3"></stop></linearGradient></defs><path d="M10 10 L90 90" fill="url(#svg-leaf)" stroke="green"></path><use href="#svg-leaf"></use><text x="5" y="95" font-size="8">basil &amp; mint</text></svg>`,
		},
		{
			`<svg><circle cx="5" cy="5" r="4"><animate attributeName="r" values="2;4;2" dur="2s" repeatCount="indefinite"/></circle></svg>`,
			`<svg xmlns="http://www.w3.org/2000/svg"><circle cx="5" cy="5" r="4"><animate attributeName="r" values="2;4;2" dur="2s" repeatCount="indefinite"></animate></circle></svg>`,
		},
		{
			`<svg><a href="https://x.example"><rect width="1" height="1"/></a><unknown><rect/></unknown></svg> trailing <b>junk</b>`,
			`<svg xmlns="http://www.w3.org/2000/svg"><rect width="1" height="1"></rect></svg>`,
		},
		{`<svg><text>unclosed`, `<svg xmlns="http://www.w3.org/2000/svg"><text>unclosed</text></svg>`},
	}
	for _, tt := range tests {
		got, err := SVG(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("SVG(%s)\n got %s (%v)\nwant %s", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "hello", "<div><svg></svg></div>", "<!-- only a comment -->"} {
		if _, err := SVG(in); !errors.Is(err, ErrNotSVG) {
			t.Errorf("SVG(%q) err = %v, want ErrNotSVG", in, err)
		}
	}
	if _, err := SVG("<svg>" + strings.Repeat("x", MaxInput) + "</svg>"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversize: %v", err)
	}
	deep := "<svg>" + strings.Repeat("<g>", 500) + `<rect onclick="x"/>` + strings.Repeat("</g>", 500) + "</svg>"
	out, err := SVG(deep)
	if err != nil || strings.Count(out, "<g>") > maxDepth {
		t.Errorf("deep nesting: %d groups, %v", strings.Count(out, "<g>"), err)
	}
}

func TestHTMLKeepsFormatting(t *testing.T) {
	tests := []struct{ in, want string }{
		{`<p>Water <b>daily</b> &amp; <i>check</i> <code class="language-go">x&lt;y</code></p>`,
			`<p>Water <b>daily</b> &amp; <i>check</i> <code class="language-go">x&lt;y</code></p>`},
		{`<a href="https://open-meteo.com/">forecast</a>`,
			`<a href="https://open-meteo.com/" rel="nofollow noopener noreferrer" target="_blank">forecast</a>`},
		{`<div class="x"><span>kept text</span></div>`, `kept text`},
		{`<ul><li>one<li>two</ul>`, `<ul><li>one<li>two</li></li></ul>`},
		{`1 < 2 > 0 "q" 'a'`, `1 &lt; 2 &gt; 0 &#34;q&#34; &#39;a&#39;`},
		{`<b>unclosed`, `<b>unclosed</b>`},
		{`line<br>break<hr/>`, `line<br>break<hr>`},
	}
	for _, tt := range tests {
		if got := HTML(tt.in); got != tt.want {
			t.Errorf("HTML(%s)\n got %s\nwant %s", tt.in, got, tt.want)
		}
	}
	if got := Text(`<b>"x"</b>`); got != "&lt;b&gt;&#34;x&#34;&lt;/b&gt;" {
		t.Errorf("Text = %s", got)
	}
}

func FuzzSVG(f *testing.F) {
	for _, p := range corpus(f) {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := SVG(in)
		if err == nil {
			inspect(t, "fuzz", out, true)
		}
		inspect(t, "fuzz-html", HTML(in), false)
	})
}
