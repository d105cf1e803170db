package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/channel/telegram/telegramtest"
	"github.com/tendrilai/tendril/internal/model/modeltest"
)

func callbackUpdate(updateID, chatID, userID int64, messageID int, data string) []byte {
	return []byte(fmt.Sprintf(`{"update_id":%d,"callback_query":{"id":"cb%d","from":{"id":%d,"is_bot":false,"first_name":"Dana"},`+
		`"message":{"message_id":%d,"chat":{"id":%d,"type":"private"},"date":%d,"text":"approve?"},"chat_instance":"ci","data":%q}}`,
		updateID, updateID, userID, messageID, chatID, time.Now().Unix(), data))
}

// A write tool called in a Telegram chat is sent as a message with Approve
// and Deny buttons; pressing Approve decides the exact request through the
// gate, the tool runs and the finished turn replies in the chat.
func TestE2ETelegramApprovalButtons(t *testing.T) {
	bot := telegramtest.New(t)
	fake := modeltest.NewOpenAI(t)
	const secret = "s3cret-webhook"
	p := startServe(t, testHome(t), append(openAIEnv(fake),
		"TELEGRAM_BOT_TOKEN="+telegramtest.Token, "TELEGRAM_WEBHOOK_SECRET="+secret, "TELEGRAM_API_URL="+bot.URL,
		"TELEGRAM_ALLOWED_CHAT_IDS=7001")...)
	hook := p.URL + "/telegram/webhook"
	post := func(body []byte) {
		t.Helper()
		if st, err := telegramtest.PostUpdate(context.Background(), hook, secret, body); err != nil || st != 200 {
			t.Fatalf("webhook: %d %v", st, err)
		}
	}
	fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: "notes", Args: `{"action":"add","text":"Fed the roses with seaweed"}`}}})
	post(telegramtest.TextUpdate(1, 7001, 7001, "Dana", "note: fed the roses with seaweed", time.Now()))
	msgs := bot.WaitMessages(t, 7001, 2)
	var prompt telegramtest.Message
	for _, m := range msgs {
		if len(m.Buttons()) > 0 {
			prompt = m
		}
	}
	btns := prompt.Buttons()
	if len(btns) != 2 || !strings.HasPrefix(btns[0].CallbackData, "approve:") {
		t.Fatalf("no approval message with buttons: %+v", msgs)
	}

	// A press from another user is refused and runs nothing.
	post(callbackUpdate(2, 7001, 9999, prompt.MessageID, btns[0].CallbackData))
	fake.Push(modeltest.Reply{Text: "Noted the seaweed feed."})
	post(callbackUpdate(3, 7001, 7001, prompt.MessageID, btns[0].CallbackData))
	bot.WaitFor(t, 30*time.Second, "the resumed turn's reply", func() bool {
		for _, m := range bot.Messages(7001) {
			if strings.Contains(m.Text, "Noted the seaweed feed.") {
				return true
			}
		}
		return false
	})
	out, _, code := runCLI(t, p.Home, nil, "memory", "list", "--actor", "telegram:7001", "--json")
	if code != 0 || strings.Count(out, "Fed the roses with seaweed") != 1 {
		t.Fatalf("note stored wrongly (exit %d):\n%s", code, out)
	}
	alerts := bot.Calls("answerCallbackQuery")
	if len(alerts) < 2 {
		t.Fatalf("callback queries not answered: %+v", alerts)
	}
}
