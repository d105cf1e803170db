package main

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// approveRequestRE finds the request ID in a paused turn's reply.
var approveRequestRE = regexp.MustCompile(`Approve request ([0-9A-Z]{26})`)

// waitFor polls out until re matches (the deadline only guards against a
// hang) and returns the match.
func waitFor(t *testing.T, what string, out *syncBuffer, re *regexp.Regexp, more func() string) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("never printed %s:\n%s\n%s", what, out.String(), more())
	return nil
}

// `tendril invoke` sent to a session whose earlier turn is paused at the
// approval gate says on stderr which approval it waits for, once, instead
// of waiting silently; approving it lets the invoke finish with its own
// answer on stdout.
func TestE2EInvokeShowsApprovalWait(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	p := startServe(t, testHome(t), openAIEnv(fake)...)

	fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "notes", Args: `{"text":"Sowed basil","action":"add"}`}}})
	_, stderr, code := runCLI(t, p.Home, nil, "invoke", "--actor", "cli:pia", "note: sowed basil")
	m := approveRequestRE.FindStringSubmatch(stderr)
	if code != 1 || m == nil || !strings.Contains(stderr, "APPROVAL_PENDING") {
		t.Fatalf("pausing invoke: exit %d %q", code, stderr)
	}
	id := m[1]
	if strings.Contains(stderr, "waiting for approval") {
		t.Fatalf("a turn's own pause was reported as a wait: %q", stderr)
	}
	if !strings.Contains(stderr, "— approve with: tendril approvals approve "+id+" (or deny)") {
		t.Fatalf("the pausing invoke does not say how to approve: %q", stderr)
	}

	fake.Push(modeltest.Reply{Text: "Saved: sowed basil."}, modeltest.Reply{Text: "Hello again!"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, tendrilBinary(t), "invoke", "--actor", "cli:pia", "hello again")
	cmd.Env = baseEnv(p.Home)
	var out, errOut syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	line := "waiting for approval " + id + `: notes {"action":"add","text":"Sowed basil"} — approve with: tendril approvals approve ` + id + " (or deny)\n"
	waitFor(t, "the approval it waits for", &errOut, regexp.MustCompile(regexp.QuoteMeta(line)), p.logs.String)
	select {
	case err := <-done:
		t.Fatalf("invoke finished before the approval: %v\nstdout %q\nstderr %q", err, out.String(), errOut.String())
	default:
	}
	if out.String() != "" || errOut.String() != line {
		t.Fatalf("while waiting: stdout %q, stderr %q; want stderr %q", out.String(), errOut.String(), line)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("the waiting message reached the model before the approval: %d requests", n)
	}

	if _, e, code := runCLI(t, p.Home, nil, "approvals", "approve", id); code != 0 {
		t.Fatalf("approve: exit %d %s", code, e)
	}
	if err := <-done; err != nil {
		t.Fatalf("invoke: %v\nstdout %q\nstderr %q\n%s", err, out.String(), errOut.String(), p.logs.String())
	}
	if out.String() != "Hello again!\n" {
		t.Fatalf("stdout %q, want the answer", out.String())
	}
	if want := line + "approval " + id + " approved: the paused notes call runs, then this message\n"; errOut.String() != want {
		t.Fatalf("stderr %q, want the wait line and the decision %q", errOut.String(), want)
	}
	if last := fake.Requests()[2].LastUserText(); last != "hello again" {
		t.Fatalf("the waiting turn's user text %q", last)
	}
	wellFormed(t, sessionNodes(t, p.URL, "cli:pia"))
}

// `tendril chat` running in-process (no server) says on stderr which
// approval a message waits for when the chat's earlier turn is paused;
// approving it from another terminal prints the resumed reply and then the
// answer to the waiting message.
func TestE2EChatShowsApprovalWait(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	home := testHome(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	chat := exec.CommandContext(ctx, tendrilBinary(t), "chat", "--actor", "cli:cha")
	chat.Env = append(baseEnv(home), openAIEnv(fake)...)
	stdin, err := chat.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut syncBuffer
	chat.Stdout, chat.Stderr = &out, &errOut
	if err := chat.Start(); err != nil {
		t.Fatal(err)
	}
	defer chat.Process.Kill()
	stderr := func() string { return "--- stderr:\n" + errOut.String() }
	waitFor(t, "its banner", &out, regexp.MustCompile(`Tendril chat`), stderr)

	fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "notes", Args: `{"action":"add","text":"buy seaweed feed"}`}}},
		modeltest.Reply{Text: "Saved your note about seaweed feed."}, modeltest.Reply{Text: "You're welcome!"})
	stdin.Write([]byte("please note: buy seaweed feed\n"))
	id := waitFor(t, "the approval prompt", &out, approveRequestRE, stderr)[1]
	stdin.Write([]byte("thanks\n"))
	line := "waiting for approval " + id + `: notes {"action":"add","text":"buy seaweed feed"} — approve with: tendril approvals approve ` + id + " (or deny)\n"
	waitFor(t, "the approval it waits for", &errOut, regexp.MustCompile(regexp.QuoteMeta(line)), out.String)
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("the waiting message reached the model before the approval: %d requests", n)
	}

	if _, e, code := runCLI(t, home, nil, "approvals", "approve", id); code != 0 {
		t.Fatalf("approve: exit %d %s", code, e)
	}
	waitFor(t, "the resumed reply", &out, regexp.MustCompile(`\[resumed\] Saved your note about seaweed feed\.`), stderr)
	waitFor(t, "the answer", &out, regexp.MustCompile(`You're welcome!`), stderr)
	stdin.Write([]byte("/quit\n"))
	stdin.Close()
	if err := chat.Wait(); err != nil {
		t.Fatalf("chat: %v\n%s%s", err, out.String(), stderr())
	}
	if want := line + "approval " + id + " approved: the paused notes call runs, then this message\n"; errOut.String() != want {
		t.Fatalf("stderr %q, want the wait line and the decision %q", errOut.String(), want)
	}
}
