package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/config"
)

func init() { register(newServiceCmd) }

// unitName is the systemd unit tendril service installs.
const unitName = "tendril.service"

// unitData fills unitText.
type unitData struct {
	User     bool   // a user unit (systemctl --user)
	Exec     string // absolute path of the tendril binary
	Home     string // TENDRIL_HOME
	EnvFile  string // optional EnvironmentFile
	RunAs    string // system units: the account that runs tendril
	Version  string
	ShutStop int // TimeoutStopSec: shutdownGrace plus slack, seconds
}

// unitText is a hardened unit. System units get the full sandbox; user
// units only what works without privileges (the namespace-based settings
// need unprivileged user namespaces, which a Raspberry Pi OS kernel may not
// offer). MemoryDenyWriteExecute is left out: MCP servers run by Node.js
// need a JIT. It is written with fmt, not text/template: executing any
// template keeps every exported method in the binary (docs/bench/soak.md,
// "Binary size").
func unitText(d unitData) string {
	var b strings.Builder
	userFlag, wanted := "", "multi-user.target"
	if d.User {
		userFlag, wanted = " --user", "default.target"
	}
	fmt.Fprintf(&b, "# Written by `tendril service install%s` (tendril %s).\n", userFlag, d.Version)
	fmt.Fprintf(&b, "# Secrets and overrides (MODEL_ID, TELEGRAM_BOT_TOKEN, ...) go in %s.\n", d.EnvFile)
	b.WriteString(`[Unit]
Description=Tendril personal assistant
Documentation=https://github.com/tendrilai/tendril/blob/main/docs/deploy.md
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
`)
	fmt.Fprintf(&b, "ExecStart=%s serve\nEnvironment=TENDRIL_HOME=%s\nEnvironmentFile=-%s\n", d.Exec, d.Home, d.EnvFile)
	if !d.User {
		fmt.Fprintf(&b, "User=%s\n", d.RunAs)
	}
	fmt.Fprintf(&b, "Restart=on-failure\nRestartSec=5s\nTimeoutStopSec=%ds\n", d.ShutStop)
	b.WriteString(`KillSignal=SIGTERM
UMask=0077
LimitNOFILE=65536
NoNewPrivileges=yes
LockPersonality=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallFilter=~@privileged
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
`)
	if !d.User {
		b.WriteString(`CapabilityBoundingSet=
AmbientCapabilities=
ProtectSystem=strict
ProtectHome=read-only
`)
		fmt.Fprintf(&b, "ReadWritePaths=%s\n", d.Home)
		b.WriteString(`PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
ProtectProc=invisible
RestrictNamespaces=yes
`)
	}
	fmt.Fprintf(&b, "\n[Install]\nWantedBy=%s\n", wanted)
	return b.String()
}

// serviceFlags are install's and uninstall's flags.
type serviceFlags struct {
	user     bool
	unitDir  string
	exec     string
	runAs    string
	envFile  string
	print    bool
	noEnable bool
}

func (f *serviceFlags) dir() (string, error) {
	if f.unitDir != "" {
		return f.unitDir, nil
	}
	if !f.user {
		return "/etc/systemd/system", nil
	}
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "systemd", "user"), nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("user unit directory: %w", err)
	}
	return filepath.Join(h, ".config", "systemd", "user"), nil
}

// systemctl runs systemctl (--user) args, or says what to run when it is
// missing or f.noEnable is set.
func (f *serviceFlags) systemctl(w io.Writer, args ...string) error {
	if f.user {
		args = append([]string{"--user"}, args...)
	}
	if f.noEnable {
		fmt.Fprintf(w, "  systemctl %s\n", strings.Join(args, " "))
		return nil
	}
	path, err := exec.LookPath("systemctl")
	if err != nil {
		fmt.Fprintf(w, "systemctl not found; run: systemctl %s\n", strings.Join(args, " "))
		return nil
	}
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("systemctl %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// renderUnit builds the unit for cfg and f.
func renderUnit(cfg *config.Config, f *serviceFlags) ([]byte, error) {
	execPath := f.exec
	if execPath == "" {
		p, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("locate the tendril binary (pass --exec): %w", err)
		}
		if p, err = filepath.EvalSymlinks(p); err != nil {
			return nil, err
		}
		execPath = p
	}
	if !filepath.IsAbs(execPath) {
		return nil, usagef("--exec %q must be an absolute path", execPath)
	}
	home, err := filepath.Abs(cfg.Home)
	if err != nil {
		return nil, err
	}
	d := unitData{User: f.user, Exec: execPath, Home: home, EnvFile: f.envFile, RunAs: f.runAs, Version: version,
		ShutStop: int(cfg.ShutdownGrace.D().Seconds()) + 15}
	if d.EnvFile == "" {
		d.EnvFile = filepath.Join(home, "tendril.env")
	}
	if !f.user && d.RunAs == "" {
		// Under sudo, the account that asked; else the current one.
		if d.RunAs = os.Getenv("SUDO_USER"); d.RunAs == "" {
			u, err := user.Current()
			if err != nil {
				return nil, fmt.Errorf("who runs the service (pass --run-as): %w", err)
			}
			d.RunAs = u.Username
		}
	}
	if d.RunAs == "root" {
		return nil, usagef("refusing to run tendril as root: pass --run-as USER (an unprivileged account that owns %s)", home)
	}
	for _, v := range []string{d.Exec, d.Home, d.EnvFile, d.RunAs} {
		if strings.ContainsAny(v, "\n\r\"'\\ %$") {
			return nil, usagef("%q cannot be written into a systemd unit: use a path without spaces, quotes, %% or $", v)
		}
	}
	return []byte(unitText(d)), nil
}

func newServiceCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "service",
		Short: "Install or remove Tendril as a systemd service (a single box or a Raspberry Pi)",
		Long: `Service writes a hardened systemd unit that runs "tendril serve" on this home,
and enables it (install), or disables and removes it (uninstall).

Without --user it is a system unit in /etc/systemd/system (run with sudo) that
runs as --run-as (default: the sudo user). With --user it is a unit of your
own systemd instance in ~/.config/systemd/user; run
"loginctl enable-linger $USER" so it starts at boot without a login.
Secrets go in $TENDRIL_HOME/tendril.env (KEY=value lines, mode 0600).`,
		Example: "  sudo tendril service install --home /home/pi/.tendril\n  tendril service install --user\n  tendril service install --print",
	}
	add := func(c *cobra.Command, f *serviceFlags) {
		c.Flags().BoolVar(&f.user, "user", false, "a user unit (systemctl --user) instead of a system unit")
		c.Flags().StringVar(&f.unitDir, "unit-dir", "", "directory of the unit file (default /etc/systemd/system, or ~/.config/systemd/user with --user)")
		c.Flags().BoolVar(&f.noEnable, "no-enable", false, "only write (or remove) the file; print the systemctl commands instead of running them")
	}
	var in serviceFlags
	install := &cobra.Command{
		Use:   "install",
		Short: "Write and enable the systemd unit",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			unit, err := renderUnit(cfg, &in)
			if err != nil {
				return err
			}
			if in.print {
				_, err := c.OutOrStdout().Write(unit)
				return err
			}
			dir, err := in.dir()
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("unit directory: %w", err)
			}
			path := filepath.Join(dir, unitName)
			if err := os.WriteFile(path, unit, 0o644); err != nil {
				return fmt.Errorf("write %s: %w", path, err)
			}
			w := c.OutOrStdout()
			fmt.Fprintln(w, "wrote", path)
			if in.noEnable {
				fmt.Fprintln(w, "to start it:")
			}
			if err := in.systemctl(w, "daemon-reload"); err != nil {
				return err
			}
			return in.systemctl(w, "enable", "--now", unitName)
		},
	}
	add(install, &in)
	install.Flags().StringVar(&in.exec, "exec", "", "absolute path of the tendril binary (default: this binary)")
	install.Flags().StringVar(&in.runAs, "run-as", "", "account of a system unit (default: $SUDO_USER, else the current user)")
	install.Flags().StringVar(&in.envFile, "env-file", "", "EnvironmentFile of the unit (default $TENDRIL_HOME/tendril.env)")
	install.Flags().BoolVar(&in.print, "print", false, "print the unit to stdout and change nothing")

	var un serviceFlags
	uninstall := &cobra.Command{
		Use:   "uninstall",
		Short: "Disable and remove the systemd unit (the home and its data stay)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			dir, err := un.dir()
			if err != nil {
				return err
			}
			path := filepath.Join(dir, unitName)
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s is not installed (no %s)", unitName, path)
			}
			w := c.OutOrStdout()
			if err := un.systemctl(w, "disable", "--now", unitName); err != nil {
				return err
			}
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("remove %s: %w", path, err)
			}
			fmt.Fprintln(w, "removed", path)
			return un.systemctl(w, "daemon-reload")
		},
	}
	add(uninstall, &un)
	cmd.AddCommand(install, uninstall)
	return cmd
}
