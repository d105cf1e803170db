package builtin_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// fakeStore is a small in-memory memory.Store with the contract's
// namespace, status, strategy and filter semantics (EQUALS_TO, CONTAINS,
// EXISTS), and word-overlap scoring. It records every query so tests can
// assert on scope. The real backends are tested by memorytest.Exercise.
type fakeStore struct {
	mu      sync.Mutex
	recs    map[string]memory.Record
	seq     int
	queries []memory.Query
}

func newFakeStore() *fakeStore { return &fakeStore{recs: map[string]memory.Record{}} }

func (s *fakeStore) Put(_ context.Context, r memory.Record) (memory.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Date(2026, 11, 30, 9, 0, s.seq, 0, time.UTC)
	if r.ID == "" {
		s.seq++
		r.ID = fmt.Sprintf("rec-%d", s.seq)
		r.CreatedAt = now
	}
	if r.Status == "" {
		r.Status = memory.StatusActive
	}
	r.UpdatedAt = now
	s.recs[r.ID] = r
	return r, nil
}

func (s *fakeStore) Get(_ context.Context, id string) (memory.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[id]
	if !ok {
		return memory.Record{}, errors.New("not found")
	}
	return r, nil
}

func (s *fakeStore) Search(_ context.Context, q memory.Query) ([]memory.Hit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries = append(s.queries, q)
	if (q.Namespace == "") == (q.NamespacePath == "") {
		return nil, errors.New("exactly one of Namespace and NamespacePath")
	}
	if len(q.Filters) > 5 {
		return nil, errors.New("too many filters")
	}
	statuses := q.Statuses
	if len(statuses) == 0 {
		statuses = []memory.Status{memory.StatusActive}
	}
	var hits []memory.Hit
	for _, r := range s.recs {
		if q.Namespace != "" && r.Namespace != q.Namespace {
			continue
		}
		if q.NamespacePath != "" && !strings.HasPrefix(r.Namespace, q.NamespacePath) {
			continue
		}
		if !slices.Contains(statuses, r.Status) {
			continue
		}
		if len(q.Strategies) > 0 && !slices.Contains(q.Strategies, r.Strategy) {
			continue
		}
		if !matchAll(r, q.Filters) {
			continue
		}
		score := 1.0
		if q.Text != "" {
			score = 0
			content := strings.ToLower(r.Content)
			for _, w := range strings.Fields(strings.ToLower(q.Text)) {
				if strings.Contains(content, w) {
					score++
				}
			}
			if score == 0 {
				continue
			}
		}
		hits = append(hits, memory.Hit{Record: r, Score: score})
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return hits[i].Record.ID < hits[j].Record.ID
	})
	if q.TopK > 0 && len(hits) > q.TopK {
		hits = hits[:q.TopK]
	}
	return hits, nil
}

func matchAll(r memory.Record, fs []memory.Filter) bool {
	for _, f := range fs {
		v, ok := r.Metadata[f.Key]
		switch f.Op {
		case memory.OpExists:
			if !ok {
				return false
			}
		case memory.OpEquals:
			if !ok || v != f.Value {
				return false
			}
		case memory.OpContains:
			switch x := v.(type) {
			case []string:
				if !slices.Contains(x, f.Value.(string)) {
					return false
				}
			case string:
				if !strings.Contains(x, f.Value.(string)) {
					return false
				}
			default:
				return false
			}
		default:
			// Other operators are the real stores' business.
		}
	}
	return true
}

func (s *fakeStore) AppendEvents(context.Context, []memory.Event) error { return nil }
func (s *fakeStore) Events(context.Context, string, string) ([]memory.Event, error) {
	return nil, nil
}
func (s *fakeStore) Forget(context.Context, string, string) error { return nil }
func (s *fakeStore) Close() error                                 { return nil }

func (s *fakeStore) lastQuery() memory.Query {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[len(s.queries)-1]
}
