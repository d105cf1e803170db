package pipeline

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/tendrilai/tendril/internal/memory"
)

// memStore is an in-memory memory.Store for the pipeline tests. It keeps
// records and events in maps and implements the Query contract of
// memory.go: exact or path-prefix namespaces, strategies, statuses
// (default active) and a naive token-overlap ranking.
type memStore struct {
	mu       sync.Mutex
	records  map[string]memory.Record
	events   []memory.Event
	puts     int
	searches int
	failPut  error // when set, Put fails
}

func newMemStore() *memStore { return &memStore{records: map[string]memory.Record{}} }

func (s *memStore) Put(_ context.Context, r memory.Record) (memory.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failPut != nil {
		return memory.Record{}, s.failPut
	}
	s.puts++
	if r.ID == "" {
		r.ID = ulid.Make().String()
	}
	now := time.Now().UTC()
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = now
	}
	if r.Status == "" {
		r.Status = memory.StatusActive
	}
	md, err := memory.NormalizeMetadata(r.Metadata)
	if err != nil {
		return memory.Record{}, err
	}
	r.Metadata = md
	r.Sources = append([]string(nil), r.Sources...)
	s.records[r.ID] = r
	return r, nil
}

func (s *memStore) Get(_ context.Context, id string) (memory.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok {
		return memory.Record{}, fmt.Errorf("%s: %w", id, memory.ErrNotFound)
	}
	return r, nil
}

func (s *memStore) Search(_ context.Context, q memory.Query) ([]memory.Hit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.searches++
	return s.search(q)
}

func (s *memStore) search(q memory.Query) ([]memory.Hit, error) {
	if (q.Namespace == "") == (q.NamespacePath == "") {
		return nil, memory.ErrInvalidQuery
	}
	statuses := q.Statuses
	if len(statuses) == 0 {
		statuses = []memory.Status{memory.StatusActive}
	}
	qt := strings.Fields(strings.ToLower(q.Text))
	var hits []memory.Hit
	for _, r := range s.records {
		if q.Namespace != "" && !memory.NamespaceEqual(r.Namespace, q.Namespace) {
			continue
		}
		if q.NamespacePath != "" && !memory.NamespaceUnder(r.Namespace, q.NamespacePath) {
			continue
		}
		if !hasStatus(statuses, r.Status) || (len(q.Strategies) > 0 && !hasStrategy(q.Strategies, r.Strategy)) {
			continue
		}
		score := 0.0
		for _, t := range qt {
			if strings.Contains(strings.ToLower(r.Content), t) {
				score++
			}
		}
		if len(qt) > 0 && score == 0 {
			continue
		}
		hits = append(hits, memory.Hit{Record: r, Score: score})
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return hits[i].Record.ID < hits[j].Record.ID
	})
	k := q.TopK
	if k <= 0 && len(qt) > 0 {
		k = 50
	}
	if k > 0 && len(hits) > k {
		hits = hits[:k]
	}
	return hits, nil
}

func hasStatus(ss []memory.Status, s memory.Status) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func hasStrategy(ss []memory.Strategy, s memory.Strategy) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func (s *memStore) AppendEvents(_ context.Context, evs []memory.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Idempotent by ID, as memory.Store requires (memorytest checks it).
	for _, e := range evs {
		if !slices.ContainsFunc(s.events, func(o memory.Event) bool { return o.ID == e.ID && e.ID != "" }) {
			s.events = append(s.events, e)
		}
	}
	return nil
}

func (s *memStore) Events(_ context.Context, actorID, sessionID string) ([]memory.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []memory.Event
	for _, e := range s.events {
		if e.ActorID == actorID && (sessionID == "" || e.SessionID == sessionID) {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Timestamp.Before(out[j].Timestamp) })
	return out, nil
}

func (s *memStore) Forget(_ context.Context, agentID, actorID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, r := range s.records {
		if _, a, ok := memory.NamespaceActor(r.Namespace); ok && a == actorID {
			delete(s.records, id)
		}
	}
	kept := s.events[:0]
	for _, e := range s.events {
		if e.ActorID != actorID {
			kept = append(kept, e)
		}
	}
	s.events = kept
	return nil
}

func (s *memStore) Close() error { return nil }

// all returns every record of an actor regardless of status.
func (s *memStore) all(actorID string) []memory.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []memory.Record
	for _, r := range s.records {
		if _, a, ok := memory.NamespaceActor(r.Namespace); ok && a == actorID {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// rejectingStore adds memory.RejectionStore to memStore.
type rejectingStore struct {
	*memStore
	rej map[string]bool
}

func (s *rejectingStore) IsRejected(_ context.Context, actorID, content string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rej[actorID+"\x00"+memory.ContentHash(content)], nil
}

func (s *rejectingStore) MarkRejected(_ context.Context, actorID, content string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rej[actorID+"\x00"+memory.ContentHash(content)] = true
	return nil
}

// Forget drops the actor's hashes too, as memory.RejectionStore requires.
func (s *rejectingStore) Forget(ctx context.Context, agentID, actorID string) error {
	if err := s.memStore.Forget(ctx, agentID, actorID); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.rej {
		if strings.HasPrefix(k, actorID+"\x00") {
			delete(s.rej, k)
		}
	}
	return nil
}

// listingStore adds the Lister and BatchPutter fast paths to memStore.
type listingStore struct {
	*memStore
	lists, batches int
}

func (s *listingStore) PutBatch(ctx context.Context, recs []memory.Record) ([]memory.Record, error) {
	s.mu.Lock()
	s.batches++
	s.mu.Unlock()
	out := make([]memory.Record, 0, len(recs))
	for _, r := range recs {
		put, err := s.memStore.Put(ctx, r)
		if err != nil {
			return out, err
		}
		out = append(out, put)
	}
	return out, nil
}

func (s *listingStore) List(_ context.Context, q memory.Query) ([]memory.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	hits, err := s.search(q)
	out := make([]memory.Record, len(hits))
	for i, h := range hits {
		out[i] = h.Record
	}
	return out, err
}
