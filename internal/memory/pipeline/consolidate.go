package pipeline

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/extract"
	"github.com/tendrilai/tendril/internal/memory/gate"
)

// Metadata keys the pipeline writes on records.
const (
	keyStatedAt     = "statedAt"     // time.Time of the latest source event
	keySupersededBy = "supersededBy" // on the old record: the new record's ID
	keySupersededAt = "supersededAt" // on the old record: when the new one was stated
	keySupersedes   = "supersedes"   // on the new record: []string of old IDs
)

// Outcome of consolidating one candidate.
type Outcome string

const (
	OutcomeDropped  Outcome = "dropped"  // gate score below Stage
	OutcomeRejected Outcome = "rejected" // its hash was rejected before
	OutcomeMerged   Outcome = "merged"   // duplicate of an existing record
	OutcomeStaged   Outcome = "staged"   // waiting for review
	OutcomeStored   Outcome = "stored"   // active
)

// Result is what happened to one candidate.
type Result struct {
	Outcome    Outcome       `json:"outcome"`
	Score      float64       `json:"score"`
	Record     memory.Record `json:"record"` // the written or merged record; zero when dropped
	Superseded []string      `json:"superseded,omitempty"`
}

// consolidateAll consolidates candidates oldest first against one
// namespace, re-reading it between candidates so that a later candidate
// sees what an earlier one wrote.
func (p *Pipeline) consolidateAll(ctx context.Context, actorID, ns string, cands []extract.Candidate) ([]Result, error) {
	sortByTime(cands)
	var out []Result
	existing, err := p.list(ctx, ns)
	if err != nil {
		return nil, err
	}
	for _, c := range cands {
		r, err := p.consolidate(ctx, actorID, ns, c, existing)
		if err != nil {
			return out, err
		}
		out = append(out, r)
		if r.Outcome == OutcomeMerged || r.Outcome == OutcomeStaged || r.Outcome == OutcomeStored {
			if existing, err = p.list(ctx, ns); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// list returns every active, staged and superseded record of a namespace.
func (p *Pipeline) list(ctx context.Context, ns string) ([]memory.Record, error) {
	hits, err := p.store.Search(ctx, memory.Query{Namespace: ns,
		Statuses: []memory.Status{memory.StatusActive, memory.StatusStaged, memory.StatusSuperseded}, TopK: p.opts.ListLimit})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", ns, err)
	}
	out := make([]memory.Record, 0, len(hits))
	for _, h := range hits {
		if !isEvent(h.Record) {
			out = append(out, h.Record)
		}
	}
	return out, nil
}

// isEvent reports a short-term event presented as an episodic record by
// the store (metadata kind "event"); it is never consolidated into.
func isEvent(r memory.Record) bool {
	k, _ := r.Metadata["kind"].(string)
	return k == "event"
}

// rejected checks the store's RejectionStore when it has one, else the
// pipeline's own table.
func (p *Pipeline) rejected(ctx context.Context, actorID, content string) (bool, error) {
	if rs, ok := p.store.(memory.RejectionStore); ok {
		return rs.IsRejected(ctx, actorID, content)
	}
	return p.q.isRejected(ctx, actorID, memory.ContentHash(content))
}

func (p *Pipeline) markRejected(ctx context.Context, actorID, content string) error {
	if rs, ok := p.store.(memory.RejectionStore); ok {
		return rs.MarkRejected(ctx, actorID, content)
	}
	return p.q.markRejected(ctx, actorID, memory.ContentHash(content), p.opts.Now())
}

// consolidate decides one candidate:
//
//  1. a content hash rejected before → OutcomeRejected;
//  2. a duplicate — same memory.ContentHash, or token Jaccard ≥
//     DuplicateOverlap with the same strategy — of an active or staged
//     record merges into it (UpdatedAt, statedAt, sources union); of a
//     superseded record it merges too, unless the candidate was stated after
//     the record was superseded, in which case it is a re-assertion and
//     goes on as new;
//  3. the gate scores it, with novelty measured against the namespace's
//     active records on other topics (an update on the same topic is news,
//     not repetition): dropped, staged or stored;
//  4. a stored candidate supersedes every active record on the same topic.
func (p *Pipeline) consolidate(ctx context.Context, actorID, ns string, c extract.Candidate, existing []memory.Record) (Result, error) {
	if strings.TrimSpace(c.Content) == "" {
		return Result{Outcome: OutcomeDropped}, nil
	}
	if rej, err := p.rejected(ctx, actorID, c.Content); err != nil {
		return Result{}, fmt.Errorf("rejections: %w", err)
	} else if rej {
		return Result{Outcome: OutcomeRejected}, nil
	}
	now := p.opts.Now().UTC()
	stated := c.Time.UTC()
	if c.Time.IsZero() {
		stated = now
	}
	hash := memory.ContentHash(c.Content)
	ctoks := gate.Tokens(c.Content)
	for _, r := range existing {
		dup := memory.ContentHash(r.Content) == hash ||
			(r.Strategy == c.Strategy && gate.Jaccard(ctoks, gate.Tokens(r.Content)) >= p.opts.DuplicateOverlap)
		if !dup {
			continue
		}
		if r.Status == memory.StatusSuperseded {
			if at, ok := timeMeta(r.Metadata[keySupersededAt]); ok && stated.After(at) {
				continue // re-assertion after it was superseded
			}
		}
		r.Sources = unionStrings(r.Sources, c.Sources)
		r.UpdatedAt = now
		if r.Metadata == nil {
			r.Metadata = map[string]any{}
		}
		if at, ok := timeMeta(r.Metadata[keyStatedAt]); !ok || stated.After(at) {
			r.Metadata[keyStatedAt] = stated
		}
		put, err := p.store.Put(ctx, r)
		if err != nil {
			return Result{}, fmt.Errorf("merge into %s: %w", r.ID, err)
		}
		return Result{Outcome: OutcomeMerged, Score: r.Importance, Record: put}, nil
	}

	var others []string
	for _, r := range existing {
		if r.Status == memory.StatusActive && (c.Topic == "" || topicOf(r) != c.Topic) {
			others = append(others, r.Content)
		}
	}
	_, score, outcome := p.opts.Thresholds.Evaluate(c.GateInput(others))
	if outcome == gate.Dropped {
		return Result{Outcome: OutcomeDropped, Score: score}, nil
	}
	c.Time = stated
	if outcome == gate.Staged {
		rec, err := p.put(ctx, ns, c, score, outcome, now)
		return Result{Outcome: OutcomeStaged, Score: score, Record: rec}, err
	}
	rec, sup, err := p.storeAndSupersede(ctx, ns, c, score, now, existing)
	return Result{Outcome: OutcomeStored, Score: score, Record: rec, Superseded: sup}, err
}

func topicOf(r memory.Record) string {
	t, _ := r.Metadata[extract.KeyTopic].(string)
	return t
}

func timeMeta(v any) (time.Time, bool) {
	switch x := v.(type) {
	case time.Time:
		return x, !x.IsZero()
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		return t, err == nil
	}
	return time.Time{}, false
}

// put writes a new record for c with the gate's outcome.
func (p *Pipeline) put(ctx context.Context, ns string, c extract.Candidate, score float64, outcome gate.Outcome, now time.Time) (memory.Record, error) {
	rec := p.newRecord(ns, c, score, now)
	if outcome == gate.Staged {
		rec.Status = memory.StatusStaged
	}
	put, err := p.store.Put(ctx, rec)
	if err != nil {
		return memory.Record{}, fmt.Errorf("put %s record: %w", rec.Strategy, err)
	}
	return put, nil
}

func (p *Pipeline) newRecord(ns string, c extract.Candidate, score float64, now time.Time) memory.Record {
	md := make(map[string]any, len(c.Metadata)+2)
	for k, v := range c.Metadata {
		md[k] = v
	}
	if c.Topic != "" {
		md[extract.KeyTopic] = c.Topic
	}
	stated := c.Time
	if stated.IsZero() {
		stated = now
	}
	md[keyStatedAt] = stated.UTC()
	return memory.Record{
		ID:         ulid.Make().String(),
		Namespace:  ns,
		Strategy:   c.Strategy,
		Content:    c.Content,
		Metadata:   md,
		CreatedAt:  now,
		UpdatedAt:  now,
		Sources:    append([]string(nil), c.Sources...),
		Importance: score,
		Status:     memory.StatusActive,
	}
}

// storeAndSupersede writes c as active and supersedes the active records of
// its topic.
func (p *Pipeline) storeAndSupersede(ctx context.Context, ns string, c extract.Candidate, score float64, now time.Time, existing []memory.Record) (memory.Record, []string, error) {
	rec := p.newRecord(ns, c, score, now)
	old := contradicted(rec, existing)
	var ids []string
	for _, o := range old {
		ids = append(ids, o.ID)
	}
	if len(ids) > 0 {
		rec.Metadata[keySupersedes] = ids
	}
	put, err := p.store.Put(ctx, rec)
	if err != nil {
		return memory.Record{}, nil, fmt.Errorf("put %s record: %w", rec.Strategy, err)
	}
	if err := p.supersede(ctx, put, old, now); err != nil {
		return put, nil, err
	}
	return put, ids, nil
}

// contradicted lists the active records on rec's topic with other content.
func contradicted(rec memory.Record, existing []memory.Record) []memory.Record {
	topic := topicOf(rec)
	if topic == "" {
		return nil
	}
	hash := memory.ContentHash(rec.Content)
	var out []memory.Record
	for _, r := range existing {
		if r.ID == rec.ID || r.Status != memory.StatusActive || topicOf(r) != topic || memory.ContentHash(r.Content) == hash {
			continue
		}
		out = append(out, r)
	}
	return out
}

func (p *Pipeline) supersede(ctx context.Context, by memory.Record, old []memory.Record, now time.Time) error {
	at, ok := timeMeta(by.Metadata[keyStatedAt])
	if !ok {
		at = now
	}
	for _, o := range old {
		md := mergeMeta(o.Metadata, nil)
		md[keySupersededBy] = by.ID
		md[keySupersededAt] = at
		o.Metadata = md
		o.Status = memory.StatusSuperseded
		o.UpdatedAt = now
		if _, err := p.store.Put(ctx, o); err != nil {
			return fmt.Errorf("supersede %s: %w", o.ID, err)
		}
	}
	return nil
}
