package assistant

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/persona"
	"github.com/tendrilai/tendril/internal/session/jsonl"
	"github.com/tendrilai/tendril/internal/testenv"
)

// doctorConfig is the default configuration in a fresh home: no model, no
// services.
func doctorConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Home = t.TempDir()
	return &cfg
}

// fakeEndpoint answers every request with 401 (any status means reachable)
// and records the paths it was asked for.
func fakeEndpoint(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), paths...) }
}

// closedURL is an http URL nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func find(rep DoctorReport, name string) []Check {
	var out []Check
	for _, c := range rep.Checks {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

func one(t *testing.T, rep DoctorReport, name string) Check {
	t.Helper()
	cs := find(rep, name)
	if len(cs) != 1 {
		t.Fatalf("%d %q checks in %+v", len(cs), name, rep.Checks)
	}
	return cs[0]
}

func TestDoctorDefaults(t *testing.T) {
	cfg := doctorConfig(t)
	cfg.Home = filepath.Join(cfg.Home, "new") // created by the home check
	rep := Doctor(context.Background(), cfg, DoctorOptions{})
	if !rep.OK {
		t.Fatalf("defaults must pass: %+v", rep.Checks)
	}
	var names []string
	for _, c := range rep.Checks {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "home,model,persona,skills,skills,postgres,redis,telegram,addr" {
		t.Fatalf("checks %s", got)
	}
	if c := one(t, rep, "home"); c.Status != CheckOK || !strings.Contains(c.Detail, "is writable") {
		t.Fatalf("home %+v", c)
	}
	if ents, _ := os.ReadDir(cfg.Home); len(ents) != 0 {
		t.Fatalf("doctor left files in home: %v", ents)
	}
	if c := one(t, rep, "model"); c.Status != CheckWarn {
		t.Fatalf("no model: %+v", c)
	}
	if c := one(t, rep, "persona"); c.Status != CheckOK || !strings.Contains(c.Detail, "embedded:") {
		t.Fatalf("persona %+v", c)
	}
	sk := find(rep, "skills")
	if sk[0].Status != CheckOK || sk[1].Status != CheckWarn || !strings.Contains(sk[1].Detail, "no manifest at") {
		t.Fatalf("skills %+v", sk)
	}
	for _, n := range []string{"postgres", "redis", "telegram"} {
		if c := one(t, rep, n); c.Status != CheckSkip {
			t.Fatalf("%s unset: %+v", n, c)
		}
	}
	if c := one(t, rep, "addr"); c.Status != CheckOK || c.Detail != cfg.Addr {
		t.Fatalf("addr %+v", c)
	}
	if rep.Home != cfg.Home || rep.ConfigFile != "" {
		t.Fatalf("home %q file %q", rep.Home, rep.ConfigFile)
	}
}

func TestDoctorHomeNotWritable(t *testing.T) {
	cfg := doctorConfig(t)
	f := filepath.Join(cfg.Home, "file")
	os.WriteFile(f, nil, 0o600)
	cfg.Home = f // a file, not a directory
	rep := Doctor(context.Background(), cfg, DoctorOptions{})
	if c := one(t, rep, "home"); c.Status != CheckFail || rep.OK {
		t.Fatalf("home on a file: %+v ok=%v", c, rep.OK)
	}
}

func TestDoctorModels(t *testing.T) {
	srv, paths := fakeEndpoint(t)
	cfg := doctorConfig(t)
	cfg.Model.ID = "openai/gpt-x"
	cfg.Model.VisionID = "openai/gpt-x" // duplicates are checked once
	cfg.Model.Fallbacks = []string{"anthropic/claude-y", "ollama/llama", "nope/z", "anthropic/claude-no-key", "bedrock/titan"}
	cfg.Providers.OpenAIBaseURL = srv.URL + "/v1/"
	cfg.Providers.OllamaBaseURL = srv.URL + "/ollama"
	cfg.Providers.AnthropicBaseURL = srv.URL
	cfg.Providers.AnthropicAPIKey = "sk-ant-secret-1234"
	cfg.Providers.BedrockEndpoint = closedURL(t)
	rep := Doctor(context.Background(), cfg, DoctorOptions{HTTPClient: srv.Client(), Timeout: 5 * time.Second})

	host := strings.TrimPrefix(srv.URL, "http://")
	if c := one(t, rep, "model openai/gpt-x"); c.Status != CheckOK || c.Detail != "OpenAI-compatible gpt-x reachable at http://"+host+" (HTTP 401)" {
		t.Fatalf("openai %+v", c)
	}
	if c := one(t, rep, "model anthropic/claude-y"); c.Status != CheckOK || !strings.Contains(c.Detail, "Anthropic claude-y reachable") {
		t.Fatalf("anthropic %+v", c)
	}
	if c := one(t, rep, "model ollama/llama"); c.Status != CheckOK {
		t.Fatalf("ollama %+v", c)
	}
	if c := one(t, rep, "model nope/z"); c.Status != CheckFail || !strings.Contains(c.Detail, "unknown provider") {
		t.Fatalf("unknown provider %+v", c)
	}
	if c := one(t, rep, "model bedrock/titan"); c.Status != CheckFail || !strings.Contains(c.Detail, "Bedrock titan unreachable at http://127.0.0.1:") {
		t.Fatalf("bedrock endpoint down %+v", c)
	}
	if rep.OK {
		t.Fatal("a failed model check must clear OK")
	}
	got := strings.Join(paths(), ",")
	if !strings.Contains(got, "/v1/models") || !strings.Contains(got, "/ollama/models") {
		t.Fatalf("probed %s", got)
	}
	// The same reference without a key fails before any request.
	cfg.Providers.AnthropicAPIKey = ""
	cfg.Model.Fallbacks = nil
	cfg.Model.ID, cfg.Model.VisionID = "anthropic/claude-y", ""
	rep = Doctor(context.Background(), cfg, DoctorOptions{HTTPClient: srv.Client()})
	if c := one(t, rep, "model anthropic/claude-y"); c.Status != CheckFail || c.Detail != "ANTHROPIC_API_KEY is not set" {
		t.Fatalf("anthropic without key %+v", c)
	}
	// OpenAI itself needs a key; a compatible server does not.
	cfg.Model.ID = "openai/gpt-x"
	cfg.Providers.OpenAIBaseURL = ""
	rep = Doctor(context.Background(), cfg, DoctorOptions{HTTPClient: srv.Client()})
	if c := one(t, rep, "model openai/gpt-x"); c.Status != CheckFail || c.Detail != "OPENAI_API_KEY is not set" {
		t.Fatalf("openai without key %+v", c)
	}
}

func TestDoctorBedrockCredentials(t *testing.T) {
	cfg := doctorConfig(t)
	cfg.Model.ID = "bedrock/titan"
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("HOME", t.TempDir())
	if c := one(t, Doctor(context.Background(), cfg, DoctorOptions{}), "model bedrock/titan"); c.Status != CheckWarn {
		t.Fatalf("no AWS credentials: %+v", c)
	}
	t.Setenv("AWS_PROFILE", "dev")
	if c := one(t, Doctor(context.Background(), cfg, DoctorOptions{}), "model bedrock/titan"); c.Status != CheckOK {
		t.Fatalf("AWS_PROFILE set: %+v", c)
	}
}

func TestDoctorTelegramHidesToken(t *testing.T) {
	srv, paths := fakeEndpoint(t)
	cfg := doctorConfig(t)
	cfg.Telegram.BotToken = "123456:SECRET-bot-token"
	rep := Doctor(context.Background(), cfg, DoctorOptions{HTTPClient: srv.Client()})
	if c := one(t, rep, "telegram"); c.Status != CheckFail || !strings.Contains(c.Detail, "TELEGRAM_WEBHOOK_SECRET") {
		t.Fatalf("token without secret %+v", c)
	}
	cfg.Telegram.WebhookSecret = "hook-secret-xyz"
	cfg.Telegram.APIURL = srv.URL + "/"
	rep = Doctor(context.Background(), cfg, DoctorOptions{HTTPClient: srv.Client()})
	if c := one(t, rep, "telegram"); c.Status != CheckOK || c.Detail != "Bot API reachable at "+srv.URL+" (HTTP 401)" {
		t.Fatalf("telegram %+v", c)
	}
	if p := paths(); len(p) != 1 || p[0] != "/bot123456:SECRET-bot-token/getMe" {
		t.Fatalf("probed %v", p)
	}
	cfg.Telegram.APIURL = closedURL(t)
	rep = Doctor(context.Background(), cfg, DoctorOptions{})
	if c := one(t, rep, "telegram"); c.Status != CheckFail || !strings.Contains(c.Detail, "unreachable") {
		t.Fatalf("telegram down %+v", c)
	}
	cfg.Telegram.APIURL = "http://[::1" // malformed: url.Error would repeat the token
	rep = Doctor(context.Background(), cfg, DoctorOptions{})
	if c := one(t, rep, "telegram"); c.Status != CheckFail {
		t.Fatalf("malformed API URL %+v", c)
	}
	// Neither a check nor the JSON document shows a secret.
	b, _ := json.Marshal(rep)
	for _, secret := range []string{"SECRET-bot-token", "hook-secret-xyz"} {
		if strings.Contains(string(b), secret) {
			t.Fatalf("report shows %q: %s", secret, b)
		}
	}
}

func TestDoctorAddr(t *testing.T) {
	cfg := doctorConfig(t)
	for _, tc := range []struct {
		addr, token, status string
	}{
		{"127.0.0.1:8080", "", CheckOK},
		{"localhost:8080", "", CheckOK},
		{"[::1]:8080", "", CheckOK},
		{"0.0.0.0:8080", "", CheckFail},
		{"0.0.0.0:8080", "tok", CheckFail}, // too short to guard a non-loopback bind
		{"0.0.0.0:8080", "0123456789abcdef", CheckOK},
		{"127.0.0.1:8080", "tok", CheckOK},
		{"no-port", "", CheckFail},
	} {
		cfg.Addr, cfg.AuthToken = tc.addr, tc.token
		rep := Doctor(context.Background(), cfg, DoctorOptions{})
		if c := one(t, rep, "addr"); c.Status != tc.status || rep.OK != (tc.status == CheckOK) {
			t.Errorf("addr %q token %q: %+v ok=%v", tc.addr, tc.token, c, rep.OK)
		}
	}
}

func TestDoctorPersonaAndSkills(t *testing.T) {
	cfg := doctorConfig(t)
	if _, err := persona.Install(cfg.Home); err != nil {
		t.Fatal(err)
	}
	rep := Doctor(context.Background(), cfg, DoctorOptions{})
	if c := one(t, rep, "persona"); c.Status != CheckOK || !strings.Contains(c.Detail, filepath.Join(cfg.Home, "persona.md")) {
		t.Fatalf("installed persona %+v", c)
	}
	if c := one(t, rep, "skills"); c.Status != CheckOK || strings.HasPrefix(c.Detail, "0 active") {
		t.Fatalf("installed skills %+v", c)
	}
	// A manifest naming a missing skill: a warning for that skill only.
	os.WriteFile(filepath.Join(cfg.Home, "skills.json"), []byte(`{"skills":["ghost"]}`), 0o600)
	rep = Doctor(context.Background(), cfg, DoctorOptions{})
	if c := one(t, rep, "skill ghost"); c.Status != CheckWarn || !strings.HasPrefix(c.Detail, "skipped: ") {
		t.Fatalf("missing skill %+v", c)
	}
	// An unreadable manifest: no skills active, still only a warning.
	os.WriteFile(filepath.Join(cfg.Home, "skills.json"), []byte(`not json`), 0o600)
	rep = Doctor(context.Background(), cfg, DoctorOptions{})
	if c := one(t, rep, "skills"); c.Status != CheckWarn || !strings.Contains(c.Detail, "manifest unreadable") {
		t.Fatalf("bad manifest %+v", c)
	}
	// A broken persona fails.
	os.WriteFile(filepath.Join(cfg.Home, "persona.md"), []byte("---\nname: [\n---\n"), 0o600)
	rep = Doctor(context.Background(), cfg, DoctorOptions{})
	if c := one(t, rep, "persona"); c.Status != CheckFail || rep.OK {
		t.Fatalf("broken persona %+v", c)
	}
}

func TestDoctorServicesDown(t *testing.T) {
	cfg := doctorConfig(t)
	dead := strings.TrimPrefix(closedURL(t), "http://")
	cfg.DatabaseURL = "postgres://u:pgpass-secret@" + dead + "/db?sslmode=disable"
	cfg.RedisURL = "redis://:redispass-secret@" + dead + "/0"
	rep := Doctor(context.Background(), cfg, DoctorOptions{Timeout: 5 * time.Second})
	for _, n := range []string{"postgres", "redis"} {
		if c := one(t, rep, n); c.Status != CheckFail {
			t.Fatalf("%s down: %+v", n, c)
		}
	}
	cfg.RedisURL = "notredis://x"
	if c := one(t, Doctor(context.Background(), cfg, DoctorOptions{}), "redis"); c.Status != CheckFail {
		t.Fatalf("bad redis URL: %+v", c)
	}
	// The masked configuration hides the passwords.
	b, _ := json.Marshal(rep)
	for _, secret := range []string{"pgpass-secret", "redispass-secret"} {
		if strings.Contains(string(b), secret) {
			t.Fatalf("report shows %q: %s", secret, b)
		}
	}
}

func TestDoctorServicesUp(t *testing.T) {
	pgURL := testenv.PostgresSchema(t)
	rd := testenv.Redis(t)
	cfg := doctorConfig(t)
	cfg.DatabaseURL, cfg.RedisURL = pgURL, "redis://"+rd+"/0"
	rep := Doctor(context.Background(), cfg, DoctorOptions{Timeout: 5 * time.Second})
	if c := one(t, rep, "redis"); c.Status != CheckOK || c.Detail != "reachable" {
		t.Fatalf("redis: %+v", c)
	}
	if c := one(t, rep, "postgres"); c.Status != CheckOK || !strings.HasPrefix(c.Detail, "reachable, PostgreSQL ") {
		t.Fatalf("postgres: %+v", c)
	}
	// A fresh database: every migration pending, River's tables absent.
	if c := one(t, rep, "migrations"); c.Status != CheckWarn || !strings.Contains(c.Detail, "0 applied") {
		t.Fatalf("migrations before the first start: %+v", c)
	}
	if c := one(t, rep, "river"); c.Status != CheckWarn {
		t.Fatalf("river before the first start: %+v", c)
	}
	// After an Open (what serve does), everything is applied.
	cfg.RedisURL = ""
	a, err := Open(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	rep = Doctor(context.Background(), cfg, DoctorOptions{Timeout: 5 * time.Second})
	for _, n := range []string{"postgres", "migrations", "river"} {
		if c := one(t, rep, n); c.Status != CheckOK {
			t.Fatalf("%s after Open: %+v", n, c)
		}
	}
}

func TestDoctorTimeout(t *testing.T) {
	// An endpoint that never answers fails at the deadline, not later.
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(block); srv.Close() })
	cfg := doctorConfig(t)
	cfg.Model.ID = "ollama/llama"
	cfg.Providers.OllamaBaseURL = srv.URL
	start := time.Now()
	rep := Doctor(context.Background(), cfg, DoctorOptions{Timeout: 200 * time.Millisecond})
	if c := one(t, rep, "model ollama/llama"); c.Status != CheckFail || time.Since(start) > 3*time.Second {
		t.Fatalf("hung endpoint: %+v after %v", c, time.Since(start))
	}
}

func TestDoctorReportJSON(t *testing.T) {
	cfg := doctorConfig(t)
	cfg.Path = filepath.Join(cfg.Home, "tendril.json")
	cfg.AuthToken = "auth-token-abcdefgh"
	cfg.Providers.OpenAIAPIKey = "sk-openai-9876"
	b, err := json.Marshal(Doctor(context.Background(), cfg, DoctorOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	var js map[string]any
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"config", "home", "configFile", "checks", "ok"} {
		if _, ok := js[k]; !ok {
			t.Fatalf("JSON lacks %q: %s", k, b)
		}
	}
	if js["configFile"] != cfg.Path || js["home"] != cfg.Home || js["ok"] != true {
		t.Fatalf("JSON %s", b)
	}
	conf := js["config"].(map[string]any)
	if conf["authToken"] != "****efgh" || conf["providers"].(map[string]any)["openaiApiKey"] != "****9876" {
		t.Fatalf("secrets not masked: %v", conf)
	}
	c := js["checks"].([]any)[0].(map[string]any)
	if c["name"] != "home" || c["status"] != "ok" || c["detail"] == "" {
		t.Fatalf("check JSON %v", c)
	}
	if strings.Contains(string(b), "auth-token-abcdefgh") || strings.Contains(string(b), "sk-openai-9876") {
		t.Fatalf("secret in JSON %s", b)
	}
}

// TestOpenSessionStoreRedis: an unreachable Redis stops the start with an
// error naming it (as an unreachable database does) instead of a server
// that reports Healthy and fails every turn; a reachable one answers the
// Ping that Assistant.Ready uses.
func TestOpenSessionStoreRedis(t *testing.T) {
	cfg := doctorConfig(t)
	dead := strings.TrimPrefix(closedURL(t), "http://")
	cfg.RedisURL = "redis://" + dead + "/0"
	if st, err := OpenSessionStore(cfg, jsonl.Options{}); err == nil || !strings.Contains(err.Error(), "redis "+dead) {
		if st != nil {
			st.Close()
		}
		t.Fatalf("unreachable redis: %v", err)
	}
	cfg.RedisURL = "redis://" + testenv.Redis(t) + "/0"
	st, err := OpenSessionStore(cfg, jsonl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, ok := st.(interface{ Ping(context.Context) error })
	if !ok || p.Ping(context.Background()) != nil {
		t.Fatal("the Redis session store does not answer Ping")
	}
}

// memory.embedder is checked as serve builds it: a reference serve would
// refuse fails doctor too (before, doctor passed it and serve then refused
// to start), and a valid one's endpoint is probed as a model's.
func TestDoctorEmbedder(t *testing.T) {
	srv, paths := fakeEndpoint(t)
	cfg := doctorConfig(t)
	cfg.Providers.OllamaBaseURL = srv.URL + "/ollama"
	for _, bad := range []string{"nonsense", "foo/bar", "openai/"} {
		cfg.Memory.Embedder = bad
		rep := Doctor(context.Background(), cfg, DoctorOptions{HTTPClient: srv.Client(), Timeout: 5 * time.Second})
		if c := one(t, rep, "embedder "+bad); c.Status != CheckFail || !strings.Contains(c.Detail, "serve will refuse to start") {
			t.Fatalf("%q: %+v", bad, c)
		}
		if rep.OK {
			t.Fatalf("%q: a failed embedder check must clear OK", bad)
		}
	}
	cfg.Memory.Embedder = " ollama/nomic-embed-text " // serve trims it, so doctor does
	rep := Doctor(context.Background(), cfg, DoctorOptions{HTTPClient: srv.Client(), Timeout: 5 * time.Second})
	if c := one(t, rep, "embedder ollama/nomic-embed-text"); c.Status != CheckOK || !strings.Contains(c.Detail, "reachable") {
		t.Fatalf("ollama embedder %+v", c)
	}
	if !strings.Contains(strings.Join(paths(), ","), "/ollama/models") {
		t.Fatalf("probed %v", paths())
	}
	cfg.Providers.OllamaBaseURL = closedURL(t)
	rep = Doctor(context.Background(), cfg, DoctorOptions{HTTPClient: srv.Client(), Timeout: 5 * time.Second})
	if c := one(t, rep, "embedder ollama/nomic-embed-text"); c.Status != CheckFail || !strings.Contains(c.Detail, "unreachable") {
		t.Fatalf("embedder endpoint down %+v", c)
	}
	cfg.Memory.Embedder = ""
	rep = Doctor(context.Background(), cfg, DoctorOptions{HTTPClient: srv.Client(), Timeout: 5 * time.Second})
	for _, c := range rep.Checks {
		if strings.HasPrefix(c.Name, "embedder") {
			t.Fatalf("an embedder check without memory.embedder: %+v", c)
		}
	}
}
