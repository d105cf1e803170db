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

	"github.com/tendrilai/tendril/internal/state"
)

func init() { register(newStateCmd) }

func newStateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Inspect the internal state and circuit breaker",
		Long: `Tendril keeps six values in [0,1] per actor — trust, curiosity, vigilance, attachment,
stability, satisfaction (SPEC §6.1) — a numeric model for state management and safety
control, not a claim of feelings. Messages are classified into stimuli that move them;
between messages they decay toward the persona's baseline. The breaker watches stability:
WARNING below 0.5 (until above 0.6) removes write tools; CRITICAL below 0.3 (until above
0.45 and 3 turns) leaves only read-only tools.`,
	}
	var actor string
	var asJSON bool
	var limit int
	show := &cobra.Command{
		Use:   "show [--actor A] [--limit N]",
		Short: "Show state values, breaker level and the last changes with their causes",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if limit < 0 {
				return usagef("--limit must be ≥ 0")
			}
			return g.with(c, func(ctx context.Context, cn *conn) error {
				if actor == "" {
					var out struct {
						Actors []state.Snapshot `json:"actors"`
					}
					if err := cn.API(ctx, "GET", "/state", nil, nil, &out); err != nil {
						return err
					}
					return emit(c, asJSON, out, func(w io.Writer) error {
						if len(out.Actors) == 0 {
							fmt.Fprintln(w, "no actor state recorded yet")
							return nil
						}
						tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
						fmt.Fprintln(tw, "ACTOR\tLEVEL\tTRUST\tCURIO\tVIGIL\tATTACH\tSTAB\tSATIS\tTURNS")
						for _, s := range out.Actors {
							fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", s.ActorID, s.Level, valuesRow(s.Values), s.Turns)
						}
						return tw.Flush()
					})
				}
				var s state.Snapshot
				if err := cn.API(ctx, "GET", "/state/"+url.PathEscape(actor), url.Values{"limit": {fmt.Sprint(limit)}}, nil, &s); err != nil {
					return err
				}
				return emit(c, asJSON, s, func(w io.Writer) error { printSnapshot(w, s); return nil })
			})
		},
	}
	show.Flags().StringVar(&actor, "actor", "", "actor ID, e.g. telegram:12345")
	show.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	show.Flags().IntVar(&limit, "limit", 10, "number of recent changes to show (0 = all kept)")
	cmd.AddCommand(show)
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
