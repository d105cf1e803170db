package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// With a server running on the home, `tendril invoke` and `tendril chat`
// answer through it (the server holds the home, so an in-process turn
// could not run), and chat shows the reply of a turn that resumes after an
// approval given from another terminal.
func TestE2EInvokeAndChatThroughRunningServer(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	p := startServe(t, testHome(t), openAIEnv(fake)...)

	fake.Push(modeltest.Reply{Text: "Hello from the server."})
	out, stderr, code := runCLI(t, p.Home, nil, "invoke", "--actor", "cli:ana", "--json", "hi there")
	if code != 0 {
		t.Fatalf("invoke: exit %d %s", code, stderr)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(out), &body); err != nil || body["ok"] != true || body["text"] != "Hello from the server." {
		t.Fatalf("invoke --json: %v %q", err, out)
	}
	if len(fake.Requests()) != 1 {
		t.Fatalf("the turn did not reach the server's model")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	chat := exec.CommandContext(ctx, tendrilBinary(t), "chat", "--actor", "cli:ana")
	chat.Env = baseEnv(p.Home)
	stdin, err := chat.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var chatOut syncBuffer
	chat.Stdout, chat.Stderr = &chatOut, &chatOut
	if err := chat.Start(); err != nil {
		t.Fatal(err)
	}
	waitOut := func(what string, re *regexp.Regexp) []string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if m := re.FindStringSubmatch(chatOut.String()); m != nil {
				return m
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("chat never printed %s:\n%s\n--- server:\n%s", what, chatOut.String(), p.logs.String())
		return nil
	}
	waitOut("its banner", regexp.MustCompile(`Tendril chat`))
	fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "notes", Args: `{"action":"add","text":"buy seaweed feed"}`}}},
		modeltest.Reply{Text: "Saved your note about seaweed feed."})
	stdin.Write([]byte("please note: buy seaweed feed\n"))
	m := waitOut("the approval prompt", regexp.MustCompile(`Approve request ([0-9A-Z]{26})`))
	if _, e, code := runCLI(t, p.Home, nil, "approvals", "approve", m[1]); code != 0 {
		t.Fatalf("approve: exit %d %s", code, e)
	}
	waitOut("the resumed reply", regexp.MustCompile(`\[resumed\] Saved your note about seaweed feed\.`))
	n := len(fake.Requests())
	stdin.Write([]byte("/bogus\n"))
	waitOut("the unknown command", regexp.MustCompile(`unknown command /bogus`))
	if len(fake.Requests()) != n {
		t.Fatal("a mistyped /command was sent to the model")
	}
	stdin.Write([]byte("/quit\n"))
	stdin.Close()
	if err := chat.Wait(); err != nil {
		t.Fatalf("chat: %v\n%s", err, chatOut.String())
	}
}

// `tendril dashboard` prints a link to the running server as the server
// gives it: its own address (serve --addr, not this command's default)
// and its own token, which this command's environment lacks. The link
// signs a browser in.
func TestE2EDashboardLinkFromServer(t *testing.T) {
	p := startServe(t, testHome(t), "TENDRIL_AUTH_TOKEN=the-servers-own-token-0123456789")
	out, stderr, code := runCLI(t, p.Home, nil, "dashboard")
	link := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(link, p.URL+"/signin?code=") || stderr != "" {
		t.Fatalf("dashboard: exit %d, link %q (want %s/signin?code=…), stderr %q", code, link, p.URL, stderr)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) == 0 {
		t.Fatalf("the link did not sign in: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
}
