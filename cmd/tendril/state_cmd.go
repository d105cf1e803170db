package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/state"
)

func init() { register(newStateCmd) }

// stateDir is where per-actor state files live: <home>/state.
func stateDir(cfg *config.Config) string { return filepath.Join(cfg.Home, "state") }

// stateOptions maps config.Config onto state.Options (SPEC §6.1–6.2).
func stateOptions(cfg *config.Config) (state.Options, error) {
	p, err := state.DefaultPersona().WithBaseline(cfg.State.Baseline)
	if err != nil {
		return state.Options{}, fmt.Errorf("config state.baseline: %w", err)
	}
	b := cfg.State.Breaker
	return state.Options{
		Persona:  p,
		HalfLife: cfg.State.HalfLife.D(),
		Breaker: state.Breaker{WarnEnter: b.WarnEnter, WarnLeave: b.WarnLeave, CriticalEnter: b.CriticalEnter,
			CriticalLeave: b.CriticalLeave, CooldownTurns: b.CooldownTurns},
	}, nil
}

func openStateEngine(g *globals) (*state.Engine, error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, err
	}
	opts, err := stateOptions(cfg)
	if err != nil {
		return nil, err
	}
	return state.Open(stateDir(cfg), opts)
}

func newStateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Inspect the internal state and circuit breaker",
		Long: `Tendril keeps six values in [0,1] per actor: trust, curiosity, vigilance, attachment,
stability and satisfaction (SPEC §6.1). They are a numeric model for state management and
safety control, not a claim of feelings. Each user message is classified into a stimulus
(connection, achievement, joy, uncertainty, threat, loss, frustration) that moves them; between
messages they decay exponentially toward the persona's baseline (half-life state.halfLife).

The circuit breaker watches stability: WARNING below 0.5 (until above 0.6) removes write
tools; CRITICAL below 0.3 (until above 0.45 and at least 3 turns) leaves only read-only tools.`,
	}
	cmd.AddCommand(newStateShowCmd(g))
	return cmd
}

func newStateShowCmd(g *globals) *cobra.Command {
	var actor string
	var asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "show [--actor A] [--json] [--limit N]",
		Short: "Show state values, breaker level and the last changes with their causes",
		Long: `Without --actor, show lists every actor with a state file: the six values (decayed to
now), the breaker level and the number of turns.

With --actor, it shows that actor's values next to the baseline, the breaker level, and the
last --limit changes (default 10), each with its cause: the turn number, the stimulus
category and intensity, the habituation factor, the matched cues and the applied delta;
floor recoveries and breaker transitions are listed too.

--json prints one JSON document (the full snapshot, or a list of snapshots without history).`,
		Example: `  tendril state show
  tendril state show --actor telegram:12345
  tendril state show --actor telegram:12345 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usagef("--limit must be ≥ 0")
			}
			e, err := openStateEngine(g)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			if actor == "" {
				actors, err := e.Actors(ctx)
				if err != nil {
					return err
				}
				var snaps []state.Snapshot
				for _, a := range actors {
					s, err := e.Snapshot(ctx, a)
					if err != nil {
						return err
					}
					s.History = nil
					snaps = append(snaps, s)
				}
				if asJSON {
					if snaps == nil {
						snaps = []state.Snapshot{}
					}
					return safetyWriteJSON(out, map[string]any{"actors": snaps})
				}
				if len(snaps) == 0 {
					fmt.Fprintln(out, "no actor state recorded yet")
					return nil
				}
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ACTOR\tLEVEL\tTRUST\tCURIO\tVIGIL\tATTACH\tSTAB\tSATIS\tTURNS")
				for _, s := range snaps {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", s.ActorID, s.Level, valuesRow(s.Values), s.Turns)
				}
				return tw.Flush()
			}
			s, err := e.Snapshot(ctx, actor)
			if err != nil {
				return usagef("%v", err)
			}
			if limit > 0 && len(s.History) > limit {
				s.History = s.History[len(s.History)-limit:]
			}
			if asJSON {
				return safetyWriteJSON(out, s)
			}
			printSnapshot(out, s)
			return nil
		},
	}
	cmd.Flags().StringVar(&actor, "actor", "", "actor ID, e.g. telegram:12345")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	cmd.Flags().IntVar(&limit, "limit", 10, "number of recent changes to show (0 = all kept)")
	return cmd
}

func valuesRow(v state.Vector) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, "\t")
}

func printSnapshot(w io.Writer, s state.Snapshot) {
	fmt.Fprintf(w, "actor %s (persona %s) at %s\n", s.ActorID, s.Persona, s.At.Format(time.RFC3339))
	fmt.Fprintf(w, "breaker: %s", s.Level)
	if s.Level == state.Critical {
		fmt.Fprintf(w, " (%d turns in CRITICAL)", s.TurnsInCritical)
	}
	fmt.Fprintf(w, ", %d turns observed\n\n", s.Turns)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VALUE\tNOW\tBASELINE")
	for i := state.Dim(0); i < state.NumDims; i++ {
		fmt.Fprintf(tw, "%s\t%.3f\t%.2f\n", i, s.Values[i], s.Baseline[i])
	}
	tw.Flush()
	if len(s.History) == 0 {
		fmt.Fprintln(w, "\nno changes recorded")
		return
	}
	fmt.Fprintln(w, "\nlast changes (oldest first):")
	for _, c := range s.History {
		fmt.Fprintf(w, "  turn #%d %s %s", c.Turn, c.At.Format(time.RFC3339), c.Cause)
		if c.Cause == state.CauseStimulus {
			fmt.Fprintf(w, " %s intensity %.2f", c.Stimulus, c.Intensity)
			if c.Habituation < 1 {
				fmt.Fprintf(w, " ×%.2f habituation", c.Habituation)
			}
			if len(c.Cues) > 0 {
				fmt.Fprintf(w, " cues %q", c.Cues)
			}
		}
		if c.Note != "" {
			fmt.Fprintf(w, ": %s", c.Note)
		}
		fmt.Fprintf(w, " → %s\n", c.Level)
		var ds []string
		for i, d := range c.Delta {
			if d > 0.0005 || d < -0.0005 {
				ds = append(ds, fmt.Sprintf("%s %+.3f", state.Dim(i), d))
			}
		}
		if len(ds) > 0 {
			fmt.Fprintf(w, "      delta: %s (stability now %.3f)\n", strings.Join(ds, ", "), c.Values[state.Stability])
		}
	}
}

// safetyWriteJSON prints v as one indented JSON document.
func safetyWriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
