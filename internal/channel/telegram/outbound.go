package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/tendrilai/tendril/internal/channel/telegram/tgmd"
)

// Sentinels are internal reply markers (SPEC §7.2's NOTHING_DUE and the
// like) that must never reach a user. A line consisting of one of them,
// optionally wrapped in Markdown emphasis or code, is removed.
var Sentinels = []string{"NOTHING_DUE", "NO_REPLY", "HEARTBEAT_OK"}

// StripSentinels removes sentinel lines from a reply and trims it.
func StripSentinels(text string) string {
	lines := strings.Split(text, "\n")
	out := lines[:0]
	for _, l := range lines {
		t := strings.Trim(l, " \t\r`*_.!~>")
		sentinel := false
		for _, s := range Sentinels {
			if strings.EqualFold(t, s) {
				sentinel = true
			}
		}
		if !sentinel {
			out = append(out, l)
		}
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// Send renders markdown to Telegram HTML and sends it to chatID in chunks
// of ≤ tgmd.MaxChunk UTF-16 units. Sentinel lines are dropped, and a reply
// that is empty after that sends nothing. A 429 waits parameters.retry_after
// seconds and retries (Options.SendRetries times). When Telegram refuses a
// chunk's HTML (400 "can't parse entities"), that chunk and the rest of the
// reply are sent as plain text rendered from the same Markdown: links keep
// their URLs as "label (url)", no Markdown syntax shows, and the plain
// chunks obey the same limit without cutting URLs.
func (c *Channel) Send(ctx context.Context, chatID int64, markdown string) error {
	text := StripSentinels(markdown)
	if text == "" {
		return nil
	}
	reply := tgmd.Prepare(text, tgmd.MaxChunk)
	for k, chunk := range reply.HTML {
		_, err := c.sendMessage(ctx, chatID, chunk, models.ParseModeHTML, nil)
		if refusedHTML(err) {
			c.log.Warn("telegram: Telegram rejected HTML; sending the rest of the reply as plain text", "chat_id", chatID, "chunk", k, "chunks", len(reply.HTML), "err", redact(err, c.opts.BotToken))
			for _, p := range reply.PlainFrom(k) {
				if _, err := c.sendMessage(ctx, chatID, p, "", nil); err != nil {
					return c.sendError(chatID, err)
				}
			}
			return nil
		}
		if err != nil {
			return c.sendError(chatID, err)
		}
	}
	return nil
}

// Deliver sends text (Markdown) to the chat whose id is the decimal string
// chatID; the scheduler delivers reminders through it. It returns an error
// for a malformed chat id or a failed send.
func (c *Channel) Deliver(ctx context.Context, chatID string, text string) error {
	id, err := strconv.ParseInt(strings.TrimSpace(chatID), 10, 64)
	if err != nil {
		return fmt.Errorf("telegram: deliver: chat id %q is not a number", chatID)
	}
	return c.Send(ctx, id, text)
}

type button struct{ text, data string }

func inlineKeyboard(bs []button) models.ReplyMarkup {
	row := make([]callbackButton, len(bs))
	for i, b := range bs {
		row[i] = callbackButton{Text: b.text, CallbackData: b.data}
	}
	return &inlineMarkup{InlineKeyboard: [][]callbackButton{row}}
}

// inlineMarkup and callbackButton are the Bot API's InlineKeyboardMarkup
// and InlineKeyboardButton with only the fields we send. The library's
// InlineKeyboardButton always serialises "copy_text":{"text":""} (a
// non-pointer struct), which Telegram rejects as BUTTON_COPY_TEXT_INVALID
// (go-telegram/bot#167). https://core.telegram.org/bots/api#inlinekeyboardbutton
type inlineMarkup struct {
	InlineKeyboard [][]callbackButton `json:"inline_keyboard"`
}

type callbackButton struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
}

// sendHTML sends one message with parse_mode HTML and returns its
// message_id. On "can't parse entities" it resends the visible text plain,
// links written "label (url)".
func (c *Channel) sendHTML(ctx context.Context, chatID int64, html string, markup any) (int, error) {
	id, err := c.sendMessage(ctx, chatID, html, models.ParseModeHTML, markup)
	if refusedHTML(err) {
		c.log.Warn("telegram: Telegram rejected HTML; resending as plain text", "chat_id", chatID, "err", redact(err, c.opts.BotToken))
		id, err = c.sendMessage(ctx, chatID, tgmd.PlainFromHTML(html), "", markup)
	}
	if err != nil {
		return 0, c.sendError(chatID, err)
	}
	return id, nil
}

// sendMessage sends text with parseMode ("" for plain text), with retries,
// and returns the message_id. Its error is the Bot API's, unwrapped.
func (c *Channel) sendMessage(ctx context.Context, chatID int64, text string, parseMode models.ParseMode, markup any) (int, error) {
	params := &bot.SendMessageParams{ChatID: chatID, Text: text, ParseMode: parseMode}
	if mk, ok := markup.(models.ReplyMarkup); ok && mk != nil {
		params.ReplyMarkup = mk
	}
	var msg *models.Message
	err := c.retry(ctx, func() (err error) {
		msg, err = c.bot.SendMessage(ctx, params)
		return err
	})
	if err != nil || msg == nil {
		return 0, err
	}
	return msg.ID, nil
}

// refusedHTML reports Telegram's 400 "can't parse entities".
func refusedHTML(err error) bool {
	return err != nil && errors.Is(err, bot.ErrorBadRequest) && strings.Contains(err.Error(), "can't parse entities")
}

func (c *Channel) sendError(chatID int64, err error) error {
	return fmt.Errorf("telegram: sendMessage to %d: %w", chatID, redact(err, c.opts.BotToken))
}

// retry runs f, waiting out 429 answers for their retry_after and
// retrying transient failures (network errors, Telegram 5xx, an answer
// that is not the Bot API's JSON) with backoff 1 s, 2 s, 4 s, … up to
// maxBackoff, up to Options.SendRetries times (the default, 12, rides out
// about 7 minutes of outage). Other errors return at once.
func (c *Channel) retry(ctx context.Context, f func() error) error {
	for attempt := 0; ; attempt++ {
		err := f()
		if err == nil || attempt >= c.opts.SendRetries || ctx.Err() != nil {
			return err
		}
		var wait time.Duration
		var tm *bot.TooManyRequestsError
		switch {
		case errors.As(err, &tm):
			wait = time.Duration(max(tm.RetryAfter, 1)) * time.Second
			c.log.Info("telegram: rate limited", "retry_after", wait)
		case transient(err):
			wait = min(time.Second<<min(attempt, 6), maxBackoff)
			c.log.Warn("telegram: transient Bot API failure; retrying", "wait", wait, "err", redact(err, c.opts.BotToken))
		default:
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.clock.After(wait):
		}
	}
}

// maxBackoff is the longest wait between two tries of a transiently
// failing Bot API call.
const maxBackoff = time.Minute

var (
	serverError = regexp.MustCompile(`error response from telegram for method \w+, 5\d\d `)
	// notBotAPI is how go-telegram/bot reports a body that is not the Bot
	// API's JSON, whatever the HTTP status: a proxy's or load balancer's
	// error page ("502 Bad Gateway" in HTML), which Telegram itself never
	// sends.
	notBotAPI = regexp.MustCompile(`^error decode response body for method \w+,`)
)

// transient reports a failure worth retrying: no HTTP answer at all, a
// 5xx from the Bot API, or an answer that is not the Bot API's JSON.
func transient(err error) bool {
	var ue *url.Error
	if errors.As(err, &ue) || serverError.MatchString(err.Error()) {
		return true
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if notBotAPI.MatchString(e.Error()) {
			return true
		}
	}
	return false
}

func (c *Channel) answerCallback(ctx context.Context, id, text string, alert bool) error {
	return c.retry(ctx, func() error {
		_, err := c.bot.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: id, Text: text, ShowAlert: alert})
		return err
	})
}

// removeButtons clears a message's inline keyboard; failures only log.
func (c *Channel) removeButtons(ctx context.Context, chatID int64, messageID int) {
	if messageID == 0 {
		return
	}
	err := c.retry(ctx, func() error {
		_, err := c.bot.EditMessageReplyMarkup(ctx, &bot.EditMessageReplyMarkupParams{
			ChatID: chatID, MessageID: messageID,
			ReplyMarkup: &inlineMarkup{InlineKeyboard: [][]callbackButton{}},
		})
		return err
	})
	if err != nil {
		c.log.Warn("telegram: remove buttons", "chat_id", chatID, "message_id", messageID, "err", redact(err, c.opts.BotToken))
	}
}

// typing shows "typing" in chatID now and every TypingInterval until the
// returned stop function is called.
func (c *Channel) typing(ctx context.Context, chatID int64) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(c.opts.TypingInterval)
		defer t.Stop()
		for {
			_, err := c.bot.SendChatAction(ctx, &bot.SendChatActionParams{ChatID: chatID, Action: models.ChatActionTyping})
			if err != nil && ctx.Err() == nil {
				c.log.Debug("telegram: sendChatAction", "chat_id", chatID, "err", redact(err, c.opts.BotToken))
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// SetWebhook registers url with Telegram together with the secret token
// (https://core.telegram.org/bots/api#setwebhook), for message,
// edited_message, channel_post and callback_query updates.
func SetWebhook(ctx context.Context, b *bot.Bot, url, secret string, dropPending bool) error {
	if secret == "" {
		return ErrNoSecret
	}
	ok, err := b.SetWebhook(ctx, &bot.SetWebhookParams{
		URL:                url,
		SecretToken:        secret,
		DropPendingUpdates: dropPending,
		AllowedUpdates:     []string{kindMessage, kindEditedMessage, kindChannelPost, kindCallbackQuery},
	})
	if err != nil {
		return fmt.Errorf("setWebhook: %w", redact(err, b.Token()))
	}
	if !ok {
		return errors.New("setWebhook: Telegram answered false")
	}
	return nil
}
