package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/channel/telegram"
	"github.com/tendrilai/tendril/internal/channel/telegram/telegramtest"
	"github.com/tendrilai/tendril/internal/mgmt"
)

func TestPairingCLI(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	st, err := telegram.OpenStore(telegram.StoreDir(home))
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := st.RequestPairing(context.Background(), 80001, 80001, "Dana", time.Now(), time.Hour, 3)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()

	out, err := runTendril(t, home, "pairing", "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var list []telegram.Pairing
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 || list[0].Code != p.Code {
		t.Fatalf("pairing list --json = %s (%v)", out, err)
	}
	if _, err := runTendril(t, home, "pairing", "approve", "short"); !errors.As(err, new(usageError)) {
		t.Fatalf("bad code: %v, want a usage error", err)
	}
	out, err = runTendril(t, home, "pairing", "approve", strings.ToLower(p.Code))
	if err != nil || !strings.Contains(out, "chat 80001") {
		t.Fatalf("approve: %q %v", out, err)
	}
	if _, err := runTendril(t, home, "pairing", "approve", p.Code); !mgmt.IsStatus(err, 404) {
		t.Fatalf("approving twice: %v", err)
	}
	out, _ = runTendril(t, home, "pairing", "list")
	if !strings.Contains(out, "No pending") {
		t.Fatalf("list after approval: %q", out)
	}
}

func TestTelegramSetWebhookCLI(t *testing.T) {
	srv := telegramtest.New(t)
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	t.Setenv("TELEGRAM_BOT_TOKEN", telegramtest.Token)
	t.Setenv("TELEGRAM_API_URL", srv.URL)
	t.Setenv("TELEGRAM_WEBHOOK_SECRET", "")
	if _, err := runTendril(t, home, "telegram", "set-webhook", "--url", "https://bot.example.com/telegram/webhook"); !errors.Is(err, telegram.ErrNoSecret) {
		t.Fatalf("without secret: %v", err)
	}
	if _, err := runTendril(t, home, "telegram", "set-webhook"); !errors.As(err, new(usageError)) {
		t.Fatalf("without --url: %v", err)
	}
	t.Setenv("TELEGRAM_WEBHOOK_SECRET", "hook-secret")
	if _, err := runTendril(t, home, "telegram", "set-webhook", "--url", "https://bot.example.com/telegram/webhook", "--drop-pending"); err != nil {
		t.Fatal(err)
	}
	calls := srv.Calls("setWebhook")
	if len(calls) != 1 {
		t.Fatalf("setWebhook calls %+v", calls)
	}
	p := calls[0].Params
	if p["url"] != "https://bot.example.com/telegram/webhook" || p["secret_token"] != "hook-secret" || p["drop_pending_updates"] != "true" || !strings.Contains(p["allowed_updates"], "callback_query") {
		t.Fatalf("setWebhook params %v", p)
	}
}
