package telegram_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/channel/telegram"
	"github.com/tendrilai/tendril/internal/channel/telegram/telegramtest"
	"github.com/tendrilai/tendril/internal/pg"
)

type shout struct{}

func (shout) Invoke(_ context.Context, req agent.Request) (*agent.Result, error) {
	return &agent.Result{Text: "**Noted:** " + req.Message}, nil
}

// Wiring the channel: construct it, mount its handler at WebhookPath, start
// it. Here the Bot API is the fake from telegramtest.
func Example() {
	api := telegramtest.NewServer()
	defer api.Close()
	dir, _ := os.MkdirTemp("", "tg-example")
	defer os.RemoveAll(dir)

	ch, err := telegram.New(telegram.Options{
		BotToken:       telegramtest.Token,
		WebhookSecret:  "hook-secret",
		APIURL:         api.URL, // TELEGRAM_API_URL
		Dir:            dir,     // telegram.StoreDir(cfg.Home)
		AllowedChatIDs: []int64{70001},
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, telegram.Deps{Invoker: shout{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ch.Close()
	mux := http.NewServeMux()
	mux.Handle("POST "+telegram.WebhookPath, ch.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	if err := ch.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}

	update := telegramtest.TextUpdate(1, 70001, 70001, "Dana", "water the figs at 7", time.Now())
	status, _ := telegramtest.PostUpdate(context.Background(), srv.URL+telegram.WebhookPath, "hook-secret", update)
	fmt.Println("webhook:", status)
	for range 200 {
		if msgs := api.Messages(70001); len(msgs) > 0 {
			fmt.Println("sent:", msgs[0].Text)
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	// Output:
	// webhook: 200
	// sent: <b>Noted:</b> water the figs at 7
}

// With TENDRIL_DATABASE_URL set, every instance opens the store on the
// process's one pool and hands it to New; the caller closes the store after
// the channel. (Not run: it needs a PostgreSQL server.)
func ExampleOpenPostgresStore() {
	ctx := context.Background()
	pool, err := pg.Open(ctx, os.Getenv("TENDRIL_DATABASE_URL"), pg.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	st, err := telegram.OpenPostgresStore(ctx, pool) // applies telegram.Migrations()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close() // leaves pool open
	ch, err := telegram.New(telegram.Options{
		BotToken:      os.Getenv("TELEGRAM_BOT_TOKEN"),
		WebhookSecret: os.Getenv("TELEGRAM_WEBHOOK_SECRET"),
		Store:         st, // instead of Dir: nothing is written to $TENDRIL_HOME
	}, telegram.Deps{Invoker: shout{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ch.Close()
	_ = ch.Start(ctx)
}
