package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestServiceInstallUninstall(t *testing.T) {
	bin := tendrilBinary(t)
	for _, tc := range []struct {
		name    string
		args    []string
		want    []string
		notWant []string
	}{
		{"system", []string{"--run-as", "pi"},
			[]string{"User=pi", "ProtectSystem=strict", "ReadWritePaths=", "NoNewPrivileges=yes", "CapabilityBoundingSet=\n", "WantedBy=multi-user.target", "ExecStart=" + bin + " serve"},
			nil},
		{"user", []string{"--user"},
			[]string{"NoNewPrivileges=yes", "SystemCallFilter=@system-service", "WantedBy=default.target"},
			[]string{"User=", "ProtectSystem", "PrivateTmp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home, dir := t.TempDir(), t.TempDir()
			args := append([]string{"service", "install", "--unit-dir", dir, "--no-enable", "--exec", bin}, tc.args...)
			out, stderr, code := runCLI(t, home, nil, args...)
			if code != 0 {
				t.Fatalf("install: exit %d %s", code, stderr)
			}
			unitPath := filepath.Join(dir, "tendril.service")
			b, err := os.ReadFile(unitPath)
			if err != nil {
				t.Fatal(err)
			}
			unit := string(b)
			for _, w := range append(tc.want, "Environment=TENDRIL_HOME="+home, "EnvironmentFile=-"+filepath.Join(home, "tendril.env")) {
				if !strings.Contains(unit, w) {
					t.Errorf("unit lacks %q:\n%s", w, unit)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(unit, w) {
					t.Errorf("a %s unit has %q", tc.name, w)
				}
			}
			if !strings.Contains(out, "enable --now tendril.service") {
				t.Errorf("install output does not say how to start it: %q", out)
			}
			verifyUnit(t, unitPath)
			if _, stderr, code := runCLI(t, home, nil, "service", "uninstall", "--unit-dir", dir, "--no-enable"); code != 0 {
				t.Fatalf("uninstall: exit %d %s", code, stderr)
			}
			if _, err := os.Stat(unitPath); !os.IsNotExist(err) {
				t.Fatalf("unit still there: %v", err)
			}
			if _, stderr, code := runCLI(t, home, nil, "service", "uninstall", "--unit-dir", dir, "--no-enable"); code != 1 || !strings.Contains(stderr, "not installed") {
				t.Fatalf("second uninstall: exit %d %s", code, stderr)
			}
		})
	}
	// Bad usage is refused with exit 2 and nothing written.
	dir := t.TempDir()
	for _, args := range [][]string{{"--exec", "relative/tendril"}, {"--run-as", "root"}, {"--exec", "/opt/my tendril"}} {
		_, stderr, code := runCLI(t, t.TempDir(), nil, append([]string{"service", "install", "--unit-dir", dir, "--no-enable"}, args...)...)
		if code != 2 || stderr == "" {
			t.Errorf("%v: exit %d %q", args, code, stderr)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("refused installs wrote %v", entries)
	}
}

// verifyUnit runs systemd-analyze verify on the unit when it is installed.
func verifyUnit(t *testing.T, path string) {
	t.Helper()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: unit not verified")
		return
	}
	out, err := exec.Command(sa, "verify", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", path, err, out)
	}
	if len(strings.TrimSpace(string(out))) > 0 {
		t.Logf("systemd-analyze verify: %s", out)
	}
}
