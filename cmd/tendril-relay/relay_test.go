package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore"

	"github.com/tendrilai/tendril/internal/channel/telegram/telegramtest"
	"github.com/tendrilai/tendril/internal/model/modeltest"
)

const testARN = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/tendril_runtime-AbCdE12345"

func TestSessionIDs(t *testing.T) {
	seen := map[string]int64{}
	for _, chat := range []int64{0, 1, 12, -12, 123456789, -1001234567890, 9223372036854775807, -9223372036854775808} {
		id := TelegramSessionID(chat)
		if len(id) < MinSessionIDLen || len(id) > 256 {
			t.Errorf("chat %d: %q is %d characters", chat, id, len(id))
		}
		if other, dup := seen[id]; dup {
			t.Errorf("chats %d and %d share %q", chat, other, id)
		}
		seen[id] = chat
		if TelegramSessionID(chat) != id {
			t.Errorf("chat %d: not deterministic", chat)
		}
	}
	if a, b := CronSessionID("morning"), CronSessionID("evening"); a == b || len(a) < MinSessionIDLen {
		t.Errorf("cron sessions %q %q", a, b)
	}
}

func TestChatOf(t *testing.T) {
	for _, tc := range []struct {
		update string
		chat   int64
		ok     bool
	}{
		{`{"update_id":1,"message":{"chat":{"id":5}}}`, 5, true},
		{`{"update_id":1,"edited_message":{"chat":{"id":-6}}}`, -6, true},
		{`{"update_id":1,"channel_post":{"chat":{"id":-7}}}`, -7, true},
		{`{"update_id":1,"callback_query":{"from":{"id":8},"message":{"chat":{"id":9}}}}`, 9, true},
		{`{"update_id":1,"callback_query":{"from":{"id":8}}}`, 8, true},
		{`{"update_id":1}`, 0, false},
		{`{"message":{"chat":{"id":5}}}`, 0, false},
		{`not json`, 0, false},
	} {
		chat, err := ChatOf([]byte(tc.update))
		if (err == nil) != tc.ok || chat != tc.chat {
			t.Errorf("%s: chat %d err %v", tc.update, chat, err)
		}
	}
}

// dataPlane is a fake AgentCore data plane: it checks the
// InvokeAgentRuntime wire format (POST /runtimes/{arn}/invocations with
// the ARN as one escaped path segment, ?qualifier=, the session header, a
// SigV4 Authorization for service bedrock-agentcore) and forwards the
// payload to a Tendril container's /invocations as AgentCore does.
type dataPlane struct {
	t         *testing.T
	container string // base URL of the container; "" answers 500
	mu        sync.Mutex
	calls     []planeCall
}

type planeCall struct {
	Session, Qualifier, Auth string
	Payload                  map[string]any
}

func (d *dataPlane) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The ARN is one path segment with ':' and '/' percent-encoded, as
	// the SDK (and AWS's own CLI) send it.
	want := "/runtimes/" + url.QueryEscape(testARN) + "/invocations"
	if !strings.Contains(want, "arn%3Aaws%3Abedrock-agentcore%3A") || !strings.Contains(want, "runtime%2F") {
		d.t.Fatalf("expected path %s", want)
	}
	if r.Method != http.MethodPost || r.URL.EscapedPath() != want {
		d.t.Errorf("data plane: %s %s, want POST %s", r.Method, r.URL.EscapedPath(), want)
		http.Error(w, `{"message":"unknown operation"}`, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	c := planeCall{Session: r.Header.Get("X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"), Qualifier: r.URL.Query().Get("qualifier"), Auth: r.Header.Get("Authorization")}
	if err := json.Unmarshal(body, &c.Payload); err != nil {
		d.t.Errorf("payload is not JSON: %q", body)
	}
	d.mu.Lock()
	d.calls = append(d.calls, c)
	d.mu.Unlock()
	if d.container == "" {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-ErrorType", "RuntimeClientError")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"message":"container failed"}`)
		return
	}
	req, _ := http.NewRequestWithContext(r.Context(), "POST", d.container+"/invocations", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Amzn-Bedrock-AgentCore-Runtime-Session-Id", c.Session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.Header().Set("X-Amzn-Bedrock-AgentCore-Runtime-Session-Id", c.Session)
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func (d *dataPlane) Calls() []planeCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]planeCall(nil), d.calls...)
}

// startTendril builds and runs `tendril serve` in AgentCore mode
// (ephemeral) with env, and returns its URL.
func startTendril(t *testing.T, env ...string) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "tendril")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/tendrilai/tendril/cmd/tendril").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	home := filepath.Join(dir, "home")
	os.MkdirAll(home, 0o700)
	os.WriteFile(filepath.Join(home, "tendril.json"), []byte(`{"memory": {"llmExtraction": false}}`), 0o600)
	cmd := exec.Command(bin, "serve", "--addr", addr)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TENDRIL_") && !strings.HasPrefix(kv, "TELEGRAM_") && !strings.HasPrefix(kv, "AWS_") &&
			!strings.HasPrefix(kv, "OPENAI_") && !strings.HasPrefix(kv, "MODEL_ID=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, append([]string{"TENDRIL_HOME=" + home, "TENDRIL_RUNTIME=agentcore", "TENDRIL_EPHEMERAL=1"}, env...)...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/ping"); err == nil {
			resp.Body.Close()
			return "http://" + addr
		}
	}
	t.Fatalf("tendril did not start\n%s", logs.String())
	return ""
}

func newRelay(t *testing.T, plane http.Handler, secret string) *Relay {
	ts := httptest.NewServer(plane)
	t.Cleanup(ts.Close)
	client := bedrockagentcore.New(bedrockagentcore.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret-key", ""),
		BaseEndpoint: aws.String(ts.URL),
	})
	return &Relay{Client: client, RuntimeARN: testARN, Qualifier: "prod", WebhookSecret: secret, Timeout: 30 * time.Second}
}

func apiGatewayEvent(t *testing.T, secret string, body []byte) json.RawMessage {
	t.Helper()
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "POST /telegram", RawPath: "/telegram",
		Headers:        map[string]string{"content-type": "application/json", SecretHeader: secret},
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/telegram"}},
		Body:           string(body),
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRelayEndToEnd: a Telegram update through the relay, the fake
// AgentCore data plane and a real Tendril in AgentCore mode comes back as
// a Bot API sendMessage to the fake Telegram; a wrong secret invokes
// nothing; a schedule event becomes a cron invocation.
func TestRelayEndToEnd(t *testing.T) {
	const secret = "relay-secret-0123456789"
	bot := telegramtest.New(t)
	fake := modeltest.NewOpenAI(t)
	fake.Otherwise(func(s modeltest.Seen) modeltest.Reply { return modeltest.Reply{Text: "echo: " + s.LastUserText()} })
	container := startTendril(t, "MODEL_ID=openai/gpt-test", "OPENAI_BASE_URL="+fake.BaseURL(), "OPENAI_API_KEY=k",
		"TELEGRAM_BOT_TOKEN="+telegramtest.Token, "TELEGRAM_WEBHOOK_SECRET="+secret, "TELEGRAM_API_URL="+bot.URL,
		"TELEGRAM_ALLOWED_CHAT_IDS=4242")
	plane := &dataPlane{t: t, container: container}
	r := newRelay(t, plane, secret)
	ctx := context.Background()

	// A wrong (or missing) secret is refused and invokes nothing.
	update := telegramtest.TextUpdate(900001, 4242, 4242, "Jin", "how are my figs?", time.Now())
	for _, bad := range []string{"", "relay-secret-0123456788", secret + "x"} {
		out, err := r.Handle(ctx, apiGatewayEvent(t, bad, update))
		if err != nil {
			t.Fatal(err)
		}
		if resp := out.(events.APIGatewayV2HTTPResponse); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("secret %q: %d %s", bad, resp.StatusCode, resp.Body)
		}
	}
	if n := len(plane.Calls()); n != 0 {
		t.Fatalf("a refused delivery invoked the runtime %d times", n)
	}

	out, err := r.Handle(ctx, apiGatewayEvent(t, secret, update))
	if err != nil {
		t.Fatal(err)
	}
	if resp := out.(events.APIGatewayV2HTTPResponse); resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook: %d %s", resp.StatusCode, resp.Body)
	}
	calls := plane.Calls()
	if len(calls) != 1 {
		t.Fatalf("calls %d", len(calls))
	}
	c := calls[0]
	if c.Session != TelegramSessionID(4242) || c.Qualifier != "prod" {
		t.Fatalf("session %q qualifier %q", c.Session, c.Qualifier)
	}
	if !strings.HasPrefix(c.Auth, "AWS4-HMAC-SHA256 Credential=AKIDTEST/") || !strings.Contains(c.Auth, "/us-east-1/bedrock-agentcore/aws4_request") || !strings.Contains(c.Auth, "Signature=") {
		t.Fatalf("Authorization %q is not SigV4 for bedrock-agentcore", c.Auth)
	}
	if c.Payload["invocation_type"] != "webhook" || c.Payload["channel"] != "telegram" || c.Payload["update"] == nil {
		t.Fatalf("payload %v", c.Payload)
	}
	msgs := bot.WaitMessages(t, 4242, 1)
	if !strings.Contains(msgs[0].Text, "echo: how are my figs?") {
		t.Fatalf("Telegram got %q", msgs[0].Text)
	}

	// The same delivery again (Telegram retries) is answered 200 and
	// never replied to twice.
	if out, _ := r.Handle(ctx, apiGatewayEvent(t, secret, update)); out.(events.APIGatewayV2HTTPResponse).StatusCode != 200 {
		t.Fatalf("retried delivery: %v", out)
	}

	// A schedule event: a cron invocation that runs Tendril's due jobs.
	res, err := r.Handle(ctx, json.RawMessage(`{"name":"morning"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := res.(map[string]any)
	meta, _ := body["metadata"].(map[string]any)
	if body["ok"] != true || meta["invocation_type"] != "cron" {
		t.Fatalf("cron answer %v", res)
	}
	calls = plane.Calls()
	last := calls[len(calls)-1]
	if last.Session != CronSessionID("morning") || last.Payload["invocation_type"] != "cron" || last.Payload["channel"] != "cron" {
		t.Fatalf("cron call %+v", last)
	}
	if n := len(bot.Messages(4242)); n != 1 {
		t.Fatalf("chat got %d messages, want 1 (the retry must not reply again)", n)
	}
}

func TestRelayRuntimeFailure(t *testing.T) {
	plane := &dataPlane{t: t} // answers 500
	r := newRelay(t, plane, "s")
	update := telegramtest.TextUpdate(1, 5, 5, "A", "hi", time.Now())
	out, err := r.Handle(context.Background(), apiGatewayEvent(t, "s", update))
	if err != nil {
		t.Fatal(err)
	}
	if resp := out.(events.APIGatewayV2HTTPResponse); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("runtime failure answered %d, want 502 so Telegram retries", resp.StatusCode)
	}
	if _, err := r.Handle(context.Background(), json.RawMessage(`{"name":"x"}`)); err == nil {
		t.Fatal("a failed cron invocation must fail the Lambda (the Scheduler retries)")
	}
	// Malformed updates are refused before any invocation.
	before := len(plane.Calls())
	out, _ = r.Handle(context.Background(), apiGatewayEvent(t, "s", []byte(`{"message":{}}`)))
	if resp := out.(events.APIGatewayV2HTTPResponse); resp.StatusCode != 400 || len(plane.Calls()) != before {
		t.Fatalf("malformed update: %d, calls %d", resp.StatusCode, len(plane.Calls())-before)
	}
}

func TestFromEnv(t *testing.T) {
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	if _, err := fromEnv(context.Background(), get); err == nil || !strings.Contains(err.Error(), "AGENT_RUNTIME_ARN") {
		t.Fatalf("missing ARN: %v", err)
	}
	env["AGENT_RUNTIME_ARN"], env["RELAY_TIMEOUT"] = testARN, "soon"
	if _, err := fromEnv(context.Background(), get); err == nil || !strings.Contains(err.Error(), "RELAY_TIMEOUT") {
		t.Fatalf("bad timeout: %v", err)
	}
	env["RELAY_TIMEOUT"], env["AWS_REGION"] = "10s", "us-east-1"
	t.Setenv("AWS_REGION", "us-east-1")
	r, err := fromEnv(context.Background(), get)
	if err != nil || r.Timeout != 10*time.Second || r.RuntimeARN != testARN {
		t.Fatalf("%+v %v", r, err)
	}
}
