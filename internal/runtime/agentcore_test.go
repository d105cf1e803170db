package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"net/http/httptest"

	"github.com/coder/websocket"
)

func TestAgentCoreAddressAndMounts(t *testing.T) {
	if _, err := New(Options{Addr: "0.0.0.0:8080", Invoker: &recInvoker{}}); !errors.Is(err, ErrUnsafeAddr) {
		t.Fatalf("self-hosted 0.0.0.0 without token: %v", err)
	}
	mgmt := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "management") })
	for _, tc := range []struct {
		name          string
		token, bearer string
		wantMgmt      int
	}{
		{name: "no token: management not mounted", wantMgmt: 404},
		{name: "token, none sent", token: "s3cret", wantMgmt: 401},
		{name: "token sent", token: "s3cret", bearer: "s3cret", wantMgmt: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Options{Addr: "0.0.0.0:8080", AgentCore: true, AuthToken: tc.token, Invoker: &recInvoker{}})
			if err != nil {
				t.Fatalf("agentcore on 0.0.0.0: %v", err)
			}
			s.Mount("/api/v1/", mgmt, true)
			s.Mount("/", mgmt, true) // the dashboard
			ts := newTestServerFrom(t, s)
			for _, path := range []string{"/api/v1/sessions", "/", "/memory"} {
				req, _ := http.NewRequest("GET", ts+path, nil)
				if tc.bearer != "" {
					req.Header.Set("Authorization", "Bearer "+tc.bearer)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tc.wantMgmt {
					t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, tc.wantMgmt)
				}
			}
			// The contract's routes never need the token.
			resp, err := http.Get(ts + "/ping")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("/ping: %v %v", resp, err)
			}
			resp.Body.Close()
			r, out := post(t, ts, `{"prompt":"hi"}`, map[string]string{SessionHeader: strings.Repeat("s", 33)})
			if r.StatusCode != 200 || out["ok"] != true {
				t.Fatalf("/invocations without token: %d %v", r.StatusCode, out)
			}
		})
	}
}

func newTestServerFrom(t *testing.T, s *Server) string {
	t.Helper()
	ts := httptestServer(t, s.Handler())
	return ts
}

func TestAgentCoreRequestShapes(t *testing.T) {
	inv := &recInvoker{}
	ts := newTestServer(t, inv, Options{AgentCore: true})
	sess := "telegram-chat-0000000000000000000012345"
	for _, tc := range []struct {
		name, body  string
		hdr         map[string]string
		status      int
		wantMessage string
		wantActor   string
		wantSession string
	}{
		{"message", `{"message":"m","actor_id":"telegram:1"}`, nil, 200, "m", "telegram:1", ""},
		{"prompt alias", `{"prompt":"p"}`, map[string]string{SessionHeader: sess}, 200, "p", "agentcore:owner", sess},
		{"input string", `{"input":"i","actor_id":"a"}`, nil, 200, "i", "a", ""},
		{"input object prompt", `{"input":{"prompt":"ip"},"actor_id":"a"}`, nil, 200, "ip", "a", ""},
		{"input object message", `{"input":{"message":"im"},"actor_id":"a"}`, nil, 200, "im", "a", ""},
		{"message wins over aliases", `{"message":"m","prompt":"p","input":"i","actor_id":"a"}`, nil, 200, "m", "a", ""},
		{"runtime user header", `{"prompt":"p"}`, map[string]string{UserHeader: "jin"}, 200, "p", "agentcore:jin", ""},
		{"overlong user header falls back", `{"prompt":"p"}`, map[string]string{UserHeader: strings.Repeat("u", 300)}, 200, "p", "agentcore:owner", ""},
		{"body names the authenticated user", `{"prompt":"p","actor_id":"agentcore:jin"}`, map[string]string{UserHeader: "jin"}, 200, "p", "agentcore:jin", ""},
		{"body names another actor than the authenticated user", `{"prompt":"p","actor_id":"api:alice"}`, map[string]string{UserHeader: "eve"}, 403, "", "", ""},
		{"input of another type", `{"input":42,"actor_id":"a"}`, nil, 400, "", "", ""},
		{"input object without text", `{"input":{"x":1},"actor_id":"a"}`, nil, 400, "", "", ""},
		{"nothing", `{"actor_id":"a"}`, nil, 400, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(inv.reqs)
			resp, out := post(t, ts.URL, tc.body, tc.hdr)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %v", resp.StatusCode, tc.status, out)
			}
			if tc.status != 200 {
				want := "INVALID_REQUEST"
				if tc.status == 403 {
					want = "FORBIDDEN"
				}
				if out["error"] != want || len(inv.reqs) != n {
					t.Fatalf("refusal %v (invoked %d)", out, len(inv.reqs)-n)
				}
				return
			}
			got := inv.reqs[len(inv.reqs)-1]
			if got.Message != tc.wantMessage || got.ActorID != tc.wantActor || got.SessionID != tc.wantSession {
				t.Fatalf("request %+v", got)
			}
		})
	}
	// Outside AgentCore mode a missing actor is still refused.
	ts2 := newTestServer(t, &recInvoker{}, Options{})
	if resp, out := post(t, ts2.URL, `{"prompt":"p"}`, nil); resp.StatusCode != 400 || out["error"] != "INVALID_ACTOR_ID" {
		t.Fatalf("self-hosted without actor: %d %v", resp.StatusCode, out)
	}
}

// fakeWebhook records what the runtime hands to the Telegram webhook.
type fakeWebhook struct {
	mu      sync.Mutex
	bodies  []string
	secrets []string
	status  int
}

func (f *fakeWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies = append(f.bodies, string(b))
	f.secrets = append(f.secrets, r.Header.Get(WebhookSecretHeader))
	status := f.status
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if status != 0 && status != 200 {
		w.WriteHeader(status)
		io.WriteString(w, `{"ok":false,"error":"STORE_UNAVAILABLE","description":"update not stored; retry"}`)
		return
	}
	io.WriteString(w, `{"ok":true}`)
}

func TestWebhookAndTickInvocations(t *testing.T) {
	inv := &recInvoker{}
	wh := &fakeWebhook{}
	ticks := 0
	ts := newTestServer(t, inv, Options{AgentCore: true, Webhook: wh, WebhookSecret: "tg-secret",
		Tick: func(context.Context) (int, error) { ticks++; return 3, nil }})
	update := `{"update_id":7,"message":{"message_id":1,"chat":{"id":42,"type":"private"},"text":"hi"}}`
	resp, out := post(t, ts.URL, `{"invocation_type":"webhook","channel":"telegram","update":`+update+`}`, nil)
	if resp.StatusCode != 200 || out["ok"] != true {
		t.Fatalf("webhook invocation: %d %v", resp.StatusCode, out)
	}
	if len(wh.bodies) != 1 || wh.bodies[0] != update || wh.secrets[0] != "tg-secret" || len(inv.reqs) != 0 {
		t.Fatalf("webhook got %q secret %q; turns %d", wh.bodies, wh.secrets, len(inv.reqs))
	}
	wh.status = 503
	if resp, out := post(t, ts.URL, `{"invocation_type":"webhook","update":`+update+`}`, nil); resp.StatusCode != 503 || out["error"] != "STORE_UNAVAILABLE" {
		t.Fatalf("webhook failure passes through: %d %v", resp.StatusCode, out)
	}
	resp, out = post(t, ts.URL, `{"invocation_type":"cron"}`, nil)
	meta, _ := out["metadata"].(map[string]any)
	if resp.StatusCode != 200 || ticks != 1 || meta["jobs_run"] != float64(3) {
		t.Fatalf("tick: %d %v (ticks %d)", resp.StatusCode, out, ticks)
	}
	// A cron invocation with a message is an ordinary turn.
	if resp, _ := post(t, ts.URL, `{"invocation_type":"cron","message":"tasks","actor_id":"telegram:42"}`, nil); resp.StatusCode != 200 || len(inv.reqs) != 1 || inv.reqs[0].InvocationType != "cron" {
		t.Fatalf("cron turn: %d %v", resp.StatusCode, inv.reqs)
	}

	// Without a bot or a scheduler both are refused, clearly.
	bare := newTestServer(t, &recInvoker{}, Options{AgentCore: true})
	if resp, out := post(t, bare.URL, `{"invocation_type":"webhook","update":`+update+`}`, nil); resp.StatusCode != 400 || !strings.Contains(out["message"].(string), "TELEGRAM_BOT_TOKEN") {
		t.Fatalf("webhook without bot: %d %v", resp.StatusCode, out)
	}
	if resp, _ := post(t, bare.URL, `{"invocation_type":"cron"}`, nil); resp.StatusCode != 400 {
		t.Fatalf("tick without scheduler: %d", resp.StatusCode)
	}
}

func wsDial(t *testing.T, url string, hdr http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	return websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(url, "http")+"/ws", &websocket.DialOptions{HTTPHeader: hdr})
}

func readTurn(t *testing.T, c *websocket.Conn) []map[string]any {
	t.Helper()
	var frames []map[string]any
	for {
		typ, b, err := c.Read(context.Background())
		if err != nil {
			t.Fatalf("read after %d frames: %v", len(frames), err)
		}
		if typ != websocket.MessageText {
			t.Fatalf("frame type %v", typ)
		}
		var f map[string]any
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f)
		if f["type"] == "final" {
			return frames
		}
	}
}

func TestWebSocket(t *testing.T) {
	inv := &recInvoker{}
	ts := newTestServer(t, inv, Options{AgentCore: true})
	sess := strings.Repeat("w", 40)
	c, _, err := wsDial(t, ts.URL, http.Header{SessionHeader: {sess}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	ctx := context.Background()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"prompt":"first","actor_id":"web:me"}`)); err != nil {
		t.Fatal(err)
	}
	frames := readTurn(t, c)
	final := frames[len(frames)-1]
	if frames[0]["type"] != "start" || final["ok"] != true || len(frames) < 3 {
		t.Fatalf("frames %v", frames)
	}
	var text string
	for _, f := range frames[1 : len(frames)-1] {
		text += f["text"].(string)
	}
	if text != final["text"] {
		t.Fatal("deltas do not add up to the final text")
	}
	// Plain text is the message; the upgrade's session header applies.
	if err := c.Write(ctx, websocket.MessageText, []byte("second")); err != nil {
		t.Fatal(err)
	}
	readTurn(t, c)
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"actor_id":"web:me"}`)); err != nil {
		t.Fatal(err)
	}
	bad := readTurn(t, c)
	if len(bad) != 1 || bad[0]["error"] != "INVALID_REQUEST" {
		t.Fatalf("invalid frame answered %v", bad)
	}
	if len(inv.reqs) != 2 || inv.reqs[0].Message != "first" || inv.reqs[1].Message != "second" ||
		inv.reqs[1].ActorID != "agentcore:owner" || inv.reqs[0].SessionID != sess || inv.reqs[1].SessionID != sess {
		t.Fatalf("requests %+v", inv.reqs)
	}
	// Binary frames are refused with 1003.
	if err := c.Write(ctx, websocket.MessageBinary, []byte{1, 2}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusUnsupportedData {
		t.Fatalf("binary frame: %v", err)
	}
}

func TestWebSocketNeedsTokenWhenSelfHosted(t *testing.T) {
	ts := newTestServer(t, &recInvoker{}, Options{AuthToken: "tok"})
	if _, resp, err := wsDial(t, ts.URL, nil); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("without bearer: %v %v", resp, err)
	}
	c, _, err := wsDial(t, ts.URL, http.Header{"Authorization": {"Bearer tok"}})
	if err != nil {
		t.Fatal(err)
	}
	c.Close(websocket.StatusNormalClosure, "")
}

func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}
