package state

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// rewriteBackend is the engine's persistence before the log: one JSON
// document per actor (record and whole history) written to a temp file and
// renamed over the old one on every change. Kept here only to measure the
// log against it, side by side. (The old record also carried up to 32
// recent stimuli where the engine now keeps Guard.Window = 6, so this
// understates the old cost by up to ~1.4 KB per turn.)
type rewriteBackend struct {
	dir     string
	noSync  bool
	mu      sync.Mutex
	cache   map[string]*legacyFile
	written int64
}

func (r *rewriteBackend) Load(_ context.Context, actor string, history bool) (Record, []Change, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, ok := r.cache[actor]
	if !ok {
		return Record{}, nil, false, nil
	}
	return st.Record, append([]Change(nil), st.History...), true, nil
}

func (r *rewriteBackend) Update(_ context.Context, actor string, limit int, fn func(Record, bool) (Record, []Change, error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, ok := r.cache[actor]
	if !ok {
		st = &legacyFile{}
	}
	next, add, err := fn(st.Record, ok)
	if err != nil {
		return err
	}
	hist := append(append([]Change(nil), st.History...), add...)
	if len(hist) > limit {
		hist = hist[len(hist)-limit:]
	}
	nst := &legacyFile{Record: next, History: hist}
	b, err := json.Marshal(nst)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	tmp, err := os.CreateTemp(r.dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if !r.noSync {
		if err := tmp.Sync(); err != nil {
			tmp.Close()
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(r.dir, legacyName(actor))); err != nil {
		return err
	}
	if !r.noSync {
		if d, err := os.Open(r.dir); err == nil {
			d.Sync()
			d.Close()
		}
	}
	r.written += int64(len(b))
	r.cache[actor] = nst
	return nil
}

func (r *rewriteBackend) Actors(context.Context) ([]string, error)           { return nil, nil }
func (r *rewriteBackend) Records(context.Context) (map[string]Record, error) { return nil, nil }
func (r *rewriteBackend) Forget(context.Context, string) error               { return nil }

// benchMessages is a realistic mix: pressure, thanks, uncertainty, neutral.
var benchMessages = []string{"this is useless, it failed again", "thank you, that worked!", "I'm not sure which one",
	"hello", "고마워 정말", "짜증나 또 실패", "we did it!!", "hmm, no idea"}

// BenchmarkApplyBytes measures bytes written per Apply in steady state
// (history full) for the old whole-file rewrite and the append-only log,
// with the server's history limit (32) and the default (200), no fsync.
//
//	go test -run '^$' -bench BenchmarkApplyBytes -benchtime 2000x ./internal/state/
func BenchmarkApplyBytes(b *testing.B) {
	for _, limit := range []int{32, 200} {
		for _, kind := range []string{"rewrite", "append"} {
			b.Run(fmt.Sprintf("%s/history=%d", kind, limit), func(b *testing.B) {
				dir := b.TempDir()
				var be Backend
				var written func() int64
				switch kind {
				case "rewrite":
					r := &rewriteBackend{dir: dir, noSync: true, cache: map[string]*legacyFile{}}
					be, written = r, func() int64 { return r.written }
				default:
					f, err := NewFileBackend(dir, FileOptions{NoSync: true})
					if err != nil {
						b.Fatal(err)
					}
					be, written = f, f.written.Load
				}
				benchApply(b, be, limit, written)
			})
		}
	}
}

// BenchmarkApplyFile measures Apply latency on the file backend, without
// and with fsync (compare BenchmarkApply in pgstate).
func BenchmarkApplyFile(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("fsync=%v", sync), func(b *testing.B) {
			f, err := NewFileBackend(b.TempDir(), FileOptions{NoSync: !sync})
			if err != nil {
				b.Fatal(err)
			}
			benchApply(b, f, 32, f.written.Load)
		})
	}
}

// benchApply warms actor "a" up to a full history, then times b.N Observe
// calls, reporting bytes/op from written when it is not nil.
func benchApply(b *testing.B, be Backend, limit int, written func() int64) {
	c := newClock()
	e, err := New(be, Options{Now: c.Now, HistoryLimit: limit})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	turn := 0
	next := func() {
		turn++
		c.Add(time.Minute)
		if _, err := e.Observe(ctx, "telegram:12345", turn, benchMessages[turn%len(benchMessages)]); err != nil {
			b.Fatal(err)
		}
	}
	for range 2 * limit {
		next()
	}
	w0 := written()
	b.ResetTimer()
	for range b.N {
		next()
	}
	b.StopTimer()
	b.ReportMetric(float64(written()-w0)/float64(b.N), "bytes/op")
}
