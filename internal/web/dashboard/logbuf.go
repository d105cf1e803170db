package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// LogBuffer keeps the last lines of the process log for the live log on
// /settings. Wrap the process logger's handler with Handler:
//
//	buf := dashboard.NewLogBuffer(500)
//	log = slog.New(buf.Handler(log.Handler()))
type LogBuffer struct {
	mu    sync.Mutex
	lines []string
	max   int
	seq   int // lines ever added
	subs  int // live streams
	wake  chan struct{}
}

// NewLogBuffer keeps at most n lines (default 500 when n ≤ 0).
func NewLogBuffer(n int) *LogBuffer {
	if n <= 0 {
		n = 500
	}
	return &LogBuffer{max: n, wake: make(chan struct{})}
}

// Add appends one line.
func (b *LogBuffer) Add(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, line)
	if len(b.lines) > b.max {
		b.lines = b.lines[len(b.lines)-b.max:]
	}
	b.seq++
	close(b.wake)
	b.wake = make(chan struct{})
}

// Lines returns the kept lines, oldest first.
func (b *LogBuffer) Lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.lines...)
}

// since returns the lines added after seq (as many as are kept), the new
// seq and a channel closed at the next Add.
func (b *LogBuffer) since(seq int) ([]string, int, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.seq - seq
	if n > len(b.lines) {
		n = len(b.lines)
	}
	if n < 0 {
		n = 0
	}
	return append([]string(nil), b.lines[len(b.lines)-n:]...), b.seq, b.wake
}

func (b *LogBuffer) subscribe(n int) {
	b.mu.Lock()
	b.subs += n
	b.mu.Unlock()
}

// Streams reports how many live log streams are open.
func (b *LogBuffer) Streams() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.subs
}

// Handler returns a slog.Handler that passes records to next and keeps a
// one-line text form of each (time, level, message, attributes) here.
func (b *LogBuffer) Handler(next slog.Handler) slog.Handler {
	return &teeHandler{next: next, buf: b}
}

type teeHandler struct {
	next  slog.Handler
	buf   *LogBuffer
	attrs []slog.Attr
	group string
}

func (h *teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *teeHandler) Handle(ctx context.Context, r slog.Record) error {
	var line bytes.Buffer
	th := slog.NewTextHandler(&line, &slog.HandlerOptions{Level: slog.LevelDebug})
	var hh slog.Handler = th
	if len(h.attrs) > 0 {
		hh = hh.WithAttrs(h.attrs)
	}
	if h.group != "" {
		hh = hh.WithGroup(h.group)
	}
	if err := hh.Handle(ctx, r.Clone()); err == nil {
		h.buf.Add(string(bytes.TrimRight(line.Bytes(), "\n")))
	}
	return h.next.Handle(ctx, r)
}

func (h *teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &teeHandler{next: h.next.WithAttrs(as), buf: h.buf, attrs: append(append([]slog.Attr(nil), h.attrs...), as...), group: h.group}
}

func (h *teeHandler) WithGroup(name string) slog.Handler {
	return &teeHandler{next: h.next.WithGroup(name), buf: h.buf, attrs: h.attrs, group: name}
}

// logStream streams new log lines as Server-Sent Events {"line"}.
func (d *Dashboard) logStream(w http.ResponseWriter, r *http.Request) {
	if d.opt.Logs == nil {
		d.fail(w, r, http.StatusNotFound, errNoLog)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		d.fail(w, r, http.StatusInternalServerError, fmt.Errorf("streaming unsupported"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 3000\n: log\n\n")
	fl.Flush()
	_, seq, wake := d.opt.Logs.since(1 << 62) // only lines from now on
	d.opt.Logs.subscribe(1)
	defer d.opt.Logs.subscribe(-1)
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-d.closing:
			return
		case <-d.a.Stopping():
			return
		case <-r.Context().Done():
			return
		case <-keep.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			fl.Flush()
		case <-wake:
			var lines []string
			lines, seq, wake = d.opt.Logs.since(seq)
			for _, l := range lines {
				b, _ := json.Marshal(map[string]string{"line": l})
				fmt.Fprintf(w, "data: %s\n\n", b)
			}
			fl.Flush()
		}
	}
}
