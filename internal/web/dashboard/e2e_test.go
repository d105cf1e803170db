package dashboard

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/assistant"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/schedule"
)

// send types a chat message and clicks "Send".
func (tb *tabT) send(msg string) {
	tb.t.Helper()
	tb.do(chromedp.SendKeys(chromedp.CSS("#message"), msg), chromedp.Click(chromedp.CSS("#send")))
}

// A chat streams its reply over SSE, shows the tool call live with its
// arguments and result, and the reply is stored in the session.
func TestChatStreamsReplyAndTools(t *testing.T) {
	ap := newApp(t)
	tb := tab(t, ap.host())
	ap.fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{ID: "call_1", Name: "notes_search", Args: `{"query":"tomatoes"}`}}})
	ap.fake.Push(modeltest.Reply{Text: "Your tomatoes want water at dawn.", StreamChunks: 6})
	tb.do(chromedp.Navigate(ap.srv.URL + "/"))
	tb.send("When should I water tomatoes?")
	tb.waitFor(`document.querySelector('.msg.assistant[data-done]') !== null`)
	if got := tb.eval(`document.querySelector('.msg.assistant[data-done]').dataset.done`); got != "ok" {
		t.Fatalf("turn ended %q: %s", got, tb.text("#transcript"))
	}
	tr := tb.text("#transcript")
	for _, want := range []string{"Your tomatoes want water at dawn.", "notes_search", `"query": "tomatoes"`} {
		if !strings.Contains(tr, want) {
			t.Fatalf("transcript lacks %q:\n%s", want, tr)
		}
	}
	reqs := ap.fake.Requests()
	if len(reqs) < 2 || !reqs[len(reqs)-1].Stream {
		t.Fatalf("the reply was not requested as a stream: %+v", len(reqs))
	}
	// Reloading shows the same conversation from the session.
	tb.do(chromedp.Navigate(ap.srv.URL + "/"))
	if tr := tb.text("#transcript"); !strings.Contains(tr, "Your tomatoes want water at dawn.") || !strings.Contains(tr, "notes_search") {
		t.Fatalf("session not shown after reload:\n%s", tr)
	}
	tb.clean()
}

// "Stop" aborts a turn in flight.
func TestChatStop(t *testing.T) {
	ap := newApp(t)
	tb := tab(t, ap.host())
	ap.fake.Push(modeltest.Reply{Text: "a very slow answer that never finishes", StreamChunks: 8, ChunkDelay: 3 * time.Second})
	tb.do(chromedp.Navigate(ap.srv.URL + "/"))
	tb.send("Tell me slowly")
	tb.waitFor(`!document.getElementById('stop').hidden && document.querySelector('.reply.streaming').textContent.length > 0`)
	tb.do(chromedp.Click(chromedp.CSS("#stop")))
	tb.waitFor(`document.querySelector('.msg.assistant[data-done]') !== null`)
	if got := tb.eval(`document.querySelector('.msg.assistant[data-done]').dataset.done`); got != "stopped" {
		t.Fatalf("turn ended %q, want stopped", got)
	}
	if !tb.eval2bool(`document.getElementById('stop').hidden && !document.getElementById('send').disabled`) {
		t.Fatal("Stop still shown after the turn ended")
	}
	tb.clean()
}

func (tb *tabT) eval2bool(js string) bool {
	tb.t.Helper()
	b, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](js))
	if err != nil {
		tb.t.Fatal(err)
	}
	return b
}

// "Branch from here" on the first reply makes the next turn's context
// follow the new branch: the model no longer sees the later messages.
func TestBranchFromHere(t *testing.T) {
	ap := newApp(t)
	ctx := context.Background()
	for _, m := range []string{"first question about figs", "second question about lemons"} {
		if _, err := ap.a.Invoke(ctx, agent.Request{Message: m, ActorID: DefaultActor, Channel: Channel}); err != nil {
			t.Fatal(err)
		}
	}
	tb := tab(t, ap.host())
	tb.do(chromedp.Navigate(ap.srv.URL + "/sessions"))
	if s := tb.text("table"); !strings.Contains(s, "web:owner") || !strings.Contains(s, "echo: second question about lemons") {
		t.Fatalf("sessions list:\n%s", s)
	}
	tb.do(chromedp.Click(chromedp.Search(`//a[normalize-space(.)='web:owner']`)))
	tb.waitFor(`document.querySelector('ol.tree') !== null`)
	// The first assistant reply ("echo: first question about figs").
	tb.submit(`//li[contains(@class,'node')][div[contains(@class,'assistant')][contains(.,'echo: first question about figs')]]/div`, "Branch from here")
	k, _ := ap.a.ParseSessionKey("", "web:owner")
	tree, err := ap.a.Session(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if last := tree.ActivePath[len(tree.ActivePath)-1]; last.Role != "assistant" || !strings.Contains(last.Text, "figs") {
		t.Fatalf("active leaf is %q", last.Text)
	}
	tb.do(chromedp.Navigate(ap.srv.URL + "/"))
	tb.send("third question on the new branch")
	tb.waitFor(`document.querySelector('.msg.assistant[data-done]') !== null`)
	reqs := ap.fake.Requests()
	seen := reqs[len(reqs)-1]
	var all []string
	for _, m := range seen.Messages {
		for _, b := range m.Content {
			if b.Type == model.BlockText {
				all = append(all, b.Text)
			}
		}
	}
	ctxText := strings.Join(all, "\n")
	if !strings.Contains(ctxText, "figs") || strings.Contains(ctxText, "lemons") {
		t.Fatalf("the next turn's context does not follow the branch:\n%s", ctxText)
	}
	// The tree now has two leaves, and "Switch" goes back to the old one.
	tb.do(chromedp.Navigate(ap.srv.URL + "/sessions/" + url.PathEscape("web:owner")))
	tb.submit("", "Switch")
	tree, _ = ap.a.Session(ctx, k)
	if last := tree.ActivePath[len(tree.ActivePath)-1]; !strings.Contains(last.Text, "lemons") {
		t.Fatalf("Switch did not return to the first leaf: %q", last.Text)
	}
	tb.clean()
}

// A write tool asks; the approval shows inline in the chat and on
// /approvals with its arguments; "Approve" runs the tool exactly once and
// the resumed reply arrives in the chat.
func TestApproveRunsToolOnce(t *testing.T) {
	ap := newApp(t)
	tb := tab(t, ap.host())
	ap.fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{ID: "call_7", Name: "notes", Args: `{"action":"add","text":"Sowed carrots in bed 3"}`}}})
	ap.fake.Push(modeltest.Reply{Text: "Noted: carrots in bed 3."})
	tb.do(chromedp.Navigate(ap.srv.URL + "/"))
	tb.send("Note that I sowed carrots in bed 3")
	tb.waitFor(`document.querySelector('#inline-approvals .approval') !== null`)
	if s := tb.text("#inline-approvals"); !strings.Contains(s, "notes") || !strings.Contains(s, "Sowed carrots in bed 3") {
		t.Fatalf("inline approval:\n%s", s)
	}
	tb.do(chromedp.Navigate(ap.srv.URL + "/approvals"))
	card := tb.text(".approval")
	for _, want := range []string{"notes", `"text": "Sowed carrots in bed 3"`, "web:owner", "Approve", "Deny"} {
		if !strings.Contains(card, want) {
			t.Fatalf("approval card lacks %q:\n%s", want, card)
		}
	}
	tb.submit("", "Approve")
	ctx := context.Background()
	waitUntil(t, "the resumed turn", func() bool {
		return len(ap.fake.Requests()) >= 2
	})
	list, err := ap.a.Gate().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Status != approval.StatusExecuted {
		t.Fatalf("requests %+v", list)
	}
	// The tool ran once: exactly one result node for call_7 in the session.
	waitUntil(t, "the reply in the session", func() bool {
		k, _ := ap.a.ParseSessionKey("", "web:owner")
		tree, err := ap.a.Session(ctx, k)
		return err == nil && strings.Contains(tree.ActivePath[len(tree.ActivePath)-1].Text, "Noted")
	})
	k, _ := ap.a.ParseSessionKey("", "web:owner")
	tree, _ := ap.a.Session(ctx, k)
	results := 0
	for _, n := range tree.Nodes {
		for _, b := range n.Blocks {
			if b.Type == "tool_result" && b.ToolUseID == "call_7" {
				results++
				if !strings.Contains(b.Text, "Saved note") {
					t.Fatalf("tool result %q", b.Text)
				}
			}
		}
	}
	if results != 1 {
		t.Fatalf("tool ran %d times, want 1", results)
	}
	if s := tb.text(".ledger"); !strings.Contains(s, "verified") {
		t.Fatalf("ledger status:\n%s", s)
	}
	tb.clean()
}

// Staged memory is approved and rejected from /memory; "Forget this
// actor" (behind its confirmation) removes everything.
func TestMemoryStagingAndForget(t *testing.T) {
	ap := newApp(t, func(cfg *config.Config) {
		cfg.Memory.StoreThreshold = 0.9 // ordinary preferences go to staging
	})
	ctx := context.Background()
	for _, m := range []string{"I like jazz", "I like rock music"} {
		if _, err := ap.a.Invoke(ctx, agent.Request{Message: m, ActorID: DefaultActor, Channel: Channel}); err != nil {
			t.Fatal(err)
		}
	}
	var staged []memory.Record
	waitUntil(t, "two staged memories", func() bool {
		staged, _ = ap.a.Staged(ctx, DefaultActor)
		return len(staged) >= 2
	})
	tb := tab(t, ap.host())
	tb.do(chromedp.Navigate(ap.srv.URL + "/memory?actor=" + url.QueryEscape(DefaultActor)))
	jazz, rock := "", ""
	for _, r := range staged {
		if strings.Contains(r.Content, "jazz") {
			jazz = r.ID
		}
		if strings.Contains(r.Content, "rock") {
			rock = r.ID
		}
	}
	if jazz == "" || rock == "" {
		t.Fatalf("staged %+v", staged)
	}
	tb.submit(`//article[@data-record='`+jazz+`']`, "Approve")
	tb.submit(`//article[@data-record='`+rock+`']`, "Reject")
	if r, err := ap.a.Record(ctx, jazz); err != nil || r.Status != memory.StatusActive {
		t.Fatalf("jazz %v %+v", err, r)
	}
	if r, err := ap.a.Record(ctx, rock); err != nil || r.Status != memory.StatusRejected {
		t.Fatalf("rock %v %+v", err, r)
	}
	// The approved record is listed with a provenance link to its session node.
	recs := tb.text("main")
	if !strings.Contains(recs, "I like jazz") {
		t.Fatalf("records:\n%s", recs)
	}
	if !tb.eval2bool(`document.querySelector('a.prov') !== null && document.querySelector('a.prov').getAttribute('href').startsWith('/sessions/')`) {
		t.Fatal("no provenance link to a session node")
	}
	// Search explains its score.
	tb.do(chromedp.SendKeys(chromedp.CSS("#q"), "jazz"), chromedp.Click(chromedp.Search(`//button[normalize-space(.)='Search']`)))
	tb.waitFor(`document.querySelector('.hits details') !== null`)

	tb.do(chromedp.Click(chromedp.Search(`//a[normalize-space(.)='Forget this actor']`)))
	tb.waitFor(`document.getElementById('confirm-forget') !== null`)
	tb.submit("", "Forget this actor")
	if s := tb.text(".flash"); !strings.Contains(s, "Forgotten") {
		t.Fatalf("forget: %s", s)
	}
	if recs, err := ap.a.Records(ctx, assistant.RecordsQuery{ActorID: DefaultActor, Statuses: []string{"active", "staged", "rejected", "superseded"}}); err != nil || len(recs) != 0 {
		t.Fatalf("records remain after forget (%s): %v %+v", tb.text(".flash"), err, recs)
	}
	if rows, _ := ap.a.ListSessions(ctx, ""); len(rows) != 0 {
		t.Fatalf("sessions remain: %+v", rows)
	}
	tb.clean()
}

// The state view draws the figure from the state alone (two renders are
// identical), and "Numbers" hides it and shows the values and causes.
func TestStateViewToggle(t *testing.T) {
	ap := newApp(t)
	ctx := context.Background()
	for _, m := range []string{"This is terrible, everything failed again and I'm furious", "Thank you, that worked wonderfully!"} {
		if _, err := ap.a.Invoke(ctx, agent.Request{Message: m, ActorID: DefaultActor, Channel: Channel}); err != nil {
			t.Fatal(err)
		}
	}
	tb := tab(t, ap.host())
	u := ap.srv.URL + "/state?actor=" + url.QueryEscape(DefaultActor)
	tb.do(chromedp.Navigate(u))
	first, err := chromedp.Run(tb.ctx, chromedp.OuterHTML(chromedp.CSS(".figure-box svg")))
	if err != nil {
		t.Fatal(err)
	}
	tb.do(chromedp.Navigate(u))
	second, _ := chromedp.Run(tb.ctx, chromedp.OuterHTML(chromedp.CSS(".figure-box svg")))
	if first != second {
		t.Fatalf("DRIFT: the same state drew two figures:\n%s\n%s", first, second)
	}
	if strings.Contains(tb.text("main"), "DRIFT detected") {
		t.Fatal("the page reports DRIFT")
	}
	if !tb.eval2bool(`!document.getElementById('figure').hidden && document.getElementById('numbers').hidden`) {
		t.Fatal("figure not shown by default")
	}
	tb.do(chromedp.Click(chromedp.CSS("#numbers-toggle")))
	if !tb.eval2bool(`document.getElementById('figure').hidden && !document.getElementById('numbers').hidden`) {
		t.Fatal("Numbers did not hide the figure")
	}
	num := tb.text("#numbers")
	for _, want := range []string{"stability", "stimulus", "frustration"} {
		if !strings.Contains(num, want) {
			t.Fatalf("numbers view lacks %q:\n%s", want, num)
		}
	}
	// Without JavaScript the toggle is a link to the numbers view.
	href := tb.eval(`document.getElementById('numbers-toggle').getAttribute('href')`)
	if !strings.Contains(href, "view=numbers") {
		t.Fatalf("toggle href %q", href)
	}
	tb.clean()
}

// Schedules: add a job, "Run now", pause and resume it, remove it.
func TestSchedules(t *testing.T) {
	ap := newApp(t)
	tb := tab(t, ap.host())
	tb.do(chromedp.Navigate(ap.srv.URL + "/schedules"))
	tb.do(chromedp.SendKeys(chromedp.CSS("#name"), "water"),
		chromedp.SetValue(chromedp.CSS("#kind"), "every"),
		chromedp.SendKeys(chromedp.CSS("#spec"), "12h"),
		chromedp.SendKeys(chromedp.CSS("#task"), "remind me to water the figs"),
		chromedp.Click(chromedp.Search(`//button[normalize-space(.)='Add']`)))
	tb.waitFor(`document.querySelector('tr[data-job]') !== null`)
	jobs, err := ap.a.Jobs(context.Background(), "")
	if err != nil || len(jobs) != 1 || jobs[0].Name != "water" {
		t.Fatalf("jobs %v %+v", err, jobs)
	}
	before := jobs[0].NextRun
	tb.submit("", "Run now")
	jobs, _ = ap.a.Jobs(context.Background(), "")
	if len(jobs) != 1 || !jobs[0].NextRun.Before(before) {
		t.Fatalf("Run now did not make the job due: %+v", jobs)
	}
	tb.submit("", "Pause")
	if jobs, _ = ap.a.Jobs(context.Background(), ""); len(jobs) != 1 || jobs[0].Status != schedule.StatusPaused {
		t.Fatalf("Pause did not pause the job: %+v", jobs)
	}
	tb.waitFor(`document.querySelector('td[data-status="paused"]') !== null`)
	tb.submit("", "Resume")
	if jobs, _ = ap.a.Jobs(context.Background(), ""); len(jobs) != 1 || jobs[0].Status != schedule.StatusActive {
		t.Fatalf("Resume did not resume the job: %+v", jobs)
	}
	tb.waitFor(`document.querySelector('tr[data-runs] details summary') !== null`)
	tb.submit("", "Remove")
	if jobs, _ = ap.a.Jobs(context.Background(), ""); len(jobs) != 0 {
		t.Fatalf("job not removed: %+v", jobs)
	}
	tb.clean()
}

// Settings shows the masked configuration, doctor's checks and the live
// log.
func TestSettings(t *testing.T) {
	ap := newApp(t)
	tb := tab(t, ap.host())
	tb.do(chromedp.Navigate(ap.srv.URL + "/settings"))
	main := tb.text("main")
	if strings.Contains(main, "sk-test-secret-value") {
		t.Fatal("a secret is shown unmasked")
	}
	for _, want := range []string{"home", "gpt-test", "Live log"} {
		if !strings.Contains(main, want) {
			t.Fatalf("settings lacks %q:\n%s", want, main)
		}
	}
	waitUntil(t, "the live log stream", func() bool { return ap.logs.Streams() > 0 })
	ap.logs.Add("level=INFO msg=\"dashboard live log check\"")
	tb.waitFor(`document.getElementById('log').textContent.includes('dashboard live log check')`)
	tb.clean()
}
