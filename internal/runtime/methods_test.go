package runtime

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWrongMethodOnAPIRoutesIs405JSON: an API route asked with a method it
// does not take answers a JSON 405 with Allow, even with the dashboard's
// catch-all "/" mounted, which keeps answering its own paths (and any
// method of them) itself.
func TestWrongMethodOnAPIRoutesIs405JSON(t *testing.T) {
	s, err := New(Options{Invoker: &recInvoker{}})
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"ok":true}`) })
	s.Mount("POST /telegram/webhook", ok, false)
	s.MountSelfAuth("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "<html>dashboard "+r.Method+" "+r.URL.Path)
	}))
	for name, h := range map[string]http.Handler{"tcp": s.Handler(), "local": s.LocalHandler()} {
		ts := httptest.NewServer(h)
		defer ts.Close()
		for _, tc := range []struct{ method, path, allow string }{
			{"GET", "/invocations", "POST"},
			{"PUT", "/invocations", "POST"},
			{"GET", "/telegram/webhook", "POST"},
			{"DELETE", "/ping", "GET, HEAD"},
		} {
			req, _ := http.NewRequest(tc.method, ts.URL+tc.path, strings.NewReader("{}"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var out map[string]any
			jerr := json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != tc.allow || jerr != nil ||
				out["error"] != "METHOD_NOT_ALLOWED" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Errorf("%s: %s %s: %d Allow %q %v (%v), want a JSON 405 with Allow %q", name, tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), out, jerr, tc.allow)
			}
		}
		for _, tc := range []struct{ method, path string }{{"GET", "/sessions"}, {"PUT", "/chat"}, {"GET", "/invocations/x"}} {
			req, _ := http.NewRequest(tc.method, ts.URL+tc.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusTeapot || !strings.Contains(string(b), "dashboard "+tc.method+" "+tc.path) {
				t.Errorf("%s: %s %s: %d %s, want the dashboard's answer", name, tc.method, tc.path, resp.StatusCode, b)
			}
		}
		if resp, out := post(t, ts.URL, `{"message":"hi","actor_id":"api:me"}`, nil); resp.StatusCode != http.StatusOK || out["ok"] != true {
			t.Errorf("%s: POST /invocations: %d %v", name, resp.StatusCode, out)
		}
		resp, err := http.Post(ts.URL+"/telegram/webhook", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: POST /telegram/webhook: %d", name, resp.StatusCode)
		}
	}
}
