package locomo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/search"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
)

// Levels.
const (
	LevelEvents  = "events"
	LevelRecords = "records"
)

// ErrRecordsUnavailable is returned for --level records when no
// extraction pipeline is wired (Options.Extract is nil).
var ErrRecordsUnavailable = errors.New("records level not available: no extraction pipeline is wired into the evaluation")

// ExtractFunc turns one conversation's stored events into records in the
// store (extraction, gate, consolidation). Records must name the turns
// they came from in Sources (event IDs), which is how recall is counted.
type ExtractFunc func(ctx context.Context, store memory.Store, agentID, actorID string, events []memory.Event) error

// Options configures Run.
type Options struct {
	Level string // events (default) or records
	Ks    []int  // default 5, 10, 20, 50
	// Baseline "bm25" runs the README's plain BM25 reference instead of
	// Tendril's ranking; "fts5" ranks with SQLite FTS5's bm25().
	Baseline string
	// Ranking overrides Tendril's ranking parameters (experiments).
	Ranking *search.Params
	// Extract runs the records pipeline (Level records).
	Extract ExtractFunc
	// Progress is called after each question (done, total).
	Progress func(done, total int)
	// Dir is the scratch home for the store (default: a temporary
	// directory, removed afterwards).
	Dir string
	// EventWindow is the store's sqlitestore.Options.EventWindow (0: its
	// default, which holds every dev conversation whole): a small window
	// measures the ranking of events that left memory (FTS5, merged).
	EventWindow int
}

// Metrics is the per-slice summary.
type Metrics struct {
	N      int
	Recall map[int]float64
	All    map[int]float64
	Any    map[int]float64
}

// Report is the result of Run.
type Report struct {
	Level      string
	Baseline   string
	Questions  int
	Ks         []int
	Overall    Metrics
	Categories map[int]*Metrics
	Session    map[int]float64 // session-level recall@1,3,5
	LatencyMS  struct{ P50, P95, P99 float64 }
	IngestTPS  float64
	Turns      int
	Skipped    int
	// PerQuestion holds every question's ranking, in run order (the input
	// of cross-validation).
	PerQuestion []QuestionResult
}

// SessionKs are the session-level cut-offs.
var SessionKs = []int{1, 3, 5}

const agentID = "locomo"

// Run ingests every conversation into a fresh store (one actor per
// conversation, one session per LoCoMo session) and runs each question of
// categories 1–4 against its own conversation.
func Run(ctx context.Context, convs []Conversation, opts Options) (*Report, error) {
	if opts.Level == "" {
		opts.Level = LevelEvents
	}
	if opts.Level != LevelEvents && opts.Level != LevelRecords {
		return nil, fmt.Errorf("unknown level %q (want events or records)", opts.Level)
	}
	if opts.Level == LevelRecords && opts.Extract == nil {
		return nil, ErrRecordsUnavailable
	}
	if !scorable(convs) {
		return nil, ErrNoQuestions
	}
	if len(opts.Ks) == 0 {
		opts.Ks = []int{5, 10, 20, 50}
	}
	ks := slices.Compact(slices.Sorted(slices.Values(opts.Ks))) // a repeated k would be counted twice
	maxK := ks[len(ks)-1]
	for _, k := range SessionKs {
		maxK = max(maxK, k)
	}
	dir, cleanup, err := scratchDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	so := sqlitestore.Options{AgentID: agentID, EventExpiryDays: -1, SyncInterval: -1, NoFsync: true, EventWindow: opts.EventWindow}
	switch opts.Baseline {
	case "":
	case "bm25":
		p := search.PlainBM25()
		so.Ranking = &p
		so.PlainDocs = true
	case "fts5":
		// SQLite's own FTS5 bm25() over the same rows.
		so.Engine = sqlitestore.EngineFTS5
	default:
		return nil, fmt.Errorf("unknown baseline %q (want bm25 or fts5)", opts.Baseline)
	}
	if opts.Ranking != nil && opts.Baseline == "" {
		so.Ranking = opts.Ranking
	}
	st, err := sqlitestore.Open(dir, so)
	if err != nil {
		return nil, err
	}
	defer st.Close()

	rep := &Report{Level: opts.Level, Baseline: opts.Baseline, Ks: ks, Categories: map[int]*Metrics{}, Session: map[int]float64{}}
	// Ingest.
	var ingest time.Duration
	for _, c := range convs {
		var all []memory.Event
		for _, s := range c.Sessions {
			evs := make([]memory.Event, 0, len(s.Turns))
			for i, t := range s.Turns {
				md := map[string]any{"speaker": t.Speaker, "diaId": t.DiaID}
				if t.BlipCaption != "" {
					md["caption"] = t.BlipCaption
				}
				evs = append(evs, memory.Event{
					ID: c.SampleID + ":" + t.DiaID, ActorID: c.SampleID, SessionID: s.Key, Role: "user",
					Text: t.Text, Timestamp: s.Date.Add(time.Duration(i) * time.Second), Metadata: md,
				})
			}
			start := time.Now()
			if err := st.AppendEvents(ctx, evs); err != nil {
				return nil, err
			}
			ingest += time.Since(start)
			rep.Turns += len(evs)
			all = append(all, evs...)
		}
		if opts.Level == LevelRecords {
			if err := opts.Extract(ctx, st, agentID, c.SampleID, all); err != nil {
				return nil, fmt.Errorf("extract %s: %w", c.SampleID, err)
			}
		}
		// Building the actor's ranking index is part of ingest, not of the
		// first query.
		start := time.Now()
		if err := st.Prepare(ctx, c.SampleID); err != nil {
			return nil, err
		}
		ingest += time.Since(start)
		rep.Skipped += c.Skipped
	}
	if ingest > 0 {
		rep.IngestTPS = float64(rep.Turns) / ingest.Seconds()
	}

	total := 0
	for _, c := range convs {
		for _, q := range c.QA {
			if q.Category >= 1 && q.Category <= 4 {
				total++
			}
		}
	}
	var lat []float64
	done := 0
	for _, c := range convs {
		scope := memory.MustNamespace(memory.EpisodicRootTemplate, memory.NamespaceVars{AgentID: agentID, ActorID: c.SampleID})
		if opts.Level == LevelRecords {
			scope = memory.MustNamespace("/{agentId}/{actorId}/", memory.NamespaceVars{AgentID: agentID, ActorID: c.SampleID})
		}
		for _, q := range c.QA {
			if q.Category < 1 || q.Category > 4 {
				continue
			}
			start := time.Now()
			mq := memory.Query{NamespacePath: scope, Text: q.Question, TopK: maxK}
			if opts.Level == LevelRecords {
				// Records only: raw turns (episodic events) are not searched.
				mq.Strategies = []memory.Strategy{memory.StrategyUserPreference, memory.StrategySemantic, memory.StrategySummary, memory.StrategyProcedural}
			}
			hits, err := st.Search(ctx, mq)
			lat = append(lat, float64(time.Since(start).Microseconds())/1000)
			if err != nil {
				return nil, err
			}
			rep.PerQuestion = append(rep.PerQuestion, QuestionResult{Conversation: c.SampleID, Category: q.Category, Evidence: q.Evidence, Ranked: turnRanking(hits, c.SampleID, opts.Level)})
			done++
			if opts.Progress != nil {
				opts.Progress(done, total)
			}
		}
	}
	rep.summarize()
	sort.Float64s(lat)
	rep.LatencyMS.P50, rep.LatencyMS.P95, rep.LatencyMS.P99 = pct(lat, 50), pct(lat, 95), pct(lat, 99)
	return rep, nil
}

// ErrNoQuestions is Run's error for data holding no question it can score
// (categories 1–4, with evidence among the conversation's turns): a
// benchmark that scored nothing reports no figures.
var ErrNoQuestions = errors.New("locomo: no question to score (categories 1–4 with evidence among the conversation's turns)")

func scorable(convs []Conversation) bool {
	for _, c := range convs {
		for _, q := range c.QA {
			if q.Category >= 1 && q.Category <= 4 {
				return true
			}
		}
	}
	return false
}

// QuestionResult is one question's ranking: the LoCoMo turn IDs retrieved,
// best first (at most the largest k), and its evidence.
type QuestionResult struct {
	Conversation string
	Category     int
	Evidence     []string
	Ranked       []string
}

// summarize fills Questions, Overall, Categories and Session from
// PerQuestion.
func (r *Report) summarize() {
	overall := newAcc()
	cats := map[int]*acc{}
	sess := map[int]float64{}
	for _, q := range r.PerQuestion {
		if cats[q.Category] == nil {
			cats[q.Category] = newAcc()
		}
		overall.add(q.Ranked, q.Evidence, r.Ks)
		cats[q.Category].add(q.Ranked, q.Evidence, r.Ks)
		// Session level: sessions in order of first appearance.
		rel := map[int]bool{}
		for _, e := range q.Evidence {
			rel[SessionOf(e)] = true
		}
		var order []int
		seen := map[int]bool{}
		for _, id := range q.Ranked {
			n := SessionOf(id)
			if !seen[n] {
				seen[n] = true
				order = append(order, n)
			}
		}
		for _, k := range SessionKs {
			found := 0
			for i := 0; i < k && i < len(order); i++ {
				if rel[order[i]] {
					found++
				}
			}
			sess[k] += float64(found) / float64(len(rel))
		}
	}
	r.Questions = len(r.PerQuestion)
	r.Overall = overall.metrics(r.Ks)
	r.Categories = map[int]*Metrics{}
	for cat, a := range cats {
		m := a.metrics(r.Ks)
		r.Categories[cat] = &m
	}
	r.Session = map[int]float64{}
	for _, k := range SessionKs {
		if r.Questions > 0 {
			r.Session[k] = sess[k] / float64(r.Questions)
		}
	}
}

// turnRanking maps hits to LoCoMo turn IDs, best first. At the records
// level each record stands for the turns in its Sources, in order.
func turnRanking(hits []memory.Hit, sample, level string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(id string) {
		d := strings.TrimPrefix(id, sample+":")
		if d != id && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	for _, h := range hits {
		if level == LevelRecords {
			for _, s := range h.Record.Sources {
				add(s)
			}
			continue
		}
		add(h.Record.ID)
	}
	return out
}

type acc struct {
	n                int
	recall, all, any map[int]float64
}

func newAcc() *acc {
	return &acc{recall: map[int]float64{}, all: map[int]float64{}, any: map[int]float64{}}
}

func (a *acc) add(ranked, evidence []string, ks []int) {
	a.n++
	pos := map[string]int{}
	for i, id := range ranked {
		pos[id] = i
	}
	for _, k := range ks {
		found := 0
		for _, e := range evidence {
			if p, ok := pos[e]; ok && p < k {
				found++
			}
		}
		a.recall[k] += float64(found) / float64(len(evidence))
		if found == len(evidence) {
			a.all[k]++
		}
		if found > 0 {
			a.any[k]++
		}
	}
}

func (a *acc) metrics(ks []int) Metrics {
	m := Metrics{N: a.n, Recall: map[int]float64{}, All: map[int]float64{}, Any: map[int]float64{}}
	for _, k := range ks {
		if a.n > 0 {
			m.Recall[k] = a.recall[k] / float64(a.n)
			m.All[k] = a.all[k] / float64(a.n)
			m.Any[k] = a.any[k] / float64(a.n)
		}
	}
	return m
}

func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1)*p/100 + 0.5)
	return sorted[i]
}

func round(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// JSON renders the report in the SPEC §4.8 shape: overall recall@k and
// all@k for each k, per-category n, recall@k and all@k, session
// recall@1/3/5, latency percentiles in ms and ingest throughput in
// turns/s. Every key names the k its value was measured at (with the
// default Ks that includes recall@10 and all@10).
func (r *Report) JSON() map[string]any {
	overall := map[string]float64{}
	for _, k := range r.Ks {
		overall[fmt.Sprintf("recall@%d", k)] = round(r.Overall.Recall[k])
		overall[fmt.Sprintf("all@%d", k)] = round(r.Overall.All[k])
	}
	cats := map[string]any{}
	for c, m := range r.Categories {
		cm := map[string]any{"n": m.N}
		for _, k := range r.Ks {
			cm[fmt.Sprintf("recall@%d", k)] = round(m.Recall[k])
			cm[fmt.Sprintf("all@%d", k)] = round(m.All[k])
		}
		cats[fmt.Sprint(c)] = cm
	}
	sess := map[string]float64{}
	for _, k := range SessionKs {
		sess[fmt.Sprintf("recall@%d", k)] = round(r.Session[k])
	}
	return map[string]any{
		"level": r.Level, "questions": r.Questions, "overall": overall, "categories": cats, "session": sess,
		"latency_ms":         map[string]float64{"p50": round(r.LatencyMS.P50), "p95": round(r.LatencyMS.P95), "p99": round(r.LatencyMS.P99)},
		"ingest_turns_per_s": round(r.IngestTPS),
	}
}

var catNames = map[int]string{1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

// WriteText prints a human-readable report.
func (r *Report) WriteText(w io.Writer) {
	name := "tendril"
	if r.Baseline != "" {
		name = "baseline " + r.Baseline
	}
	fmt.Fprintf(w, "LoCoMo retrieval, level %s, ranking %s: %d questions (categories 1–4), %d turns, %d skipped without evidence\n",
		r.Level, name, r.Questions, r.Turns, r.Skipped)
	r.writeTable(w)
	fmt.Fprintf(w, "session recall@1 %.3f  @3 %.3f  @5 %.3f\n", r.Session[1], r.Session[3], r.Session[5])
	fmt.Fprintf(w, "query latency ms p50 %.3f  p95 %.3f  p99 %.3f\n", r.LatencyMS.P50, r.LatencyMS.P95, r.LatencyMS.P99)
	fmt.Fprintf(w, "ingest %.0f turns/s\n", r.IngestTPS)
}

// writeTable prints recall@k, all@k and any@k overall and per category.
func (r *Report) writeTable(w io.Writer) {
	fmt.Fprintf(w, "%-16s %5s", "slice", "n")
	for _, k := range r.Ks {
		fmt.Fprintf(w, "  recall@%-3d all@%-3d any@%-3d", k, k, k)
	}
	fmt.Fprintln(w)
	row := func(label string, m Metrics) {
		fmt.Fprintf(w, "%-16s %5d", label, m.N)
		for _, k := range r.Ks {
			fmt.Fprintf(w, "  %9.3f %6.3f %6.3f", m.Recall[k], m.All[k], m.Any[k])
		}
		fmt.Fprintln(w)
	}
	row("overall (1–4)", r.Overall)
	for c := 1; c <= 4; c++ {
		if m := r.Categories[c]; m != nil {
			row(fmt.Sprintf("%d %s", c, catNames[c]), *m)
		}
	}
}
