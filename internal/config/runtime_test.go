package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRuntimeAgentCore(t *testing.T) {
	for _, tc := range []struct {
		name, file, runtime, addr, ephemeral string
		wantAgentCore, wantEphemeral         bool
		wantAddr, wantErr                    string
	}{
		{name: "unset", wantAddr: "127.0.0.1:8080"},
		{name: "env", runtime: "agentcore", wantAgentCore: true, wantAddr: "0.0.0.0:8080"},
		{name: "file key", file: `{"runtime": "agentcore"}`, wantAgentCore: true, wantAddr: "0.0.0.0:8080"},
		{name: "explicit addr kept", runtime: "agentcore", addr: "127.0.0.1:9001", wantAgentCore: true, wantAddr: "127.0.0.1:9001"},
		{name: "ephemeral", runtime: "agentcore", ephemeral: "1", wantAgentCore: true, wantEphemeral: true, wantAddr: "0.0.0.0:8080"},
		{name: "ephemeral file", file: `{"runtime": "agentcore", "ephemeral": true}`, wantAgentCore: true, wantEphemeral: true, wantAddr: "0.0.0.0:8080"},
		{name: "unknown", runtime: "lambda", wantErr: `runtime (from TENDRIL_RUNTIME) "lambda" is unknown`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			t.Setenv("TENDRIL_HOME", home)
			t.Setenv("TENDRIL_RUNTIME", tc.runtime)
			t.Setenv("TENDRIL_ADDR", tc.addr)
			t.Setenv("TENDRIL_EPHEMERAL", tc.ephemeral)
			if tc.file != "" {
				if err := os.WriteFile(filepath.Join(home, "tendril.json"), []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, err := Load("")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.AgentCore() != tc.wantAgentCore || c.Ephemeral != tc.wantEphemeral || c.Addr != tc.wantAddr {
				t.Fatalf("agentcore %v ephemeral %v addr %q", c.AgentCore(), c.Ephemeral, c.Addr)
			}
		})
	}
}

func TestPersonaSourceEnv(t *testing.T) {
	t.Setenv("TENDRIL_HOME", t.TempDir())
	t.Setenv("TENDRIL_PERSONA_FILE", "/etc/tendril/examples/sprout/persona.md")
	t.Setenv("TENDRIL_SKILLS_DIR", "/etc/tendril/examples/sprout/skills")
	t.Setenv("TENDRIL_SKILLS_MANIFEST", "/etc/tendril/examples/sprout/skills.json")
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Agent.PersonaFile != "/etc/tendril/examples/sprout/persona.md" || c.Agent.SkillsDir != "/etc/tendril/examples/sprout/skills" || c.Agent.SkillsManifest != "/etc/tendril/examples/sprout/skills.json" {
		t.Fatalf("agent %+v", c.Agent)
	}
}
