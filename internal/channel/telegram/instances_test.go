package telegram

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/channel/telegram/telegramtest"
	"github.com/tendrilai/tendril/internal/pg"
	"github.com/tendrilai/tendril/internal/testenv"
)

// Several `tendril serve` instances on one PostgreSQL database (SPEC §9):
// each test opens Channels with their own pools on one schema, against one
// fake Bot API, as instances behind a load balancer would run.

// chatTracker is the agent of every instance: it records, per chat, the
// order of turns and whether two turns of one chat ever overlapped.
type chatTracker struct {
	mu      sync.Mutex
	active  map[any]int
	overlap []string
	order   map[any][]string
}

func (c *chatTracker) Invoke(ctx context.Context, req agent.Request) (*agent.Result, error) {
	chat := req.Metadata["telegram_chat_id"]
	c.mu.Lock()
	c.active[chat]++
	if c.active[chat] > 1 {
		c.overlap = append(c.overlap, fmt.Sprintf("chat %v: %q while another turn ran", chat, req.Message))
	}
	c.order[chat] = append(c.order[chat], req.Message)
	c.mu.Unlock()
	// Give a concurrent turn of the same chat, if the lease failed to
	// exclude it, a chance to show up.
	select {
	case <-time.After(3 * time.Millisecond):
	case <-ctx.Done():
	}
	c.mu.Lock()
	c.active[chat]--
	c.mu.Unlock()
	return &agent.Result{Text: "echo: " + req.Message}, nil
}

type instanceOpts struct {
	pollInterval time.Duration
	leaseTTL     time.Duration
}

// openInstance opens a Channel on its own pool to url.
func openInstance(t *testing.T, url, api string, inv agent.Invoker, o instanceOpts) *Channel {
	t.Helper()
	ch, err := New(Options{
		BotToken: telegramtest.Token, WebhookSecret: testSecret, APIURL: api,
		Store:          openPostgres(t, url),
		AllowedChatIDs: []int64{70001, 70002, 70003, 70004},
		BotUsername:    "tendril_bot",
		PollInterval:   o.pollInterval,
		LeaseTTL:       o.leaseTTL,
		Logger:         slog.New(slog.NewTextHandler(testLogOut(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}, Deps{Invoker: inv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

func deliver(t *testing.T, ch *Channel, body string) int {
	req := httptest.NewRequest(http.MethodPost, WebhookPath, strings.NewReader(body))
	req.Header.Set(SecretHeader, testSecret)
	rec := httptest.NewRecorder()
	ch.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("webhook answered %d: %s", rec.Code, rec.Body)
	}
	return rec.Code
}

// TestInstancesShareChats: every update is delivered to two instances at
// once (a retried webhook landing on another instance). Each is answered
// exactly once, each chat's turns run one at a time, in update_id order.
func TestInstancesShareChats(t *testing.T) {
	url := testenv.PostgresSchema(t)
	srv := telegramtest.New(t)
	inv := &chatTracker{active: map[any]int{}, order: map[any][]string{}}
	a := openInstance(t, url, srv.URL, inv, instanceOpts{})
	b := openInstance(t, url, srv.URL, inv, instanceOpts{})
	for _, ch := range []*Channel{a, b} {
		if err := ch.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	chats := []int64{70001, 70002, 70003, 70004}
	const perChat = 12
	want := map[int64][]string{}
	for _, chat := range chats {
		for i := range perChat {
			want[chat] = append(want[chat], fmt.Sprintf("c%d m%d", chat, i))
		}
	}
	var wg sync.WaitGroup
	for ci, chat := range chats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Telegram sends one chat's updates in update_id order; both
			// instances get each one concurrently.
			for i := range perChat {
				id := int64(1000 + i*len(chats) + ci)
				body := textUpdate(id, chat, chat, want[chat][i])
				var dup sync.WaitGroup
				for _, ch := range []*Channel{a, b} {
					dup.Add(1)
					go func() { defer dup.Done(); deliver(t, ch, body) }()
				}
				dup.Wait()
			}
		}()
	}
	wg.Wait()
	for _, chat := range chats {
		msgs := srv.WaitMessages(t, chat, perChat)
		var got []string
		for _, m := range msgs {
			got = append(got, strings.TrimPrefix(m.Text, "echo: "))
		}
		if fmt.Sprint(got) != fmt.Sprint(want[chat]) {
			t.Errorf("chat %d replies:\n got %q\nwant %q", chat, got, want[chat])
		}
	}
	// Everything is processed: nothing pending, and no late duplicates.
	srv.WaitFor(t, 20*time.Second, "no pending updates", func() bool {
		n, err := a.store.Pending(context.Background())
		return err == nil && n == 0
	})
	a.Stop(context.Background())
	b.Stop(context.Background())
	for _, chat := range chats {
		if n := len(srv.Messages(chat)); n != perChat {
			t.Errorf("chat %d got %d replies, want %d (one per update)", chat, n, perChat)
		}
		if got := inv.order[chat]; len(got) != perChat {
			t.Errorf("chat %d had %d turns, want %d", chat, len(got), perChat)
		}
	}
	if len(inv.overlap) > 0 {
		t.Errorf("turns of one chat overlapped across instances: %v", inv.overlap)
	}
}

// TestNotifyWakesTheOtherInstance: an update accepted by an instance that
// does not process (not started) is processed by another one, woken by
// NOTIFY; its fallback scan is set far beyond the test's span, so only the
// notification can deliver it.
func TestNotifyWakesTheOtherInstance(t *testing.T) {
	// Its own application_name: the LISTEN waited for is this test's
	// worker's, not another test binary's on the same server.
	app := "tg-notify-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	url := testenv.WithApplicationName(testenv.PostgresSchema(t), app)
	srv := telegramtest.New(t)
	inv := &chatTracker{active: map[any]int{}, order: map[any][]string{}}
	worker := openInstance(t, url, srv.URL, inv, instanceOpts{pollInterval: time.Hour})
	ingress := openInstance(t, url, srv.URL, inv, instanceOpts{})
	if err := worker.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The worker's initial scan found nothing; wait until it listens: its
	// LISTEN finished (idle after it), not only started, since a NOTIFY
	// sent before the LISTEN commits is not delivered to it.
	srv.WaitFor(t, 20*time.Second, "worker listening", func() bool {
		var n int
		err := worker.store.db.QueryRowContext(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN `+notifyChannel+`' AND state = 'idle'
			AND datname = current_database() AND application_name = $1`, app).Scan(&n)
		return err == nil && n > 0
	})
	deliver(t, ingress, textUpdate(2000, 70001, 70001, "ping via notify"))
	msgs := srv.WaitMessages(t, 70001, 1)
	if msgs[0].Text != "echo: ping via notify" {
		t.Fatalf("reply %q", msgs[0].Text)
	}
}

// TestKill9InstanceChatTakenOver: an instance is killed with SIGKILL in
// the middle of a turn, holding the chat's lease. The lease ends with the
// killed process's database session; another instance on the same
// database takes the chat over and answers the acknowledged update;
// nothing is lost and the chat is not stranded.
func TestKill9InstanceChatTakenOver(t *testing.T) {
	if url := os.Getenv("TENDRIL_TG_CHILD_PG"); url != "" {
		runPGChild(t, url, os.Getenv("TENDRIL_TG_CHILD_API"))
		return
	}
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	url := testenv.PostgresSchema(t)
	srv := telegramtest.New(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9InstanceChatTakenOver$", "-test.v")
	cmd.Env = append(os.Environ(), "TENDRIL_TG_CHILD_PG="+url, "TENDRIL_TG_CHILD_API="+srv.URL)
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
	for i, text := range []string{"first", "second"} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+WebhookPath, strings.NewReader(textUpdate(int64(3000+i), 70001, 70001, text)))
		req.Header.Set(SecretHeader, testSecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("child answered %d", resp.StatusCode)
		}
	}
	// The child's turn has begun (it shows "typing" first): it holds the
	// chat's lease. Kill it there.
	srv.WaitFor(t, 20*time.Second, "child turn started", func() bool { return len(srv.Calls("sendChatAction")) > 0 })
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if n := len(srv.Messages(70001)); n != 0 {
		t.Fatalf("child replied before being killed (%d messages)", n)
	}
	// The lease was an advisory lock of the killed process's session: the
	// server frees it when that session's socket closes, without waiting
	// for a TTL.
	pool, err := pg.Open(context.Background(), url, pg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	srv.WaitFor(t, 20*time.Second, "the killed instance's chat lock freed", func() bool {
		var locks int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1
			AND (CAST(classid AS BIGINT) << 32) + CAST(objid AS BIGINT) = $1`, chatLockKey(70001)).Scan(&locks)
		return err == nil && locks == 0
	})

	inv := &chatTracker{active: map[any]int{}, order: map[any][]string{}}
	survivor := openInstance(t, url, srv.URL, inv, instanceOpts{pollInterval: 100 * time.Millisecond, leaseTTL: 2 * time.Second})
	if err := survivor.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	msgs := srv.WaitMessages(t, 70001, 2)
	if msgs[0].Text != "echo: first" || msgs[1].Text != "echo: second" {
		t.Fatalf("replies after takeover %q, %q", msgs[0].Text, msgs[1].Text)
	}
}

func runPGChild(t *testing.T, url, api string) {
	ctx := context.Background()
	pool, err := pg.Open(ctx, url, pg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := OpenPostgresStore(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := New(Options{BotToken: telegramtest.Token, WebhookSecret: testSecret, APIURL: api, Store: st,
		AllowedChatIDs: []int64{70001}, LeaseTTL: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, Deps{Invoker: blockingInvoker{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Start(ctx); err != nil {
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

// TestProcessChatRunsOneChat: ProcessChat, the body a per-chat job would
// run, processes a chat's pending updates without the channel's workers,
// and asks to be called again while an album is inside its debounce window.
func TestProcessChatRunsOneChat(t *testing.T) {
	h := newHarness(t, nil) // not started: no workers
	h.post(textUpdate(1, 70001, 70001, "first"))
	h.post(textUpdate(2, 70001, 70001, "second"))
	ctx := context.Background()
	if retry := h.ch.ProcessChat(ctx, 70001); retry != 0 {
		t.Fatalf("ProcessChat = %v, want 0 (drained)", retry)
	}
	msgs := h.srv.Messages(70001)
	if len(msgs) != 2 || msgs[0].Text != "echo: first" || msgs[1].Text != "echo: second" {
		t.Fatalf("replies %+v", msgs)
	}
	album := `{"update_id": 3, "message": {"message_id": 3, "date": 1, "media_group_id": "G9",
		"photo": [{"file_id": "AgACAgIAAxkBAAIalbum1", "file_size": 90000, "width": 1280, "height": 960}],
		"from": {"id": 70001, "first_name": "D"}, "chat": {"id": 70001, "type": "private"}}}`
	h.post(album)
	if retry := h.ch.ProcessChat(ctx, 70001); retry != DefaultAlbumDebounce {
		t.Fatalf("ProcessChat inside the album window = %v, want %v", retry, DefaultAlbumDebounce)
	}
	if s, _, _ := h.ch.store.updateState(ctx, 3); s != statePending {
		t.Fatalf("album part state %q before its window ended, want pending", s)
	}
}
