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
	"unicode/utf8"

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
// package logs the same way. JSON lines carry bidirectional controls
// escaped (bidiWriter), as the text handler quotes them; each line is one
// Write under the handler's lock.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var log *slog.Logger
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		log = slog.New(slog.NewTextHandler(w, opts))
	} else {
		log = slog.New(slog.NewJSONHandler(bidiWriter(w), opts))
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
	stdout, stderr := outputWriter(os.Stdout), outputWriter(os.Stderr)
	root.SetOut(stdout)
	root.SetErr(stderr)
	ran, err := root.ExecuteC()
	if err != nil && wantsJSON(ran) && !errors.As(err, new(silentErr)) {
		// A --json command that failed before printing its answer (the
		// database unreachable, a bad argument): stdout still gets JSON,
		// the envelope /invocations answers errors with.
		fmt.Fprintln(stdout, string(errorEnvelope(err)))
	}
	stdout.Flush()
	stderr.Flush()
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

// wantsJSON reports whether cmd was run with --json.
func wantsJSON(cmd *cobra.Command) bool {
	if cmd == nil {
		return false
	}
	f := cmd.Flags().Lookup("json")
	return f != nil && f.Value.String() == "true"
}

// oneLine makes an error one printable line: newlines become "; " and
// other control characters (terminal escapes from user input) are quoted
// (quoteRune).
func oneLine(s string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(s) {
		switch {
		case r == '\n':
			b.WriteString("; ")
		case !quoteRune(&b, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// quoteRune writes r to b quoted and reports true when r is a control
// character or a bidirectional control (sanitize.IsBidi): "\x1b" for
// C0 controls, which JSON output holds only escaped already, and
// "\u0085", "\u202e" for the others, which is what JSON's own escape
// means there.
func quoteRune(b *strings.Builder, r rune) bool {
	switch {
	case r < 0x20:
		fmt.Fprintf(b, "\\x%02x", r)
	case unicode.IsControl(r) || sanitize.IsBidi(r):
		fmt.Fprintf(b, "\\u%04x", r)
	default:
		return false
	}
	return true
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
// bidirectional controls (quoteRune).
func printable(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '\n' || r == '\t' || !quoteRune(&b, r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// outputWriter is the one way every command's output (stdout) and notes
// (stderr) reach f. On a terminal it is termWriter. Anywhere else (a
// pipe, a file, a log collector) it is bidiWriter: the bytes as stored,
// except the bidirectional controls, which would reorder how a terminal or
// log viewer shows the line later.
func outputWriter(f *os.File) *escWriter {
	if isatty.IsTerminal(f.Fd()) {
		return termWriter(f)
	}
	return bidiWriter(f)
}

// termWriter quotes control characters other than newline and tab, and
// the bidirectional controls (printable), so that text a user sent (ANSI
// escapes, OSC titles, BEL, U+202E) can neither drive the operator's
// terminal nor reorder what it shows.
func termWriter(w io.Writer) *escWriter { return &escWriter{w: w, esc: printable} }

// bidiWriter writes each bidirectional control as its \uXXXX escape
// (sanitize.EscapeBidi) and every other byte as it is. In JSON output such
// characters only occur inside strings, where the escape decodes to the
// same character: --json output means the same, and its bytes hold no
// such control.
func bidiWriter(w io.Writer) *escWriter {
	return &escWriter{w: w, esc: sanitize.EscapeBidi}
}

// escWriter writes to w what esc makes of the text written to it. A UTF-8
// sequence cut at the end of one Write (output copied in chunks) is held
// until the next completes it, so a character is never escaped in halves;
// Flush writes what is held at the end.
type escWriter struct {
	w    io.Writer
	esc  func(string) string
	held []byte
}

func (e *escWriter) Write(p []byte) (int, error) {
	buf := append(e.held, p...)
	cut := len(buf)
	// Back up over at most utf8.UTFMax-1 bytes to the start of the last
	// sequence: hold it when it is incomplete.
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	e.held = append([]byte(nil), buf[cut:]...)
	if _, err := io.WriteString(e.w, e.esc(string(buf[:cut]))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what a last Write left held (an incomplete sequence).
func (e *escWriter) Flush() error {
	if len(e.held) == 0 {
		return nil
	}
	_, err := io.WriteString(e.w, e.esc(string(e.held)))
	e.held = nil
	return err
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
