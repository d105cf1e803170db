package dashboard

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/schedule"
)

// TestScreenshots writes a PNG of every page in English and Korean to
// $TENDRIL_SCREENSHOTS (docs/screenshots in the repository); it is skipped
// when the variable is unset.
//
//	TENDRIL_SCREENSHOTS=$PWD/docs/screenshots go test -run Screenshots ./internal/web/dashboard/
func TestScreenshots(t *testing.T) {
	dir := os.Getenv("TENDRIL_SCREENSHOTS")
	if dir == "" {
		t.Skip("set TENDRIL_SCREENSHOTS to a directory to write the dashboard screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ap := newApp(t, func(cfg *config.Config) { cfg.Memory.StoreThreshold = 0.9 })
	ctx := context.Background()
	ap.fake.Push(modeltest.Reply{Text: "Figs like full sun and deep, rare watering. Here is the bed:\n```svg\n<svg viewBox=\"0 0 120 60\"><rect x=\"5\" y=\"20\" width=\"110\" height=\"35\" fill=\"#c8a26b\"/><circle cx=\"30\" cy=\"15\" r=\"10\" fill=\"#2e8b57\"/><circle cx=\"80\" cy=\"12\" r=\"12\" fill=\"#2e8b57\"/></svg>\n```"})
	for _, m := range []string{"I have a fig tree in a raised bed. How should I care for it?", "I like organic fertiliser", "This keeps failing and I'm frustrated"} {
		if _, err := ap.a.Invoke(ctx, agent.Request{Message: m, ActorID: DefaultActor, Channel: Channel}); err != nil {
			t.Fatal(err)
		}
	}
	ap.fake.Push(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{ID: "call_s", Name: "notes", Args: `{"action":"add","text":"Fed the fig with compost"}`}}})
	if _, err := ap.a.Invoke(ctx, agent.Request{Message: "Note that I fed the fig with compost", ActorID: DefaultActor, Channel: Channel}); err != nil {
		t.Fatal(err)
	}
	if _, err := ap.a.AddJob(ctx, schedule.JobSpec{Name: "water-figs", Every: "12h", Task: "remind me to water the figs", ActorID: DefaultActor}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "staged memory", func() bool { s, _ := ap.a.Staged(ctx, DefaultActor); return len(s) > 0 })
	tb := tab(t, ap.host())
	pages := []struct{ name, path string }{
		{"chat", "/"}, {"sessions", "/sessions"}, {"session", "/sessions/" + url.PathEscape("web:owner")},
		{"memory", "/memory?actor=" + DefaultActor}, {"approvals", "/approvals"},
		{"state", "/state?actor=" + DefaultActor}, {"state-numbers", "/state?view=numbers&actor=" + DefaultActor},
		{"schedules", "/schedules"}, {"settings", "/settings"},
	}
	for _, l := range []string{"en", "ko"} {
		for _, p := range pages {
			u := ap.srv.URL + p.path
			if len(p.path) > 1 && contains(p.path, "?") {
				u += "&lang=" + l
			} else {
				u += "?lang=" + l
			}
			tb.do(chromedp.Navigate(u))
			png, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, p.name+"-"+l+".png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One mobile-width view.
	tb.do(chromedp.EmulateViewport(390, 844, func(p *emulation.SetDeviceMetricsOverrideParams, _ *emulation.SetTouchEmulationEnabledParams) {
		p.Mobile = true
	}), chromedp.Navigate(ap.srv.URL+"/?lang=en"))
	png, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "chat-mobile-en.png"), png, 0o644)
}
