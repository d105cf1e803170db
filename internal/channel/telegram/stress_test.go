package telegram

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/channel/telegram/telegramtest"
	"github.com/tendrilai/tendril/internal/testenv"
)

// slowInvoker answers "echo: <message>" after a random delay, some turns
// far longer than the lease TTL (renewal must keep the chat), and counts
// how often each message was run.
type slowInvoker struct {
	mu    sync.Mutex
	runs  map[string]int
	rnd   *rand.Rand
	long  time.Duration
	turns atomic.Int64
}

func (s *slowInvoker) Invoke(ctx context.Context, req agent.Request) (*agent.Result, error) {
	s.mu.Lock()
	s.runs[req.Message]++
	d := time.Duration(s.rnd.IntN(8)) * time.Millisecond
	if s.rnd.IntN(20) == 0 {
		d = s.long
	}
	s.mu.Unlock()
	s.turns.Add(1)
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &agent.Result{Text: "echo: " + req.Message}, nil
}

// TestInstancesStressExactlyOnce: three instances on one database, many
// chats, every update posted to a random instance and one in ten posted
// to a second instance at the same moment, a slow Bot API, slow turns
// (some several lease TTLs long), short leases and a busy CPU. No instance
// dies, so every update is run once and answered once, in update_id order.
func TestInstancesStressExactlyOnce(t *testing.T) {
	url := testenv.PostgresSchema(t)
	srv := telegramtest.New(t)
	const ttl = 150 * time.Millisecond
	var latMu sync.Mutex
	latRnd := rand.New(rand.NewPCG(7, 7))
	srv.SetLatency(func(method string) time.Duration {
		latMu.Lock()
		defer latMu.Unlock()
		if latRnd.IntN(25) == 0 {
			return 2 * ttl // slower than the lease lasts
		}
		return time.Duration(latRnd.IntN(4)) * time.Millisecond
	})
	chats, perChat := 25, 20
	if testing.Short() {
		chats, perChat = 8, 8
	}
	var allowed []int64
	for c := range chats {
		allowed = append(allowed, int64(71000+c))
	}
	inv := &slowInvoker{runs: map[string]int{}, rnd: rand.New(rand.NewPCG(1, 2)), long: 3 * ttl}
	var inst []*Channel
	for range 3 {
		ch, err := New(Options{
			BotToken: telegramtest.Token, WebhookSecret: testSecret, APIURL: srv.URL,
			Store:          openPostgres(t, url),
			AllowedChatIDs: allowed,
			BotUsername:    "tendril_bot",
			PollInterval:   50 * time.Millisecond,
			LeaseTTL:       ttl,
			TypingInterval: time.Hour,
			Logger:         slog.New(slog.NewTextHandler(testLogOut(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		}, Deps{Invoker: inv})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ch.Close() })
		if err := ch.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		inst = append(inst, ch)
	}

	// A busy CPU: the scheduler delays every goroutine a little.
	stop := make(chan struct{})
	var burn sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		burn.Add(1)
		go func() {
			defer burn.Done()
			for x := 0; ; x++ {
				select {
				case <-stop:
					return
				default:
				}
				for i := 0; i < 1e5; i++ {
					x ^= i
				}
			}
		}()
	}
	defer func() { close(stop); burn.Wait() }()

	var wg sync.WaitGroup
	for c := range chats {
		chat := int64(71000 + c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(chat), 3))
			for k := range perChat {
				body := textUpdate(chat*1000+int64(k), chat, chat, fmt.Sprintf("c%d m%d", chat, k))
				first := r.IntN(len(inst))
				if r.IntN(10) == 0 { // the same update at two instances at once
					second := (first + 1 + r.IntN(len(inst)-1)) % len(inst)
					var dup sync.WaitGroup
					for _, i := range []int{first, second} {
						dup.Add(1)
						go func() { defer dup.Done(); deliver(t, inst[i], body) }()
					}
					dup.Wait()
				} else {
					deliver(t, inst[first], body)
				}
				time.Sleep(time.Duration(r.IntN(3)) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	srv.WaitFor(t, 60*time.Second, "every update processed", func() bool {
		n, err := inst[0].store.Pending(context.Background())
		return err == nil && n == 0
	})
	for _, ch := range inst {
		ch.Stop(context.Background())
	}
	for c := range chats {
		chat := int64(71000 + c)
		var got, want []string
		for _, m := range srv.Messages(chat) {
			got = append(got, m.Text)
		}
		for k := range perChat {
			want = append(want, fmt.Sprintf("echo: c%d m%d", chat, k))
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("chat %d replies (%d, want %d):\n%s", chat, len(got), perChat, strings.Join(got, "\n"))
		}
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for msg, n := range inv.runs {
		if n != 1 {
			t.Errorf("turn %q ran %d times, want once", msg, n)
		}
	}
	t.Logf("%d turns for %d updates", inv.turns.Load(), chats*perChat)
}
