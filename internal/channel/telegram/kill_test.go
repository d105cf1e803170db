package telegram

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/channel/telegram/telegramtest"
)

type blockingInvoker struct{}

func (blockingInvoker) Invoke(ctx context.Context, _ agent.Request) (*agent.Result, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestKill9AfterAck runs the webhook in a child process, kills it with
// SIGKILL right after it answered 200, and checks that a new process on the
// same store answers the update.
func TestKill9AfterAck(t *testing.T) {
	if dir := os.Getenv("TENDRIL_TG_CHILD_DIR"); dir != "" {
		runChild(t, dir, os.Getenv("TENDRIL_TG_CHILD_API"))
		return
	}
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	srv := telegramtest.New(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9AfterAck$", "-test.v")
	cmd.Env = append(os.Environ(), "TENDRIL_TG_CHILD_DIR="+dir, "TENDRIL_TG_CHILD_API="+srv.URL)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	addr := ""
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "LISTEN "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		t.Fatal("child did not report its address")
	}
	go io.Copy(io.Discard, out)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+WebhookPath, strings.NewReader(textUpdate(700, 70001, 70001, "survive the crash")))
	req.Header.Set(SecretHeader, testSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("child answered %d", resp.StatusCode)
	}
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if n := len(srv.Messages(70001)); n != 0 {
		t.Fatalf("child replied before being killed (%d messages)", n)
	}

	inv := &fakeInvoker{}
	ch, err := New(Options{BotToken: telegramtest.Token, WebhookSecret: testSecret, APIURL: srv.URL, Dir: dir,
		AllowedChatIDs: []int64{70001}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, Deps{Invoker: inv})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	msgs := srv.WaitMessages(t, 70001, 1)
	if msgs[0].Text != "echo: survive the crash" {
		t.Fatalf("reply after restart %q", msgs[0].Text)
	}
}

func runChild(t *testing.T, dir, api string) {
	ch, err := New(Options{BotToken: telegramtest.Token, WebhookSecret: testSecret, APIURL: api, Dir: dir,
		AllowedChatIDs: []int64{70001}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, Deps{Invoker: blockingInvoker{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("LISTEN " + ln.Addr().String() + "\n")
	go http.Serve(ln, ch.Handler())
	time.Sleep(time.Minute) // killed by the parent long before
}
