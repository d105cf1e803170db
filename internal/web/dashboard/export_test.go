package dashboard

import (
	"mime"
	"strings"
	"testing"
)

// TestExportDisposition: a session key's quotes, ';', '=', '/' and
// non-ASCII bytes never reach the header raw; the header parses with one
// filename, its plain form is safe ASCII, and a name with other letters
// travels whole as RFC 8187 filename*.
func TestExportDisposition(t *testing.T) {
	for _, tc := range []struct{ key, ascii, exact string }{
		{"main/api/me", "main_api_me.md", ""},
		{`main/api/q"x;y=z~s"1`, "main_api_q_x_y_z_s_1.md", ""},
		{"main/telegram/민수", "main_telegram___.md", "main_telegram_민수.md"},
	} {
		v := exportDisposition(tc.key, "md")
		if strings.ContainsAny(v, "\"\r\n") && !strings.HasPrefix(v, `attachment; filename="`) {
			t.Errorf("%q: raw quote in %q", tc.key, v)
		}
		disp, params, err := mime.ParseMediaType(v)
		if err != nil || disp != "attachment" {
			t.Fatalf("%q: %q does not parse: %v", tc.key, v, err)
		}
		// mime decodes filename* into filename when present
		want := tc.ascii
		if tc.exact != "" {
			want = tc.exact
		}
		if params["filename"] != want {
			t.Errorf("%q: filename %q, want %q (header %q)", tc.key, params["filename"], want, v)
		}
		if len(params) != 1 {
			t.Errorf("%q: parameters %v: something was injected", tc.key, params)
		}
		if !strings.Contains(v, `filename=`+tc.ascii) && !strings.Contains(v, `filename="`+tc.ascii+`"`) {
			t.Errorf("%q: ASCII filename %q not in %q", tc.key, tc.ascii, v)
		}
	}
}
