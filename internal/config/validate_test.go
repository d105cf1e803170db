package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNonsenseValuesAreErrors: values that cannot mean anything are
// errors naming the key, not accepted silently.
func TestNonsenseValuesAreErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{`{"model": {"maxRetries": -3}}`, "model.maxRetries is negative"},
		{`{"model": {"contextWindow": -1}}`, "model.contextWindow is negative"},
		{`{"model": {"timeout": "-1s"}}`, "model.timeout is negative"},
		{`{"memory": {"topK": -1}}`, "memory.topK is negative"},
		{`{"memory": {"retrieveTimeout": "-3s"}}`, "memory.retrieveTimeout is negative"},
		{`{"memory": {"retrieveTimeout": -3}}`, "memory.retrieveTimeout is negative"},
		{`{"memory": {"blockShare": 5}}`, "memory.blockShare 5"},
		{`{"memory": {"blockShare": -0.1}}`, "memory.blockShare -0.1"},
		{`{"memory": {"storeThreshold": 1.5}}`, "memory.storeThreshold 1.5"},
		{`{"session": {"fsync": "sometimes"}}`, `session.fsync "sometimes"`},
		{`{"session": {"channelOverrides": {"dm": {"maxHistoryTokens": -5}}}}`, "session.channelOverrides.dm.maxHistoryTokens is negative"},
		{`{"maxBodyBytes": -1}`, "maxBodyBytes is negative"},
		{`{"addr": "notanaddr"}`, `tendril.json:1:10: addr "notanaddr": missing port`},
		{`{"authToken": "  "}`, "tendril.json:1:15: authToken is blank"},
		// what serve's session retention refuses, Load refuses, so doctor does too
		{`{"session": {"retention": {"maxAge": "30x"}}}`, `session.retention.maxAge: bad age "30x"`},
		{`{"session": {"retention": {"maxAge": "-3d"}}}`, `session.retention.maxAge: bad age "-3d"`},
		{`{"session": {"retention": {"maxAge": " "}}}`, `session.retention.maxAge: bad age " "`},
		{`{"session": {"retention": {"maxSize": "lots"}}}`, `session.retention.maxSize: bad size "lots"`},
		{`{"session": {"retention": {"maxSize": "0"}}}`, `session.retention.maxSize: bad size "0"`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			home := t.TempDir()
			t.Setenv("TENDRIL_HOME", home)
			t.Setenv("TENDRIL_ADDR", "")
			t.Setenv("TENDRIL_AUTH_TOKEN", "")
			os.WriteFile(filepath.Join(home, "tendril.json"), []byte(tc.file), 0o600)
			if _, err := Load(""); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
	// The edges stay valid: 0 (the default) and exactly 1.
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	os.WriteFile(filepath.Join(home, "tendril.json"), []byte(`{"memory": {"blockShare": 1, "topK": 0}, "session": {"fsync": "batch", "retention": {"maxAge": "", "maxSize": "2 MiB"}}, "model": {"maxRetries": 0}}`), 0o600)
	c, err := Load("")
	if err != nil || c.Memory.BlockShare != 1 || c.Session.Fsync != "batch" {
		t.Fatalf("edge values: %v", err)
	}
	if age, size, err := c.Session.Retention.Limits(); age != 0 || size != 2<<20 || err != nil {
		t.Fatalf("retention limits %v %d %v, want no age limit and 2 MiB", age, size, err)
	}
}

func TestParseAgeAndSize(t *testing.T) {
	ages := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{"30d", 30 * 24 * time.Hour, false}, {"2w", 14 * 24 * time.Hour, false}, {"12h", 12 * time.Hour, false},
		{"1d12h", 36 * time.Hour, false}, {"90m", 90 * time.Minute, false}, {"", 0, true}, {"d", 0, true}, {"5x", 0, true}, {"-1d", 0, true},
	}
	for _, c := range ages {
		got, err := ParseAge(c.in)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("ParseAge(%q) = %v, %v", c.in, got, err)
		}
	}
	sizes := []struct {
		in   string
		want int64
		bad  bool
	}{
		{"100mb", 100 << 20, false}, {"100MB", 100 << 20, false}, {"1.5gb", 3 << 29, false}, {"512kb", 512 << 10, false},
		{"2 MiB", 2 << 20, false}, {"123", 123, false}, {"mb", 0, true}, {"10pb", 0, true}, {"0", 0, true},
	}
	for _, c := range sizes {
		got, err := ParseSize(c.in)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("ParseSize(%q) = %v, %v", c.in, got, err)
		}
	}
}

func TestAddrEnvNamed(t *testing.T) {
	t.Setenv("TENDRIL_HOME", t.TempDir())
	t.Setenv("TENDRIL_ADDR", "notanaddr")
	if _, err := Load(""); err == nil || !strings.Contains(err.Error(), `addr (from TENDRIL_ADDR) "notanaddr": missing port`) {
		t.Fatalf("err %v", err)
	}
}

// TestAuthToken: a blank token is an error, surrounding blanks are
// trimmed (HTTP trims a bearer header the same way), and a short token
// is refused where it guards a non-loopback address.
func TestAuthToken(t *testing.T) {
	t.Setenv("TENDRIL_HOME", t.TempDir())
	t.Setenv("TENDRIL_ADDR", "0.0.0.0:8080")
	t.Setenv("TENDRIL_AUTH_TOKEN", " ")
	if _, err := Load(""); err == nil || !strings.Contains(err.Error(), "TENDRIL_AUTH_TOKEN is set but blank") || !strings.Contains(err.Error(), "openssl rand -hex 32") {
		t.Fatalf("blank token: %v", err)
	}
	t.Setenv("TENDRIL_AUTH_TOKEN", "x")
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckAuthToken(); err == nil || !strings.Contains(err.Error(), "at least 16 bytes") || !strings.Contains(err.Error(), "openssl rand -hex 32") {
		t.Fatalf("one-byte token off loopback: %v", err)
	}
	for _, addr := range []string{"127.0.0.1:8080", "localhost:1", "[::1]:8080"} {
		c.Addr = addr
		if err := c.CheckAuthToken(); err != nil {
			t.Fatalf("short token on loopback %s: %v", addr, err)
		}
	}
	c.Addr, c.Runtime = "0.0.0.0:8080", RuntimeAgentCore
	if err := c.CheckAuthToken(); err != nil {
		t.Fatalf("agentcore, where the token is optional: %v", err)
	}
	t.Setenv("TENDRIL_AUTH_TOKEN", " 0123456789abcdef\n")
	if c, err = Load(""); err != nil || c.AuthToken != "0123456789abcdef" {
		t.Fatalf("token %q, %v", c.AuthToken, err)
	}
	if err := c.CheckAuthToken(); err != nil {
		t.Fatalf("16-byte token: %v", err)
	}
}

// TestAgentPathsExplicit: the persona and skills paths record where they
// were set, so a missing explicit one can be an error naming it.
func TestAgentPathsExplicit(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	for _, k := range []string{"TENDRIL_PERSONA_FILE", "TENDRIL_SKILLS_DIR", "TENDRIL_SKILLS_MANIFEST"} {
		t.Setenv(k, "")
	}
	c, err := Load("")
	if err != nil || c.Agent.PersonaFileFrom != "" || c.Agent.SkillsDirFrom != "" || c.Agent.SkillsManifestFrom != "" {
		t.Fatalf("defaults %+v %v", c.Agent, err)
	}
	os.WriteFile(filepath.Join(home, "tendril.json"), []byte(`{"agent": {"personaFile": "persona.md", "skillsDir": "s"}}`), 0o600)
	c, err = Load("")
	if err != nil || c.Agent.PersonaFileFrom != "agent.personaFile" || c.Agent.SkillsDirFrom != "agent.skillsDir" || c.Agent.SkillsManifestFrom != "" {
		t.Fatalf("file %+v %v", c.Agent, err)
	}
	t.Setenv("TENDRIL_PERSONA_FILE", "/x/p.md")
	t.Setenv("TENDRIL_SKILLS_MANIFEST", "/x/s.json")
	c, err = Load("")
	if err != nil || c.Agent.PersonaFileFrom != "TENDRIL_PERSONA_FILE" || c.Agent.SkillsManifestFrom != "TENDRIL_SKILLS_MANIFEST" || c.Agent.SkillsDirFrom != "agent.skillsDir" {
		t.Fatalf("env %+v %v", c.Agent, err)
	}
}

// TestZeroMeansDefaultIsShown: a documented "0 means the default" is
// stored as the value in effect, which doctor prints.
func TestZeroMeansDefaultIsShown(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	t.Setenv("TENDRIL_MEMORY_CACHE_MB", "")
	os.WriteFile(filepath.Join(home, "tendril.json"), []byte(`{"memory": {"cacheMB": 0, "blockShare": 0}}`), 0o600)
	c, err := Load("")
	if err != nil || c.Memory.CacheMB != 32 || c.Memory.BlockShare != 0.15 {
		t.Fatalf("cacheMB %d blockShare %v, %v; want 32 and 0.15", c.Memory.CacheMB, c.Memory.BlockShare, err)
	}
	t.Setenv("TENDRIL_MEMORY_CACHE_MB", "0")
	if c, err = Load(""); err != nil || c.Memory.CacheMB != 32 {
		t.Fatalf("TENDRIL_MEMORY_CACHE_MB=0: %d, %v", c.Memory.CacheMB, err)
	}
}
