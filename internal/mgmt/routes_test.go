package mgmt

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/runtime"
	"github.com/tendrilai/tendril/internal/session"
)

// do sends method path (under Prefix) with a JSON body and decodes the
// JSON reply.
func do(t *testing.T, base, method, path string, body any) (*http.Response, map[string]any) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, base+Prefix+path, rd)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: %d, reply is not JSON: %v", method, path, res.StatusCode, err)
	}
	return res, out
}

// TestJobsAddValidatesAndRecordsSource: POST /jobs refuses an actor that
// /invocations refuses and a task holding a NUL byte (every run would
// fail) and a blank name, and
// records where the job came from: "api" over HTTP, "cli" on the local
// socket; an HTTP caller cannot claim another source.
func TestJobsAddValidatesAndRecordsSource(t *testing.T) {
	a := openAssistant(t)
	srv := httptest.NewServer(Handler(a))
	defer srv.Close()
	job := func(name, actor, source string) map[string]any {
		m := map[string]any{"name": name, "every": "5m", "task": "water the figs", "actor_id": actor}
		if source != "" {
			m["source"] = source
		}
		return m
	}
	for _, tc := range []struct {
		body map[string]any
		want string
	}{
		{job("x", "api:a~b", ""), `contains "~"`},
		{job("", "api:a", ""), "name is required"},
		{job("   ", "api:a", ""), "name is required"},
		{job("x", "api:a", "cli"), `source "cli"`},
		{job("x", "api:a", "config"), `source "config"`},
		{map[string]any{"name": "x", "every": "5m", "task": "water\x00the figs", "actor_id": "api:a"}, "NUL"},
	} {
		res, out := do(t, srv.URL, "POST", "/jobs", tc.body)
		if msg, _ := out["message"].(string); res.StatusCode != http.StatusBadRequest || out["error"] != "INVALID_REQUEST" || !strings.Contains(msg, tc.want) {
			t.Errorf("%v: %d %v, want 400 INVALID_REQUEST containing %q", tc.body, res.StatusCode, out, tc.want)
		}
	}
	if jobs, err := a.Jobs(context.Background(), ""); err != nil || len(jobs) != 0 {
		t.Fatalf("refused jobs were added: %v %v", jobs, err)
	}
	for _, src := range []string{"", "api"} {
		res, out := do(t, srv.URL, "POST", "/jobs", job("figs"+src, "api:a", src))
		if res.StatusCode != http.StatusOK || out["source"] != "api" {
			t.Errorf("source %q over HTTP: %d %v, want 200 with source api", src, res.StatusCode, out)
		}
	}

	rt, err := runtime.New(runtime.Options{Invoker: a})
	if err != nil {
		t.Fatal(err)
	}
	rt.Mount(Prefix+"/", Handler(a), true)
	local := httptest.NewServer(rt.LocalHandler())
	defer local.Close()
	res, out := do(t, local.URL, "POST", "/jobs", job("basil", "api:a", ""))
	if res.StatusCode != http.StatusOK || out["source"] != "cli" {
		t.Fatalf("on the local socket: %d %v, want 200 with source cli", res.StatusCode, out)
	}
}

// TestSessionsClearSaysWhatIsMissing: neither keys nor all is not "both".
func TestSessionsClearSaysWhatIsMissing(t *testing.T) {
	srv := httptest.NewServer(Handler(openAssistant(t)))
	defer srv.Close()
	for _, tc := range []struct {
		body    ClearRequest
		want    string
		notWant string
	}{
		{ClearRequest{}, "give keys or all", "not both"},
		{ClearRequest{Keys: []string{"api:x"}, All: true}, "give keys or all, not both", ""},
	} {
		res, out := do(t, srv.URL, "POST", "/sessions/clear", tc.body)
		msg, _ := out["message"].(string)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(msg, tc.want) || (tc.notWant != "" && strings.Contains(msg, tc.notWant)) {
			t.Errorf("%+v: %d %q, want 400 containing %q", tc.body, res.StatusCode, msg, tc.want)
		}
	}
}

// TestBranchFromUnknownNode: a node the session does not have is a 404
// "no such node", not "no such session"; an unknown session stays "no
// such session".
func TestBranchFromUnknownNode(t *testing.T) {
	a := openAssistant(t)
	ctx := context.Background()
	k, err := a.ParseSessionKey("", "api:민수")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	if err := a.Sessions().Append(ctx, k,
		session.Node{ID: "msg_1", Role: session.RoleUser, Text: "hi", Timestamp: now},
		session.Node{ID: "msg_2", ParentID: "msg_1", Role: session.RoleAssistant, Text: "hello", Timestamp: now}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(a))
	defer srv.Close()
	res, out := do(t, srv.URL, "POST", "/sessions/"+url.PathEscape("api:민수")+"/branch", map[string]string{"from": "msg_NONEXISTENT"})
	msg, _ := out["message"].(string)
	if res.StatusCode != http.StatusNotFound || out["error"] != "NOT_FOUND" || !strings.Contains(msg, "no such node") || strings.Contains(msg, "no such session") {
		t.Fatalf("unknown node: %d %v, want 404 NOT_FOUND saying no such node", res.StatusCode, out)
	}
	res, out = do(t, srv.URL, "POST", "/sessions/api:nobody/branch", map[string]string{"from": "msg_1"})
	if msg, _ := out["message"].(string); res.StatusCode != http.StatusNotFound || !strings.Contains(msg, "no such session") {
		t.Fatalf("unknown session: %d %v, want 404 saying no such session", res.StatusCode, out)
	}
	if res, out := do(t, srv.URL, "POST", "/sessions/"+url.PathEscape("api:민수")+"/branch", map[string]string{"from": "msg_1"}); res.StatusCode != http.StatusOK {
		t.Fatalf("known node: %d %v", res.StatusCode, out)
	}
}

// TestWrongMethodIs405: a route asked with another method is a JSON 405
// with Allow, not a 404; an unknown path stays a JSON 404.
func TestWrongMethodIs405(t *testing.T) {
	srv := httptest.NewServer(Handler(openAssistant(t)))
	defer srv.Close()
	for _, tc := range []struct{ method, path, allow string }{
		{"GET", "/jobs/x/run", "POST"},
		{"PUT", "/jobs", "GET, HEAD, POST"},
		{"GET", "/memory/forget", "POST"},
		{"DELETE", "/memory/records/r1", "GET, HEAD"},
	} {
		res, out := do(t, srv.URL, tc.method, tc.path, nil)
		if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != tc.allow || out["error"] != "METHOD_NOT_ALLOWED" {
			t.Errorf("%s %s: %d Allow %q %v, want 405 Allow %q", tc.method, tc.path, res.StatusCode, res.Header.Get("Allow"), out, tc.allow)
		}
	}
	res, out := do(t, srv.URL, "GET", "/nope", nil)
	if msg, _ := out["message"].(string); res.StatusCode != http.StatusNotFound || !strings.Contains(msg, "no such endpoint") {
		t.Fatalf("GET /nope: %d %v", res.StatusCode, out)
	}
}
