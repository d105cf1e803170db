package telegram

import (
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/config"
)

func TestOptionsFromConfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TENDRIL_HOME", home)
	t.Setenv("TELEGRAM_BOT_TOKEN", "1:tok")
	t.Setenv("TELEGRAM_WEBHOOK_SECRET", "sec")
	t.Setenv("TELEGRAM_API_URL", "http://127.0.0.1:9")
	t.Setenv("TELEGRAM_ALLOWED_CHAT_IDS", "5, -100123")
	cfg, err := config.Load("") // no tendril.json in home: defaults + env
	if err != nil {
		t.Fatal(err)
	}
	o := OptionsFromConfig(cfg.Telegram, home)
	if o.BotToken != "1:tok" || o.WebhookSecret != "sec" || o.APIURL != "http://127.0.0.1:9" || o.Dir != StoreDir(home) {
		t.Fatalf("options %+v", o)
	}
	if len(o.AllowedChatIDs) != 2 || o.AllowedChatIDs[1] != -100123 {
		t.Fatalf("allowed %v", o.AllowedChatIDs)
	}
	if o.AlbumDebounce != 2*time.Second {
		t.Fatalf("album debounce %v", o.AlbumDebounce)
	}
}
