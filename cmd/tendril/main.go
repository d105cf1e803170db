// Command tendril is the Tendril personal assistant runtime: one binary that
// serves the HTTP API, channels and scheduler, and manages its stores.
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"unicode"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/web/sanitize"
)

// Set by -ldflags "-X main.version=..."; otherwise taken from the module
// and VCS build information.
var version = ""

func init() {
	if version != "" {
		return
	}
	version = "dev"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			version = v
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				version += " (" + s.Value[:12] + ")"
			}
		}
	}
}

// globals are the persistent flags every subcommand sees.
type globals struct {
	configPath string
	home       string
	json       bool
}

// loadConfig reads tendril.json and the environment, honouring --home and
// --config.
func (g *globals) loadConfig() (*config.Config, error) {
	if g.home != "" {
		os.Setenv("TENDRIL_HOME", g.home)
	}
	return config.Load(g.configPath)
}

// newLogger logs JSON when stderr is not a terminal and text when it is,
// one format for the whole run: it also becomes slog's default, so every
// package logs the same way.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var log *slog.Logger
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		log = slog.New(slog.NewTextHandler(w, opts))
	} else {
		log = slog.New(slog.NewJSONHandler(w, opts))
	}
	slog.SetDefault(log)
	return log
}

// errHomeBusy: another tendril process holds the home's lock.
var errHomeBusy = errors.New("the home is in use by another tendril process")

// usageError marks bad usage: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// idArg accepts exactly one argument, which must not be blank: an empty
// ID would name the collection instead ("GET /memory/records/"). what
// names it in the usage error: "record ID is required".
func idArg(what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(1)(c, args); err != nil {
			return err
		}
		if strings.TrimSpace(args[0]) == "" {
			return usagef("%s is required", what)
		}
		return nil
	}
}

// registry of subcommand constructors; each command file adds itself in init.
var registry []func(*globals) *cobra.Command

func register(f func(*globals) *cobra.Command) { registry = append(registry, f) }

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "tendril",
		Short: "Tendril: a self-hosted personal AI assistant runtime",
		Long: `Tendril is a self-hosted personal AI assistant. It answers over Telegram, a
terminal and an HTTP API; remembers each user across conversations;
keeps every conversation as a branchable tree; asks before risky tool calls; and
runs reminders on schedule.

Configuration lives in $TENDRIL_HOME/tendril.json (default ~/.tendril); environment
variables such as MODEL_ID override it. Run "tendril doctor" to see the effective
configuration.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.PersistentFlags().StringVar(&g.configPath, "config", "", "path to tendril.json (default $TENDRIL_HOME/tendril.json)")
	root.PersistentFlags().StringVar(&g.home, "home", "", "Tendril home directory (default $TENDRIL_HOME or ~/.tendril)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	for _, f := range registry {
		root.AddCommand(f(g))
	}
	for _, c := range root.Commands() {
		strictGroups(c)
	}
	return root
}

// strictGroups makes every command group below the root (memory, session,
// cron, approvals, …) fail with a usage error (exit 2) on an unknown
// subcommand: cobra would print the group's help and exit 0. The bare
// group still prints its help.
func strictGroups(c *cobra.Command) {
	if !c.HasSubCommands() {
		return
	}
	if !c.Runnable() {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for %q; see %q", args[0], c.CommandPath(), c.CommandPath()+" --help")
			}
			return c.Help()
		}
	}
	for _, sub := range c.Commands() {
		strictGroups(sub)
	}
}

func main() {
	root := newRoot()
	if isatty.IsTerminal(os.Stdout.Fd()) {
		root.SetOut(termWriter{os.Stdout})
	}
	err := root.Execute()
	if err == nil {
		return
	}
	var se silentErr
	if errors.As(err, &se) {
		os.Exit(max(se.code, 1))
	}
	fmt.Fprintln(os.Stderr, "tendril:", errorText(err))
	var ue usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		os.Exit(2)
	}
	os.Exit(1)
}

// oneLine makes an error one printable line: newlines become "; " and
// other control characters (terminal escapes from user input) are quoted.
func oneLine(s string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(s) {
		switch {
		case r == '\n':
			b.WriteString("; ")
		case unicode.IsControl(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		case sanitize.IsBidi(r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// errorText is err as main prints it: one line (oneLine), except cobra's
// own unknown-command error, whose suggestions ("Did you mean
// this?\n\tsession") are lines meant to be read as such; its other
// control characters are still quoted (printable).
func errorText(err error) string {
	var ue usageError
	if msg := err.Error(); !errors.As(err, &ue) && strings.HasPrefix(msg, "unknown command ") {
		return printable(strings.TrimSpace(msg))
	}
	return oneLine(err.Error())
}

// printable quotes control characters other than newline and tab, and the
// bidirectional controls (sanitize.IsBidi).
func printable(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		if sanitize.IsBidi(r) {
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// termWriter quotes control characters other than newline and tab, so
// text a user sent (ANSI escapes, OSC titles, BEL) cannot drive the
// operator's terminal. It wraps stdout only when stdout is a terminal;
// piped output stays byte for byte.
type termWriter struct{ w io.Writer }

func (t termWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, printable(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires at least", "requires at most", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func init() {
	register(func(g *globals) *cobra.Command {
		return &cobra.Command{
			Use:   "version",
			Short: "Print the Tendril version",
			Args:  cobra.NoArgs,
			Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "tendril", version) },
		}
	})
}
