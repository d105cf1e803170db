package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestGroupsRejectUnknownSubcommands: every command group (memory,
// session, cron, approvals, …) answers an unknown subcommand with a usage
// error (exit 2), not its help and exit 0; the bare group prints help.
func TestGroupsRejectUnknownSubcommands(t *testing.T) {
	var groups [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			if sub.HasSubCommands() {
				p := append(append([]string{}, path...), sub.Name())
				groups = append(groups, p)
				walk(sub, p)
			}
		}
	}
	walk(newRoot(), nil)
	names := map[string]bool{}
	for _, g := range groups {
		names[strings.Join(g, " ")] = true
	}
	for _, want := range []string{"memory", "session", "cron", "approvals"} {
		if !names[want] {
			t.Fatalf("group %q not found among %v", want, groups)
		}
	}
	for _, g := range groups {
		root := newRoot()
		var out strings.Builder
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(append([]string{}, g...), "bogus"))
		err := root.Execute()
		var ue usageError
		if !(errors.As(err, &ue) || isCobraUsage(err)) || !strings.Contains(err.Error(), `unknown command "bogus"`) {
			t.Errorf("%v bogus: err %v, want a usage error", g, err)
		}
		root = newRoot()
		out.Reset()
		root.SetOut(&out)
		root.SetArgs(g)
		if err := root.Execute(); err != nil || !strings.Contains(out.String(), "Available Commands") {
			t.Errorf("%v: err %v, help %q", g, err, out.String())
		}
	}
}

// TestStartErrorsNameTheVariable: the binary's start-up errors name the
// variable or file key at fault, and bad usage exits 2.
func TestStartErrorsNameTheVariable(t *testing.T) {
	home := t.TempDir()
	if _, stderr, code := runCLI(t, home, nil, "memory", "bogus"); code != 2 || !strings.Contains(stderr, "unknown command") {
		t.Fatalf("memory bogus: exit %d stderr %q", code, stderr)
	}
	missing := filepath.Join(t.TempDir(), "nope.md")
	for _, tc := range []struct {
		env  []string
		args []string
		code int
		want string
	}{
		{[]string{"TENDRIL_ADDR=notanaddr"}, []string{"serve"}, 1, `TENDRIL_ADDR) "notanaddr": missing port`},
		{[]string{"TENDRIL_PPROF_ADDR=garbage"}, []string{"serve", "--addr", "127.0.0.1:0"}, 1, `TENDRIL_PPROF_ADDR "garbage": missing port`},
		{nil, []string{"serve", "--addr", "garbage"}, 2, `--addr "garbage": missing port`},
		{[]string{"TENDRIL_REDIS_URL=notaurl"}, []string{"serve", "--addr", "127.0.0.1:0"}, 1, "TENDRIL_REDIS_URL (redisUrl): redis: invalid URL scheme"},
		{[]string{"TENDRIL_ADDR=0.0.0.0:0", "TENDRIL_AUTH_TOKEN= "}, []string{"serve"}, 1, "TENDRIL_AUTH_TOKEN is set but blank"},
		{[]string{"TENDRIL_ADDR=0.0.0.0:0", "TENDRIL_AUTH_TOKEN=x"}, []string{"serve"}, 1, "at least 16 bytes; make one with `openssl rand -hex 32`"},
		{[]string{"TENDRIL_PERSONA_FILE=" + missing}, []string{"serve", "--addr", "127.0.0.1:0"}, 1, "TENDRIL_PERSONA_FILE " + missing},
		{[]string{"TENDRIL_SKILLS_DIR=" + missing}, []string{"serve", "--addr", "127.0.0.1:0"}, 1, "TENDRIL_SKILLS_DIR " + missing},
		{[]string{"TENDRIL_PERSONA_FILE=" + missing}, []string{"doctor"}, 1, ""},
	} {
		out, stderr, code := runCLI(t, home, tc.env, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v %v: exit %d (want %d), stderr %q, want it to contain %q", tc.env, tc.args, code, tc.code, stderr, tc.want)
		}
		if tc.args[0] == "doctor" && !strings.Contains(out, "[fail] persona") {
			t.Errorf("doctor with a missing TENDRIL_PERSONA_FILE: %s", out)
		}
	}
	os.WriteFile(filepath.Join(home, "tendril.json"), []byte(`{"session": {"fsync": "sometimes"}}`), 0o600)
	if _, stderr, code := runCLI(t, home, nil, "serve", "--addr", "127.0.0.1:0"); code != 1 || !strings.Contains(stderr, `session.fsync "sometimes"`) {
		t.Fatalf("bad session.fsync: exit %d stderr %q", code, stderr)
	}
}
