package dashboard

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	g "maragu.dev/gomponents"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/session"
)

func renderPage(t *testing.T, p pageData, view func(pageData) g.Node) string {
	t.Helper()
	var buf bytes.Buffer
	if err := layout(p, view(p)).Render(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// A broken ledger names its first bad line (the method's result, not the
// method value).
func TestApprovalsShowsBrokenLedger(t *testing.T) {
	page := renderPage(t, pageData{Lang: "en", Data: approvalsData{Verify: approval.VerifyReport{
		Path: "/home/approvals/ledger.jsonl", FirstBad: &approval.BadEntry{Line: 4, Reason: "hash mismatch"}}}}, approvalsView)
	if !strings.Contains(page, "BROKEN</strong> ledger /home/approvals/ledger.jsonl: line 4: hash mismatch") {
		t.Errorf("ledger summary missing:\n%s", page)
	}
}

// A node whose body renders nothing still keeps its time apart from the
// "Active" badge.
func TestSessionTreeKeepsWordsApart(t *testing.T) {
	n := &treeNode{Node: session.Node{ID: "msg_1", Role: "assistant", Timestamp: 1764547200}, Leaf: true, Active: true}
	page := renderPage(t, pageData{Lang: "en", Data: sessionData{Key: "web:owner", Roots: []*treeNode{n}}}, sessionView)
	if !strings.Contains(page, "Z</small> <strong class=\"badge\">Active</strong>") {
		t.Errorf("time and badge run together:\n%s", page)
	}
}

// A fired one-shot is shown done, with no next run and no Pause, and its
// runs stay under it.
func TestSchedulesShowsDoneOneShot(t *testing.T) {
	at := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	j := schedule.Job{ID: "01JDONE", Name: "figs", Kind: schedule.KindAt, Spec: at.Format(time.RFC3339), Task: "water the figs",
		ActorID: "web:owner", NextRun: at, LastRun: at.Add(3 * time.Second), Status: schedule.StatusDone, Source: schedule.SourceWeb}
	runs := []schedule.Run{{JobID: j.ID, Started: at, Finished: at.Add(3 * time.Second), Result: schedule.RunOK, Detail: "Time to water the figs!"}}
	for lang, label := range map[string]string{"en": "done", "ko": "완료"} {
		page := renderPage(t, pageData{Lang: lang, CSRF: "x", Data: schedulesData{Jobs: []scheduleRow{{Job: j, Runs: runs}}}}, schedulesView)
		for _, want := range []string{`data-status="done"`, ">" + label + "<", "<td>—</td><td>2026-06-01 09:00:03Z", "Time to water the figs!", "(1)", `action="/schedules/01JDONE/run"`, `action="/schedules/01JDONE/remove"`} {
			if !strings.Contains(page, want) {
				t.Errorf("%s: /schedules lacks %q", lang, want)
			}
		}
		if strings.Contains(page, "/schedules/01JDONE/pause") || strings.Contains(page, "/schedules/01JDONE/resume") {
			t.Errorf("%s: a done job offers Pause or Resume:\n%s", lang, page)
		}
	}
}

// A job's name, actor and ID show a bidirectional override as its escape,
// so a name cannot display as something it is not; the ID's title keeps
// it as stored, for copying.
func TestSchedulesEscapeBidi(t *testing.T) {
	at := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	j := schedule.Job{ID: "01J\u202eX", Name: "backup \u202egpj.exe", Kind: schedule.KindAt, Spec: at.Format(time.RFC3339), Task: "check \u202eplants",
		ActorID: "web:\u202eowner", NextRun: at, Status: schedule.StatusActive, Source: schedule.SourceWeb, LastError: "bad \u202eerror"}
	runs := []schedule.Run{{JobID: j.ID, Started: at, Finished: at, Result: schedule.RunOK, Detail: "said \u202eolleh"}}
	page := renderPage(t, pageData{Lang: "en", CSRF: "x", Data: schedulesData{Jobs: []scheduleRow{{Job: j, Runs: runs}}}}, schedulesView)
	for _, want := range []string{`backup \u202egpj.exe`, `web:\u202eowner`, `01J\u202eX</code>`, `check \u202eplants`, `said \u202eolleh`, `bad \u202eerror`} {
		if !strings.Contains(page, want) {
			t.Errorf("/schedules lacks %q", want)
		}
	}
	// Attribute values (the title, data-job) are not displayed.
	if shown := regexp.MustCompile(`="[^"]*"`).ReplaceAllString(page, ""); strings.ContainsRune(shown, 0x202e) {
		t.Errorf("/schedules displays a raw U+202E:\n%s", page)
	}
	// The actor lists of /memory and /state, and the actor picker.
	var b strings.Builder
	g.Group{actorList("en", "Actors", "/memory", []string{"api:\u202eeve"}), actorPicker("en", "/memory", "", []string{"api:\u202eeve"})}.Render(&b)
	if shown := regexp.MustCompile(`="[^"]*"`).ReplaceAllString(b.String(), ""); strings.ContainsRune(shown, 0x202e) || !strings.Contains(shown, `api:\u202eeve`) {
		t.Errorf("actor list displays %q", b.String())
	}
}

// A memory record under review (staged, a search hit, the records table)
// shows a bidirectional override as its escape, as job names do: a record
// taken from a conversation cannot display as something it does not say
// when it is approved.
func TestMemoryEscapesBidi(t *testing.T) {
	rec := memory.Record{ID: "r1", Namespace: "/main/api:\u202eeve/facts/", Strategy: memory.StrategySemantic,
		Content: "likes \u202eeifaz", Metadata: map[string]any{"note": "x\u202ey"}, Importance: 0.5, Status: memory.StatusActive}
	rv := recordView{Record: rec}
	d := memoryData{Actor: "api:eve", Staged: []recordView{rv}, Searched: true, Hits: []memory.Hit{{Record: rec, Score: 1}},
		Groups: []recordGroup{{Namespace: rec.Namespace, Strategy: rec.Strategy, Records: []recordView{rv}}}}
	page := renderPage(t, pageData{Lang: "en", CSRF: "x", Data: d}, memoryView)
	if n := strings.Count(page, `likes \u202eeifaz`); n != 3 {
		t.Errorf("/memory shows the escaped content %d times, want 3 (staged, hit, table):\n%s", n, page)
	}
	if shown := regexp.MustCompile(`="[^"]*"`).ReplaceAllString(page, ""); strings.ContainsRune(shown, 0x202e) {
		t.Errorf("/memory displays a raw U+202E:\n%s", page)
	}
}

func TestLocalURL(t *testing.T) {
	for in, want := range map[string]string{
		"/sessions/web%3Aowner#n-msg_1": "/sessions/web%3Aowner#n-msg_1",
		"/?actor=web%3Aowner":           "/?actor=web%3Aowner",
		"javascript:alert(1)":           "#",
		"//evil.example/x":              "#",
		"/\\evil.example":               "#",
		"https://evil.example/":         "#",
		"/\t/evil.example":              "#",
		"/\n/evil.example":              "#",
		"/x\\y":                         "#",
		"":                              "#",
	} {
		if got := localURL(in); got != want {
			t.Errorf("localURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// Values inside URLs are escaped for their part of the URL, and then as an
// attribute: an actor ID cannot add a query parameter or leave the href.
func TestViewURLsEscapeTheirValues(t *testing.T) {
	actor := `a&view=x"><script>alert(1)</script>`
	page := renderPage(t, pageData{Lang: "en", Data: memoryData{Actor: actor}}, memoryView)
	if strings.Contains(page, "<script>alert") {
		t.Fatal("unescaped markup in the page")
	}
	want := `href="/memory/forget?actor=a%26view%3Dx%22%3E%3Cscript%3Ealert%281%29%3C%2Fscript%3E"`
	if !strings.Contains(page, want) {
		t.Errorf("forget link not query-escaped; want %s in\n%s", want, page)
	}
	if !strings.Contains(page, `value="a&amp;view=x&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"`) {
		t.Errorf("hidden actor value not attribute-escaped:\n%s", page)
	}
}

// With no model the chat page says so before anything is sent, and it
// links the session only once the session exists.
func TestChatSaysNoModel(t *testing.T) {
	ap := newApp(t, func(cfg *config.Config) { cfg.Model.ID, cfg.Model.VisionID = "", "" })
	_, page := get(t, noRedirect(nil), ap.srv.URL+"/", nil)
	if !strings.Contains(page, `id="no-model"`) || !strings.Contains(page, "set MODEL_ID") {
		t.Errorf("no warning without a model:\n%s", page)
	}
	if strings.Contains(page, `href="/sessions/web%3Aowner"`) || strings.Contains(page, `href="/sessions/web:owner"`) {
		t.Errorf("links a session that does not exist:\n%s", page)
	}
	ok := newApp(t)
	if _, page := get(t, noRedirect(nil), ok.srv.URL+"/", nil); strings.Contains(page, `id="no-model"`) {
		t.Error("warning with a model configured")
	}
}

func TestBackOf(t *testing.T) {
	for in, want := range map[string]string{
		"/schedules": "/schedules", "/schedules/j1/run": "/schedules", "/sessions/web:owner/branch": "/sessions",
		"/memory/forget": "/memory", "/": "/", "/chat": "/", "/evil/x": "/", "": "/",
	} {
		if got := backOf(in); got != want {
			t.Errorf("backOf(%q) = %q, want %q", in, got, want)
		}
	}
}
