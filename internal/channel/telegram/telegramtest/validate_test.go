package telegramtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot"

	"github.com/tendrilai/tendril/internal/channel/telegram/telegramtest"
)

func TestValidateHTML(t *testing.T) {
	tests := []struct {
		html string
		ok   bool
		text string
	}{
		{"<b>bold</b> <i>it</i> <u>u</u> <s>s</s>", true, "bold it u s"},
		{`<a href="https://x.y/?a=1&amp;b=2">l</a>`, true, "l"},
		{`<pre><code class="language-go">x &lt; y</code></pre>`, true, "x < y"},
		{"<blockquote>q <b>b</b></blockquote>", true, "q b"},
		{"<strong>alias</strong> <em>e</em> <del>d</del>", true, "alias e d"},
		{"&#128512; &#x41; &quot;", true, "😀 A \""},
		{"a > b", true, "a > b"},
		{"<div>x</div>", false, ""},
		{"<b>x</i>", false, ""},
		{"<b>x", false, ""},
		{"x</b>", false, ""},
		{"a < b", false, ""},
		{"a & b", false, ""},
		{"&nbsp;", false, ""},
		{"&copy;", false, ""},
		{"<b><code>x</code></b>", false, ""},
		{"<code><b>x</b></code>", false, ""},
		{"<pre><pre>x</pre></pre>", false, ""},
		{"<b><pre>x</pre></b>", false, ""},
		{`<a href="https://a"><a href="https://b">x</a></a>`, false, ""},
		{"<blockquote><blockquote>x</blockquote></blockquote>", false, ""},
		{`<a href="javascript:alert(1)">x</a>`, false, ""},
		{`<a>x</a>`, false, ""},
		{`<b onclick="x">x</b>`, false, ""},
		{`<code class="language-go">x</code>`, false, ""},
		{"   ", false, ""},
		{"<b></b>", false, ""},
		{strings.Repeat("x", 4096), true, strings.Repeat("x", 4096)},
		{strings.Repeat("x", 4097), false, ""},
		{strings.Repeat("🌱", 2049), false, ""}, // 4098 UTF-16 units
		{"\xff", false, ""},
	}
	for _, tt := range tests {
		text, err := telegramtest.ValidateHTML(tt.html)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateHTML(%.40q) error = %v, want ok=%v", tt.html, err, tt.ok)
			continue
		}
		if tt.ok && text != tt.text {
			t.Errorf("ValidateHTML(%.40q) text = %.40q, want %.40q", tt.html, text, tt.text)
		}
	}
}

// TestServerSpeaksBotAPI drives the fake through go-telegram/bot, the
// client the channel uses.
func TestServerSpeaksBotAPI(t *testing.T) {
	srv := telegramtest.New(t)
	b, err := bot.New(telegramtest.Token, bot.WithServerURL(srv.URL), bot.WithSkipGetMe())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: 5, Text: "<b>ok</b>", ParseMode: "HTML"}); err != nil {
		t.Fatal(err)
	}
	_, err = b.SendMessage(ctx, &bot.SendMessageParams{ChatID: 5, Text: "<x>bad</x>", ParseMode: "HTML"})
	if !errors.Is(err, bot.ErrorBadRequest) || !strings.Contains(err.Error(), "can't parse entities") {
		t.Fatalf("invalid HTML: %v", err)
	}
	srv.RateLimit("sendMessage", 1, 9)
	_, err = b.SendMessage(ctx, &bot.SendMessageParams{ChatID: 5, Text: "x"})
	var tm *bot.TooManyRequestsError
	if !errors.As(err, &tm) || tm.RetryAfter != 9 {
		t.Fatalf("rate limit: %v", err)
	}
	f, err := b.GetFile(ctx, &bot.GetFileParams{FileID: "AgACAgIAAxkBAAIBlarge"})
	if err != nil || f.FileSize != 121503 {
		t.Fatalf("getFile: %+v %v", f, err)
	}
	me, err := b.GetMe(ctx)
	if err != nil || me.Username != telegramtest.BotUsername {
		t.Fatalf("getMe: %+v %v", me, err)
	}
	if msgs := srv.Messages(5); len(msgs) != 1 || msgs[0].Text != "<b>ok</b>" {
		t.Fatalf("accepted messages %+v", msgs)
	}
	if n := len(srv.Calls("sendMessage")); n != 3 {
		t.Fatalf("%d sendMessage calls recorded, want 3", n)
	}
	srv.Token = telegramtest.Token
	bad, _ := bot.New("1:WRONG", bot.WithServerURL(srv.URL), bot.WithSkipGetMe())
	if _, err := bad.GetMe(ctx); !errors.Is(err, bot.ErrorUnauthorized) {
		t.Fatalf("wrong token: %v", err)
	}
}

// TestRefuseHTML: with RefuseHTML every HTML message, valid or not, is
// refused as Telegram refuses unparsable HTML; plain text still goes
// through, and RefuseHTML(false) restores validation. RefuseHTMLAfter(n)
// accepts n HTML messages first.
func TestRefuseHTML(t *testing.T) {
	srv := telegramtest.New(t)
	b, err := bot.New(telegramtest.Token, bot.WithServerURL(srv.URL), bot.WithSkipGetMe())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	srv.RefuseHTML(true)
	for _, html := range []string{"<b>ok</b>", "plain words"} {
		_, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: 5, Text: html, ParseMode: "HTML"})
		if !errors.Is(err, bot.ErrorBadRequest) || !strings.Contains(err.Error(), "can't parse entities") {
			t.Fatalf("HTML %q while refusing: %v", html, err)
		}
	}
	if _, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: 5, Text: "**plain** <b>"}); err != nil {
		t.Fatalf("plain text refused: %v", err)
	}
	srv.RefuseHTML(false)
	if _, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: 5, Text: "<b>ok</b>", ParseMode: "HTML"}); err != nil {
		t.Fatalf("HTML after RefuseHTML(false): %v", err)
	}
	msgs := srv.Messages(5)
	if len(msgs) != 2 || msgs[0].ParseMode != "" || msgs[1].Text != "<b>ok</b>" {
		t.Fatalf("accepted %+v", msgs)
	}
	if calls := srv.Calls("sendMessage"); len(calls) != 4 || calls[0].Status != 400 || calls[1].Status != 400 {
		t.Fatalf("calls %+v", calls)
	}
	srv.RefuseHTMLAfter(1)
	for i, want := range []bool{true, false, false} {
		_, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: 6, Text: "<b>n</b>", ParseMode: "HTML"})
		if (err == nil) != want {
			t.Fatalf("RefuseHTMLAfter(1): HTML message %d: err %v", i, err)
		}
	}
}

func TestHelpers(t *testing.T) {
	srv := telegramtest.New(t)
	var got []byte
	hook := httptestServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Telegram-Bot-Api-Secret-Token") != "s" {
			w.WriteHeader(401)
			return
		}
		got, _ = io.ReadAll(r.Body)
	})
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	body := telegramtest.TextUpdate(7, 70001, 70001, "Dana", "hi <there>", at)
	if code, err := telegramtest.PostUpdate(context.Background(), hook, "s", body); err != nil || code != 200 {
		t.Fatalf("PostUpdate = %d, %v", code, err)
	}
	var u struct {
		UpdateID int64 `json:"update_id"`
		Message  struct {
			Date int64  `json:"date"`
			Text string `json:"text"`
		} `json:"message"`
	}
	if err := json.Unmarshal(got, &u); err != nil || u.UpdateID != 7 || u.Message.Text != "hi <there>" || u.Message.Date != at.Unix() {
		t.Fatalf("update %s (%v)", got, err)
	}
	b, _ := bot.New("1:x", bot.WithServerURL(srv.URL), bot.WithSkipGetMe())
	if _, err := b.SendMessage(context.Background(), &bot.SendMessageParams{ChatID: 3, Text: "<b>a</b> &amp; b", ParseMode: "HTML"}); err != nil {
		t.Fatal(err)
	}
	if p := srv.Messages(3)[0].Plain(); p != "a & b" {
		t.Fatalf("Plain = %q", p)
	}
}

func httptestServer(t *testing.T, h http.HandlerFunc) string {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}
