package locomo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/pipeline"
)

// EvalOptions configures Evaluate.
type EvalOptions struct {
	// Data is the LoCoMo JSON file (a list of conversations), read with
	// Load. It is ignored when Conversations is non-nil.
	Data string
	// Conversations are already loaded conversations.
	Conversations []Conversation
	// Level is LevelEvents (default: raw turns are searched) or
	// LevelRecords (the extraction pipeline runs first and its records
	// are searched).
	Level string
	// Ks are the turn-level cut-offs k of recall@k, all@k and any@k
	// [5, 10, 20, 50].
	Ks []int
	// Baseline "bm25" or "fts5" also runs that reference ranking (see
	// Options.Baseline) on the same data, before Tendril's; "" runs
	// Tendril's ranking only.
	Baseline string
	// Extract runs the records pipeline at LevelRecords; nil means
	// PipelineExtract over each run's scratch directory.
	Extract ExtractFunc
	// Progress is called after each question as (done, total); with a
	// baseline it counts the baseline run, then restarts at 1 for
	// Tendril's. It is not called when there are no questions.
	Progress func(done, total int)
	// Dir is the scratch directory for the stores and job databases
	// (default: a temporary directory, removed before Evaluate returns).
	Dir string
	// EventWindow is Options.EventWindow of every run.
	EventWindow int
}

// Evaluation is the result of Evaluate.
type Evaluation struct {
	// Tendril is the report of Tendril's own ranking.
	Tendril *Report
	// Baseline is the reference ranking's report, nil when
	// EvalOptions.Baseline is "".
	Baseline *Report
}

// Evaluate loads the conversations and runs Run once with Tendril's
// ranking or, with a baseline, twice in one process over the same data:
// the baseline first (in Dir/baseline), then Tendril (in Dir/tendril).
//
// Errors: no Data and no Conversations; Load's errors (unreadable or
// malformed file); Run's errors, among them an unknown Level or Baseline;
// the first extraction error at LevelRecords; ctx's error.
func Evaluate(ctx context.Context, opts EvalOptions) (*Evaluation, error) {
	convs := opts.Conversations
	if convs == nil {
		if opts.Data == "" {
			return nil, errors.New("locomo: EvalOptions.Data or Conversations is required")
		}
		var err error
		if convs, err = Load(opts.Data); err != nil {
			return nil, err
		}
	}
	dir, cleanup, err := scratchDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	run := func(baseline, dir string) (*Report, error) {
		o := Options{Level: opts.Level, Ks: opts.Ks, Baseline: baseline, Extract: opts.Extract, Progress: opts.Progress, Dir: dir, EventWindow: opts.EventWindow}
		if o.Level == LevelRecords && o.Extract == nil {
			o.Extract = PipelineExtract(dir)
		}
		return Run(ctx, convs, o)
	}
	var ev Evaluation
	if opts.Baseline == "" {
		ev.Tendril, err = run("", dir)
		if err != nil {
			return nil, err
		}
		return &ev, nil
	}
	if ev.Baseline, err = run(opts.Baseline, filepath.Join(dir, "baseline")); err != nil {
		return nil, err
	}
	if ev.Tendril, err = run("", filepath.Join(dir, "tendril")); err != nil {
		return nil, err
	}
	return &ev, nil
}

// JSON is the SPEC §4.8 document (Report.JSON) of Tendril's run or, with
// a baseline, {"baseline_<name>": {…}, "tendril": {…}}.
func (e *Evaluation) JSON() any {
	if e.Baseline == nil {
		return e.Tendril.JSON()
	}
	return map[string]any{"baseline_" + e.Baseline.Baseline: e.Baseline.JSON(), "tendril": e.Tendril.JSON()}
}

// WriteText prints each report (Report.WriteText; the baseline first)
// and, with a baseline, a last line comparing recall@10 and all@10 of the
// two rankings as values and ratios (0 when 10 is not among the Ks).
func (e *Evaluation) WriteText(w io.Writer) {
	if e.Baseline == nil {
		e.Tendril.WriteText(w)
		return
	}
	e.Baseline.WriteText(w)
	fmt.Fprintln(w)
	e.Tendril.WriteText(w)
	b, t := e.Baseline.Overall, e.Tendril.Overall
	fmt.Fprintf(w, "\ntendril vs %s (same run): recall@10 %.3f vs %.3f (×%.2f), all@10 %.3f vs %.3f (×%.2f)\n",
		e.Baseline.Baseline, t.Recall[10], b.Recall[10], t.Recall[10]/b.Recall[10], t.All[10], b.All[10], t.All[10]/b.All[10])
}

// ParseKs parses comma-separated positive cut-offs such as "5,10,20,50"
// (spaces around each are allowed), sorted, each once. It returns an error naming the first
// entry that is not a positive integer.
func ParseKs(s string) ([]int, error) {
	var ks []int
	for _, f := range strings.Split(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k <= 0 {
			return nil, fmt.Errorf("locomo: cut-off %q is not a positive integer", strings.TrimSpace(f))
		}
		ks = append(ks, k)
	}
	return slices.Compact(slices.Sorted(slices.Values(ks))), nil // "5,5" is one cut-off
}

// PipelineExtract is the ExtractFunc of LevelRecords: it runs Tendril's
// extraction pipeline (rules, importance gate, consolidation) over one
// conversation's events session by session, in order of first
// appearance, flushing each session. Each actor gets its own job database
// in dir (jobs-<actor>.db, "/" in the actor ID replaced by "_").
func PipelineExtract(dir string) ExtractFunc {
	return func(ctx context.Context, store memory.Store, agentID, actorID string, events []memory.Event) error {
		p, err := pipeline.New(store, pipeline.Options{JobsPath: filepath.Join(dir, "jobs-"+strings.ReplaceAll(actorID, "/", "_")+".db"), AgentID: agentID})
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

// scratchDir returns dir, or a new temporary directory that cleanup
// removes when dir is "".
func scratchDir(dir string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, nil
	}
	d, err := os.MkdirTemp("", "tendril-locomo-*")
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}
