package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLoadFileEnvAndErrors(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	for _, k := range []string{"MODEL_ID", "VISION_MODEL_ID", "TENDRIL_ADDR", "TELEGRAM_ALLOWED_CHAT_IDS", "OPENAI_BASE_URL"} {
		t.Setenv(k, "")
	}
	// No file: defaults.
	c, err := Load("")
	if err != nil || c.Addr != "127.0.0.1:8080" || c.Memory.TopK != 50 || c.Session.MaxHistoryMessages != 50 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	// Comments allowed; env overrides the file.
	os.WriteFile(filepath.Join(home, "tendril.json"), []byte(`{
	  // a comment
	  "addr": "127.0.0.1:9000",
	  "model": {"id": "openai/a", "timeout": "2m"},
	  "session": {"retention": {"maxAge": "7d"}},
	}`), 0o600)
	t.Setenv("MODEL_ID", "anthropic/b")
	t.Setenv("TELEGRAM_ALLOWED_CHAT_IDS", "1, 2,")
	c, err = Load("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:9000" || c.Model.ID != "anthropic/b" || c.Model.VisionID != "anthropic/b" || c.Model.Timeout.D() != 2*time.Minute {
		t.Fatalf("merged config %+v", c.Model)
	}
	if len(c.Telegram.AllowedChatIDs) != 2 {
		t.Fatalf("allowed chats %v", c.Telegram.AllowedChatIDs)
	}
	// Syntax errors and unknown fields name the file.
	for _, bad := range []string{`{"addr": }`, `{"adddr": "x"}`} {
		os.WriteFile(filepath.Join(home, "tendril.json"), []byte(bad), 0o600)
		if _, err := Load(""); err == nil || !strings.Contains(err.Error(), "tendril.json") {
			t.Fatalf("%s: err %v", bad, err)
		}
	}
	// An explicit --config that does not exist is an error.
	if _, err := Load(filepath.Join(home, "nope.json")); err == nil {
		t.Fatal("missing --config file accepted")
	}
}

func TestMaskedHidesSecrets(t *testing.T) {
	c := Default()
	c.Providers.OpenAIAPIKey = "sk-1234567890abcdef"
	c.Providers.OpenAIBaseURL = "http://user:pass@llm.local/v1"
	c.Telegram.BotToken = "123:ABCDEFGHIJKLMNOP"
	c.DatabaseURL = "postgres://u:pw@db/x"
	c.RedisURL = "host=db user=u password=pgpass dbname=x"
	c.Providers.AnthropicBaseURL = "https://llm.local/v1?api-key=QSECRET&region=eu"
	c.MCP = map[string]MCPServer{"x": {URL: "https://a:b@mcp", Env: map[string]string{"TOKEN": "secret-token-value"}, Headers: map[string]string{"Authorization": "Bearer abcdefghij"}}}
	m := c.Masked()
	all := strings.Join([]string{m.Providers.OpenAIAPIKey, m.Providers.OpenAIBaseURL, m.Telegram.BotToken, m.DatabaseURL, m.RedisURL, m.Providers.AnthropicBaseURL,
		m.MCP["x"].URL, m.MCP["x"].Env["TOKEN"], m.MCP["x"].Headers["Authorization"]}, " ")
	for _, secret := range []string{"1234567890", "pass@", "pgpass", "QSECRET", "ABCDEFGH", "pw@", "a:b", "secret-token", "abcdefg"} {
		if strings.Contains(all, secret) {
			t.Fatalf("%q visible in %q", secret, all)
		}
	}
	if c.MCP["x"].Env["TOKEN"] != "secret-token-value" {
		t.Fatal("Masked changed the original")
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "1.5d": 36 * time.Hour, "90m": 90 * time.Minute} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("%s: %v %v", in, got, err)
		}
	}
	if _, err := ParseDuration("xd"); err == nil {
		t.Error("bad duration accepted")
	}
}

func TestMaskedKeepsUsefulParts(t *testing.T) {
	c := Default()
	c.Providers.OpenAIBaseURL = "http://user:pass@llm.local:8000/v1?region=eu"
	m := c.Masked()
	if !strings.Contains(m.Providers.OpenAIBaseURL, "llm.local:8000/v1") || !strings.Contains(m.Providers.OpenAIBaseURL, "region=eu") {
		t.Fatalf("masked too much: %s", m.Providers.OpenAIBaseURL)
	}
}

func TestMemoryBlockShare(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	c, err := Load("")
	if err != nil || c.Memory.BlockShare != 0.15 {
		t.Fatalf("default memory.blockShare = %v, %v; want 0.15", c.Memory.BlockShare, err)
	}
	os.WriteFile(filepath.Join(home, "tendril.json"), []byte(`{"model": {"contextWindow": 4000}, "memory": {"blockShare": 0.1}}`), 0o600)
	if c, err = Load(""); err != nil || c.Memory.BlockShare != 0.1 || c.Model.ContextWindow != 4000 {
		t.Fatalf("memory.blockShare from file = %v, %v", c.Memory.BlockShare, err)
	}
}

// TestMemoryCacheMB: default 32, memory.cacheMB from the file,
// TENDRIL_MEMORY_CACHE_MB over it, and a clear error for a non-number.
func TestMemoryCacheMB(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	t.Setenv("TENDRIL_MEMORY_CACHE_MB", "")
	c, err := Load("")
	if err != nil || c.Memory.CacheMB != 32 {
		t.Fatalf("default memory.cacheMB = %v, %v; want 32", c.Memory.CacheMB, err)
	}
	os.WriteFile(filepath.Join(home, "tendril.json"), []byte(`{"memory": {"cacheMB": 24}}`), 0o600)
	if c, err = Load(""); err != nil || c.Memory.CacheMB != 24 {
		t.Fatalf("memory.cacheMB from file = %v, %v; want 24", c.Memory.CacheMB, err)
	}
	t.Setenv("TENDRIL_MEMORY_CACHE_MB", "-1")
	if c, err = Load(""); err != nil || c.Memory.CacheMB != -1 {
		t.Fatalf("TENDRIL_MEMORY_CACHE_MB=-1: %v, %v", c.Memory.CacheMB, err)
	}
	t.Setenv("TENDRIL_MEMORY_CACHE_MB", "lots")
	if _, err = Load(""); err == nil || !strings.Contains(err.Error(), "TENDRIL_MEMORY_CACHE_MB") {
		t.Fatalf("TENDRIL_MEMORY_CACHE_MB=lots: err = %v, want an error naming it", err)
	}
	// a value whose bytes would overflow the stores' int64 budget
	t.Setenv("TENDRIL_MEMORY_CACHE_MB", "17592186044416")
	if _, err = Load(""); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("TENDRIL_MEMORY_CACHE_MB=2^44: err = %v, want a bound error", err)
	}
}

// TestMemoryLimitMB: the default follows memory.cacheMB (4 × cacheMB +
// 128), memoryLimitMB from the file and TENDRIL_MEMORY_LIMIT_MB over it,
// -1 (none) when the cache is unbounded, and clear errors.
func TestMemoryLimitMB(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	t.Setenv("TENDRIL_MEMORY_CACHE_MB", "")
	t.Setenv("TENDRIL_MEMORY_LIMIT_MB", "")
	c, err := Load("")
	if err != nil || c.MemoryLimitMB != 256 {
		t.Fatalf("default memoryLimitMB = %v, %v; want 256", c.MemoryLimitMB, err)
	}
	os.WriteFile(filepath.Join(home, "tendril.json"), []byte(`{"memory": {"cacheMB": 8}}`), 0o600)
	if c, err = Load(""); err != nil || c.MemoryLimitMB != 160 {
		t.Fatalf("memoryLimitMB with cacheMB 8 = %v, %v; want 160", c.MemoryLimitMB, err)
	}
	os.WriteFile(filepath.Join(home, "tendril.json"), []byte(`{"memoryLimitMB": 300, "memory": {"cacheMB": 8}}`), 0o600)
	if c, err = Load(""); err != nil || c.MemoryLimitMB != 300 {
		t.Fatalf("memoryLimitMB from file = %v, %v; want 300", c.MemoryLimitMB, err)
	}
	t.Setenv("TENDRIL_MEMORY_LIMIT_MB", "-1")
	if c, err = Load(""); err != nil || c.MemoryLimitMB != -1 {
		t.Fatalf("TENDRIL_MEMORY_LIMIT_MB=-1: %v, %v", c.MemoryLimitMB, err)
	}
	t.Setenv("TENDRIL_MEMORY_LIMIT_MB", "")
	t.Setenv("TENDRIL_MEMORY_CACHE_MB", "-1")
	os.WriteFile(filepath.Join(home, "tendril.json"), []byte(`{}`), 0o600)
	if c, err = Load(""); err != nil || c.MemoryLimitMB != -1 {
		t.Fatalf("memoryLimitMB with an unbounded cache = %v, %v; want -1 (none)", c.MemoryLimitMB, err)
	}
	t.Setenv("TENDRIL_MEMORY_LIMIT_MB", "half")
	if _, err = Load(""); err == nil || !strings.Contains(err.Error(), "TENDRIL_MEMORY_LIMIT_MB") {
		t.Fatalf("TENDRIL_MEMORY_LIMIT_MB=half: err = %v, want an error naming it", err)
	}
	t.Setenv("TENDRIL_MEMORY_LIMIT_MB", "17592186044416")
	if _, err = Load(""); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("TENDRIL_MEMORY_LIMIT_MB=2^44: err = %v, want a bound error", err)
	}
}

// TestMemoryEventWindow: memory.eventWindow from the file reaches the
// memory store's options, TENDRIL_MEMORY_EVENT_WINDOW overrides it, and a
// non-number is an error naming the variable.
func TestMemoryEventWindow(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	t.Setenv("TENDRIL_MEMORY_EVENT_WINDOW", "")
	if c, err := Load(""); err != nil || c.Memory.EventWindow != DefaultEventWindow {
		t.Fatalf("default memory.eventWindow = %v, %v; want %d, the value in effect", c.Memory.EventWindow, err, DefaultEventWindow)
	}
	// a 0 that means the default is stored as the default, so that doctor
	// shows what runs
	os.WriteFile(filepath.Join(home, "tendril.json"), []byte(`{"memory": {"eventWindow": 0, "topK": 0, "retrieveTimeout": "0s"}}`), 0o600)
	if c, err := Load(""); err != nil || c.Memory.EventWindow != DefaultEventWindow || c.Memory.TopK != Default().Memory.TopK ||
		c.Memory.RetrieveTimeout != Default().Memory.RetrieveTimeout {
		t.Fatalf("zeros that mean the default: %+v, %v", c.Memory, err)
	}
	os.WriteFile(filepath.Join(home, "tendril.json"), []byte(`{"memory": {"eventWindow": 512}}`), 0o600)
	if c, err := Load(""); err != nil || c.Memory.EventWindow != 512 {
		t.Fatalf("memory.eventWindow from file = %v, %v; want 512", c.Memory.EventWindow, err)
	}
	t.Setenv("TENDRIL_MEMORY_EVENT_WINDOW", "-1")
	if c, err := Load(""); err != nil || c.Memory.EventWindow != -1 {
		t.Fatalf("TENDRIL_MEMORY_EVENT_WINDOW=-1: %v, %v", c.Memory.EventWindow, err)
	}
	t.Setenv("TENDRIL_MEMORY_EVENT_WINDOW", "many")
	if _, err := Load(""); err == nil || !strings.Contains(err.Error(), "TENDRIL_MEMORY_EVENT_WINDOW") {
		t.Fatalf("TENDRIL_MEMORY_EVENT_WINDOW=many: err = %v, want an error naming it", err)
	}
}

// TestMemoryRecordWindow: memory.recordWindow from the file reaches the
// config, TENDRIL_MEMORY_RECORD_WINDOW overrides it, and a non-number is
// an error naming the variable.
func TestMemoryRecordWindow(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	t.Setenv("TENDRIL_MEMORY_RECORD_WINDOW", "")
	if c, err := Load(""); err != nil || c.Memory.RecordWindow != DefaultRecordWindow {
		t.Fatalf("default memory.recordWindow = %v, %v; want %d", c.Memory.RecordWindow, err, DefaultRecordWindow)
	}
	os.WriteFile(filepath.Join(home, "tendril.json"), []byte(`{"memory": {"recordWindow": 256}}`), 0o600)
	if c, err := Load(""); err != nil || c.Memory.RecordWindow != 256 {
		t.Fatalf("memory.recordWindow from file = %v, %v; want 256", c.Memory.RecordWindow, err)
	}
	t.Setenv("TENDRIL_MEMORY_RECORD_WINDOW", "-1")
	if c, err := Load(""); err != nil || c.Memory.RecordWindow != -1 {
		t.Fatalf("TENDRIL_MEMORY_RECORD_WINDOW=-1: %v, %v", c.Memory.RecordWindow, err)
	}
	t.Setenv("TENDRIL_MEMORY_RECORD_WINDOW", "some")
	if _, err := Load(""); err == nil || !strings.Contains(err.Error(), "TENDRIL_MEMORY_RECORD_WINDOW") {
		t.Fatalf("TENDRIL_MEMORY_RECORD_WINDOW=some: err = %v, want an error naming it", err)
	}
}

// TestBadEnvValuesAreErrors: an environment value Tendril cannot read is
// an error naming the variable, not silently dropped (a typo in the
// allow-list would otherwise lock a listed chat out, and "yes" would
// leave exec tools off without a word).
func TestBadEnvValuesAreErrors(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"TELEGRAM_ALLOWED_CHAT_IDS", "123,abc", `"abc" is not a chat ID`},
		{"TELEGRAM_ALLOWED_CHAT_IDS", "123x", `"123x" is not a chat ID`},
		{"TELEGRAM_ALLOWED_CHAT_IDS", "99999999999999999999", "is not a chat ID"},
		{"TENDRIL_ENABLE_EXEC_TOOLS", "yes", `TENDRIL_ENABLE_EXEC_TOOLS "yes"`},
		{"TENDRIL_EPHEMERAL", "on", `TENDRIL_EPHEMERAL "on"`},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			t.Setenv("TENDRIL_HOME", t.TempDir())
			t.Setenv(tc.name, tc.value)
			if _, err := Load(""); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		exec, ephemeral string
		wantExec, wantE bool
		chats           string
		wantChats       []int64
	}{
		{"1", "true", true, true, "-1001234567890, 42", []int64{-1001234567890, 42}},
		{"TRUE", "0", true, false, " 7 ,, 8 ", []int64{7, 8}},
		{"false", "", false, false, "", nil},
	} {
		t.Setenv("TENDRIL_HOME", t.TempDir())
		t.Setenv("TENDRIL_ENABLE_EXEC_TOOLS", tc.exec)
		t.Setenv("TENDRIL_EPHEMERAL", tc.ephemeral)
		t.Setenv("TELEGRAM_ALLOWED_CHAT_IDS", tc.chats)
		c, err := Load("")
		if err != nil {
			t.Fatal(err)
		}
		if c.Tools.EnableExec != tc.wantExec || c.Ephemeral != tc.wantE || !slices.Equal(c.Telegram.AllowedChatIDs, tc.wantChats) {
			t.Fatalf("%+v: exec %v ephemeral %v chats %v", tc, c.Tools.EnableExec, c.Ephemeral, c.Telegram.AllowedChatIDs)
		}
	}
}
