package dashboard

import (
	"bytes"
	"strings"
	"testing"
)

func TestLocalURL(t *testing.T) {
	for in, want := range map[string]string{
		"/sessions/web%3Aowner#n-msg_1": "/sessions/web%3Aowner#n-msg_1",
		"/?actor=web%3Aowner":           "/?actor=web%3Aowner",
		"javascript:alert(1)":           "#",
		"//evil.example/x":              "#",
		"/\\evil.example":               "#",
		"https://evil.example/":         "#",
		"":                              "#",
	} {
		if got := localURL(in); got != want {
			t.Errorf("localURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// Values inside URLs are escaped for their part of the URL, and then as an
// attribute: an actor ID cannot add a query parameter or leave the href.
func TestViewURLsEscapeTheirValues(t *testing.T) {
	actor := `a&view=x"><script>alert(1)</script>`
	var buf bytes.Buffer
	p := pageData{Lang: "en", Data: memoryData{Actor: actor}}
	if err := layout(p, memoryView(p)).Render(&buf); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if strings.Contains(page, "<script>alert") {
		t.Fatal("unescaped markup in the page")
	}
	want := `href="/memory/forget?actor=a%26view%3Dx%22%3E%3Cscript%3Ealert%281%29%3C%2Fscript%3E"`
	if !strings.Contains(page, want) {
		t.Errorf("forget link not query-escaped; want %s in\n%s", want, page)
	}
	if !strings.Contains(page, `value="a&amp;view=x&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"`) {
		t.Errorf("hidden actor value not attribute-escaped:\n%s", page)
	}
}
