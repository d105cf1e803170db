package main

import (
	"fmt"
	"os"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/eval/locomo"
)

func init() { register(newEvalCmd) }

func newEvalCmd(*globals) *cobra.Command {
	o, ks, asJSON, folds := locomo.EvalOptions{}, "", false, 0
	cmd := &cobra.Command{
		Use:   "locomo --data FILE",
		Short: "Measure memory retrieval on LoCoMo conversations (no model needed)",
		Long: `eval locomo replays every LoCoMo conversation into a fresh embedded memory store (one actor
per conversation, one session per LoCoMo session) and runs each question of categories
1–4 against its own conversation. It reports turn-level recall@k, all@k and any@k per
category, session-level recall@1/3/5, query latency p50/p95/p99 and ingest throughput.

--level events searches the raw turns; --level records runs the extraction pipeline
(rules, importance gate, consolidation) and counts recall through the records' sources.
--baseline bm25 also runs the plain BM25 reference (k1 1.2, b 0.75, lowercase
alphanumeric tokens, English stop words, no stemming) on the same data in the same run
and prints both; with --json the document is then {"baseline_bm25": {…}, "tendril": {…}}.
--baseline fts5 does the same with SQLite FTS5's bm25() over the same rows.
--folds N cross-validates the ranking over conversations (N = number of conversations is
leave-one-conversation-out): each fold's questions are ranked by the configuration best on
the other folds; it prints the cross-validated, in-sample, default and plain BM25 figures of
one run, per category, and the per-fold choices. At --level events the default ranking's
learned re-ranker (turns only) is cross-validated too: each conversation is re-ranked by
weights trained on the others (l2 by nested leave-one-out), and those are the cross-validated
figures; --folds must then be the number of conversations.

Example:
  tendril eval locomo --data ../shared/data/locomo/locomo-dev.json --json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var err error
			switch {
			case o.Data == "":
				return usagef("--data is required")
			case o.Level != locomo.LevelEvents && o.Level != locomo.LevelRecords:
				return usagef("--level must be events or records")
			case o.Baseline != "" && o.Baseline != "bm25" && o.Baseline != "fts5":
				return usagef("--baseline must be bm25 or fts5")
			}
			if o.Ks, err = locomo.ParseKs(ks); err != nil {
				return usagef("--k takes positive integers separated by commas, got %q", ks)
			}
			if isatty.IsTerminal(os.Stderr.Fd()) {
				var bar *progressbar.ProgressBar // one per run: done restarts at 1
				o.Progress = func(done, total int) {
					if done == 1 {
						bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription("questions"),
							progressbar.OptionOnCompletion(func() { fmt.Fprintln(os.Stderr) }))
					}
					bar.Set(done)
				}
			}
			if folds != 0 {
				if folds < 2 {
					return usagef("--folds must be at least 2")
				}
				convs, err := locomo.Load(o.Data)
				if err != nil {
					return err
				}
				// checked before the grid runs (minutes), not after
				switch {
				case len(convs) < 2:
					return usagef("--folds: %s holds %s; cross-validation needs at least 2", o.Data, plural(len(convs), "conversation"))
				case folds > len(convs):
					return usagef("--folds %d: %s holds %s; each fold needs one (--folds %d is leave-one-conversation-out)", folds, o.Data, plural(len(convs), "conversation"), len(convs))
				case o.Level != locomo.LevelRecords && folds != len(convs):
					return usagef("--folds %d: at --level events the learned re-ranker is cross-validated leave-one-conversation-out, so --folds must be the number of conversations in %s: %d", folds, o.Data, len(convs))
				}
				cv, err := locomo.CrossValidate(c.Context(), convs, locomo.CVOptions{Folds: folds, Level: o.Level, Ks: o.Ks, Dir: o.Dir, Progress: o.Progress})
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(c.OutOrStdout(), cv.JSON())
				}
				cv.WriteText(c.OutOrStdout())
				return nil
			}
			ev, err := locomo.Evaluate(c.Context(), o)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(c.OutOrStdout(), ev.JSON())
			}
			ev.WriteText(c.OutOrStdout())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Data, "data", "", "LoCoMo JSON file (a list of conversations)")
	f.StringVar(&o.Level, "level", "events", "what is searched: events (raw turns) or records (extracted records)")
	f.StringVar(&ks, "k", "5,10,20,50", "cut-offs k for recall@k, comma-separated")
	f.StringVar(&o.Baseline, "baseline", "", "also run a reference ranking side by side: bm25 or fts5")
	f.BoolVar(&asJSON, "json", false, "print one JSON document (SPEC §4.8)")
	f.IntVar(&o.EventWindow, "event-window", 0, "events of each conversation kept in memory (0: the store's default, 4096; smaller ranks the older turns through FTS5, merged)")
	f.IntVar(&folds, "folds", 0, "cross-validate the ranking over conversations in N folds (5 = leave-one-conversation-out on the dev split; 0 = no cross-validation)")
	eval := &cobra.Command{Use: "eval", Short: "Run retrieval benchmarks"}
	eval.AddCommand(cmd)
	return eval
}

// plural is "1 conversation", "2 conversations".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
