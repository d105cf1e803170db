package sessionhttp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/jsonl"
	"github.com/tendrilai/tendril/internal/session/sessionhttp"
)

func TestAPI(t *testing.T) {
	st, err := jsonl.Open(t.TempDir(), jsonl.Options{Fsync: jsonl.FsyncNever})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	k := session.Key{AgentID: "main", Channel: "telegram", ID: "42"}
	odd := session.Key{AgentID: "main", Channel: "web", ID: "a/b c"}
	for _, n := range []session.Node{
		{ID: "a", Role: "user", Text: "hello"},
		{ID: "b", ParentID: "a", Role: "assistant", Text: "hi"},
		{ID: "c", ParentID: "a", Role: "assistant", Text: "hey"},
	} {
		if err := st.Append(ctx, k, n); err != nil {
			t.Fatal(err)
		}
	}
	st.Append(ctx, odd, session.Node{ID: "x", Role: "user", Text: "odd"})
	srv := httptest.NewServer(sessionhttp.Handler(st, "main"))
	defer srv.Close()

	cases := []struct {
		name, method, path, body string
		status                   int
		contains                 []string
	}{
		{"list", "GET", "/api/sessions", "", 200, []string{`"key":"telegram:42"`, `"key":"web:a/b c"`}},
		{"show", "GET", "/api/sessions/telegram/42", "", 200, []string{`"leaf":"c"`, `"id":"b"`, `"leafId":"b"`}},
		{"show escaped id", "GET", "/api/sessions/web/a%2Fb%20c", "", 200, []string{`"content":"odd"`}},
		{"tree", "GET", "/api/sessions/telegram/42?tree=1", "", 200, []string{`"children":{"a":["b","c"]}`, `"activePath":["a","c"]`}},
		{"unknown session", "GET", "/api/sessions/telegram/999", "", 404, []string{`"error":"NOT_FOUND"`}},
		{"bad channel", "GET", "/api/sessions/a:b/1", "", 400, []string{`"ok":false`, `"error":"INVALID_REQUEST"`}},
		{"branch bad json", "POST", "/api/sessions/telegram/42/branch", `{"from":`, 400, []string{`"error":"INVALID_REQUEST"`}},
		{"branch unknown field", "POST", "/api/sessions/telegram/42/branch", `{"node":"a"}`, 400, []string{`INVALID_REQUEST`}},
		{"branch missing from", "POST", "/api/sessions/telegram/42/branch", `{}`, 400, []string{`is required`}},
		{"branch unknown node", "POST", "/api/sessions/telegram/42/branch", `{"from":"zz"}`, 404, []string{`NOT_FOUND`}},
		{"branch", "POST", "/api/sessions/telegram/42/branch", `{"from":"a"}`, 200, []string{`"leaf":"a"`}},
		{"leaf", "POST", "/api/sessions/telegram/42/leaf", `{"nodeId":"b"}`, 200, []string{`"leaf":"b"`}},
		{"leaf persisted", "GET", "/api/sessions/telegram/42", "", 200, []string{`"leaf":"b"`}},
		{"export md", "GET", "/api/sessions/telegram/42/export?format=md", "", 200, []string{"# Session telegram:42", "hello", "hi"}},
		{"export jsonl", "GET", "/api/sessions/telegram/42/export?format=jsonl", "", 200, []string{`{"id":"c","parentId":"a"`}},
		{"export bad format", "GET", "/api/sessions/telegram/42/export?format=xml", "", 400, []string{`INVALID_REQUEST`}},
		{"delete", "DELETE", "/api/sessions/telegram/42", "", 200, []string{`"ok":true`}},
		{"deleted", "GET", "/api/sessions/telegram/42", "", 404, []string{`NOT_FOUND`}},
		{"delete again", "DELETE", "/api/sessions/telegram/42", "", 404, []string{`NOT_FOUND`}},
		{"unknown endpoint", "PUT", "/api/sessions/telegram/42/zzz", "", 404, []string{`NOT_FOUND`}},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, resp.StatusCode, c.status, b)
			continue
		}
		for _, want := range c.contains {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s: body lacks %q:\n%s", c.name, want, b)
			}
		}
		if resp.StatusCode >= 400 {
			var e struct {
				OK      bool   `json:"ok"`
				Error   string `json:"error"`
				Message string `json:"message"`
			}
			if json.Unmarshal(b, &e) != nil || e.OK || e.Error == "" || e.Message == "" {
				t.Errorf("%s: error body %s", c.name, b)
			}
		}
	}
}
