package telegramtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// TextUpdate returns a Bot API Update holding a text message from userID in
// chatID (a private chat when chatID > 0, else a supergroup), dated at.
func TextUpdate(updateID, chatID, userID int64, firstName, text string, at time.Time) []byte {
	chatType := "private"
	if chatID < 0 {
		chatType = "supergroup"
	}
	b, _ := json.Marshal(map[string]any{
		"update_id": updateID,
		"message": map[string]any{
			"message_id": updateID % 1_000_000_000,
			"date":       at.Unix(),
			"from":       map[string]any{"id": userID, "is_bot": false, "first_name": firstName},
			"chat":       map[string]any{"id": chatID, "type": chatType, "first_name": firstName},
			"text":       text,
		},
	})
	return b
}

// PostUpdate delivers body to a webhook URL the way Telegram does, with the
// X-Telegram-Bot-Api-Secret-Token header, and returns the HTTP status.
func PostUpdate(ctx context.Context, webhookURL, secret string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, webhookURL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("post update: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// Plain returns the text a user sees: the HTML tags stripped and entities
// resolved (or the text itself when it was sent without parse_mode).
func (m Message) Plain() string {
	if m.ParseMode == "" {
		return m.Text
	}
	t, err := ValidateHTML(m.Text)
	if err != nil {
		return m.Text
	}
	return t
}
