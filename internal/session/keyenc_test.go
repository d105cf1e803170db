package session_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/session"
)

func TestEncodeID(t *testing.T) {
	cases := []struct{ in, want string }{
		{"12345", "12345"},
		{"..", "%2e%2e"},
		{"a/b", "a%2fb"},
		{`a\b`, "a%5cb"},
		{"nul\x00", "nul%00"},
		{"Telegram", "%54elegram"},
		{"a_b", "a%5fb"},
		{"%", "%25"},
		{"ｔ", "%ef%bd%94"},
	}
	for _, c := range cases {
		if got := session.EncodeID(c.in); got != c.want {
			t.Errorf("EncodeID(%q) = %q, want %q", c.in, got, c.want)
		}
		if back, ok := session.DecodeID(c.want); !ok || back != c.in {
			t.Errorf("DecodeID(%q) = %q, %v", c.want, back, ok)
		}
	}
	long := session.EncodeID(strings.Repeat("x", 10000))
	if len(long) > session.MaxEncodedLen || !strings.Contains(long, "%h") {
		t.Fatalf("long ID encoded as %q", long)
	}
	if _, ok := session.DecodeID(long); ok {
		t.Fatal("hashed form decoded")
	}
	for _, bad := range []string{"", "A", "%2", "%zz", "%61", "a.b"} {
		if _, ok := session.DecodeID(bad); ok {
			t.Errorf("DecodeID(%q) accepted a non-canonical form", bad)
		}
	}
}

// FuzzEncodeID: the encoding is path-safe, bounded, reversible when not
// hashed, and injective.
func FuzzEncodeID(f *testing.F) {
	for _, s := range []string{"", "..", "/", "a/../b", "\x00", "Ａ", strings.Repeat("é", 200), "%h", "a_b"} {
		f.Add(s, s+"x")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ea, eb := session.EncodeID(a), session.EncodeID(b)
		if a != b && ea == eb {
			t.Fatalf("collision: %q and %q both encode to %q", a, b, ea)
		}
		if a == "" {
			return
		}
		if len(ea) > session.MaxEncodedLen || ea == "" {
			t.Fatalf("EncodeID(%q) = %q: bad length", a, ea)
		}
		for i := 0; i < len(ea); i++ {
			c := ea[i]
			if !(('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '-' || c == '%') {
				t.Fatalf("EncodeID(%q) = %q has byte %q", a, ea, c)
			}
		}
		dir := filepath.Join("/sessions", "dir")
		if p := filepath.Join(dir, ea); filepath.Dir(p) != dir || filepath.Base(p) != ea {
			t.Fatalf("EncodeID(%q) = %q escapes %s: %s", a, ea, dir, p)
		}
		if !strings.Contains(ea, "%h") {
			if back, ok := session.DecodeID(ea); !ok || back != a {
				t.Fatalf("DecodeID(EncodeID(%q)) = %q, %v", a, back, ok)
			}
		}
	})
}
