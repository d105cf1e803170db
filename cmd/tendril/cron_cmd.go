package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/schedule"
	schedpg "github.com/tendrilai/tendril/internal/schedule/pgstore"
	"github.com/tendrilai/tendril/internal/schedule/reminders"
	schedsqlite "github.com/tendrilai/tendril/internal/schedule/sqlitestore"
	"github.com/tendrilai/tendril/internal/tool"
)

func init() { register(newCronCmd) }

// openScheduleStore opens the jobs store for cfg: Postgres (table
// schedule_jobs) when cfg.DatabaseURL is set, else SQLite at
// $TENDRIL_HOME/schedule/jobs.db. The server should use the same function so
// that the CLI and every instance see one store.
func openScheduleStore(ctx context.Context, cfg *config.Config) (schedule.Store, error) {
	if cfg.DatabaseURL != "" {
		return schedpg.Open(ctx, cfg.DatabaseURL)
	}
	return schedsqlite.Open(ctx, schedsqlite.DefaultPath(cfg.Home))
}

// scheduleJobSpecs maps tendril.json schedule.jobs onto the scheduler's
// specs, for Scheduler.SyncConfigJobs at server start. Channel and chat
// default from the actor ("telegram:123" → telegram, 123).
func scheduleJobSpecs(cfg *config.Config) []schedule.JobSpec {
	var out []schedule.JobSpec
	for _, j := range cfg.Schedule.Jobs {
		ch, chat := reminders.ChatOf(tool.Call{Channel: j.Channel, ActorID: j.ActorID})
		if j.ChatID != "" {
			chat = j.ChatID
		}
		out = append(out, schedule.JobSpec{
			Name: j.Name, Kind: schedule.Kind(j.Kind), At: j.At, Every: j.Every, Cron: j.Cron, TZ: j.TZ,
			Task: j.Task, ActorID: j.ActorID, Channel: ch, ChatID: chat, Source: schedule.SourceConfig,
		})
	}
	return out
}

// openCronScheduler opens the store and a management-only scheduler (no
// runner: the CLI never runs jobs itself).
func openCronScheduler(cmd *cobra.Command, g *globals) (*schedule.Scheduler, func(), error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	st, err := openScheduleStore(cmd.Context(), cfg)
	if err != nil {
		return nil, nil, err
	}
	return schedule.New(st, nil, schedule.Options{}), func() { st.Close() }, nil
}

func newCronCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cron",
		Short: "List, add, remove and run scheduled jobs",
		Long: `Scheduled jobs (SPEC §7.2) run an agent turn with invocation_type=cron and deliver the
reply to the job's chat, unless the reply is NOTHING_DUE. Kinds:

  at     one-shot at an RFC 3339 time (or "in 2h"); deleted after a successful run
  every  a fixed interval: "90m", "12h", "7d" (minimum 1m)
  cron   a 5-field expression ("0 8 * * 1-5") in an IANA time zone (--tz, default UTC)

Jobs live in $TENDRIL_HOME/schedule/jobs.db (in Postgres when TENDRIL_DATABASE_URL
is set) and are shared with a running "tendril
serve", which picks up changes within its poll interval (15s). Jobs from tendril.json
(schedule.jobs) are synced at server start; the reminders tool adds jobs for users.

A failed run is retried after 60s, 120s and 300s; after that it waits for its next
regular slot (a one-shot job is marked failed). A run missed while the server was down
runs once at start-up.`,
	}
	cmd.AddCommand(newCronListCmd(g), newCronAddCmd(g), newCronRemoveCmd(g), newCronRunCmd(g))
	return cmd
}

func newCronListCmd(g *globals) *cobra.Command {
	var asJSON bool
	var actor string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List scheduled jobs, earliest next run first",
		Long: `List scheduled jobs, earliest next run first. --json prints one JSON array of jobs
with the fields id, name, kind, spec, tz, task, actor_id, channel, chat_id, session_id,
created_at, next_run, last_run, attempts, status (active|failed), source
(config|cli|tool) and last_error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, done, err := openCronScheduler(cmd, g)
			if err != nil {
				return err
			}
			defer done()
			jobs, err := s.List(cmd.Context(), schedule.Filter{ActorID: actor})
			if err != nil {
				return err
			}
			if asJSON {
				if jobs == nil {
					jobs = []schedule.Job{}
				}
				return cronWriteJSON(cmd.OutOrStdout(), jobs)
			}
			if len(jobs) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no scheduled jobs")
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tKIND\tSPEC\tNEXT RUN\tSTATUS\tSOURCE\tACTOR\tTASK")
			for _, j := range jobs {
				spec := j.Spec
				if j.TZ != "" {
					spec += " " + j.TZ
				}
				status := string(j.Status)
				if j.Attempts > 0 {
					status += fmt.Sprintf(" (retry %d)", j.Attempts)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, cronClip(j.Name, 24), j.Kind, spec,
					cronLocal(j.NextRun, j.TZ), status, j.Source, j.ActorID, cronClip(j.Task, 40))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON array")
	cmd.Flags().StringVar(&actor, "actor", "", "only jobs of this actor (e.g. telegram:123)")
	return cmd
}

func newCronAddCmd(g *globals) *cobra.Command {
	var spec schedule.JobSpec
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "add --name N (--at T | --every D | --cron EXPR [--tz Z]) --task TEXT --actor A [--channel C --chat ID]",
		Short: "Add a scheduled job",
		Long: `Add a scheduled job. Give exactly one of --at, --every or --cron.

  --at     RFC 3339 ("2026-12-01T09:00:00+01:00"), local "2026-12-01T09:00" read in --tz,
           or relative ("in 2h", "in 3 days")
  --every  interval: "90m", "12h", "7d"
  --cron   5-field expression "minute hour day-of-month month day-of-week", or @daily etc.
  --tz     IANA zone for --cron and local --at times (default UTC)

The reply goes to --channel/--chat; for an actor "telegram:123" they default to
telegram and 123.

Examples:
  tendril cron add --name morning --cron "0 8 * * *" --tz Europe/Berlin \
      --task "Check today's garden tasks" --actor telegram:123
  tendril cron add --name pills --at "in 2h" --task "Remind me to take my pills" --actor telegram:123`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if spec.Task == "" || spec.ActorID == "" {
				return usagef("cron add: --task and --actor are required")
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
			ch, chat := reminders.ChatOf(tool.Call{Channel: spec.Channel, ActorID: spec.ActorID})
			if spec.Channel == "" {
				spec.Channel = ch
			}
			if spec.ChatID == "" {
				spec.ChatID = chat
			}
			spec.Source = schedule.SourceCLI
			s, done, err := openCronScheduler(cmd, g)
			if err != nil {
				return err
			}
			defer done()
			if spec.Name != "" {
				// Names identify jobs to people: one per actor.
				same, err := s.List(cmd.Context(), schedule.Filter{ActorID: spec.ActorID, Name: spec.Name})
				if err != nil {
					return err
				}
				if len(same) > 0 {
					return usagef("cron add: %s already has a job named %q (%s); remove it first or pick another name", spec.ActorID, spec.Name, same[0].ID)
				}
			}
			j, err := s.Add(cmd.Context(), spec)
			if errors.Is(err, schedule.ErrBadSpec) {
				return usagef("cron add: %v", err)
			}
			if err != nil {
				return err
			}
			if asJSON {
				return cronWriteJSON(cmd.OutOrStdout(), j)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "added %s (%s %s), next run %s\n", j.ID, j.Kind, j.Spec, cronLocal(j.NextRun, j.TZ))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&spec.Name, "name", "", "job name")
	f.StringVar(&spec.At, "at", "", "one-shot time: RFC 3339 or \"in 2h\"")
	f.StringVar(&spec.Every, "every", "", "interval: 90m, 12h, 7d")
	f.StringVar(&spec.Cron, "cron", "", "5-field cron expression")
	f.StringVar(&spec.TZ, "tz", "", "IANA time zone, e.g. Europe/Berlin (default UTC)")
	f.StringVar(&spec.Task, "task", "", "what the agent is asked to do at run time (required)")
	f.StringVar(&spec.ActorID, "actor", "", "actor the job runs as, e.g. telegram:123 (required)")
	f.StringVar(&spec.Channel, "channel", "", "channel the reply goes to (default: the actor's prefix)")
	f.StringVar(&spec.ChatID, "chat", "", "chat id the reply goes to (default: from the actor)")
	f.StringVar(&spec.SessionID, "session", "", "session the turn runs in (default: the actor's)")
	f.BoolVar(&asJSON, "json", false, "print the new job as JSON")
	return cmd
}

// resolveCronJob finds a job by ID, or else by its unique name.
func resolveCronJob(ctx context.Context, s *schedule.Scheduler, ref string) (schedule.Job, error) {
	j, err := s.Get(ctx, ref)
	if err == nil || !errors.Is(err, schedule.ErrNotFound) {
		return j, err
	}
	named, err := s.List(ctx, schedule.Filter{Name: ref})
	if err != nil {
		return schedule.Job{}, err
	}
	switch len(named) {
	case 0:
		return schedule.Job{}, fmt.Errorf("no job with id or name %q (see tendril cron list)", ref)
	case 1:
		return named[0], nil
	}
	return schedule.Job{}, usagef("%d jobs are named %q; give the id", len(named), ref)
}

func newCronRemoveCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "remove <id|name>",
		Short: "Remove a scheduled job",
		Long: `Remove a scheduled job by id (or by name, if unique). A run already in progress
finishes, but the job does not run again. A job from tendril.json comes back at the
next server start unless you also remove it from the config file.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, done, err := openCronScheduler(cmd, g)
			if err != nil {
				return err
			}
			defer done()
			j, err := resolveCronJob(cmd.Context(), s, args[0])
			if err != nil {
				return err
			}
			if err := s.Remove(cmd.Context(), j.ID); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s %s\n", j.ID, j.Name)
			if j.Source == schedule.SourceConfig {
				fmt.Fprintln(cmd.ErrOrStderr(), "note: this job is defined in tendril.json and returns at the next server start unless removed there")
			}
			return nil
		},
	}
}

func newCronRunCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "run <id|name>",
		Short: "Make a job due now, so the running server runs it",
		Long: `Make a job due now: its next run is set to the current time and its retry count
reset (a failed one-shot job becomes active again). The CLI does not run the agent
itself; the running "tendril serve" (any instance sharing the store) picks the job up
within its poll interval (15s) and then continues on the job's regular schedule.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, done, err := openCronScheduler(cmd, g)
			if err != nil {
				return err
			}
			defer done()
			j, err := resolveCronJob(cmd.Context(), s, args[0])
			if err != nil {
				return err
			}
			if _, err := s.RunNow(cmd.Context(), j.ID); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s is due now; the running server will run it shortly\n", j.ID, j.Name)
			return nil
		},
	}
}

func cronWriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func cronLocal(t time.Time, tz string) string {
	if t.IsZero() {
		return "-"
	}
	if tz != "" {
		if loc, err := time.LoadLocation(tz); err == nil {
			t = t.In(loc)
		}
	}
	return t.Format(time.RFC3339)
}

func cronClip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
