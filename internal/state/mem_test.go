package state

import (
	"context"
	"sync"
)

// memBackend keeps state in memory, for driving the dynamics for many
// thousands of turns without file I/O.
type memBackend struct {
	mu   sync.Mutex
	recs map[string]Record
	hist map[string][]Change
}

func newMemBackend() *memBackend {
	return &memBackend{recs: map[string]Record{}, hist: map[string][]Change{}}
}

func (m *memBackend) Load(_ context.Context, actor string, history bool) (Record, []Change, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[actor]
	var h []Change
	if history {
		h = append(h, m.hist[actor]...)
	}
	return r, h, ok, nil
}

func (m *memBackend) Update(_ context.Context, actor string, limit int, fn func(Record, bool) (Record, []Change, error)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.recs[actor]
	next, add, err := fn(cur, ok)
	if err != nil {
		return err
	}
	m.recs[actor] = next
	h := append(m.hist[actor], add...)
	if len(h) > limit {
		h = append([]Change(nil), h[len(h)-limit:]...)
	}
	m.hist[actor] = h
	return nil
}

func (m *memBackend) Actors(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for a := range m.recs {
		out = append(out, a)
	}
	return out, nil
}

func (m *memBackend) Records(context.Context) (map[string]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]Record{}
	for a, r := range m.recs {
		out[a] = r
	}
	return out, nil
}

func (m *memBackend) Forget(_ context.Context, actor string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs, actor)
	delete(m.hist, actor)
	return nil
}
