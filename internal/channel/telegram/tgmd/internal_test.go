package tgmd

import "testing"

func TestRemoveEmptyPairs(t *testing.T) {
	tests := []struct{ in, want string }{
		{"<b></b>x", "x"},
		{"<b><i></i></b>x", "x"},
		{`<pre><code class="language-go"></code></pre>y`, "y"},
		{"<b>a</b><i></i>", "<b>a</b>"},
		{"<b><i></i>c</b>", "<b>c</b>"},
		{"<b>a<i></i></b>", "<b>a</b>"},
		{"a &lt;b&gt;&lt;/b&gt;", "a &lt;b&gt;&lt;/b&gt;"},
	}
	for _, tt := range tests {
		if got := removeEmptyPairs(tt.in); got != tt.want {
			t.Errorf("removeEmptyPairs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPlainText(t *testing.T) {
	if got := PlainText(`<b>a &amp; b</b> &lt;c&gt; <a href="https://x">l</a>&#128512;`); got != "a & b <c> l😀" {
		t.Fatalf("PlainText = %q", got)
	}
}
