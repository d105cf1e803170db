package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
)

// Output that is not a terminal (a pipe, a file, a log) keeps its bytes,
// except the bidirectional controls, which are escaped: also when a write
// cuts one in two (output copied in chunks), and in JSON, where the escape
// decodes to the same string.
func TestBidiWriter(t *testing.T) {
	in := "rtl\u202eevil\u2066 \x1b[1m bold\x07 비료 \xff\n\ttab \u200f."
	want := `rtl\u202eevil\u2066 ` + "\x1b[1m bold\x07 비료 \xff\n\ttab " + `\u200f.`
	for _, chunk := range []int{len(in), 1, 2} {
		var b bytes.Buffer
		w := bidiWriter(&b)
		for p := []byte(in); len(p) > 0; {
			n := min(chunk, len(p))
			if k, err := w.Write(p[:n]); err != nil || k != n {
				t.Fatalf("Write = %d, %v", k, err)
			}
			p = p[n:]
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if b.String() != want {
			t.Errorf("written in chunks of %d: %q, want %q", chunk, b.String(), want)
		}
	}
	// A cut sequence that never completes is written as it is at the end.
	var b bytes.Buffer
	w := bidiWriter(&b)
	w.Write([]byte("a\xe2\x80"))
	w.Flush()
	if b.String() != "a\xe2\x80" {
		t.Errorf("held bytes: %q", b.String())
	}

	type rec struct {
		Content string `json:"content"`
	}
	v := rec{Content: "likes \u202efigs\u2069 and \u200epears"}
	b.Reset()
	w = bidiWriter(&b)
	if err := writeJSON(w, v); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if strings.ContainsFunc(b.String(), func(r rune) bool { return r == 0x202e || r == 0x2069 || r == 0x200e }) || !strings.Contains(b.String(), `\u202e`) {
		t.Fatalf("JSON output %q holds a raw bidi control", b.String())
	}
	var got rec
	if err := json.Unmarshal(b.Bytes(), &got); err != nil || got != v {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, v)
	}
}

// A terminal sees the same characters quoted, however the writes cut them.
func TestTermWriterChunks(t *testing.T) {
	in := "a\u202eb\x1b 비료\u0085"
	var b bytes.Buffer
	w := termWriter(&b)
	for i := 0; i < len(in); i++ {
		w.Write([]byte{in[i]})
	}
	w.Flush()
	if want := `a\u202eb\x1b 비료\u0085`; b.String() != want {
		t.Fatalf("%q, want %q", b.String(), want)
	}
}

// A record or job stored with bidirectional controls (written before IDs
// were validated, or free text) prints escaped when the output is piped:
// in plain text, tables and --json, whose values still decode unchanged.
func TestPipedOutputEscapesBidi(t *testing.T) {
	home := t.TempDir()
	st, err := sqlitestore.Open(home, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns := memory.MustNamespace(memory.DefaultLongTermTemplate, memory.NamespaceVars{AgentID: "main", ActorID: "telegram:7"})
	const content = "likes figs \u202eseirrep\u202c and plums"
	rec, err := st.Put(context.Background(), memory.Record{Namespace: ns, Content: content})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	const task = "water the \u2067figs\u2069"
	if _, stderr, code := runCLI(t, home, nil, "cron", "add", "--name", "figs", "--every", "24h", "--task", task, "--actor", "telegram:7"); code != 0 {
		t.Fatalf("cron add: exit %d %s", code, stderr)
	}
	raw := func(s string) bool { return strings.ContainsAny(s, "\u202e\u202c\u2067\u2069") }
	for _, args := range [][]string{
		{"memory", "show", rec.ID},
		{"memory", "list", "--actor", "telegram:7"},
		{"cron", "list"},
	} {
		out, stderr, code := runCLI(t, home, nil, args...)
		if code != 0 || raw(out) || !strings.Contains(out, `\u202e`) && !strings.Contains(out, `\u2067`) {
			t.Errorf("%v: exit %d %s\n%q: want the bidi controls escaped", args, code, stderr, out)
		}
	}
	out, stderr, code := runCLI(t, home, nil, "memory", "show", rec.ID, "--json")
	var r memory.Record
	if code != 0 || raw(out) || json.Unmarshal([]byte(out), &r) != nil || r.Content != content {
		t.Errorf("memory show --json: exit %d %s\n%q: want no raw bidi control and the content %q", code, stderr, out, content)
	}
	out, stderr, code = runCLI(t, home, nil, "cron", "list", "--json")
	var jobs []struct {
		Task string `json:"task"`
	}
	if code != 0 || raw(out) || json.Unmarshal([]byte(out), &jobs) != nil || len(jobs) != 1 || jobs[0].Task != task {
		t.Errorf("cron list --json: exit %d %s\n%q: want no raw bidi control and the task %q", code, stderr, out, task)
	}
}

// cron add takes an actor only in its documented form, <channel>:<id>
// (the reply's channel and chat default from it), and no name that is
// another job's ID, which "cron remove <x>" would read as that job.
func TestCronAddRefusesBadActorAndIDName(t *testing.T) {
	home := t.TempDir()
	add := func(name, actor string) (string, string, int) {
		return runCLI(t, home, nil, "cron", "add", "--name", name, "--every", "24h", "--task", "water the figs", "--actor", actor, "--json")
	}
	for _, actor := range []string{"nocolon", "telegram:", ":123", " :1"} {
		_, stderr, code := add("figs", actor)
		if want := `--actor "` + actor + `": want <channel>:<id>, e.g. telegram:123`; code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("--actor %q: exit %d stderr %q, want exit 2 and %q", actor, code, stderr, want)
		}
	}
	out, stderr, code := add("figs", "telegram:123")
	var figs struct {
		ID string `json:"id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &figs) != nil || figs.ID == "" {
		t.Fatalf("cron add: exit %d %s %q", code, stderr, out)
	}
	if _, stderr, code := add(figs.ID, "telegram:5"); code != 2 || !strings.Contains(stderr, `is the ID of another job ("figs" of telegram:123)`) {
		t.Errorf("name %s: exit %d stderr %q, want exit 2: the name is figs's ID", figs.ID, code, stderr)
	}
	out, _, _ = runCLI(t, home, nil, "cron", "list", "--json")
	if n := strings.Count(out, `"id"`); n != 1 {
		t.Errorf("%d jobs listed, want figs alone:\n%s", n, out)
	}
}

// A log line (JSON, off a terminal) carries a user's bidirectional
// controls escaped, and still decodes to the same text.
func TestLogEscapesBidi(t *testing.T) {
	defer slog.SetDefault(slog.Default())
	var b bytes.Buffer
	newLogger(&b, slog.LevelInfo).Info("turn", "text", "hi \u202eevil")
	var line struct {
		Text string `json:"text"`
	}
	if strings.ContainsRune(b.String(), 0x202e) || json.Unmarshal(b.Bytes(), &line) != nil || line.Text != "hi \u202eevil" {
		t.Fatalf("log line %q", b.String())
	}
}
