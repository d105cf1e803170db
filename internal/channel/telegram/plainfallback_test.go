package telegram

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/channel/telegram/tgmd"
)

// TestRefusedHTMLReplyArrivesAsPlainText drives a turn whose long model
// reply (links, bold, unclosed bold, a code block, Korean; well over 4096
// characters) meets a Bot API that refuses every HTML message. The reply
// must arrive as plain messages within Telegram's limit that together keep
// every sentence and every URL, once each and never cut, and show no
// Markdown syntax.
func TestRefusedHTMLReplyArrivesAsPlainText(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.RefuseHTML(true)

	var md strings.Builder
	var sentences, urls []string
	md.WriteString("## Watering plan\n\n**Start here: the figs need water")
	sentences = append(sentences, "Watering plan", "Start here: the figs need water")
	for i := range 40 {
		u := fmt.Sprintf("https://example.com/guide/%d?plant=fig&step=%d", i, i)
		bare := fmt.Sprintf("https://plants.example.org/notes/%d_b", i)
		urls = append(urls, u, bare)
		fmt.Fprintf(&md, "\n\nStep %d: water the **figs** early, use `organic` feed and read [guide %d](%s) or %s for details. 물을 주세요 %d.", i, i, u, bare, i)
		sentences = append(sentences, fmt.Sprintf("Step %d: water the figs early, use organic feed and read guide %d (%s) or %s for details. 물을 주세요 %d.", i, i, u, bare, i))
		if i == 20 {
			md.WriteString("\n\n```python\nfor pot in pots:\n    water(pot, ml=250)\n```")
			sentences = append(sentences, "for pot in pots:\n    water(pot, ml=250)")
		}
	}
	md.WriteString("\n\n- first [a](https://a.example.com/x)\n- second <https://auto.example.com/y>")
	sentences = append(sentences, "• first a (https://a.example.com/x)\n• second https://auto.example.com/y")
	urls = append(urls, "https://a.example.com/x", "https://auto.example.com/y")
	if n := len(md.String()); n < 6000 {
		t.Fatalf("reply is only %d bytes", n)
	}
	reply := md.String()
	h.inv.reply = func(agent.Request) (*agent.Result, error) { return &agent.Result{Text: reply}, nil }

	h.start()
	h.post(textUpdate(1, 70001, 70001, "how do I water the figs?"))
	h.waitDone(1)

	msgs := h.srv.Messages(70001)
	if len(msgs) < 2 {
		t.Fatalf("%d messages; the reply should need several", len(msgs))
	}
	var texts []string
	for i, m := range msgs {
		if m.ParseMode != "" {
			t.Fatalf("message %d accepted with parse_mode %q while HTML is refused", i, m.ParseMode)
		}
		if n := tgmd.UTF16Len(m.Text); n > 4096 {
			t.Fatalf("message %d has %d UTF-16 units", i, n)
		}
		for _, bad := range []string{"**", "__", "`", "](", "##", "[guide", "[a]"} {
			if strings.Contains(m.Text, bad) {
				t.Fatalf("message %d shows Markdown %q: %.300q", i, bad, m.Text)
			}
		}
		texts = append(texts, m.Text)
	}
	all := strings.Join(texts, "\n")
	t.Logf("%d plain messages, UTF-16 units %v", len(texts), unitsOf(texts))
	for _, s := range sentences {
		if !strings.Contains(all, s) {
			t.Errorf("lost or altered: %q", s)
		}
	}
	for _, u := range urls {
		in := 0
		for _, m := range texts {
			in += strings.Count(m, u)
		}
		if in != 1 {
			t.Errorf("URL %s appears whole %d times, want once", u, in)
		}
	}
	// Telegram refused the first HTML chunk; the rest went plain without
	// trying HTML again.
	html := 0
	for _, c := range h.srv.Calls("sendMessage") {
		if c.Params["parse_mode"] != "" {
			html++
			if c.Status != 400 {
				t.Fatalf("HTML call answered %d", c.Status)
			}
		}
	}
	if html != 1 {
		t.Fatalf("%d HTML attempts, want 1", html)
	}
}

// TestRefusedLaterChunkContinuesPlain: Telegram accepts the first HTML
// chunk and refuses the second; plain messages carry the rest of the reply
// from exactly where the HTML left off: every word arrives once.
func TestRefusedLaterChunkContinuesPlain(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.RefuseHTMLAfter(1)
	var md strings.Builder
	n := 1500
	for i := range n {
		fmt.Fprintf(&md, "w%d [l%d](https://x.io/%d) **b%d** ", i, i, i, i)
		if i%25 == 24 {
			md.WriteString("\n\n")
		}
	}
	if err := h.ch.Send(t.Context(), 70001, md.String()); err != nil {
		t.Fatal(err)
	}
	msgs := h.srv.Messages(70001)
	if len(msgs) < 3 || msgs[0].ParseMode != "HTML" {
		t.Fatalf("%d messages, first %q", len(msgs), msgs[0].ParseMode)
	}
	var words []string
	for i, m := range msgs {
		if i > 0 && m.ParseMode != "" {
			t.Fatalf("message %d sent with parse_mode %q after HTML was refused", i, m.ParseMode)
		}
		if u := tgmd.UTF16Len(m.Plain()); u > 4096 {
			t.Fatalf("message %d has %d units", i, u)
		}
		words = append(words, strings.Fields(m.Plain())...)
	}
	// The HTML message shows "l7" as a link; plain ones "l7 (https://x.io/7)".
	seen := map[string]int{}
	for _, w := range words {
		seen[strings.Trim(w, "()")]++
	}
	for i := range n {
		for _, w := range []string{fmt.Sprintf("w%d", i), fmt.Sprintf("l%d", i), fmt.Sprintf("b%d", i)} {
			if seen[w] != 1 {
				t.Fatalf("%s arrived %d times", w, seen[w])
			}
		}
		if u := fmt.Sprintf("https://x.io/%d", i); seen[u] > 1 || seen[u] == 0 && !strings.Contains(msgs[0].Text, `href="`+u+`"`) {
			t.Fatalf("URL %s: %d times in plain text", u, seen[u])
		}
	}
}

func unitsOf(texts []string) []int {
	var n []int
	for _, s := range texts {
		n = append(n, tgmd.UTF16Len(s))
	}
	return n
}
