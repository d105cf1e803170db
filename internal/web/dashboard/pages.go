package dashboard

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/assistant"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/skill"
	"github.com/tendrilai/tendril/internal/state"
)

// decider is recorded in the ledger as who decided from the dashboard.
const decider = "web:owner"

// ---- Sessions ----

func (d *Dashboard) sessionsPage(w http.ResponseWriter, r *http.Request) {
	rows, err := d.a.ListSessions(r.Context(), "")
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	var out []sessionRow
	for _, s := range rows {
		k, err := d.a.ParseSessionKey("", s.Key)
		if err != nil {
			continue
		}
		tree, err := d.a.Session(r.Context(), k)
		if err != nil {
			continue
		}
		rw := sessionRow{SessionRow: s}
		for _, n := range tree.Nodes {
			if n.Timestamp > rw.Updated {
				rw.Updated = n.Timestamp
			}
			if a, ok := n.Metadata["actorId"].(string); ok && rw.Actor == "" {
				rw.Actor = a
			}
		}
		out = append(out, rw)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Updated > out[j].Updated })
	d.render(w, r, "sessions", "Sessions", out)
}

// sessionRow is a session on /sessions: its actor and last change.
type sessionRow struct {
	assistant.SessionRow
	Actor   string
	Updated int64
}

// treeNode is a node with its children, for drawing the tree.
type treeNode struct {
	session.Node
	Children []*treeNode
	Active   bool // on the active path
	Leaf     bool // the active leaf
	IsLeaf   bool // has no children
}

type sessionData struct {
	Key      string
	Roots    []*treeNode
	Branches []session.Branch
	Leaf     string
	Chat     string // the chat link for this session, "" when not a web session
}

func (d *Dashboard) sessionPage(w http.ResponseWriter, r *http.Request) {
	k, err := d.a.ParseSessionKey("", r.PathValue("key"))
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	tree, err := d.a.Session(r.Context(), k)
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	onPath := map[string]bool{}
	for _, n := range tree.ActivePath {
		onPath[n.ID] = true
	}
	byID := map[string]*treeNode{}
	for _, n := range tree.Nodes {
		byID[n.ID] = &treeNode{Node: n, Active: onPath[n.ID], Leaf: n.ID == tree.Leaf}
	}
	var roots []*treeNode
	for _, n := range tree.Nodes {
		tn := byID[n.ID]
		if p, ok := byID[n.ParentID]; ok && n.ParentID != "" {
			p.Children = append(p.Children, tn)
		} else {
			roots = append(roots, tn)
		}
	}
	for _, tn := range byID {
		tn.IsLeaf = len(tn.Children) == 0
	}
	data := sessionData{Key: tree.Key, Roots: roots, Branches: tree.Branches, Leaf: tree.Leaf}
	if k.Channel == Channel {
		for _, n := range tree.Nodes {
			if a, ok := n.Metadata["actorId"].(string); ok && a != "" {
				tg := chatTarget{Actor: a}
				owner := agent.SessionOwner(a, Channel)
				if rest, ok := strings.CutPrefix(k.ID, owner+agent.SessionSep); ok {
					tg.Session = rest
				}
				data.Chat = "/?" + tg.query()
				break
			}
		}
	}
	d.render(w, r, "session", "Session", data)
}

// sessionBranch is "Branch from here" and "Switch": the node becomes the
// active leaf.
func (d *Dashboard) sessionBranch(w http.ResponseWriter, r *http.Request) {
	k, err := d.a.ParseSessionKey("", r.PathValue("key"))
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	node := r.PostFormValue("node")
	if node == "" {
		d.fail(w, r, 0, fmt.Errorf("%w: node (a node ID) is required", assistant.ErrInvalid))
		return
	}
	if err := d.a.BranchFrom(r.Context(), k, node); err != nil {
		d.fail(w, r, 0, err)
		return
	}
	d.done(w, r, back(r, "/sessions/"+url.PathEscape(k.String())), t(lang(r), "The next message continues from this node."), map[string]string{"leaf": node})
}

func (d *Dashboard) sessionExport(w http.ResponseWriter, r *http.Request) {
	k, err := d.a.ParseSessionKey("", r.PathValue("key"))
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	format := r.URL.Query().Get("format")
	ct := map[string]string{session.FormatJSON: "application/json", session.FormatJSONL: "application/x-ndjson", session.FormatMD: "text/markdown; charset=utf-8"}[format]
	ext := map[string]string{session.FormatJSON: "json", session.FormatJSONL: "jsonl", session.FormatMD: "md"}[format]
	if ct == "" {
		d.fail(w, r, http.StatusBadRequest, fmt.Errorf("format must be json, jsonl or md, not %q", format))
		return
	}
	if _, err := d.a.Session(r.Context(), k); err != nil {
		d.fail(w, r, 0, err)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Disposition", exportDisposition(k.String(), ext))
	if err := d.a.ExportSession(r.Context(), k, format, w); err != nil {
		d.log.Warn("session export failed midway", "key", k.String(), "err", err)
	}
}

// ---- Memory ----

type recordView struct {
	memory.Record
	Links []provLink
}

type provLink struct {
	ID  string
	URL string // "" when the node's session is gone
}

type memoryData struct {
	Actor    string
	Actors   []string
	Groups   []recordGroup
	Staged   []recordView
	Query    string
	Hits     []memory.Hit
	Searched bool
}

type recordGroup struct {
	Namespace string
	Strategy  memory.Strategy
	Records   []recordView
}

func (d *Dashboard) memoryPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	data := memoryData{Actor: q.Get("actor"), Query: q.Get("q")}
	var err error
	if data.Actors, err = d.a.MemoryActors(r.Context()); err != nil {
		d.fail(w, r, 0, err)
		return
	}
	if data.Actor == "" {
		d.render(w, r, "memory", "Memory", data)
		return
	}
	recs, err := d.a.Records(r.Context(), assistant.RecordsQuery{ActorID: data.Actor,
		Statuses: []string{string(memory.StatusActive), string(memory.StatusSuperseded), string(memory.StatusRejected)}})
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	staged, err := d.a.Staged(r.Context(), data.Actor)
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	prov := d.provenance(r.Context(), data.Actor)
	view := func(rec memory.Record) recordView {
		v := recordView{Record: rec}
		for _, s := range rec.Sources {
			v.Links = append(v.Links, provLink{ID: s, URL: prov[s]})
		}
		return v
	}
	idx := map[string]int{}
	for _, rec := range recs {
		g := rec.Namespace + "\x00" + string(rec.Strategy)
		i, ok := idx[g]
		if !ok {
			i = len(data.Groups)
			idx[g] = i
			data.Groups = append(data.Groups, recordGroup{Namespace: rec.Namespace, Strategy: rec.Strategy})
		}
		data.Groups[i].Records = append(data.Groups[i].Records, view(rec))
	}
	for _, rec := range staged {
		data.Staged = append(data.Staged, view(rec))
	}
	if data.Query != "" {
		data.Searched = true
		if data.Hits, err = d.a.Search(r.Context(), assistant.SearchQuery{ActorID: data.Actor, Text: data.Query, Explain: true}); err != nil {
			d.fail(w, r, 0, err)
			return
		}
	}
	d.render(w, r, "memory", "Memory", data)
}

// provenance maps the actor's session node IDs (the sources of records
// and events) to links to the node in its session tree.
func (d *Dashboard) provenance(ctx context.Context, actor string) map[string]string {
	out := map[string]string{}
	rows, err := d.a.ListSessions(ctx, "")
	if err != nil {
		return out
	}
	for _, s := range rows {
		k, err := d.a.ParseSessionKey("", s.Key)
		if err != nil || !agent.OwnsSession(k, actor) {
			continue
		}
		tree, err := d.a.Session(ctx, k)
		if err != nil {
			continue
		}
		for _, n := range tree.Nodes {
			out[n.ID] = "/sessions/" + url.PathEscape(k.String()) + "#n-" + url.PathEscape(n.ID)
		}
	}
	return out
}

func (d *Dashboard) stagingDecide(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		var err error
		var v any
		if approve {
			v, err = d.a.ApproveStaged(r.Context(), id)
		} else {
			err = d.a.RejectStaged(r.Context(), id)
		}
		if err != nil {
			d.fail(w, r, 0, err)
			return
		}
		d.done(w, r, back(r, "/memory"), t(lang(r), "Done."), v)
	}
}

func (d *Dashboard) forgetConfirm(w http.ResponseWriter, r *http.Request) {
	actor := r.URL.Query().Get("actor")
	if err := agent.ValidateID(actor); err != nil {
		d.fail(w, r, http.StatusBadRequest, fmt.Errorf("actor %v", err))
		return
	}
	d.render(w, r, "forget", "Forget this actor", forgetData{Actor: actor})
}

// forget runs only with confirm equal to the actor ID, the field the
// confirmation page fills.
func (d *Dashboard) forget(w http.ResponseWriter, r *http.Request) {
	actor := r.PostFormValue("actor")
	if actor == "" || r.PostFormValue("confirm") != actor {
		d.fail(w, r, http.StatusBadRequest, fmt.Errorf("%w: forgetting needs the confirmation page", assistant.ErrInvalid))
		return
	}
	rep, err := d.a.Forget(r.Context(), assistant.ForgetRequest{ActorID: actor, Sessions: true})
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	if rep.Remaining != 0 {
		d.fail(w, r, http.StatusInternalServerError, fmt.Errorf("forget %s: %d items remain", actor, rep.Remaining))
		return
	}
	msg := fmt.Sprintf("%s: %s (sessions %d, jobs %d, approvals %d)", t(lang(r), "Forgotten"), actor, len(rep.SessionsRemoved), rep.JobsRemoved, rep.ApprovalsDenied)
	d.done(w, r, "/memory", msg, rep)
}

// ---- Approvals ----

type approvalsData struct {
	Pending   []approval.Request
	Recent    []approval.Request
	YoloUntil time.Time
	YoloOpen  bool
	Verify    approval.VerifyReport
	VerifyErr string
	Broken    *approval.VerifyReport
	Now       time.Time
}

func (d *Dashboard) approvalsPage(w http.ResponseWriter, r *http.Request) {
	g := d.a.Gate()
	pend, err := g.Pending(r.Context())
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	all, err := g.List(r.Context())
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	data := approvalsData{Pending: pend, Now: d.opt.Now()}
	for i := len(all) - 1; i >= 0 && len(data.Recent) < 20; i-- {
		if all[i].Status != approval.StatusPending {
			data.Recent = append(data.Recent, all[i])
		}
	}
	data.YoloUntil, data.YoloOpen = g.YoloUntil()
	if data.Verify, err = g.Verify(r.Context()); err != nil {
		data.VerifyErr = err.Error()
	}
	data.Broken = g.Broken() // after Verify, which closes the gate on a bad ledger
	d.render(w, r, "approvals", "Approvals", data)
}

func (d *Dashboard) approvalDecide(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if !approval.ValidRequestID(id) {
			d.fail(w, r, http.StatusBadRequest, fmt.Errorf("%q is not a request ID", id))
			return
		}
		req, err := d.a.Decide(r.Context(), id, approve, decider, "")
		if err != nil {
			d.fail(w, r, 0, err)
			return
		}
		d.done(w, r, back(r, "/approvals"), fmt.Sprintf("%s %s: %s", req.Tool, req.ID, req.Status), req)
	}
}

func (d *Dashboard) yolo(w http.ResponseWriter, r *http.Request) {
	var dur time.Duration
	if r.PostFormValue("close") == "" {
		m, err := strconv.ParseFloat(r.PostFormValue("minutes"), 64)
		if err != nil || !(m > 0 && m <= approval.MaxYolo.Minutes()) { // also refuses NaN
			d.fail(w, r, http.StatusBadRequest, fmt.Errorf("%w: minutes must be a number in (0, %g]", assistant.ErrInvalid, approval.MaxYolo.Minutes()))
			return
		}
		dur = time.Duration(m * float64(time.Minute))
	}
	until, err := d.a.Yolo(r.Context(), dur, decider)
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	msg := t(lang(r), "closed")
	if dur > 0 {
		msg = t(lang(r), "open until") + " " + until.UTC().Format(time.RFC3339)
	}
	d.done(w, r, "/approvals", "YOLO: "+msg, map[string]any{"until": until, "open": dur > 0})
}

// ---- State ----

type stateData struct {
	Actor   string
	Actors  []string
	Snap    state.Snapshot
	Has     bool
	Rows    []dimRow
	Figure  Figure
	Drift   bool
	Numbers bool
	Changes []state.Change // newest first
	Breaks  []state.Change // breaker transitions, newest first
}

type dimRow struct {
	Name      string
	Value     float64
	Baseline  float64
	Spark     Sparkline
	LastCause string
}

func (d *Dashboard) statePage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	data := stateData{Actor: q.Get("actor"), Numbers: q.Get("view") == "numbers"}
	var err error
	if data.Actors, err = d.a.StateActors(r.Context()); err != nil {
		d.fail(w, r, 0, err)
		return
	}
	if data.Actor == "" && len(data.Actors) == 1 {
		data.Actor = data.Actors[0]
	}
	if data.Actor != "" {
		s, err := d.a.StateSnapshot(r.Context(), data.Actor)
		if err != nil {
			d.fail(w, r, http.StatusBadRequest, err)
			return
		}
		data.Snap, data.Has = s, s.Turns > 0 || len(s.History) > 0
		data.Figure = DrawFigure(s)
		// The seed's DRIFT check: the same state must draw the same figure.
		data.Drift = DrawFigure(s).SVG != data.Figure.SVG
		for i := 0; i < int(state.NumDims); i++ {
			row := dimRow{Name: state.Dim(i).String(), Value: s.Values[i], Baseline: s.Baseline[i], Spark: DrawSparkline(s.History, state.Dim(i), s.Baseline[i])}
			for j := len(s.History) - 1; j >= 0; j-- {
				c := s.History[j]
				if c.Delta[i] != 0 {
					row.LastCause = describeChange(c, i)
					break
				}
			}
			data.Rows = append(data.Rows, row)
		}
		for j := len(s.History) - 1; j >= 0; j-- {
			data.Changes = append(data.Changes, s.History[j])
			if s.History[j].Cause == state.CauseBreaker {
				data.Breaks = append(data.Breaks, s.History[j])
			}
		}
	}
	d.render(w, r, "state", "State", data)
}

// describeChange says why value i changed: "turn #3 stimulus threat ×0.80:
// −0.120".
func describeChange(c state.Change, i int) string {
	s := fmt.Sprintf("#%d %s", c.Turn, c.Cause)
	if c.Stimulus != "" {
		s += fmt.Sprintf(" %s ×%.2f", c.Stimulus, c.Intensity)
	}
	return s + fmt.Sprintf(": %+.3f", c.Delta[i])
}

// ---- Schedules ----

// scheduleRow is a job on /schedules with its last runs, newest first.
type scheduleRow struct {
	schedule.Job
	Runs []schedule.Run
}

func (d *Dashboard) schedulesPage(w http.ResponseWriter, r *http.Request) {
	jobs, err := d.a.Jobs(r.Context(), "")
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	rows := make([]scheduleRow, 0, len(jobs))
	for _, j := range jobs {
		runs, err := d.a.JobHistory(r.Context(), j.ID)
		if errors.Is(err, schedule.ErrNotFound) {
			continue // removed since the list was read
		}
		if err != nil {
			d.fail(w, r, 0, err)
			return
		}
		rows = append(rows, scheduleRow{Job: j, Runs: runs})
	}
	d.render(w, r, "schedules", "Schedules", schedulesData{Jobs: rows, Default: DefaultActor})
}

func (d *Dashboard) scheduleAdd(w http.ResponseWriter, r *http.Request) {
	spec := schedule.JobSpec{Name: strings.TrimSpace(r.PostFormValue("name")), Task: strings.TrimSpace(r.PostFormValue("task")),
		ActorID: strings.TrimSpace(r.PostFormValue("actor")), TZ: strings.TrimSpace(r.PostFormValue("tz")), Source: schedule.SourceWeb}
	value := strings.TrimSpace(r.PostFormValue("spec"))
	switch r.PostFormValue("kind") {
	case "at":
		spec.At = value
	case "every":
		spec.Every = value
	case "cron":
		spec.Cron = value
	default:
		d.fail(w, r, http.StatusBadRequest, fmt.Errorf("%w: kind must be at, every or cron", assistant.ErrInvalid))
		return
	}
	if spec.ActorID == "" {
		spec.ActorID = DefaultActor
	}
	j, err := d.a.AddJob(r.Context(), spec)
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	d.done(w, r, "/schedules", fmt.Sprintf("%s %s", j.ID, j.NextRun.UTC().Format(time.RFC3339)), j)
}

func (d *Dashboard) scheduleRemove(w http.ResponseWriter, r *http.Request) {
	j, err := d.a.RemoveJob(r.Context(), r.PathValue("ref"))
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	d.done(w, r, "/schedules", j.ID, j)
}

func (d *Dashboard) scheduleRun(w http.ResponseWriter, r *http.Request) {
	j, err := d.a.RunJobNow(r.Context(), r.PathValue("ref"))
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	d.done(w, r, "/schedules", j.ID, j)
}

func (d *Dashboard) schedulePause(w http.ResponseWriter, r *http.Request) {
	j, err := d.a.PauseJob(r.Context(), r.PathValue("ref"))
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	d.done(w, r, "/schedules", j.ID, j)
}

func (d *Dashboard) scheduleResume(w http.ResponseWriter, r *http.Request) {
	j, err := d.a.ResumeJob(r.Context(), r.PathValue("ref"))
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	d.done(w, r, "/schedules", j.ID, j)
}

// ---- Settings ----

type settingsData struct {
	Report   assistant.DoctorReport
	Config   string
	Skills   []skill.Skill
	Problems []string
	MCP      []mcpView
	Tools    []ToolInfo
	ToolsErr string
	HasTools bool
	Log      []string
	HasLog   bool
}

type mcpView struct {
	Name   string
	Target string // command or URL (scheme://host only)
	Class  string
	Tools  []ToolInfo
}

func (d *Dashboard) settingsPage(w http.ResponseWriter, r *http.Request) {
	cfg := d.a.Config()
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	data := settingsData{Report: assistant.Doctor(ctx, cfg, assistant.DoctorOptions{Timeout: 4 * time.Second})}
	data.Config = jsonIndent(data.Report.Config)
	dir, manifest := assistant.SkillPaths(cfg)
	active, problems, err := skill.Load(dir, manifest)
	if err != nil {
		data.Problems = append(data.Problems, err.Error())
	}
	data.Skills = active
	for _, p := range problems {
		data.Problems = append(data.Problems, p.Error())
	}
	if d.opt.Tools != nil {
		data.HasTools = true
		tools, err := d.opt.Tools(ctx)
		if err != nil {
			data.ToolsErr = err.Error()
		}
		for _, tl := range tools {
			if tl.Server == "" {
				data.Tools = append(data.Tools, tl)
			}
		}
		for name, s := range data.Report.Config.MCP {
			v := mcpView{Name: name, Target: s.Command, Class: s.Class}
			if s.URL != "" {
				v.Target = originOf(s.URL)
			}
			for _, tl := range tools {
				if tl.Server == name {
					v.Tools = append(v.Tools, tl)
				}
			}
			data.MCP = append(data.MCP, v)
		}
	} else {
		for name, s := range data.Report.Config.MCP {
			v := mcpView{Name: name, Target: s.Command, Class: s.Class}
			if s.URL != "" {
				v.Target = originOf(s.URL)
			}
			data.MCP = append(data.MCP, v)
		}
	}
	sort.Slice(data.MCP, func(i, j int) bool { return data.MCP[i].Name < data.MCP[j].Name })
	if d.opt.Logs != nil {
		data.HasLog = true
		data.Log = d.opt.Logs.Lines()
	}
	d.render(w, r, "settings", "Settings", data)
}

func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(url)"
	}
	return u.Scheme + "://" + u.Host
}

var errNoLog = errors.New("the log tail is not connected in this process")

// exportDisposition is the Content-Disposition of a session export
// (RFC 6266). The file's name is the session key with every rune but
// letters, digits, '-', '_' and '.' replaced by '_' (no quote, ';' or path
// separator can reach the header or the saved name, whatever the key
// holds); filename holds its ASCII form (other letters '_' too) and, when
// that lost letters, filename* the whole name (RFC 8187 UTF-8
// percent-encoding), which browsers prefer.
func exportDisposition(key, ext string) string {
	keep := func(r rune, ascii bool) rune {
		if r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') ||
			!ascii && r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return r
		}
		return '_'
	}
	name := strings.Map(func(r rune) rune { return keep(r, false) }, key) + "." + ext
	plain := strings.Map(func(r rune) rune { return keep(r, true) }, key) + "." + ext
	v := mime.FormatMediaType("attachment", map[string]string{"filename": plain})
	if plain != name {
		v += "; filename*=UTF-8''" + rfc8187(name)
	}
	return v
}

// rfc8187 percent-encodes every byte of s outside RFC 8187's attr-char.
func rfc8187(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$&+-.^_`|~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
