package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/config"
)

func init() {
	register(newApprovalsCmd)
	register(newAuditCmd)
}

// approvalDir holds the ledger: <home>/approvals/ledger.jsonl.
func approvalDir(cfg *config.Config) string { return filepath.Join(cfg.Home, "approvals") }

// approvalOptions maps config.Config onto approval.Options. The server sets
// SyncRules so tendril.json's rules are saved to the ledger (invalidating
// open approvals when they change); the CLI leaves the ledger's rules alone.
func approvalOptions(cfg *config.Config, syncRules bool) (approval.Options, error) {
	rules, err := approval.ParseRules(cfg.Approval.Rules)
	if err != nil {
		return approval.Options{}, fmt.Errorf("config approval.rules: %w", err)
	}
	return approval.Options{
		Rules: rules, SyncRules: syncRules, ExecEnabled: cfg.Tools.EnableExec, Expiry: cfg.Approval.Expiry.D(),
	}, nil
}

func openGateCLI(g *globals) (*approval.Gate, error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, err
	}
	opts, err := approvalOptions(cfg, false)
	if err != nil {
		return nil, err
	}
	return approval.Open(approvalDir(cfg), opts)
}

// operator names the person at the CLI for the ledger's "by" field.
func operator() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	return "cli:" + name
}

func newApprovalsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List, approve and deny tool calls waiting for approval; YOLO window; reset",
		Long: `Every tool call passes the approval gate (SPEC §6.3). Each tool has a rule — always, ask or
never — defaulting by class (read → always, write → ask, exec → never, or ask when
TENDRIL_ENABLE_EXEC_TOOLS=1). The effective rule is the strictest of the rule, the breaker
(WARNING removes write tools, CRITICAL leaves read-only tools) and the floor (exec always asks).

An "ask" opens a request bound to its request_id (one use), agent, tool, the SHA-256 of its
RFC 8785 canonical arguments, actor, session and expiry (default 120 s). Approving it lets that
exact call run once; any other agent, tool, argument, actor or session is refused.

Everything goes to the hash-chained ledger <home>/approvals/ledger.jsonl. If it fails
verification the gate closes: nothing runs until "tendril approvals reset".`,
	}
	cmd.AddCommand(newApprovalsListCmd(g), newApprovalsDecideCmd(g, true), newApprovalsDecideCmd(g, false),
		newApprovalsYoloCmd(g), newApprovalsResetCmd(g))
	return cmd
}

func newApprovalsListCmd(g *globals) *cobra.Command {
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "list [--all] [--json]",
		Short: "List open approval requests (pending or approved, not yet run)",
		Long: `List shows open requests, oldest first: ID, status, tool, actor, expiry and the canonical
arguments. --all includes finished ones (executed, denied, expired, invalidated by a rule
change, rejected because the ledger is broken). --json prints one JSON document:
{"requests": [...], "broken": null | {...}, "yolo_until": null | "<time>"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gate, err := openGateCLI(g)
			if err != nil {
				return err
			}
			defer gate.Close()
			var reqs []approval.Request
			if all {
				reqs, err = gate.List(cmd.Context())
			} else {
				reqs, err = gate.Pending(cmd.Context())
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			broken := gate.Broken()
			until, yolo := gate.YoloUntil()
			if asJSON {
				if reqs == nil {
					reqs = []approval.Request{}
				}
				doc := map[string]any{"requests": reqs, "broken": broken, "yolo_until": nil}
				if yolo {
					doc["yolo_until"] = until
				}
				return safetyWriteJSON(out, doc)
			}
			if broken != nil {
				fmt.Fprintf(out, "LEDGER BROKEN (gate closed): %s\nrun \"tendril audit verify\" and \"tendril approvals reset\"\n\n", broken.Summary())
			}
			if yolo {
				fmt.Fprintf(out, "YOLO window open until %s (ask treated as always; never and exec unaffected)\n\n", until.Local().Format(time.RFC3339))
			}
			if len(reqs) == 0 {
				fmt.Fprintln(out, "no open approval requests")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATUS\tTOOL\tACTOR\tEXPIRES\tARGS")
			for _, r := range reqs {
				args := string(r.Args)
				if len(args) > 80 {
					args = args[:77] + "..."
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Status, r.Tool, r.ActorID, r.ExpiresAt.Local().Format("15:04:05"), args)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	cmd.Flags().BoolVar(&all, "all", false, "include finished requests")
	return cmd
}

func newApprovalsDecideCmd(g *globals, approve bool) *cobra.Command {
	verb, short := "approve", "Approve a pending request: its exact call may then run once"
	if !approve {
		verb, short = "deny", "Deny a pending request"
	}
	var by string
	cmd := &cobra.Command{
		Use:   verb + " <id>",
		Short: short,
		Long: short + `.

The decision is written to the ledger; a running server picks it up within a second and
resumes (or ends) the paused turn, replying on its channel. A request that expired, was
invalidated by a rule change or was already decided cannot be decided.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if !approval.ValidRequestID(id) {
				return usagef("%q is not a request ID (26 characters, see \"tendril approvals list\")", id)
			}
			gate, err := openGateCLI(g)
			if err != nil {
				return err
			}
			defer gate.Close()
			if by == "" {
				by = operator()
			}
			if err := gate.Decide(cmd.Context(), id, approve, by); err != nil {
				return err
			}
			r, err := gate.Get(cmd.Context(), id)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s: %s %s\n", id, r.Status, r.Tool, r.Args)
			return nil
		},
	}
	cmd.Flags().StringVar(&by, "by", "", "who decides, recorded in the ledger (default cli:<user>)")
	return cmd
}

func newApprovalsYoloCmd(g *globals) *cobra.Command {
	var dur time.Duration
	var off bool
	cmd := &cobra.Command{
		Use:   "yolo --for 10m | --off",
		Short: "Treat ask as always for a while (capped at 30 minutes)",
		Long: `yolo opens a window in which tools whose rule is "ask" run without asking. It never relaxes
"never", exec tools or the breaker. The window is capped at 30 minutes and ends on whichever
comes first: its wall-clock end or its monotonic-clock end (so changing the system clock
cannot extend it). --off closes it now.`,
		Example: `  tendril approvals yolo --for 10m
  tendril approvals yolo --off`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if off == (dur != 0) {
				return usagef("give exactly one of --for DURATION or --off")
			}
			if dur < 0 {
				return usagef("--for must be positive")
			}
			gate, err := openGateCLI(g)
			if err != nil {
				return err
			}
			defer gate.Close()
			until, err := gate.Yolo(cmd.Context(), dur, operator())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case off:
				fmt.Fprintln(out, "YOLO window closed")
			default:
				if dur > approval.MaxYolo {
					fmt.Fprintf(out, "capped at %s\n", approval.MaxYolo)
				}
				fmt.Fprintf(out, "YOLO window open until %s\n", until.Local().Format(time.RFC3339))
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&dur, "for", 0, "window length, e.g. 10m (max 30m)")
	cmd.Flags().BoolVar(&off, "off", false, "close the window now")
	return cmd
}

func newApprovalsResetCmd(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "reset --reason TEXT",
		Short: "Reopen a gate closed by a broken ledger (archives the broken ledger)",
		Long: `When the ledger fails verification the gate fails closed: every open request is rejected and
no tool runs. After investigating ("tendril audit verify"), reset moves the broken ledger
aside to ledger.jsonl.broken-<time> (nothing is deleted) and starts a new one whose first
entry records who reset it, why, the archive's SHA-256, the first bad line and the last good
hash. Old requests stay rejected. It refuses when the ledger verifies.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if reason == "" {
				return usagef("--reason is required")
			}
			gate, err := openGateCLI(g)
			if err != nil {
				return err
			}
			defer gate.Close()
			if err := gate.Reset(cmd.Context(), operator(), reason); err != nil {
				if errors.Is(err, approval.ErrNotBroken) {
					return fmt.Errorf("ledger %s verifies; nothing to reset", gate.Path())
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ledger reset; the broken one was archived next to %s\n", gate.Path())
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the ledger")
	return cmd
}

func newAuditCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Check the tamper-evident approval ledger",
	}
	var asJSON bool
	verify := &cobra.Command{
		Use:   "verify [--json]",
		Short: "Verify the approval ledger's hash chain; report the first bad entry",
		Long: `verify reads <home>/approvals/ledger.jsonl without changing it and checks every line: RFC 8785
canonical form, its SHA-256 hash, the link to the previous entry's hash, the sequence number,
and the entry's meaning (a decision names an open request with the same binding, a request
runs at most once, nothing happens after expiry or a rule change). It prints the number of
good entries and the head hash, or the first bad line and why, and exits 1 if it is bad.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			rep, err := approval.VerifyLedger(filepath.Join(approvalDir(cfg), "ledger.jsonl"))
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := safetyWriteJSON(out, rep); err != nil {
					return err
				}
			} else {
				printVerify(out, rep)
			}
			if !rep.OK {
				return errSilentFail
			}
			return nil
		},
	}
	verify.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	cmd.AddCommand(verify)
	return cmd
}

// errSilentFail exits 1 after the command already explained the failure.
var errSilentFail = errors.New("ledger verification failed")

func printVerify(w io.Writer, rep approval.VerifyReport) {
	if rep.OK {
		fmt.Fprintf(w, "ok: %d entries, head seq %d hash %s\n", rep.Entries, rep.HeadSeq, rep.HeadHash)
		return
	}
	fmt.Fprintf(w, "BROKEN at line %d (seq %d): %s\n", rep.FirstBad.Line, rep.FirstBad.Seq, rep.FirstBad.Reason)
	fmt.Fprintf(w, "%d entries before it verify; last good hash %s\n", rep.Entries, rep.HeadHash)
	fmt.Fprintln(os.Stderr, `the gate is closed; after investigating, run "tendril approvals reset --reason ..."`)
}
