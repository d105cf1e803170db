package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/approval/pgledger"
	"github.com/tendrilai/tendril/internal/assistant"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/mgmt"
	"github.com/tendrilai/tendril/internal/pg"
)

func init() {
	register(newApprovalsCmd)
	register(newAuditCmd)
}

// yoloCap is approval.MaxYolo as the user would type it: "30m".
var yoloCap = strings.TrimSuffix(approval.MaxYolo.String(), "0s")

// operator names the person at the CLI for the ledger's "by" field.
func operator() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return "cli:unknown"
}

// showJSON returns JSON for display with encoding/json's HTML escapes
// (\u003c, \u003e, \u0026, which the management API's encoder writes in
// every string, json.RawMessage included) turned back into <, > and &, so
// "echo a >> f" shows as written. Every other escape stays: control
// characters remain \u00xx, and the output writer quotes bidirectional
// controls, which JSON does not escape.
func showJSON(j []byte) string {
	var b strings.Builder
	for i := 0; i < len(j); i++ {
		if j[i] != '\\' || i+1 == len(j) {
			b.WriteByte(j[i])
			continue
		}
		if j[i+1] == 'u' && i+6 <= len(j) {
			var c byte
			switch strings.ToLower(string(j[i+2 : i+6])) {
			case "003c":
				c = '<'
			case "003e":
				c = '>'
			case "0026":
				c = '&'
			}
			if c != 0 {
				b.WriteByte(c)
				i += 5
				continue
			}
		}
		b.Write(j[i : i+2]) // a whole escape, so \\u003e stays
		i++
	}
	return b.String()
}

func newApprovalsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List, approve and deny tool calls waiting for approval; YOLO window; reset",
		Long: `Every tool call passes the approval gate (SPEC §6.3): each tool's rule is always, ask or
never (read → always, write → ask, exec → never, or ask with TENDRIL_ENABLE_EXEC_TOOLS=1),
made stricter by the breaker. An "ask" opens a request bound to its ID (one use), agent,
tool, the SHA-256 of its RFC 8785 canonical arguments, actor, session and expiry (120 s).
Everything goes to the hash-chained ledger <home>/approvals/ledger.jsonl; if it fails
verification the gate closes until "tendril approvals reset".`,
	}
	var asJSON, all bool
	list := &cobra.Command{
		Use:   "list [--all]",
		Short: "List open approval requests (--all: finished ones too)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return call(g, c, asJSON, "GET", "/approvals", url.Values{"all": {fmt.Sprint(all)}}, nil, func(w io.Writer, out mgmt.ApprovalList) error {
				if out.Broken != nil {
					fmt.Fprintf(w, "LEDGER BROKEN (gate closed): %s\nrun \"tendril audit verify\" and \"tendril approvals reset\"\n\n", out.Broken.Summary())
				}
				if out.YoloUntil != nil {
					fmt.Fprintf(w, "YOLO window open until %s (ask treated as always; never and exec unaffected)\n\n", out.YoloUntil.Local().Format(time.RFC3339))
				}
				if len(out.Requests) == 0 {
					fmt.Fprintln(w, "no open approval requests")
					return nil
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tSTATUS\tTOOL\tACTOR\tEXPIRES\tARGS")
				for _, r := range out.Requests {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Status, r.Tool, r.ActorID, r.ExpiresAt.Local().Format("15:04:05"), clip(showJSON(r.Args), 80))
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	list.Flags().BoolVar(&all, "all", false, "include finished requests")

	decide := func(verb string) *cobra.Command {
		var by string
		c := &cobra.Command{
			Use:   verb + " <id>",
			Short: map[string]string{"approve": "Approve a pending request: its exact call may then run once", "deny": "Deny a pending request"}[verb],
			Long: `The decision is written to the ledger and the running server resumes (or ends) the
paused turn at once, replying on its channel.`,
			Args: cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				if !approval.ValidRequestID(args[0]) {
					return usagef("%s is not a request ID (26 characters, see \"tendril approvals list\")", approval.QuoteID(args[0]))
				}
				if by == "" {
					by = operator()
				}
				return g.with(c, func(ctx context.Context, cn *conn) error {
					var r approval.Request
					if err := cn.API(ctx, "POST", "/approvals/"+args[0]+"/"+verb, nil, mgmt.Decision{By: by}, &r); err != nil {
						return err
					}
					_, err := fmt.Fprintf(c.OutOrStdout(), "%s %s: %s %s\n", r.ID, r.Status, oneLine(r.Tool), oneLine(showJSON(r.Args)))
					if cn.local != nil && verb == "approve" {
						fmt.Fprintln(c.ErrOrStderr(), cn.noServerNote("the paused turn resumes"))
					}
					return err
				})
			},
		}
		c.Flags().StringVar(&by, "by", "", "who decides, recorded in the ledger (default cli:<user>)")
		return c
	}

	var dur time.Duration
	var off bool
	yolo := &cobra.Command{
		Use:   "yolo --for 10m | --off",
		Short: "Treat ask as always for a while (at most 30 minutes)",
		Long: `yolo opens a window in which "ask" tools run without asking. It never relaxes "never",
exec tools or the breaker, and ends at its wall-clock or monotonic end, whichever is first.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if off == (dur != 0) {
				return usagef("give exactly one of --for DURATION or --off")
			}
			if dur < 0 {
				return usagef("--for must be positive")
			}
			if dur > approval.MaxYolo {
				return usagef("--for must be at most %s (the YOLO window's cap)", yoloCap)
			}
			return g.with(c, func(ctx context.Context, cn *conn) error {
				var out struct {
					Until time.Time `json:"until"`
				}
				if err := cn.API(ctx, "POST", "/approvals/yolo", nil, mgmt.YoloRequest{Seconds: dur.Seconds(), By: operator()}, &out); err != nil {
					return err
				}
				w := c.OutOrStdout()
				if off {
					fmt.Fprintln(w, "YOLO window closed")
					return nil
				}
				_, err := fmt.Fprintf(w, "YOLO window open until %s\n", out.Until.Local().Format(time.RFC3339))
				return err
			})
		},
	}
	yolo.Flags().DurationVar(&dur, "for", 0, "window length, e.g. 10m (max "+yoloCap+")")
	yolo.Flags().BoolVar(&off, "off", false, "close the window now")

	var reason string
	reset := &cobra.Command{
		Use:   "reset --reason TEXT",
		Short: "Reopen a gate closed by a broken ledger (archives the broken ledger)",
		Long: `After investigating ("tendril audit verify"), reset moves the broken ledger aside to
ledger.jsonl.broken-<time> (nothing is deleted) and starts a new one recording who, why,
the archive's SHA-256 and the last good hash. It refuses when the ledger verifies.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if reason == "" {
				return usagef("--reason is required")
			}
			return g.with(c, func(ctx context.Context, cn *conn) error {
				var out struct {
					Ledger string `json:"ledger"`
				}
				err := cn.API(ctx, "POST", "/approvals/reset", nil, map[string]string{"by": operator(), "reason": reason}, &out)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(c.OutOrStdout(), "ledger reset; the broken one was archived next to %s\n", out.Ledger)
				return err
			})
		},
	}
	reset.Flags().StringVar(&reason, "reason", "", "why, recorded in the ledger")
	cmd.AddCommand(list, decide("approve"), decide("deny"), yolo, reset)
	return cmd
}

// errSilentFail exits 1 after the command already explained the failure.
var errSilentFail = errors.New("ledger verification failed")

func newAuditCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Check the tamper-evident approval ledger"}
	var asJSON bool
	verify := &cobra.Command{
		Use:   "verify",
		Short: "Verify the approval ledger's hash chain; report the first bad entry",
		Long: `verify reads the ledger (<home>/approvals/ledger.jsonl, or the approval_ledger table
with TENDRIL_DATABASE_URL) without changing it (safe beside a running server) and checks every line's RFC 8785 form, SHA-256 hash, link, sequence and meaning.
It exits 1 when the ledger is bad.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			rep, err := verifyLedger(c.Context(), cfg)
			if err != nil {
				return err
			}
			err = emit(c, asJSON, rep, func(w io.Writer) error {
				if rep.OK {
					_, err := fmt.Fprintf(w, "ok: %d entries, head seq %d hash %s\n", rep.Entries, rep.HeadSeq, rep.HeadHash)
					return err
				}
				fmt.Fprintf(w, "BROKEN at line %d (seq %d): %s\n", rep.FirstBad.Line, rep.FirstBad.Seq, rep.FirstBad.Reason)
				fmt.Fprintf(w, "%d entries before it verify; last good hash %s\n", rep.Entries, rep.HeadHash)
				fmt.Fprintln(os.Stderr, `the gate is closed; after investigating, run "tendril approvals reset --reason ..."`)
				return nil
			})
			if err == nil && !rep.OK {
				return errSilentFail
			}
			return err
		},
	}
	verify.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	cmd.AddCommand(verify)
	return cmd
}

// verifyLedger checks the configured ledger: the file in the home, or the
// PostgreSQL table when a database is set.
func verifyLedger(ctx context.Context, cfg *config.Config) (approval.VerifyReport, error) {
	if cfg.DatabaseURL == "" {
		return approval.VerifyLedger(filepath.Join(assistant.ApprovalDir(cfg), "ledger.jsonl"))
	}
	db, err := pg.Open(ctx, cfg.DatabaseURL, pg.Options{MaxConns: 2})
	if err != nil {
		return approval.VerifyReport{}, err
	}
	defer db.Close()
	gopts, err := assistant.ApprovalOptions(cfg, false)
	if err != nil {
		return approval.VerifyReport{}, err
	}
	g, err := pgledger.OpenGate(ctx, db, gopts)
	if err != nil {
		return approval.VerifyReport{}, err
	}
	defer g.Close()
	return g.Verify(ctx)
}
