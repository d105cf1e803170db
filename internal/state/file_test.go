package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// logLines decodes every line of actor's log, failing on any that does not
// decode: the file must be clean JSON Lines.
func logLines(t *testing.T, dir, actor string) []logLine {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, LogName(actor)))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		t.Fatalf("log does not end on a line boundary: %q", b[max(0, len(b)-40):])
	}
	var out []logLine
	for i, ln := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		var l logLine
		if err := json.Unmarshal(ln, &l); err != nil {
			t.Fatalf("line %d: %v: %q", i+1, err, ln)
		}
		out = append(out, l)
	}
	return out
}

func TestFileMigratesLegacy(t *testing.T) {
	// Build the state a few turns produce, then write it as the old engine
	// did: one JSON document per actor, integer level, up to 32 recent
	// stimuli, the whole history.
	c := newClock()
	src := openTest(t, t.TempDir(), c, nil)
	actor := "telegram:Bob/.."
	for i := range 12 {
		if _, err := src.Apply(ctx, actor, i+1, Stimulus{Category: Threat, Intensity: 0.8}); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := src.Snapshot(ctx, actor)
	rec, _, _, _ := src.Backend().Load(ctx, actor, false)
	rec.Recent = nil
	for i := range 32 {
		rec.Recent = append(rec.Recent, RecentStimulus{Category: Threat, At: c.Now().Add(time.Duration(i-40) * time.Hour)})
	}
	old, err := json.Marshal(legacyFile{Record: rec, History: want.History})
	if err != nil {
		t.Fatal(err)
	}
	old = bytes.Replace(old, []byte(`"level":"`+want.Level.String()+`"`), fmt.Appendf(nil, `"version":1,"level":%d`, int(want.Level)), 1)
	if !bytes.Contains(old, []byte(`"version":1`)) {
		t.Fatalf("legacy fixture lacks the integer level: %s", old)
	}
	dir := t.TempDir()
	legacy := filepath.Join(dir, legacyName(actor))
	if err := os.WriteFile(legacy, append(old, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}

	e := openTest(t, dir, c, nil)
	// Listed and counted before anything loads it.
	if acts, err := e.Actors(ctx); err != nil || len(acts) != 1 || acts[0] != actor {
		t.Fatalf("Actors = %q, %v", acts, err)
	}
	if counts, _ := e.LevelCounts(ctx); counts[want.Level] != 1 {
		t.Fatalf("LevelCounts = %v, want one %s", counts, want.Level)
	}
	got, err := e.Snapshot(ctx, actor)
	if err != nil {
		t.Fatal(err)
	}
	if got.Values != want.Values || got.Level != want.Level || got.Turns != 12 || len(got.History) != len(want.History) {
		t.Fatalf("migrated: %v %s %d turns %d changes; want %v %s 12 %d", got.Values, got.Level, got.Turns, len(got.History), want.Values, want.Level, len(want.History))
	}
	if _, err := os.Stat(legacy); !os.IsNotExist(err) {
		t.Fatalf("legacy file still there: %v", err)
	}
	if lines := logLines(t, dir, actor); len(lines) != 1 || len(lines[0].Add) != len(want.History) {
		t.Fatalf("migrated log: %d lines", len(lines))
	}
	// It continues from the migrated state, appending.
	ev, err := e.Apply(ctx, actor, 0, Stimulus{Category: Joy, Intensity: 1})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Turn != 13 || ev.Before != want.Values {
		t.Fatalf("next turn %d from %v", ev.Turn, ev.Before)
	}
	if lines := logLines(t, dir, actor); len(lines) != 2 {
		t.Fatalf("%d lines after one more turn, want 2", len(lines))
	}
	e2 := openTest(t, dir, c, nil)
	if s, _ := e2.Snapshot(ctx, actor); s.Turns != 13 || s.Values != ev.After {
		t.Fatalf("reopened: %d turns %v", s.Turns, s.Values)
	}

	// A leftover legacy file next to a log (a migration that crashed
	// before the remove) loses to the log and is removed.
	if err := os.WriteFile(legacy, append(old, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	e3 := openTest(t, dir, c, nil)
	if acts, _ := e3.Actors(ctx); len(acts) != 1 {
		t.Fatalf("Actors with a leftover legacy file: %q", acts)
	}
	if s, _ := e3.Snapshot(ctx, actor); s.Turns != 13 {
		t.Fatalf("leftover legacy file won: %d turns", s.Turns)
	}
	if _, err := os.Stat(legacy); !os.IsNotExist(err) {
		t.Fatal("leftover legacy file not removed")
	}
}

func TestFileTornLastLine(t *testing.T) {
	tails := map[string]string{
		"partial line":    `{"rec":{"actor_id":"a","val`,
		"undecodable":     "garbage\n",
		"zeros":           strings.Repeat("\x00", 300),
		"zeros, newline":  strings.Repeat("\x00", 30) + "\n",
		"decodable, torn": `{"rec":{"actor_id":"a","turns":99}}`,
	}
	for name, tail := range tails {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			c := newClock()
			e := openTest(t, dir, c, nil)
			for i := range 5 {
				if _, err := e.Apply(ctx, "a", i+1, Stimulus{Category: Loss, Intensity: 0.5}); err != nil {
					t.Fatal(err)
				}
			}
			want, _ := e.Snapshot(ctx, "a")
			p := filepath.Join(dir, LogName("a"))
			fh, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			fh.WriteString(tail)
			fh.Close()

			e2 := openTest(t, dir, c, nil)
			got, err := e2.Snapshot(ctx, "a")
			if err != nil {
				t.Fatalf("torn tail is fatal: %v", err)
			}
			if got.Turns != 5 || got.Values != want.Values || len(got.History) != len(want.History) {
				t.Fatalf("after torn tail: %d turns %v; want 5 %v", got.Turns, got.Values, want.Values)
			}
			if _, err := e2.Apply(ctx, "a", 6, Stimulus{Category: Joy, Intensity: 0.5}); err != nil {
				t.Fatal(err)
			}
			if lines := logLines(t, dir, "a"); len(lines) != 6 || lines[5].Rec.Turns != 6 {
				t.Fatalf("log after repair: %d lines", len(lines))
			}
		})
	}
	t.Run("only line torn", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, LogName("a"))
		os.WriteFile(p, []byte(`{"rec":{"actor_id":"a"`), 0o600)
		e := openTest(t, dir, newClock(), nil)
		s, err := e.Snapshot(ctx, "a")
		if err != nil || s.Turns != 0 {
			t.Fatalf("lone torn line: %d turns, %v", s.Turns, err)
		}
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatal("empty log left behind")
		}
		if acts, _ := e.Actors(ctx); len(acts) != 0 {
			t.Fatalf("Actors = %q", acts)
		}
	})
}

func TestFileCompaction(t *testing.T) {
	for _, limit := range []int{8, 32, 100} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			dir := t.TempDir()
			c := newClock()
			e := openTest(t, dir, c, func(o *Options) { o.HistoryLimit = limit })
			msgs := []string{"thank you!!", "this is useless, it failed again", "I'm not sure", "we did it!!", "hello"}
			maxLines := 0
			for i := range 250 {
				c.Add(3 * time.Minute)
				if _, err := e.Observe(ctx, "a", i+1, msgs[i%len(msgs)]); err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(filepath.Join(dir, LogName("a")))
				if err != nil {
					t.Fatal(err)
				}
				maxLines = max(maxLines, bytes.Count(b, []byte("\n")))
			}
			logLines(t, dir, "a") // every line decodes
			every := max(64, 2*limit)
			if maxLines != every {
				t.Fatalf("log grew to %d lines, want compaction at %d", maxLines, every)
			}
			want, _ := e.Snapshot(ctx, "a")
			if len(want.History) != limit {
				t.Fatalf("%d changes kept, want %d", len(want.History), limit)
			}
			got, _ := openTest(t, dir, c, func(o *Options) { o.HistoryLimit = limit }).Snapshot(ctx, "a")
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("reopened after compactions:\n%v\nwant\n%v", got, want)
			}
		})
	}
}

// TestFileAppendCost checks the point of the log: a turn appends one line
// whose size does not grow with the history.
func TestFileAppendCost(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	e := openTest(t, dir, c, func(o *Options) { o.HistoryLimit = 200 })
	p := filepath.Join(dir, LogName("a"))
	var sizes []int64
	for i := range 30 {
		c.Add(time.Minute)
		if _, err := e.Apply(ctx, "a", i+1, Stimulus{Category: Uncertainty, Intensity: 0.6, Cues: []string{"not sure"}}); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, st.Size())
	}
	// From turn 7 on the habituation window is full and every line is
	// the same size up to number formatting.
	first, last := sizes[7]-sizes[6], sizes[len(sizes)-1]-sizes[len(sizes)-2]
	if last > first+64 || last > 2048 {
		t.Fatalf("turn 8 appended %d bytes, turn 30 %d: appends grow with the history", first, last)
	}
}

func TestLogName(t *testing.T) {
	for _, tc := range []struct{ actor, want string }{
		{"a", "a.jsonl"},
		{"telegram:12345", "telegram%3A12345.jsonl"},
		{"../x", "%2E%2E%2Fx.jsonl"},
		{"Bob", "%42ob.jsonl"},
		{"~", "%7E.jsonl"},
	} {
		if got := LogName(tc.actor); got != tc.want {
			t.Errorf("LogName(%q) = %q, want %q", tc.actor, got, tc.want)
		}
	}
	long := LogName(strings.Repeat("/", 256))
	if !strings.HasPrefix(long, "~") || len(long) != 1+64+len(logExt) {
		t.Errorf("long name %q", long)
	}
	if legacyName(strings.Repeat("/", 256)) != "" {
		t.Error("over-long legacy name not dropped")
	}
}

// FuzzLogName: every valid actor gets a name that stays in the directory,
// fits NAME_MAX, decodes back (or is hashed), and differs, ignoring case,
// from the name of the same ID with its letters' case swapped.
func FuzzLogName(f *testing.F) {
	for _, s := range []string{"a", "../../etc/passwd", "Bob", "가나다", "%41", strings.Repeat("/", 256), "~x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, actor string) {
		if validActor(actor) != nil {
			return
		}
		name := LogName(actor)
		if strings.ContainsAny(name, "/\\\x00") || strings.HasPrefix(name, ".") || len(name) > 255 || !strings.HasSuffix(name, logExt) ||
			filepath.Base(name) != name {
			t.Fatalf("LogName(%q) = %q", actor, name)
		}
		base := strings.TrimSuffix(name, logExt)
		if !strings.HasPrefix(base, "~") {
			if back, ok := unescape(base); !ok || back != actor {
				t.Fatalf("unescape(%q) = %q, %v; want %q", base, back, ok, actor)
			}
		}
		swapped := strings.Map(func(r rune) rune {
			if unicode.IsUpper(r) {
				return unicode.ToLower(r)
			}
			return unicode.ToUpper(r)
		}, actor)
		if swapped != actor && utf8.ValidString(swapped) && validActor(swapped) == nil && len(swapped) == len(actor) &&
			!strings.HasPrefix(name, "~") && strings.EqualFold(LogName(swapped), name) {
			t.Fatalf("%q and %q collide on a case-insensitive file system: %q", actor, swapped, name)
		}
	})
}
