package telegram

import (
	"time"

	"github.com/tendrilai/tendril/internal/config"
)

// OptionsFromConfig maps tendril.json's telegram section (with its
// environment overrides: TELEGRAM_BOT_TOKEN, TELEGRAM_WEBHOOK_SECRET,
// TELEGRAM_API_URL, TELEGRAM_ALLOWED_CHAT_IDS) onto Options, with the store
// in StoreDir(home). Clock, HTTPClient and Logger are left for the caller.
func OptionsFromConfig(c config.TelegramConfig, home string) Options {
	return Options{
		BotToken:       c.BotToken,
		WebhookSecret:  c.WebhookSecret,
		APIURL:         c.APIURL,
		Dir:            StoreDir(home),
		AllowedChatIDs: append([]int64(nil), c.AllowedChatIDs...),
		BotUsername:    c.BotUsername,
		GroupReplyAll:  c.GroupReplyAll,
		AlbumDebounce:  time.Duration(c.AlbumDebounce),
	}
}
