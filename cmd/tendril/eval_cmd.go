package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/eval/locomo"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/pipeline"
)

func init() { register(newEvalCmd) }

func newEvalCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Run retrieval benchmarks",
	}
	cmd.AddCommand(newEvalLocomoCmd(g))
	return cmd
}

// locomoExtract runs the extraction pipeline (rules, gate, consolidation)
// over one conversation's events, session by session.
func locomoExtract(dir string) locomo.ExtractFunc {
	return func(ctx context.Context, store memory.Store, agentID, actorID string, events []memory.Event) error {
		p, err := pipeline.New(store, pipeline.Options{JobsPath: dir + "/jobs-" + strings.ReplaceAll(actorID, "/", "_") + ".db", AgentID: agentID})
		if err != nil {
			return err
		}
		defer p.Close()
		bySession := map[string][]memory.Event{}
		var order []string
		for _, e := range events {
			if _, ok := bySession[e.SessionID]; !ok {
				order = append(order, e.SessionID)
			}
			bySession[e.SessionID] = append(bySession[e.SessionID], e)
		}
		for _, s := range order {
			if err := p.RecordTurn(ctx, agentID, actorID, s, bySession[s]); err != nil {
				return err
			}
			if err := p.Flush(ctx, agentID, actorID, s); err != nil {
				return err
			}
		}
		return nil
	}
}

func newEvalLocomoCmd(g *globals) *cobra.Command {
	var data, level, ks, baseline string
	var asJSON bool
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

Example:
  tendril eval locomo --data ../shared/data/locomo/locomo-dev.json --json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if data == "" {
				return usagef("--data is required")
			}
			if level != locomo.LevelEvents && level != locomo.LevelRecords {
				return usagef("--level must be events or records")
			}
			if baseline != "" && baseline != "bm25" && baseline != "fts5" {
				return usagef("--baseline must be bm25 or fts5")
			}
			var kk []int
			for _, s := range strings.Split(ks, ",") {
				k, err := strconv.Atoi(strings.TrimSpace(s))
				if err != nil || k <= 0 {
					return usagef("--k takes positive integers separated by commas, got %q", ks)
				}
				kk = append(kk, k)
			}
			convs, err := locomo.Load(data)
			if err != nil {
				return err
			}
			dir, err := os.MkdirTemp("", "tendril-locomo-*")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			opts := locomo.Options{Level: level, Ks: kk, Baseline: baseline, Dir: dir}
			if level == locomo.LevelRecords {
				opts.Extract = locomoExtract(dir)
			}
			var bar *progressbar.ProgressBar
			if isatty.IsTerminal(os.Stderr.Fd()) {
				opts.Progress = func(done, total int) {
					if bar == nil {
						bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription("questions"))
					}
					bar.Set(done)
				}
			}
			runs := []locomo.Options{opts}
			if baseline != "" {
				// Side by side in one run: the reference first, then Tendril.
				tendril := opts
				tendril.Baseline = ""
				tendril.Dir = dir + "/tendril"
				opts.Dir = dir + "/baseline"
				runs = []locomo.Options{opts, tendril}
			}
			var reps []*locomo.Report
			for _, o := range runs {
				bar = nil
				rep, err := locomo.Run(c.Context(), convs, o)
				if bar != nil {
					bar.Finish()
					fmt.Fprintln(os.Stderr)
				}
				if err != nil {
					return err
				}
				reps = append(reps, rep)
			}
			if asJSON {
				if len(reps) == 1 {
					return writeJSON(c.OutOrStdout(), reps[0].JSON())
				}
				return writeJSON(c.OutOrStdout(), map[string]any{"baseline_" + baseline: reps[0].JSON(), "tendril": reps[1].JSON()})
			}
			for i, rep := range reps {
				if i > 0 {
					fmt.Fprintln(c.OutOrStdout())
				}
				rep.WriteText(c.OutOrStdout())
			}
			if len(reps) == 2 {
				b, t := reps[0].Overall, reps[1].Overall
				fmt.Fprintf(c.OutOrStdout(), "\ntendril vs %s (same run): recall@10 %.3f vs %.3f (×%.2f), all@10 %.3f vs %.3f (×%.2f)\n",
					baseline, t.Recall[10], b.Recall[10], t.Recall[10]/b.Recall[10], t.All[10], b.All[10], t.All[10]/b.All[10])
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&data, "data", "", "LoCoMo JSON file (a list of conversations)")
	f.StringVar(&level, "level", "events", "what is searched: events (raw turns) or records (extracted records)")
	f.StringVar(&ks, "k", "5,10,20,50", "cut-offs k for recall@k, comma-separated")
	f.StringVar(&baseline, "baseline", "", "also run a reference ranking side by side: bm25")
	f.BoolVar(&asJSON, "json", false, "print one JSON document (SPEC §4.8)")
	return cmd
}
