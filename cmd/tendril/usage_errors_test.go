package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewUserUsageErrors: mistakes a new user makes are usage errors (exit
// 2) that say what is wrong: an unknown command prints cobra's suggestion
// readably; an empty ID argument is named, not sent as a request for the
// collection; a job whose runs would all fail, or that has no name, is
// refused when added.
func TestNewUserUsageErrors(t *testing.T) {
	home := t.TempDir()
	_, stderr, code := runCLI(t, home, nil, "sessions")
	if code != 2 || !strings.Contains(stderr, "unknown command \"sessions\" for \"tendril\"\n\nDid you mean this?\n\tsession\n") ||
		strings.Contains(stderr, `\x09`) || strings.Contains(stderr, "; ;") {
		t.Errorf("sessions: exit %d stderr %q, want cobra's suggestion on its own lines", code, stderr)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"memory", "show", ""}, "record ID is required"},
		{[]string{"session", "show", ""}, "session key is required"},
		{[]string{"session", "export", " "}, "session key is required"},
		{[]string{"session", "branch", "", "--from", "msg_1"}, "session key is required"},
		{[]string{"cron", "history", ""}, "job ID or name is required"},
		{[]string{"cron", "remove", ""}, "job ID or name is required"},
		{[]string{"cron", "pause", ""}, "job ID or name is required"},
		{[]string{"cron", "add", "--name", "x", "--every", "5m", "--task", "x", "--actor", "api:a~b"}, `actor contains "~"`},
		{[]string{"cron", "add", "--name", "", "--every", "5m", "--task", "x", "--actor", "api:a"}, "--name"},
	} {
		_, stderr, code := runCLI(t, home, nil, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "no such endpoint") {
			t.Errorf("%q: exit %d stderr %q, want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if out, _, code := runCLI(t, home, nil, "cron", "list"); code != 0 || !strings.Contains(out, "no scheduled jobs") {
		t.Errorf("refused jobs were added: exit %d\n%s", code, out)
	}
}

// TestDoctorRefusesWhatServeRefuses: a session.retention value serve
// cannot parse fails doctor too, naming the key, and so does a GOGC,
// collector headroom or AUTOMEMLIMIT that serve refuses (as a failed
// check in the report).
func TestDoctorRefusesWhatServeRefuses(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{`{"session":{"retention":{"maxAge":"30x"}}}`, `session.retention.maxAge: bad age "30x"`},
		{`{"session":{"retention":{"maxAge":"-3d"}}}`, `session.retention.maxAge: bad age "-3d"`},
		{`{"session":{"retention":{"maxSize":"lots"}}}`, `session.retention.maxSize: bad size "lots"`},
	} {
		home := t.TempDir()
		os.WriteFile(filepath.Join(home, "tendril.json"), []byte(tc.file), 0o600)
		for _, args := range [][]string{{"doctor"}, {"serve", "--addr", "127.0.0.1:0"}} {
			if _, stderr, code := runCLI(t, home, nil, args...); code != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("%s %v: exit %d stderr %q, want exit 1 and %q", tc.file, args, code, stderr, tc.want)
			}
		}
	}
	// The Go runtime's variables serve checks itself: serve refuses to
	// start, and doctor reports a failed "runtime env" check beside the
	// others (the rest of the report still shown) and exits 1.
	for _, tc := range []struct{ env, want string }{
		{"GOGC=abc", `GOGC="abc": want off or a whole number`},
		{gcHeadroomEnv + "=0", gcHeadroomEnv + `="0": want a whole number`},
		{"AUTOMEMLIMIT=2", `AUTOMEMLIMIT="2": want off or a ratio`},
	} {
		home := t.TempDir()
		if _, stderr, code := runCLI(t, home, []string{tc.env}, "serve", "--addr", "127.0.0.1:0"); code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s serve: exit %d stderr %q, want exit 1 and %q", tc.env, code, stderr, tc.want)
		}
		out, _, code := runCLI(t, home, []string{tc.env}, "doctor")
		if code != 1 || !strings.Contains(out, "runtime env") || !strings.Contains(out, tc.want) || !strings.Contains(out, "Effective configuration") {
			t.Errorf("%s doctor: exit %d\n%s\nwant exit 1 and the report with a failed runtime env check saying %q", tc.env, code, out, tc.want)
		}
	}
}

// A table cell shows control characters and bidirectional overrides
// escaped: a U+202E in a tool's arguments or a job's name would otherwise
// reorder the rest of the terminal line.
func TestClipEscapesControlAndBidi(t *testing.T) {
	got := clip("note \u202eevil\x1b[2J\nnext", 80)
	if strings.ContainsRune(got, 0x202e) || strings.ContainsRune(got, 0x1b) || strings.ContainsRune(got, '\n') {
		t.Fatalf("clip left a control or bidi character: %q", got)
	}
	if !strings.Contains(got, `\u202e`) || !strings.Contains(got, `\x1b`) {
		t.Fatalf("clip = %q, want the characters shown escaped", got)
	}
	if got := clip("plain  text", 80); got != "plain text" {
		t.Fatalf("clip(plain) = %q", got)
	}
}
