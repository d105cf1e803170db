package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Retrieval defaults (SPEC §4.6).
const (
	DefaultTopK            = 50
	DefaultRetrieveTimeout = 3 * time.Second
	// DefaultFallbackQuery is searched for empty messages so that the
	// search never gets an empty query.
	DefaultFallbackQuery = "user preferences facts instructions"
)

// RetrieveStats describes one Recall, for metrics.
type RetrieveStats struct {
	Duration time.Duration
	Hits     int
	// Failed is true when the turn went on without memory; Err says why
	// (context.DeadlineExceeded on timeout).
	Failed bool
	Err    error
}

// RetrieveOptions configures NewRetriever. Zero values take the defaults.
type RetrieveOptions struct {
	TopK    int           // 50
	Timeout time.Duration // 3s
	// Scopes are namespace-path templates searched for the actor; default
	// the long_term path and the episodic root (summaries and past
	// exchanges across all sessions).
	Scopes []string
	// FallbackQuery replaces an empty message. Cron turns pass
	// "tasks due: <task>" themselves.
	FallbackQuery string
	// NoStanding turns off the standing records: by default every Recall
	// also returns the actor's explicit standing records (USER_PREFERENCE
	// and PROCEDURAL in the long-term scope) whatever the query, because
	// keyword search alone would miss "I only use organic fertiliser" when
	// the user asks about aphids, yet that is what the answer must respect
	// (the seed's fertiliser example). They are few per user
	// (consolidation supersedes contradictions) and capped with the rest.
	NoStanding bool
	// Metrics, when set, is called after every Recall (e.g. to feed
	// Prometheus retrieval latency and timeout counters).
	Metrics func(RetrieveStats)
	Logger  *slog.Logger
}

// Retrieval is the Retriever built by NewRetriever.
type Retrieval struct {
	store    Store
	opts     RetrieveOptions
	failures atomic.Uint64
}

// NewRetriever returns the per-turn retriever of SPEC §4.6 over store.
func NewRetriever(store Store, opts RetrieveOptions) *Retrieval {
	if opts.TopK <= 0 {
		opts.TopK = DefaultTopK
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultRetrieveTimeout
	}
	if len(opts.Scopes) == 0 {
		opts.Scopes = []string{DefaultLongTermTemplate, EpisodicRootTemplate}
	}
	if strings.TrimSpace(opts.FallbackQuery) == "" {
		opts.FallbackQuery = DefaultFallbackQuery
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Retrieval{store: store, opts: opts}
}

// Failures counts Recalls that fell back to no memory (timeouts and
// errors) since the retriever was made.
func (r *Retrieval) Failures() uint64 { return r.failures.Load() }

// Query returns the search text for a message: the message itself, or the
// fallback query when it is blank.
func (r *Retrieval) Query(message string) string {
	if q := strings.TrimSpace(message); q != "" {
		return q
	}
	return r.opts.FallbackQuery
}

// Recall searches the actor's scopes for message within the timeout and
// returns the assembled hits (explicit first, capped at TopK). On timeout
// or store error it logs, counts, and returns no hits and a nil error: the
// turn never fails because of memory.
func (r *Retrieval) Recall(ctx context.Context, agentID, actorID, message string) ([]Hit, error) {
	start := time.Now()
	hits, err := r.search(ctx, agentID, actorID, r.Query(message))
	st := RetrieveStats{Duration: time.Since(start), Hits: len(hits), Err: err, Failed: err != nil}
	if err != nil {
		r.failures.Add(1)
		r.opts.Logger.Warn("memory retrieval failed; continuing without memory",
			"actor", actorID, "err", err, "timeout", errors.Is(err, context.DeadlineExceeded))
		hits = nil
		st.Hits = 0
	}
	if r.opts.Metrics != nil {
		r.opts.Metrics(st)
	}
	return hits, nil
}

type scopeResult struct {
	hits     []Hit
	err      error
	standing bool
}

func (r *Retrieval) search(ctx context.Context, agentID, actorID, query string) ([]Hit, error) {
	if actorID == "" {
		return nil, fmt.Errorf("%w: empty actor", ErrInvalidQuery)
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	ch := make(chan scopeResult, len(r.opts.Scopes)+1)
	n := len(r.opts.Scopes)
	if !r.opts.NoStanding {
		path, err := Namespace(DefaultLongTermTemplate, NamespaceVars{AgentID: agentID, ActorID: actorID})
		if err != nil {
			return nil, err
		}
		n++
		go func() {
			hits, err := r.store.Search(ctx, Query{NamespacePath: path, TopK: r.opts.TopK,
				Strategies: []Strategy{StrategyUserPreference, StrategyProcedural}})
			for i := range hits {
				if hits[i].Explain == "" {
					hits[i].Explain = "standing explicit record"
				}
			}
			ch <- scopeResult{hits: hits, err: err, standing: true}
		}()
	}
	for _, tmpl := range r.opts.Scopes {
		path, err := Namespace(tmpl, NamespaceVars{AgentID: agentID, ActorID: actorID})
		if err != nil {
			return nil, err
		}
		go func() {
			// The prompt block never shows explanations: skip their cost.
			hits, err := r.store.Search(ctx, Query{NamespacePath: path, Text: query, TopK: r.opts.TopK, NoExplain: true})
			ch <- scopeResult{hits: hits, err: err}
		}()
	}
	var standing []Hit
	parts := make([][]Hit, 0, n)
	total := 0
	for range n {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case res := <-ch:
			if res.err != nil {
				return nil, res.err
			}
			if res.standing {
				standing = res.hits
			} else {
				parts = append(parts, res.hits)
			}
			total += len(res.hits)
		}
	}
	// Standing records go first, then the query's hits by score. One
	// slice holds them all (hits are large structs; each copy of a turn's
	// 150 cost as much as filtering them).
	all := make([]Hit, 0, total)
	all = append(all, standing...)
	for _, p := range parts {
		all = append(all, p...)
	}
	slices.SortStableFunc(all[len(standing):], func(a, b Hit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	seen := make(map[string]bool, len(all))
	uniq := all[:0]
	for _, h := range all {
		if seen[h.Record.ID] {
			continue
		}
		seen[h.Record.ID] = true
		uniq = append(uniq, h)
	}
	return Assemble(uniq, r.opts.TopK), nil
}

// Assemble orders and filters hits for the prompt (SPEC §4.6 step 4):
// explicit records (USER_PREFERENCE, PROCEDURAL) first in their relative
// order, then inferred ones in theirs; echoes, contentless lines,
// duplicates and inferred records conflicting with an explicit one
// (SameTopic) are dropped (see FilterHits); the result is capped at limit
// (≤0 = 50). Dropping happens before the cap, so what is dropped never
// takes a place in it.
func Assemble(hits []Hit, limit int) []Hit {
	if limit <= 0 {
		limit = DefaultTopK
	}
	out, _ := filterHits(hits, limit, false)
	return out
}

// RenderBlock renders hits as the system-prompt block of SPEC §4.6 step 5,
// with no token budget:
//
//	What you remember about this user:
//	- [Explicit] I only use organic fertiliser.
//	- [Inferred] Has a fig tree.
//
// The hits are filtered first (FilterHits, as in Assemble; idempotent, so
// already assembled hits render as they are); there is no cap. Each record is one line
// (whitespace folded, at most 500 runes). No hits render as "". For a
// budgeted block use RenderBlockWith, or FitBlock around RenderBlock.
func RenderBlock(hits []Hit) string {
	return RenderBlockWith(hits, BlockOptions{}).Text
}
