package dashboard

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	g "maragu.dev/gomponents"
	h "maragu.dev/gomponents/html"

	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/web/sanitize"
)

// The pages are built with gomponents (maragu.dev/gomponents): every
// text node and attribute value is HTML-escaped by the library, and raw
// markup enters only through g.Raw, which this file uses for nothing but
// SVG: sanitize.SVG's output, and the state figure and sparklines, which
// are drawn from numbers alone (figure.go). Values inside URLs are escaped
// here with url.PathEscape / url.QueryEscape (what html/template's URL
// contexts did), and a URL taken whole from data passes localURL.
//
// Why not html/template: executing any text/template makes the linker
// keep every exported method of every type that reaches an interface
// (text/template finds methods by name through reflection), which cost
// the binary about 27 MB (docs/bench/soak.md, "Binary size").

// views are the pages' content, each rendered inside layout.
var views = map[string]func(p pageData) g.Node{
	"chat": chatView, "sessions": sessionsView, "session": sessionView, "memory": memoryView,
	"forget": forgetView, "approvals": approvalsView, "state": stateView, "schedules": schedulesView,
	"settings": settingsView, "signin": signinView, "error": errorView,
}

type errorData struct {
	Status  int
	Message string
	Back    string // where "Back" goes (backOf)
}

type forgetData struct{ Actor string }

type schedulesData struct {
	Jobs    []scheduleRow
	Default string
}

type signinData struct {
	Next, Error string
	NoToken     bool
}

// printable is what txt prints: strings and numbers of any named type,
// so that a method value (Summary instead of Summary()) does not compile.
type printable interface {
	~string | ~int | ~int32 | ~int64 | ~uint | ~uint64 | ~float64 | ~bool
}

// txt is v printed as escaped text.
func txt[T printable](v T) g.Node { return g.Text(fmt.Sprint(v)) }

// localURL returns u when it is a path on this server ("/…", not "//…"
// or a scheme), else "#": the only URLs taken whole from data are links
// the dashboard built itself.
func localURL(u string) string {
	// A browser drops tabs and newlines from a URL and reads "\\" as "/",
	// so "/\t/host" or "/\\host" would leave the site.
	if !strings.HasPrefix(u, "/") || strings.HasPrefix(u, "//") ||
		strings.ContainsFunc(u, func(c rune) bool { return c < 0x20 || c == 0x7f || c == '\\' }) {
		return "#"
	}
	return u
}

func q(s string) string { return url.QueryEscape(s) }

func seg(s string) string { return url.PathEscape(s) }

func csrfInput(csrf string) g.Node {
	return h.Input(h.Type("hidden"), h.Name("csrf"), h.Value(csrf))
}

// postButton is a form with the CSRF field, extra hidden fields and one
// submit button.
func postButton(action, csrf string, formClass, btnClass string, label g.Node, hidden ...g.Node) g.Node {
	btn := []g.Node{h.Type("submit")}
	if btnClass != "" {
		btn = append(btn, h.Class(btnClass))
	}
	btn = append(btn, label)
	form := []g.Node{h.Method("post"), h.Action(action)}
	if formClass != "" {
		form = append(form, h.Class(formClass))
	}
	form = append(form, csrfInput(csrf))
	form = append(form, hidden...)
	form = append(form, h.Button(btn...))
	return h.Form(form...)
}

func hiddenInput(name, value string) g.Node {
	return h.Input(h.Type("hidden"), h.Name(name), h.Value(value))
}

func layout(p pageData, content g.Node) g.Node {
	l := p.Lang
	cur := func(names ...string) g.Node {
		for _, n := range names {
			if p.Nav == n {
				return h.Aria("current", "page")
			}
		}
		return nil
	}
	return h.Doctype(h.HTML(h.Lang(l),
		h.Head(
			h.Meta(h.Charset("utf-8")),
			h.Meta(h.Name("viewport"), h.Content("width=device-width, initial-scale=1")),
			h.Meta(h.Name("csrf-token"), h.Content(p.CSRF)),
			h.TitleEl(g.Text(p.Title+" · Tendril")),
			h.Link(h.Rel("stylesheet"), h.Href("/static/app.css")),
			h.Script(h.Src("/static/app.js"), h.Defer()),
		),
		h.Body(h.Data("page", p.Nav),
			h.A(h.Class("skip"), h.Href("#main"), g.Text(t(l, "Skip to content"))),
			h.Header(h.Class("top"),
				h.Span(h.Class("brand"), g.Text("Tendril")),
				h.Nav(h.Aria("label", t(l, "Tendril dashboard")),
					h.A(h.Href("/"), cur("chat"), g.Text(t(l, "Chat"))),
					h.A(h.Href("/sessions"), cur("sessions", "session"), g.Text(t(l, "Sessions"))),
					h.A(h.Href("/memory"), cur("memory", "forget"), g.Text(t(l, "Memory"))),
					h.A(h.Href("/approvals"), cur("approvals"), g.Text(t(l, "Approvals"))),
					h.A(h.Href("/state"), cur("state"), g.Text(t(l, "State"))),
					h.A(h.Href("/schedules"), cur("schedules"), g.Text(t(l, "Schedules"))),
					h.A(h.Href("/settings"), cur("settings"), g.Text(t(l, "Settings"))),
				),
				g.If(p.Auth && p.SignedIn, postButton("/signout", p.CSRF, "signout", "", g.Text(t(l, "Sign out")))),
			),
			h.Main(h.ID("main"), h.TabIndex("-1"),
				h.H1(g.Text(p.Title)),
				g.If(p.Flash != "", h.P(h.Class("flash"), h.Role("status"), g.Text(p.Flash))),
				content,
			),
		),
	))
}

// approvalCard is one pending approval request with its approve and deny
// buttons; back is where the buttons return to.
func approvalCard(l, csrf string, r approval.Request, back string) g.Node {
	return h.Article(h.Class("card approval"), h.ID("req-"+r.ID), h.Data("request", r.ID),
		h.H3(h.Code(g.Text(r.Tool)), g.Text(" "), h.Small(txt(r.Class))),
		h.Dl(h.Class("kv"),
			h.Dt(g.Text(t(l, "Arguments"))), h.Dd(h.Pre(h.Class("args"), g.Text(prettyJSON(r.Args)))),
			h.Dt(g.Text(t(l, "Actor"))), h.Dd(shown(r.ActorID)),
			h.Dt(g.Text(t(l, "Session"))), h.Dd(shown(r.SessionID)),
			h.Dt(g.Text(t(l, "Who asked"))), h.Dd(txt(r.Channel), g.Text(" · "), txt(r.AgentID)),
			g.If(r.Reason != "", g.Group{h.Dt(g.Text(t(l, "Why it asks"))), h.Dd(g.Text(r.Reason))}),
			h.Dt(g.Text(t(l, "Expires"))), h.Dd(h.Time(h.DateTime(when(r.ExpiresAt)), h.Data("expires", strconv.FormatInt(r.ExpiresAt.Unix(), 10)), g.Text(when(r.ExpiresAt)))),
			h.Dt(g.Text("args_hash")), h.Dd(idCode(r.ArgsHash)),
		),
		h.Div(h.Class("actions"),
			postButton("/approvals/"+seg(r.ID)+"/approve", csrf, "", "ok", g.Text(t(l, "Approve")), hiddenInput("back", back)),
			postButton("/approvals/"+seg(r.ID)+"/deny", csrf, "", "danger", g.Text(t(l, "Deny")), hiddenInput("back", back)),
		),
	)
}

// nodeBody is a session node's content: the user's text, the assistant's
// reply (SVG drawings sanitised) and tool calls, or tool results.
func nodeBody(l string, n session.Node) g.Node {
	switch n.Role {
	case "user":
		return h.Div(h.Class("msg-text"), g.Text(n.Text))
	case "assistant":
		out := g.Group{g.If(n.Text != "", h.Div(h.Class("msg-text reply"), replyNodes(n.Text)))}
		for _, b := range n.Blocks {
			switch b.Type {
			case "text":
				out = append(out, h.Div(h.Class("msg-text reply"), replyNodes(b.Text)))
			case "tool_use":
				out = append(out, h.Div(h.Class("tool"),
					h.Span(h.Class("tool-name"), g.Text(t(l, "Tool call")+": "), h.Code(g.Text(b.Name))),
					h.Pre(h.Class("args"), g.Text(prettyJSON(b.Input)))))
			}
		}
		return out
	case "tool":
		var out g.Group
		for _, b := range n.Blocks {
			cls := "tool result"
			if b.IsError {
				cls += " error"
			}
			out = append(out, h.Div(h.Class(cls), h.Span(h.Class("tool-name"), g.Text(t(l, "Result"))), h.Pre(g.Text(b.Text))))
		}
		return out
	}
	return h.Div(h.Class("msg-text"), g.Text(n.Text))
}

// replyNodes renders a reply: text escaped, SVG sanitised.
func replyNodes(reply string) g.Node {
	var out g.Group
	for _, s := range Segments(reply) {
		if s.SVG != "" {
			out = append(out, h.Figure(h.Class("whiteboard"), g.Raw(s.SVG)))
		} else {
			out = append(out, h.Span(h.Class("text"), g.Text(s.Text)))
		}
	}
	return out
}

func chatView(p pageData) g.Node {
	l, csrf := p.Lang, p.CSRF
	d := p.Data.(chatData)
	var path g.Group
	for _, n := range d.Path {
		who := t(l, "Assistant")
		switch n.Role {
		case "user":
			who = t(l, "You")
		case "tool":
			who = t(l, "Tool")
		}
		path = append(path, h.Div(h.Class("msg "+n.Role), h.ID("n-"+n.ID), h.Span(h.Class("who"), g.Text(who)), nodeBody(l, n)))
	}
	if len(path) == 0 {
		path = append(path, h.P(h.Class("empty"), g.Text(t(l, "No messages yet. Say hello."))))
	}
	var cards g.Group
	for _, r := range d.Pending {
		cards = append(cards, approvalCard(l, csrf, r, "/?"+d.Query))
	}
	return g.Group{
		h.Form(h.Method("get"), h.Action("/"), h.Class("inline target"),
			h.Label(h.For("actor"), g.Text(t(l, "Actor"))), g.Text(" "), h.Input(h.ID("actor"), h.Name("actor"), h.Value(d.Target.Actor), g.Attr("size", "16")),
			h.Label(h.For("session"), g.Text(t(l, "Session ID"))), g.Text(" "), h.Input(h.ID("session"), h.Name("session"), h.Value(d.Target.Session), g.Attr("size", "12")),
			h.Button(h.Type("submit"), g.Text(t(l, "Show"))),
			h.A(h.Href("/?actor="+q(d.Target.Actor)+"&session="+q(d.NewSession)), g.Text(t(l, "New session"))),
			g.If(d.HasSession, h.A(h.Href("/sessions/"+seg(d.Key)), shown(d.Key))),
		),
		g.If(d.NoModel, h.P(h.Class("warn"), h.Role("status"), h.ID("no-model"),
			g.Text(t(l, "No model is configured: set MODEL_ID (for example ollama/llama3.2) and restart; until then every message is refused.")))),
		h.Section(h.ID("transcript"), h.Class("transcript"), h.Aria("live", "polite"), h.Data("actor", d.Target.Actor), path),
		h.Section(h.ID("inline-approvals"), cards),
		h.Form(h.Method("post"), h.Action("/chat"), h.ID("chat-form"), h.Class("chat-form"),
			csrfInput(csrf),
			hiddenInput("actor", d.Target.Actor),
			hiddenInput("session", d.Target.Session),
			h.Label(h.For("message"), h.Class("sr"), g.Text(t(l, "Message"))),
			h.Textarea(h.ID("message"), h.Name("message"), h.Rows("3"), h.Required(), h.Placeholder(t(l, "Message"))),
			h.Div(h.Class("actions"),
				h.Button(h.Type("submit"), h.ID("send"), g.Text(t(l, "Send"))),
				h.Button(h.Type("button"), h.ID("stop"), g.Attr("hidden"), h.Data("label", t(l, "Stop")), g.Text(t(l, "Stop"))),
			),
		),
		h.Template(h.ID("i18n"), h.Data("you", t(l, "You")), h.Data("assistant", t(l, "Assistant")), h.Data("tool", t(l, "Tool call")),
			h.Data("result", t(l, "Result")), h.Data("thinking", t(l, "Thinking…")), h.Data("waiting", t(l, "Waiting for approval")),
			h.Data("delivered", t(l, "Reply after approval")), h.Data("failed", t(l, "The turn failed"))),
	}
}

func sessionsView(p pageData) g.Node {
	l := p.Lang
	rows, _ := p.Data.([]sessionRow)
	if len(rows) == 0 {
		return h.P(h.Class("empty"), g.Text(t(l, "No sessions yet.")))
	}
	var body g.Group
	for _, s := range rows {
		body = append(body, h.Tr(
			h.Td(h.A(h.Href("/sessions/"+seg(s.Key)), shown(s.Key))), h.Td(shown(s.Actor)), h.Td(txt(s.Channel)),
			h.Td(txt(s.Nodes)), h.Td(txt(s.Branches)), h.Td(h.Class("clip"), g.Text(s.LastText))))
	}
	return h.Div(h.Class("scroll"), h.Table(
		h.THead(h.Tr(th(l, "Key"), th(l, "Actor"), th(l, "Channel"), th(l, "Nodes"), th(l, "Branches"), th(l, "Last text"))),
		h.TBody(body)))
}

func th(l, s string) g.Node { return h.Th(g.Text(t(l, s))) }

func sessionView(p pageData) g.Node {
	l, csrf := p.Lang, p.CSRF
	d := p.Data.(sessionData)
	var leaves g.Group
	for _, b := range d.Branches {
		var act g.Node
		if b.Active {
			act = h.Strong(g.Text(t(l, "Active")))
		} else {
			act = postButton("/sessions/"+seg(d.Key)+"/branch", csrf, "inline", "", g.Text(t(l, "Switch")), hiddenInput("node", b.LeafID))
		}
		leaves = append(leaves, h.Li(g.If(b.Active, h.Class("active")),
			h.Span(h.Class("clip"), g.Text(b.LastText)), g.Text(" "),
			h.Small(g.Text("("+fmt.Sprint(b.Length)+" · "+when(b.Timestamp)+")")), g.Text(" "), act))
	}
	var roots g.Group
	for _, n := range d.Roots {
		roots = append(roots, treeNodeView(l, csrf, d.Key, n))
	}
	return g.Group{
		h.P(h.Code(shown(d.Key)),
			g.If(d.Chat != "", g.Group{g.Text(" · "), h.A(h.Href(localURL(d.Chat)), g.Text(t(l, "Open in chat")))}),
			g.Text(" · "+t(l, "Export")+": "),
			h.A(h.Href("/sessions/"+seg(d.Key)+"/export?format=json"), g.Text("JSON")), g.Text(" "),
			h.A(h.Href("/sessions/"+seg(d.Key)+"/export?format=jsonl"), g.Text("JSONL")), g.Text(" "),
			h.A(h.Href("/sessions/"+seg(d.Key)+"/export?format=md"), g.Text("Markdown"))),
		h.H2(g.Text(t(l, "Leaves"))),
		h.Ul(h.Class("leaves"), leaves),
		h.H2(g.Text(t(l, "Nodes")+" "), h.Small(h.Class("legend"), h.Span(h.Class("mark")), g.Text(" "+t(l, "active path")))),
		h.Ol(h.Class("tree"), roots),
	}
}

func treeNodeView(l, csrf, key string, n *treeNode) g.Node {
	cls := "node"
	if n.Active {
		cls += " on-path"
	}
	if n.Leaf {
		cls += " leaf"
	}
	var act g.Node
	if n.Leaf {
		act = h.Strong(h.Class("badge"), g.Text(t(l, "Active")))
	} else {
		act = postButton("/sessions/"+seg(key)+"/branch", csrf, "inline", "branch", g.Text(t(l, "Branch from here")), hiddenInput("node", n.ID))
	}
	var kids g.Node
	if len(n.Children) > 0 {
		var c g.Group
		for _, k := range n.Children {
			c = append(c, treeNodeView(l, csrf, key, k))
		}
		kids = h.Ol(c)
	}
	return h.Li(h.Class(cls), h.ID("n-"+n.ID),
		h.Div(h.Class("msg "+n.Role),
			h.Span(h.Class("who"), g.Text(n.Role)), g.Text(" "), h.Small(idCode(n.ID), g.Text(" "+when(n.Timestamp))),
			nodeBody(l, n.Node),
			g.Text(" "), act,
		),
		kids,
	)
}

func sourcesView(links []provLink) g.Node {
	if len(links) == 0 {
		return nil
	}
	var out g.Group
	for _, k := range links {
		if k.URL != "" {
			out = append(out, h.A(h.Href(localURL(k.URL)), h.Class("prov"), g.Text(short(k.ID))), g.Text(" "))
		} else {
			out = append(out, idCode(k.ID), g.Text(" "))
		}
	}
	return h.Span(h.Class("sources"), out)
}

func actorPicker(l, action, actor string, actors []string) g.Node {
	var opts g.Group
	for _, a := range actors {
		opts = append(opts, h.Option(h.Value(a), shown(a)))
	}
	return h.Form(h.Method("get"), h.Action(action), h.Class("inline"),
		h.Label(h.For("actor"), g.Text(t(l, "Actor"))), g.Text(" "), h.Input(h.ID("actor"), h.Name("actor"), h.Value(actor), h.List("actors")),
		h.DataList(h.ID("actors"), opts),
		h.Button(h.Type("submit"), g.Text(t(l, "Show"))))
}

func actorList(l, heading, base string, actors []string) g.Node {
	var items g.Group
	for _, a := range actors {
		items = append(items, h.Li(h.A(h.Href(base+"?actor="+q(a)), shown(a))))
	}
	if len(items) == 0 {
		items = append(items, h.Li(g.Text(t(l, "none"))))
	}
	return g.Group{h.H2(g.Text(t(l, heading))), h.Ul(items)}
}

func memoryView(p pageData) g.Node {
	l, csrf := p.Lang, p.CSRF
	d := p.Data.(memoryData)
	out := g.Group{actorPicker(l, "/memory", d.Actor, d.Actors)}
	if d.Actor == "" {
		return append(out, actorList(l, "Actors with memory", "/memory", d.Actors))
	}
	back := "/memory?actor=" + q(d.Actor)
	out = append(out, h.H2(g.Text(t(l, "Staging queue"))))
	for _, r := range d.Staged {
		out = append(out, h.Article(h.Class("card staged"), h.Data("record", r.ID),
			h.P(h.Class("content"), shown(r.Content)),
			h.P(h.Small(txt(r.Strategy), g.Text(" · "+t(l, "Importance")+" "+f2(r.Importance)+" · "), shown(r.Namespace))),
			sourcesView(r.Links),
			h.Div(h.Class("actions"),
				postButton("/memory/staging/"+seg(r.ID)+"/approve", csrf, "", "ok", g.Text(t(l, "Approve")), hiddenInput("back", back)),
				postButton("/memory/staging/"+seg(r.ID)+"/reject", csrf, "", "danger", g.Text(t(l, "Reject")), hiddenInput("back", back)),
			)))
	}
	if len(d.Staged) == 0 {
		out = append(out, h.P(h.Class("empty"), g.Text(t(l, "Nothing is staged."))))
	}
	out = append(out, h.H2(g.Text(t(l, "Search"))),
		h.Form(h.Method("get"), h.Action("/memory"), h.Class("inline"), hiddenInput("actor", d.Actor),
			h.Label(h.For("q"), h.Class("sr"), g.Text(t(l, "Search"))), h.Input(h.ID("q"), h.Name("q"), h.Value(d.Query), h.Type("search")),
			g.Text(" "), h.Button(h.Type("submit"), g.Text(t(l, "Search")))))
	if d.Searched {
		var hits g.Group
		for _, hit := range d.Hits {
			hits = append(hits, h.Li(h.P(h.Class("content"), shown(hit.Record.Content)),
				h.P(h.Small(g.Text(t(l, "Score")+" "+f3(hit.Score)+" · "), txt(hit.Record.Strategy), g.Text(" · "), txt(hit.Record.Status))),
				g.If(hit.Explain != "", h.Details(h.Summary(g.Text(t(l, "Explanation"))), h.Pre(g.Text(hit.Explain))))))
		}
		if len(hits) == 0 {
			hits = append(hits, h.Li(h.Class("empty"), g.Text(t(l, "No hits."))))
		}
		out = append(out, h.Ol(h.Class("hits"), hits))
	}
	out = append(out, h.H2(g.Text(t(l, "Records"))))
	for _, gr := range d.Groups {
		var rows g.Group
		for _, r := range gr.Records {
			rows = append(rows, h.Tr(h.Class("status-"+fmt.Sprint(r.Status)),
				h.Td(shown(r.Content)), h.Td(txt(r.Status)), h.Td(g.Text(f2(r.Importance))),
				h.Td(h.Code(h.Class("meta"), shown(metaJSON(r.Metadata)))), h.Td(sourcesView(r.Links))))
		}
		out = append(out, h.Section(h.Class("group"), h.H3(h.Code(shown(gr.Namespace)), g.Text(" · "), txt(gr.Strategy)),
			h.Div(h.Class("scroll"), h.Table(
				h.THead(h.Tr(th(l, "Content"), th(l, "Status"), th(l, "Importance"), th(l, "Metadata"), th(l, "Sources"))),
				h.TBody(rows)))))
	}
	if len(d.Groups) == 0 {
		out = append(out, h.P(h.Class("empty"), g.Text(t(l, "No records."))))
	}
	return append(out, h.P(h.A(h.Class("button danger"), h.Href("/memory/forget?actor="+q(d.Actor)), g.Text(t(l, "Forget this actor")))))
}

func forgetView(p pageData) g.Node {
	l := p.Lang
	d := p.Data.(forgetData)
	return g.Group{
		h.P(h.Class("warn"), g.Text(t(l, "This removes every record, event, session, job, pending approval and state of the actor, for good."))),
		h.P(h.Strong(g.Text(d.Actor))),
		h.Form(h.Method("post"), h.Action("/memory/forget"), h.Class("inline"), csrfInput(p.CSRF),
			hiddenInput("actor", d.Actor), hiddenInput("confirm", d.Actor),
			h.Button(h.Type("submit"), h.Class("danger"), h.ID("confirm-forget"), g.Text(t(l, "Forget this actor"))),
			g.Text(" "), h.A(h.Href("/memory?actor="+q(d.Actor)), g.Text(t(l, "Cancel")))),
	}
}

func approvalsView(p pageData) g.Node {
	l, csrf := p.Lang, p.CSRF
	d := p.Data.(approvalsData)
	out := g.Group{h.H2(g.Text(t(l, "Pending requests")))}
	for _, r := range d.Pending {
		out = append(out, approvalCard(l, csrf, r, "/approvals"))
	}
	if len(d.Pending) == 0 {
		out = append(out, h.P(h.Class("empty"), g.Text(t(l, "No pending requests."))))
	}
	yolo := g.Text(t(l, "closed"))
	if d.YoloOpen {
		yolo = h.Strong(h.Class("warn"), g.Text(t(l, "open until")+" "),
			h.Time(h.Data("expires", strconv.FormatInt(d.YoloUntil.Unix(), 10)), g.Text(when(d.YoloUntil))))
	}
	out = append(out, h.H2(g.Text(t(l, "YOLO window"))), h.P(yolo),
		h.P(h.Small(g.Text(t(l, "While open, ask rules are treated as always (never and exec tools are untouched; at most 30 minutes).")))),
		h.Form(h.Method("post"), h.Action("/approvals/yolo"), h.Class("inline"), csrfInput(csrf),
			h.Label(h.For("minutes"), g.Text(t(l, "Open for"))), g.Text(" "),
			h.Input(h.ID("minutes"), h.Name("minutes"), h.Type("number"), h.Min("1"), h.Max("30"), h.Value("10"), g.Attr("size", "3")),
			g.Text(" "+t(l, "minutes")+" "), h.Button(h.Type("submit"), g.Text(t(l, "Open")))),
		g.If(d.YoloOpen, postButton("/approvals/yolo", csrf, "inline", "", g.Text(t(l, "Close")), hiddenInput("close", "1"))),
		h.H2(g.Text(t(l, "Ledger"))),
		g.If(d.VerifyErr != "", h.P(h.Class("error"), g.Text(d.VerifyErr))))
	// The gate's own report wins: it is closed by what it saw (a truncated
	// or replaced ledger, a failed append) even when the file as it is now
	// verifies.
	rep, broken := d.Verify, !d.Verify.OK
	if d.Broken != nil {
		broken = true
		if d.Verify.OK || d.Verify.FirstBad == nil {
			rep = *d.Broken
		}
	}
	status := g.Group{h.Strong(h.Class("ok-text"), g.Text(t(l, "verified")))}
	hashLabel := "Head hash"
	if broken {
		status = g.Group{h.Strong(h.Class("error"), g.Text(t(l, "BROKEN"))), g.Text(" "), g.Text(rep.Summary())}
		hashLabel = "Last good hash"
	}
	if d.Broken != nil {
		out = append(out, h.Div(h.Class("error"), h.ID("ledger-broken"), h.Role("alert"),
			h.P(h.Strong(g.Text(t(l, "Ledger broken — gate closed"))), g.Text(": "), g.Text(d.Broken.Summary())),
			h.P(g.Text(t(l, "Every tool call is refused and open requests are rejected. After investigating (tendril audit verify), reopen the gate with:")),
				g.Text(" "), h.Code(g.Text(`tendril approvals reset --reason "…"`)))))
	}
	out = append(out, h.Dl(h.Class("kv ledger"),
		h.Dt(g.Text(t(l, "Status"))), h.Dd(status),
		h.Dt(g.Text(t(l, "entries"))), h.Dd(g.Text(fmt.Sprint(rep.Entries)+" (seq "+fmt.Sprint(rep.HeadSeq)+")")),
		h.Dt(g.Text(t(l, hashLabel))), h.Dd(h.Code(h.Class("hash"), txt(rep.HeadHash))),
		h.Dt(g.Text("path")), h.Dd(h.Code(txt(rep.Path)))),
		h.H2(g.Text(t(l, "Recent decisions"))))
	if len(d.Recent) == 0 {
		return append(out, h.P(h.Class("empty"), g.Text(t(l, "none"))))
	}
	var rows g.Group
	for _, r := range d.Recent {
		rows = append(rows, h.Tr(h.Td(idCode(r.ID)), h.Td(g.Text(r.Tool)), h.Td(shown(r.ActorID)), h.Td(txt(r.Status)), h.Td(shown(r.DecidedBy))))
	}
	return append(out, h.Div(h.Class("scroll"), h.Table(
		h.THead(h.Tr(h.Th(g.Text("ID")), th(l, "Tool"), th(l, "Actor"), th(l, "Status"), th(l, "Decided by"))),
		h.TBody(rows))))
}

func stateView(p pageData) g.Node {
	l := p.Lang
	d := p.Data.(stateData)
	out := g.Group{actorPicker(l, "/state", d.Actor, d.Actors)}
	if d.Actor == "" {
		return append(out, actorList(l, "Actors with state", "/state", d.Actors))
	}
	level := fmt.Sprint(d.Snap.Level)
	view, pressed := "numbers", "false"
	if d.Numbers {
		view, pressed = "figure", "true"
	}
	out = append(out,
		h.P(h.Small(g.Text(t(l, "This is a numeric model for state management and safety control, not a claim of feelings.")))),
		h.P(h.Class("breaker level-"+level), g.Text(t(l, "Breaker")+": "), h.Strong(g.Text(level)),
			g.Text(" · "+t(l, "Turns")+" "+fmt.Sprint(d.Snap.Turns)),
			g.If(d.Snap.TurnsInCritical != 0, g.Text(" · CRITICAL "+fmt.Sprint(d.Snap.TurnsInCritical)))),
		g.If(!d.Has, h.P(h.Class("empty"), g.Text(t(l, "No state yet for this actor.")))),
		h.P(h.A(h.ID("numbers-toggle"), h.Class("button"), h.Role("button"), h.Aria("pressed", pressed), h.Aria("controls", "figure numbers"),
			h.Href("/state?actor="+q(d.Actor)+"&view="+view), g.Text(t(l, "Numbers")))))
	drift := g.Group{g.Text(t(l, "figure consistent with state") + " "), h.Code(g.Text(d.Figure.StateDigest)), g.Text(" → "), h.Code(g.Text(d.Figure.Digest))}
	if d.Drift {
		drift = g.Group{h.Strong(h.Class("error"), g.Text(t(l, "DRIFT detected")))}
	}
	var reading g.Group
	for _, s := range d.Figure.Reading {
		reading = append(reading, h.Li(h.Code(g.Text(s))))
	}
	out = append(out, h.Section(h.ID("figure"), g.If(d.Numbers, g.Attr("hidden")),
		h.H2(g.Text(t(l, "Figure"))),
		h.Div(h.Class("figure-box"), h.Data("figure-digest", d.Figure.Digest), h.Data("state-digest", d.Figure.StateDigest), g.Raw(d.Figure.SVG)),
		h.P(h.Class("drift"), drift),
		h.P(h.Small(g.Text(t(l, "Every part of the figure is computed from the state alone; the same state always draws the same figure.")))),
		h.Ul(h.Class("reading"), reading)))
	var rows g.Group
	for _, r := range d.Rows {
		cause := g.Node(g.Text("—"))
		if r.LastCause != "" {
			cause = h.Code(g.Text(r.LastCause))
		}
		rows = append(rows, h.Tr(h.Data("dim", r.Name), h.Th(h.Scope("row"), g.Text(t(l, r.Name)+" "), h.Small(g.Text(r.Name))),
			h.Td(h.Class("num"), g.Text(f3(r.Value))), h.Td(h.Class("num"), g.Text(f3(r.Baseline))), h.Td(g.Raw(r.Spark.SVG)), h.Td(cause)))
	}
	var breaks g.Group
	for _, c := range d.Breaks {
		breaks = append(breaks, h.Li(g.Text("#"+fmt.Sprint(c.Turn)+" "+when(c.At)+" "), h.Strong(txt(c.Note))))
	}
	if len(breaks) == 0 {
		breaks = append(breaks, h.Li(g.Text(t(l, "none"))))
	}
	var changes g.Group
	for _, c := range d.Changes {
		var cues g.Group
		for _, cue := range c.Cues {
			cues = append(cues, g.Text("“"+cue+"” "))
		}
		changes = append(changes, h.Tr(
			h.Td(g.Text("#"+fmt.Sprint(c.Turn)), h.Br(), h.Small(g.Text(when(c.At)))),
			h.Td(txt(c.Cause)),
			h.Td(txt(c.Stimulus), g.If(len(c.Cues) > 0, g.Group{h.Br(), h.Small(cues)})),
			h.Td(h.Class("num"), g.If(c.Intensity != 0, g.Text(f2(c.Intensity)))),
			h.Td(h.Code(h.Class("delta"), g.Text(deltas(c.Delta)))), h.Td(txt(c.Level)), h.Td(txt(c.Note))))
	}
	return append(out, h.Section(h.ID("numbers"), g.If(!d.Numbers, g.Attr("hidden")),
		h.H2(g.Text(t(l, "Numbers"))),
		h.Div(h.Class("scroll"), h.Table(h.Class("values"),
			h.THead(h.Tr(th(l, "Name"), th(l, "Value"), th(l, "Baseline"), th(l, "Trend"), th(l, "Cause"))),
			h.TBody(rows))),
		h.H2(g.Text(t(l, "Transitions"))), h.Ul(breaks),
		h.H2(g.Text(t(l, "Event log"))),
		h.Div(h.Class("scroll"), h.Table(h.Class("events"),
			h.THead(h.Tr(th(l, "Turn"), th(l, "Cause"), th(l, "Stimulus"), th(l, "Intensity"), th(l, "Delta"), th(l, "Breaker"), th(l, "Note"))),
			h.TBody(changes)))))
}

func schedulesView(p pageData) g.Node {
	l, csrf := p.Lang, p.CSRF
	d := p.Data.(schedulesData)
	out := g.Group{h.H2(g.Text(t(l, "Jobs")))}
	if len(d.Jobs) == 0 {
		out = append(out, h.P(h.Class("empty"), g.Text(t(l, "No jobs."))))
	} else {
		var rows g.Group
		for _, j := range d.Jobs {
			status := fmt.Sprint(j.Status)
			pause := postButton("/schedules/"+seg(j.ID)+"/pause", csrf, "", "", g.Text(t(l, "Pause")))
			next := when(j.NextRun)
			switch status {
			case "paused":
				pause = postButton("/schedules/"+seg(j.ID)+"/resume", csrf, "", "", g.Text(t(l, "Resume")))
			case "done":
				// A fired one-shot: it will not run again (Run now runs
				// it once more); its runs stay below.
				pause, next = nil, "—"
			}
			var runs g.Node = h.P(h.Class("empty"), g.Text(t(l, "No runs yet.")))
			if len(j.Runs) > 0 {
				var rr g.Group
				for _, r := range j.Runs {
					res := fmt.Sprint(r.Result)
					detail := h.Small(shown(r.Detail))
					if res == "error" {
						detail = h.Small(h.Class("error"), shown(r.Detail))
					}
					rr = append(rr, h.Tr(h.Data("outcome", res), h.Td(g.Text(when(r.Started))), h.Td(g.Text(when(r.Finished))), h.Td(g.Text(t(l, res))), h.Td(detail)))
				}
				runs = h.Table(h.THead(h.Tr(th(l, "Started"), th(l, "Finished"), th(l, "Outcome"), th(l, "Detail"))), h.TBody(rr))
			}
			rows = append(rows,
				h.Tr(h.Data("job", j.ID),
					h.Td(shown(j.Name), h.Br(), h.Small(idCode(j.ID), g.Text(" "), txt(j.Source))),
					h.Td(txt(j.Kind)),
					h.Td(h.Code(g.Text(j.Spec)), g.If(j.TZ != "", g.Text(" "+j.TZ))),
					h.Td(shown(j.Task)),
					h.Td(shown(j.ActorID), h.Br(), h.Small(txt(j.Channel))),
					h.Td(g.Text(next)),
					h.Td(g.Text(when(j.LastRun)),
						g.If(j.Attempts != 0, g.Group{h.Br(), h.Small(g.Text(t(l, "Attempts") + " " + fmt.Sprint(j.Attempts)))}),
						g.If(j.LastError != "", g.Group{h.Br(), h.Small(h.Class("error"), shown(j.LastError))})),
					h.Td(h.Data("status", status), g.Text(t(l, status))),
					h.Td(h.Class("actions"),
						postButton("/schedules/"+seg(j.ID)+"/run", csrf, "", "", g.Text(t(l, "Run now"))),
						pause,
						postButton("/schedules/"+seg(j.ID)+"/remove", csrf, "", "danger", g.Text(t(l, "Remove"))))),
				h.Tr(h.Class("runs"), h.Data("runs", j.ID), h.Td(h.ColSpan("9"),
					h.Details(h.Summary(g.Text(t(l, "Run history")+" ("+strconv.Itoa(len(j.Runs))+")")), runs))))
		}
		out = append(out, h.Div(h.Class("scroll"), h.Table(
			h.THead(h.Tr(th(l, "Name"), th(l, "Kind"), th(l, "Spec"), th(l, "Task"), th(l, "Actor"), th(l, "Next run"), th(l, "Last run"), th(l, "Status"), h.Th())),
			h.TBody(rows))))
	}
	return append(out, h.H2(g.Text(t(l, "Add a job"))),
		h.Form(h.Method("post"), h.Action("/schedules"), h.Class("stack"), csrfInput(csrf),
			h.Label(h.For("name"), g.Text(t(l, "Name"))), h.Input(h.ID("name"), h.Name("name"), h.Required()),
			h.Label(h.For("kind"), g.Text(t(l, "Kind"))), h.Select(h.ID("kind"), h.Name("kind"),
				h.Option(g.Text("at")), h.Option(h.Selected(), g.Text("every")), h.Option(g.Text("cron"))),
			h.Label(h.For("spec"), g.Text(t(l, "Spec"))), h.Input(h.ID("spec"), h.Name("spec"), h.Required(), h.Placeholder("90m")),
			h.Small(g.Text(t(l, "at: an instant (2026-12-01T09:00:00Z, or in 2h); every: an interval (90m); cron: an expression (0 8 * * *)."))),
			h.Label(h.For("tz"), g.Text(t(l, "Time zone"))), h.Input(h.ID("tz"), h.Name("tz"), h.Placeholder("Europe/Berlin")),
			h.Label(h.For("task"), g.Text(t(l, "Task"))), h.Input(h.ID("task"), h.Name("task"), h.Required()),
			h.Label(h.For("job-actor"), g.Text(t(l, "Actor"))), h.Input(h.ID("job-actor"), h.Name("actor"), h.Value(d.Default)),
			h.Button(h.Type("submit"), g.Text(t(l, "Add")))))
}

func settingsView(p pageData) g.Node {
	l := p.Lang
	d := p.Data.(settingsData)
	var checks g.Group
	for _, c := range d.Report.Checks {
		checks = append(checks, h.Tr(h.Class("check-"+fmt.Sprint(c.Status)), h.Td(txt(c.Name)), h.Td(txt(c.Status)), h.Td(txt(c.Detail))))
	}
	out := g.Group{h.H2(g.Text(t(l, "Checks"))),
		h.Div(h.Class("scroll"), h.Table(h.THead(h.Tr(th(l, "Check"), th(l, "Status"), th(l, "Detail"))), h.TBody(checks))),
		h.H2(g.Text(t(l, "Skills")))}
	for _, s := range d.Skills {
		out = append(out, h.Details(h.Summary(h.Strong(g.Text(s.Name)), g.Text(" — "+s.Description)), h.Pre(g.Text(s.Instructions))))
	}
	if len(d.Skills) == 0 {
		out = append(out, h.P(h.Class("empty"), g.Text(t(l, "No skills are active."))))
	}
	for _, pr := range d.Problems {
		out = append(out, h.P(h.Class("warn"), h.Small(g.Text(pr))))
	}
	out = append(out, h.H2(g.Text(t(l, "Tools"))))
	if d.HasTools {
		var tools g.Group
		for _, tl := range d.Tools {
			tools = append(tools, h.Tr(h.Td(h.Code(g.Text(tl.Name))), h.Td(txt(tl.Class)), h.Td(g.Text(tl.Description))))
		}
		out = append(out, g.If(d.ToolsErr != "", h.P(h.Class("warn"), g.Text(d.ToolsErr))),
			h.Div(h.Class("scroll"), h.Table(h.THead(h.Tr(th(l, "Name"), th(l, "Class"), th(l, "Description"))), h.TBody(tools))))
	}
	out = append(out, h.H2(g.Text(t(l, "MCP servers"))))
	for _, m := range d.MCP {
		var tools g.Group
		for _, tl := range m.Tools {
			tools = append(tools, h.Li(h.Code(g.Text(tl.Name)), g.Text(" — "+tl.Description)))
		}
		out = append(out, h.Section(h.Class("group"), h.H3(g.Text(m.Name+" "), h.Small(h.Code(g.Text(m.Target)), g.Text(" "+m.Class))), h.Ul(tools)))
	}
	if len(d.MCP) == 0 {
		out = append(out, h.P(h.Class("empty"), g.Text(t(l, "No MCP servers are configured."))))
	}
	out = append(out, h.H2(g.Text(t(l, "Effective configuration"))),
		h.P(h.Small(g.Text(t(l, "Secrets are masked.")+" "+d.Report.ConfigFile))),
		h.Pre(h.Class("config"), g.Text(d.Config)),
		h.H2(g.Text(t(l, "Live log"))))
	if !d.HasLog {
		return append(out, h.P(h.Class("empty"), g.Text(t(l, "The log tail is not connected in this process."))))
	}
	var log strings.Builder
	for _, line := range d.Log {
		log.WriteString(line)
		log.WriteByte('\n')
	}
	return append(out, h.Pre(h.ID("log"), h.Class("log"), h.Data("stream", "/settings/log"), h.Aria("live", "polite"), g.Text(log.String())))
}

func signinView(p pageData) g.Node {
	l := p.Lang
	d := p.Data.(signinData)
	out := g.Group{g.If(d.Error != "", h.P(h.Class("error"), h.Role("alert"), g.Text(d.Error)))}
	if d.NoToken {
		return append(out, h.P(g.Text(t(l, "No token is configured: on loopback the dashboard needs no sign-in.")+" "), h.A(h.Href("/"), g.Text(t(l, "Chat")))))
	}
	return append(out, h.P(g.Text(t(l, "Enter TENDRIL_AUTH_TOKEN, or open the link that tendril dashboard prints."))),
		h.Form(h.Method("post"), h.Action("/signin"), h.Class("stack"),
			hiddenInput("next", d.Next),
			h.Label(h.For("token"), g.Text(t(l, "Token"))),
			h.Input(h.ID("token"), h.Name("token"), h.Type("password"), h.AutoComplete("current-password"), h.Required()),
			h.Button(h.Type("submit"), g.Text(t(l, "Sign in")))))
}

func errorView(p pageData) g.Node {
	d := p.Data.(errorData)
	return g.Group{
		h.P(h.Class("error"), h.Role("alert"), h.Strong(g.Text(strconv.Itoa(d.Status))), g.Text(" "+d.Message)),
		h.P(h.A(h.Href(localURL(d.Back)), g.Text(t(p.Lang, "Back")))),
	}
}

// shown is g.Text of stored text (an ID, a name, a job's task or error, a
// memory record under review) with its bidirectional formatting characters
// escaped
// (sanitize.EscapeBidi), so that it displays in the order it is stored.
func shown(s string) g.Node { return g.Text(sanitize.EscapeBidi(s)) }

// idCode shows an ID abbreviated (short) in <code>, with the whole ID as
// its title so it can be read and copied (`tendril session branch --from`).
// The shown part has its bidirectional controls escaped
// (sanitize.EscapeBidi); the title keeps the ID as stored, for copying.
func idCode(id string) g.Node {
	return h.Code(h.TitleAttr(id), g.Text(short(sanitize.EscapeBidi(id))))
}
