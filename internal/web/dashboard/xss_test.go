package dashboard

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/model/modeltest"
)

// payloads reads a corpus file: blocks separated by "%%" lines, the first
// block a comment.
func payloads(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, blk := range strings.Split(string(b), "\n%%\n")[1:] {
		if p := strings.TrimRight(blk, "\n"); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Hostile SVG (the sanitizer's corpus, as ```svg blocks) and hostile HTML
// (as plain text) reach the browser through chat replies (streamed and
// server-rendered), session trees and memory records: no dialog opens, no
// request leaves for another origin, and nothing executable is in the DOM.
func TestXSSCorpus(t *testing.T) {
	svg := payloads(t, "../sanitize/testdata/xss.txt")
	htm := payloads(t, "testdata/xss_html.txt")
	if len(svg)+len(htm) < 40 {
		t.Fatalf("corpus has %d payloads, want ≥ 40", len(svg)+len(htm))
	}
	ap := newApp(t)
	var reply strings.Builder
	for i, p := range svg {
		reply.WriteString("svg payload " + itoa(i) + ":\n```svg\n" + p + "\n```\n")
	}
	for _, p := range htm {
		reply.WriteString(p + "\n")
	}
	ap.fake.Push(modeltest.Reply{Text: reply.String(), StreamChunks: 20})
	// Memory records carrying the HTML payloads.
	ctx := context.Background()
	ns := "/main/" + DefaultActor + "/long_term/"
	for _, p := range htm {
		if _, err := ap.a.Memory().Put(ctx, memory.Record{Namespace: ns, Strategy: memory.StrategySemantic, Content: "The user said " + p,
			Metadata: map[string]any{"note": p}, Importance: 0.8, Status: memory.StatusActive}); err != nil {
			t.Fatal(err)
		}
	}
	tb := tab(t, ap.host())
	tb.do(chromedp.Navigate(ap.srv.URL + "/"))
	tb.send("show me the payloads " + htm[1])
	tb.waitFor(`document.querySelector('.msg.assistant[data-done]') !== null`)
	tb.checkDOM("chat (streamed)")
	if n := tb.eval(`String(document.querySelectorAll('.whiteboard svg').length)`); n == "0" {
		t.Fatal("no SVG drawn on the whiteboard")
	}
	// The same reply rendered by the server, then every page that shows it.
	if _, err := ap.a.Invoke(ctx, agent.Request{Message: htm[0], ActorID: DefaultActor, Channel: Channel}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "/sessions", "/sessions/" + url.PathEscape("web:owner"), "/memory?actor=" + DefaultActor,
		"/memory?actor=" + DefaultActor + "&q=" + url.QueryEscape("user said"), "/state?actor=" + DefaultActor} {
		tb.do(chromedp.Navigate(ap.srv.URL + p))
		tb.checkDOM(p)
	}
	tb.do(chromedp.Navigate(ap.srv.URL + "/memory?actor=" + DefaultActor))
	if m := tb.text("main"); !strings.Contains(m, "The user said <script>alert(1)</script>") {
		t.Fatalf("hostile memory text is not shown as text:\n%s", m)
	}
	tb.clean()
}

// checkDOM fails on anything executable or external in the page: only our
// own script, no event-handler attributes, no javascript: URLs, no
// foreignObject, frames, objects or external resources.
func (tb *tabT) checkDOM(where string) {
	tb.t.Helper()
	bad := tb.eval(`(function(){
	  var out = [];
	  document.querySelectorAll('*').forEach(function(e){
	    var n = e.tagName.toLowerCase();
	    if (n === 'script' && e.getAttribute('src') !== '/static/app.js') out.push('script');
	    if (['iframe','object','embed','foreignobject','image','img','base','meta','link','style','form','video','audio','source'].indexOf(n) >= 0 &&
	        !(n === 'meta' && e.closest('head')) && !(n === 'link' && e.getAttribute('href') === '/static/app.css') &&
	        !(n === 'form' && (e.getAttribute('action')||'').startsWith('/'))) out.push(n);
	    for (var i = 0; i < e.attributes.length; i++) {
	      var a = e.attributes[i], v = (a.value||'').replace(/\s/g,'').toLowerCase();
	      if (a.name.startsWith('on')) out.push(n+'@'+a.name);
	      if (a.name === 'style') out.push(n+'@style');
	      if (v.startsWith('javascript:') || v.startsWith('data:') || ((a.name==='href'||a.name==='src'||a.name==='xlink:href') && /^(https?:)?\/\//.test(v))) out.push(n+'@'+a.name+'='+a.value);
	    }
	  });
	  return out.join(' ');
	})()`)
	if bad != "" {
		tb.t.Fatalf("%s: executable or external markup in the page: %s", where, bad)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// Arguments shown for approval keep their stored order: a right-to-left
// override inside a string is shown as its JSON escape, which names the
// same character, instead of reversing the rest of the line.
func TestPrettyJSONEscapesBidi(t *testing.T) {
	got := prettyJSON(json.RawMessage("{\"cmd\":\"rm -rf /tmp/\u202egpj.exe\"}"))
	if strings.ContainsRune(got, 0x202e) || !strings.Contains(got, `\u202e`) {
		t.Fatalf("prettyJSON = %q, want U+202E escaped", got)
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(got), &v); err != nil || v["cmd"] != "rm -rf /tmp/\u202egpj.exe" {
		t.Fatalf("the escaped form means something else: %v %q", err, v["cmd"])
	}
	if got := prettyJSON(json.RawMessage(`{"a":"<b>"}`)); got != "{\n  \"a\": \"<b>\"\n}" {
		t.Fatalf("prettyJSON without bidi = %q", got)
	}
}
