package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/extract"
	"github.com/tendrilai/tendril/internal/memory/gate"
	"github.com/tendrilai/tendril/internal/memory/pipeline"
)

func init() {
	memorySubcommands = append(memorySubcommands, newMemoryStagingCmd, newMemoryHarvestCmd)
}

// memoryLLMCompleter returns the model completer used by LLM extraction and
// "memory harvest --llm"; nil when no model is configured. The model wiring
// replaces it.
var memoryLLMCompleter = func(ctx context.Context, cfg *config.Config) (extract.Completer, error) { return nil, nil }

// memoryPipelineOptions maps config.Config onto pipeline.Options.
func memoryPipelineOptions(cfg *config.Config) pipeline.Options {
	return pipeline.Options{
		Home:              cfg.Home,
		AgentID:           cfg.AgentID,
		ExtractEveryTurns: cfg.Memory.ExtractEveryTurns,
		IdleAfter:         cfg.Memory.IdleAfter.D(),
		Thresholds:        gate.Thresholds{Stage: cfg.Memory.StageThreshold, Store: cfg.Memory.StoreThreshold},
	}
}

// openMemoryPipeline opens the embedded store and the extraction pipeline
// over it; close closes both.
func openMemoryPipeline(g *globals) (cfg *config.Config, st memory.Store, p *pipeline.Pipeline, closeFn func(), err error) {
	cfg, s, err := openMemoryStore(g)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	p, err = pipeline.New(s, memoryPipelineOptions(cfg))
	if err != nil {
		s.Close()
		return nil, nil, nil, nil, err
	}
	return cfg, s, p, func() { p.Close(); s.Close() }, nil
}

func newMemoryStagingCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "staging",
		Short: "Review memories waiting in staging: list, approve, reject",
		Long: `Every candidate memory gets an importance score in [0,1] (SPEC §4.4): below the stage
threshold (0.4) it is dropped, at or above the store threshold (0.7) it is stored, and in
between it waits here for a person to decide.

Approving makes it active (and, like any stored memory, it supersedes an older memory on
the same topic). Rejecting remembers its normalised content hash for that user, so the
same thing is never proposed again.`,
	}
	cmd.AddCommand(newStagingListCmd(g), newStagingApproveCmd(g), newStagingRejectCmd(g))
	return cmd
}

func newStagingListCmd(g *globals) *cobra.Command {
	var actor string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--actor A] [--json]",
		Short: "List memories waiting for review, oldest first",
		Long: `List shows staged memories of one actor (--actor) or of every actor: ID, actor,
strategy, importance score, age and content. --json prints {"staged": [records]}.`,
		Example: `  tendril memory staging list
  tendril memory staging list --actor telegram:12345 --json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, _, p, closeFn, err := openMemoryPipeline(g)
			if err != nil {
				return err
			}
			defer closeFn()
			recs, err := p.Staged(c.Context(), actor)
			if err != nil {
				return err
			}
			if asJSON {
				if recs == nil {
					recs = []memory.Record{}
				}
				return writeJSON(c.OutOrStdout(), map[string]any{"staged": recs})
			}
			if len(recs) == 0 {
				fmt.Fprintln(c.OutOrStdout(), "nothing staged")
				return nil
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tACTOR\tSTRATEGY\tSCORE\tAGE\tCONTENT")
			for _, r := range recs {
				_, a, _ := memory.NamespaceActor(r.Namespace)
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\t%s\n", r.ID, a, r.Strategy, r.Importance, stagingAge(time.Since(r.CreatedAt)), stagingClip(r.Content, 80))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&actor, "actor", "", "only this actor's staged memories (default: every actor)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newStagingApproveCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "approve <id>",
		Short: "Approve a staged memory: it becomes active",
		Long: `Approve makes a staged memory active. If it contradicts an older active memory on the
same topic (say "I only use chemical fertiliser" against "I only use organic
fertiliser"), the older one is kept as superseded, with its history.`,
		Example: `  tendril memory staging approve mem_01j9...`,
		Args:    stagingExactArgs(1, "approve needs the ID of a staged memory (see: tendril memory staging list)"),
		RunE: func(c *cobra.Command, args []string) error {
			_, _, p, closeFn, err := openMemoryPipeline(g)
			if err != nil {
				return err
			}
			defer closeFn()
			r, err := p.Approve(c.Context(), args[0])
			if err != nil {
				return stagingErr(err)
			}
			if asJSON {
				return writeJSON(c.OutOrStdout(), r)
			}
			fmt.Fprintf(c.OutOrStdout(), "approved %s: %s\n", r.ID, stagingClip(r.Content, 100))
			if ids, ok := r.Metadata["supersedes"].([]string); ok && len(ids) > 0 {
				fmt.Fprintf(c.OutOrStdout(), "superseded %d older memory(ies) on the same topic\n", len(ids))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the approved record as JSON")
	return cmd
}

func newStagingRejectCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "reject <id>",
		Short: "Reject a staged memory; the same content is never proposed again",
		Long: `Reject marks a staged memory rejected and remembers its normalised content hash
(lower case, punctuation and extra spaces removed) for that actor: saying the same thing
again later, in any capitalisation or punctuation, never brings it back to staging.`,
		Example: `  tendril memory staging reject mem_01j9...`,
		Args:    stagingExactArgs(1, "reject needs the ID of a staged memory (see: tendril memory staging list)"),
		RunE: func(c *cobra.Command, args []string) error {
			_, _, p, closeFn, err := openMemoryPipeline(g)
			if err != nil {
				return err
			}
			defer closeFn()
			if err := p.Reject(c.Context(), args[0]); err != nil {
				return stagingErr(err)
			}
			if asJSON {
				return writeJSON(c.OutOrStdout(), map[string]any{"rejected": args[0]})
			}
			fmt.Fprintf(c.OutOrStdout(), "rejected %s; it will not be proposed again\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newMemoryHarvestCmd(g *globals) *cobra.Command {
	var actor, agent string
	var useLLM, asJSON bool
	cmd := &cobra.Command{
		Use:   "harvest [--actor A]",
		Short: "Distil episodic memory (past exchanges, memory_write notes) into long-term records",
		Long: `Harvest reads the episodic layer — past exchanges and notes the assistant wrote with
memory_write — newer than the last harvest, extracts preferences, facts and standing
instructions, and passes each through the importance gate and consolidation: duplicates
merge, contradictions supersede, middling scores go to staging. It is rule-based (English
and Korean) unless --llm is given and a model is configured. Safe to run repeatedly.

Without --actor it harvests every actor with memory.`,
		Example: `  tendril memory harvest
  tendril memory harvest --actor telegram:12345 --json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, s, err := openMemoryStore(g)
			if err != nil {
				return err
			}
			defer s.Close()
			opts := memoryPipelineOptions(cfg)
			if useLLM {
				complete, err := memoryLLMCompleter(c.Context(), cfg)
				if err != nil {
					return err
				}
				if complete == nil {
					return usagef("--llm needs a configured model (set MODEL_ID); run without --llm for rule-based harvest")
				}
				l := extract.NewLLM(complete)
				l.OnFallback = func(err error) { fmt.Fprintln(c.ErrOrStderr(), "harvest: model reply unusable, used rules:", err) }
				opts.HarvestExtractor = l
			}
			p, err := pipeline.New(s, opts)
			if err != nil {
				return err
			}
			defer p.Close()
			if agent == "" {
				agent = cfg.AgentID
			}
			actors := []string{actor}
			if actor == "" {
				if actors, err = s.Actors(c.Context()); err != nil {
					return err
				}
			}
			var bar *progressbar.ProgressBar
			if !asJSON && len(actors) > 1 && isatty.IsTerminal(os.Stderr.Fd()) {
				bar = progressbar.NewOptions(len(actors), progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription("harvest"),
					progressbar.OptionClearOnFinish())
			}
			per := map[string]int{}
			total := 0
			for _, a := range actors {
				n, err := p.Harvest(c.Context(), agent, a)
				if err != nil {
					return fmt.Errorf("harvest %s: %w", a, err)
				}
				per[a] = n
				total += n
				if bar != nil {
					bar.Add(1)
				}
			}
			if bar != nil {
				bar.Finish()
			}
			if asJSON {
				return writeJSON(c.OutOrStdout(), map[string]any{"agent": agent, "actors": per, "new": total})
			}
			for _, a := range actors {
				fmt.Fprintf(c.OutOrStdout(), "%s: %d new record(s)\n", a, per[a])
			}
			if len(actors) == 0 {
				fmt.Fprintln(c.OutOrStdout(), "no actors with memory")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&actor, "actor", "", "harvest only this actor (default: every actor)")
	cmd.Flags().StringVar(&agent, "agent", "", "agent whose namespaces to write (default: the configured agentId)")
	cmd.Flags().BoolVar(&useLLM, "llm", false, "use the configured model for extraction, falling back to rules on bad output")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// stagingExactArgs is cobra.ExactArgs with a helpful message; it is a usage error.
func stagingExactArgs(n int, msg string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s", msg)
		}
		return nil
	}
}

func stagingErr(err error) error {
	switch {
	case errors.Is(err, pipeline.ErrInvalid):
		return usagef("%v", err)
	case errors.Is(err, memory.ErrNotFound):
		return fmt.Errorf("%w (see: tendril memory staging list)", err)
	}
	return err
}

func stagingAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "now"
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func stagingClip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
