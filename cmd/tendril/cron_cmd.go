package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/schedule"
)

func init() { register(newCronCmd) }

func newCronCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cron",
		Short: "List, add, remove, run, pause and resume scheduled jobs, and show their runs",
		Long: `Scheduled jobs run a task as an actor and deliver the reply to a chat (SPEC §7.2). They
persist across restarts; a run missed while the server was down runs once at start-up.`,
	}
	var asJSON bool
	var actor string
	list := &cobra.Command{
		Use:   "list",
		Short: "List scheduled jobs, earliest next run first, then fired one-shots (status done)",
		Long: `List scheduled jobs, earliest next run first. A one-shot (--at) job that fired is listed
last with status done and no next run: it will not fire again, and "cron history" shows its runs.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return call(g, c, asJSON, "GET", "/jobs", url.Values{"actor": {actor}}, nil, func(w io.Writer, jobs []schedule.Job) error {
				if len(jobs) == 0 {
					fmt.Fprintln(w, "no scheduled jobs")
					return nil
				}
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tNAME\tKIND\tSPEC\tNEXT RUN\tSTATUS\tSOURCE\tACTOR\tTASK")
				for _, j := range jobs {
					status := string(j.Status)
					if j.Attempts > 0 {
						status += fmt.Sprintf(" (retry %d)", j.Attempts)
					}
					next := localTime(j.NextRun, j.TZ)
					if j.Status == schedule.StatusDone {
						next, status = "-", "done "+localTime(j.LastRun, j.TZ)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%s\t%s\t%s\t%s\t%s\n", j.ID, clip(j.Name, 24), j.Kind, j.Spec, j.TZ,
						next, status, j.Source, j.ActorID, clip(j.Task, 40))
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print one JSON array")
	list.Flags().StringVar(&actor, "actor", "", "only jobs of this actor (e.g. telegram:123)")

	var spec schedule.JobSpec
	add := &cobra.Command{
		Use:   "add --name N (--at T | --every D | --cron EXPR [--tz Z]) --task TEXT --actor A",
		Short: "Add a scheduled job",
		Long: `Give exactly one of --at (RFC 3339, local "2026-12-01T09:00" in --tz, or "in 2h"), --every
("90m", "7d") or --cron (5 fields or @daily). --actor is <channel>:<id>; the reply goes to
--channel/--chat, which for an actor "telegram:123" default to telegram and 123.`,
		Example: `  tendril cron add --name morning --cron "0 8 * * *" --tz Europe/Berlin --task "Check today's garden tasks" --actor telegram:123`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if strings.TrimSpace(spec.Name) == "" || spec.Task == "" || spec.ActorID == "" {
				return usagef("cron add: --name, --task and --actor are required")
			}
			// The reply's channel and chat default from the actor's two
			// parts: without them the job would deliver nowhere.
			if ch, id, ok := strings.Cut(spec.ActorID, ":"); !ok || strings.TrimSpace(ch) == "" || strings.TrimSpace(id) == "" {
				return usagef("cron add: --actor %q: want <channel>:<id>, e.g. telegram:123", spec.ActorID)
			}
			n := 0
			for _, v := range []string{spec.At, spec.Every, spec.Cron} {
				if v != "" {
					n++
				}
			}
			if n != 1 {
				return usagef("cron add: give exactly one of --at, --every or --cron")
			}
			spec.Source = schedule.SourceCLI
			return call(g, c, asJSON, "POST", "/jobs", nil, spec, func(w io.Writer, j schedule.Job) error {
				_, err := fmt.Fprintf(w, "added %s (%s %s), next run %s\n", j.ID, j.Kind, j.Spec, localTime(j.NextRun, j.TZ))
				return err
			})
		},
	}
	f := add.Flags()
	f.StringVar(&spec.Name, "name", "", "job name, unique per actor (required)")
	f.StringVar(&spec.At, "at", "", "one-shot time: RFC 3339 or \"in 2h\"")
	f.StringVar(&spec.Every, "every", "", "interval: 90m, 12h, 7d")
	f.StringVar(&spec.Cron, "cron", "", "5-field cron expression")
	f.StringVar(&spec.TZ, "tz", "", "IANA time zone (default UTC)")
	f.StringVar(&spec.Task, "task", "", "what the agent is asked to do at run time (required)")
	f.StringVar(&spec.ActorID, "actor", "", "actor the job runs as, <channel>:<id> such as telegram:123 (required)")
	f.StringVar(&spec.Channel, "channel", "", "channel the reply goes to (default: the actor's prefix)")
	f.StringVar(&spec.ChatID, "chat", "", "chat id the reply goes to (default: from the actor)")
	f.StringVar(&spec.SessionID, "session", "", "session the turn runs in (default: the actor's)")
	f.BoolVar(&asJSON, "json", false, "print the new job as JSON")

	ref := func(use, short, method, suffix, done string) *cobra.Command {
		return &cobra.Command{
			Use: use, Short: short, Args: idArg("job ID or name"),
			RunE: func(c *cobra.Command, args []string) error {
				return g.with(c, func(ctx context.Context, cn *conn) error {
					var j schedule.Job
					if err := cn.API(ctx, method, "/jobs/"+url.PathEscape(args[0])+suffix, nil, struct{}{}, &j); err != nil {
						return err
					}
					fmt.Fprintf(c.OutOrStdout(), "%s %s %s\n", done, j.ID, oneLine(j.Name))
					if j.Source == schedule.SourceConfig && suffix == "" {
						fmt.Fprintln(c.ErrOrStderr(), "note: this job is defined in tendril.json and returns at the next server start unless removed there")
					}
					if suffix == "/pause" && !j.NextRun.IsZero() && !j.NextRun.After(time.Now()) {
						// A run that was due (a `cron run`, or a slot that
						// has come) does not survive the pause: resume starts
						// from the next slot after then.
						fmt.Fprintf(c.ErrOrStderr(), "note: its run due at %s is dropped by the pause; after resume, `tendril cron run %s` runs it\n", localTime(j.NextRun, ""), j.ID)
					}
					if cn.local != nil && suffix == "/run" {
						fmt.Fprintln(c.ErrOrStderr(), cn.noServerNote("the job runs"))
					}
					return nil
				})
			},
		}
	}
	history := &cobra.Command{
		Use:   "history <id|name>",
		Short: fmt.Sprintf("Show a job's last %d runs, newest first", schedule.MaxRuns),
		Long: fmt.Sprintf(`Show a job's last %d runs, newest first: when each started and finished, whether it
delivered (ok) or failed (error), and what was delivered or the error. A one-shot job's runs
stay after it fired (it is listed as done); each actor keeps its newest %d done one-shots.`, schedule.MaxRuns, schedule.MaxDone),
		Args: idArg("job ID or name"),
		RunE: func(c *cobra.Command, args []string) error {
			return call(g, c, asJSON, "GET", "/jobs/"+url.PathEscape(args[0])+"/history", nil, nil, func(w io.Writer, runs []schedule.Run) error {
				if len(runs) == 0 {
					fmt.Fprintln(w, "no runs yet")
					return nil
				}
				head := "job " + runs[0].JobID
				if r := runs[0]; r.Name != "" || r.ActorID != "" {
					head += fmt.Sprintf(" \"%s\" of %s", clip(r.Name, 60), clip(r.ActorID, 64))
				}
				fmt.Fprintln(w, head)
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "STARTED\tFINISHED\tOUTCOME\tDETAIL")
				for _, r := range runs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", localTime(r.Started, ""), localTime(r.Finished, ""), r.Result, clip(r.Detail, 80))
				}
				return tw.Flush()
			})
		},
	}
	history.Flags().BoolVar(&asJSON, "json", false, "print one JSON array")
	cmd.AddCommand(list, add, history,
		ref("remove <id|name>", "Remove a scheduled job", "DELETE", "", "removed"),
		ref("run <id|name>", "Run a job now on the running server (resumes a paused job)", "POST", "/run", "due now:"),
		ref("pause <id|name>", "Pause a job: it does not fire until resumed", "POST", "/pause", "paused"),
		ref("resume <id|name>", "Resume a paused job from its next slot after now (missed runs are not replayed)", "POST", "/resume", "resumed"))
	return cmd
}

func localTime(t time.Time, tz string) string {
	if t.IsZero() {
		return "-"
	}
	if loc, err := time.LoadLocation(tz); err == nil && tz != "" {
		t = t.In(loc)
	}
	return t.Format(time.RFC3339)
}
