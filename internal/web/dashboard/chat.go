package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	g "maragu.dev/gomponents"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/assistant"
	"github.com/tendrilai/tendril/internal/session"
)

// Channel is the session channel of dashboard chats.
const Channel = "web"

// chatTarget is whose chat a request means: ?actor= (default web:owner)
// and ?session= ("" = the actor's default session on the web channel).
type chatTarget struct {
	Actor   string
	Session string
}

func targetOf(v url.Values) (chatTarget, error) {
	c := chatTarget{Actor: v.Get("actor"), Session: v.Get("session")}
	if c.Actor == "" {
		c.Actor = DefaultActor
	}
	if err := agent.ValidateActorID(c.Actor); err != nil {
		return c, fmt.Errorf("%w: actor %v", assistant.ErrInvalid, err)
	}
	if c.Session != "" {
		if err := agent.ValidateID(c.Session); err != nil {
			return c, fmt.Errorf("%w: session %v", assistant.ErrInvalid, err)
		}
	}
	return c, nil
}

// key is the session key the agent uses for this chat ("web:<id>").
func (c chatTarget) key() string {
	id := agent.SessionOwner(c.Actor, Channel)
	if c.Session != "" {
		id += agent.SessionSep + c.Session
	}
	return Channel + ":" + id
}

func (c chatTarget) query() string {
	v := url.Values{"actor": {c.Actor}}
	if c.Session != "" {
		v.Set("session", c.Session)
	}
	return v.Encode()
}

type chatData struct {
	Target     chatTarget
	Key        string
	Path       []session.Node
	Pending    []approval.Request
	Query      string
	Now        time.Time
	NewSession string
	NoModel    bool // no text model is configured: say so before a message is sent
	HasSession bool // the session exists (its page can be linked)
}

func (d *Dashboard) chatPage(w http.ResponseWriter, r *http.Request) {
	tg, err := targetOf(r.URL.Query())
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	data := chatData{Target: tg, Key: tg.key(), Query: tg.query(), Now: d.opt.Now(), NewSession: "s" + strconv.FormatInt(d.opt.Now().Unix(), 36)}
	k, err := d.a.ParseSessionKey("", tg.key())
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	tree, err := d.a.Session(r.Context(), k)
	if err != nil && !errors.Is(err, assistant.ErrNoSession) {
		d.fail(w, r, 0, err)
		return
	}
	data.Path = tree.ActivePath
	data.HasSession = err == nil
	data.NoModel = !d.a.ModelConfigured()
	pend, err := d.a.Gate().Pending(r.Context())
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	for _, p := range pend {
		if p.ActorID == tg.Actor {
			data.Pending = append(data.Pending, p)
		}
	}
	d.render(w, r, "chat", "Chat", data)
}

func (d *Dashboard) request(r *http.Request) (agent.Request, chatTarget, error) {
	tg, err := targetOf(r.PostForm)
	if err != nil {
		return agent.Request{}, tg, err
	}
	msg := r.PostFormValue("message")
	if msg == "" {
		return agent.Request{}, tg, fmt.Errorf("%w: the message is empty", assistant.ErrInvalid)
	}
	return agent.Request{Message: msg, ActorID: tg.Actor, SessionID: tg.Session, Channel: Channel, InvocationType: "api"}, tg, nil
}

// chatSend is the form post without JavaScript: the turn runs while the
// browser waits, then the chat page shows it.
func (d *Dashboard) chatSend(w http.ResponseWriter, r *http.Request) {
	req, tg, err := d.request(r)
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), d.opt.TurnTimeout)
	defer cancel()
	if _, err := d.a.Invoke(ctx, req); err != nil {
		d.fail(w, r, turnStatus(err), err)
		return
	}
	http.Redirect(w, r, "/?"+tg.query(), http.StatusSeeOther)
}

func turnStatus(err error) int {
	switch agent.ErrorCode(err) {
	case "INVALID_REQUEST", "INVALID_ACTOR_ID":
		return http.StatusBadRequest
	case "FORBIDDEN":
		return http.StatusForbidden
	case "MODEL_NOT_CONFIGURED", "NOT_READY":
		return http.StatusServiceUnavailable
	case "APPROVAL_PENDING":
		return http.StatusConflict
	case "MODEL_ERROR":
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}

// liveTurn is a chat turn started by turnStart: its events (start, delta,
// tool, approval, final) are kept so an EventSource that reconnects
// replays from its Last-Event-ID.
type liveTurn struct {
	id     string
	actor  string
	cancel context.CancelFunc

	mu      sync.Mutex
	events  [][]byte
	done    bool
	stopped bool
	ended   time.Time
	wake    chan struct{}
}

func (lt *liveTurn) emit(v map[string]any) {
	b, _ := json.Marshal(v)
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.events = append(lt.events, b)
	close(lt.wake)
	lt.wake = make(chan struct{})
}

func (lt *liveTurn) finish(v map[string]any) {
	lt.emit(v)
	lt.mu.Lock()
	lt.done = true
	lt.ended = time.Now()
	lt.mu.Unlock()
}

type turnRegistry struct {
	mu sync.Mutex
	m  map[string]*liveTurn
}

// add registers a turn, dropping finished turns older than ten minutes.
func (tr *turnRegistry) add(lt *liveTurn) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for id, o := range tr.m {
		o.mu.Lock()
		old := o.done && time.Since(o.ended) > 10*time.Minute
		o.mu.Unlock()
		if old {
			delete(tr.m, id)
		}
	}
	tr.m[lt.id] = lt
}

func (tr *turnRegistry) get(id string) *liveTurn {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.m[id]
}

// turnStart starts a turn for the page's JavaScript and answers
// {"id","events","stop"}; the turn runs on a goroutine the dashboard owns
// (Close cancels it), bounded by TurnTimeout, and ends early on "Stop".
func (d *Dashboard) turnStart(w http.ResponseWriter, r *http.Request) {
	req, tg, err := d.request(r)
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	l := lang(r)
	csrf, _ := r.Context().Value(csrfKey).(string)
	ctx, cancel := context.WithTimeout(context.Background(), d.opt.TurnTimeout)
	lt := &liveTurn{id: randomHex(12), actor: tg.Actor, cancel: cancel, wake: make(chan struct{})}
	d.turns.add(lt)
	lt.emit(map[string]any{"type": "start"})
	d.wg.Add(2)
	go func() {
		defer d.wg.Done()
		select {
		case <-d.closing:
		case <-d.a.Stopping():
		case <-ctx.Done():
		}
		cancel()
	}()
	go func() {
		defer d.wg.Done()
		defer cancel()
		d.runTurn(ctx, lt, req, l, csrf)
	}()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"ok": true, "id": lt.id,
		"events": "/chat/turns/" + lt.id + "/events", "stop": "/chat/turns/" + lt.id + "/stop"})
}

func (d *Dashboard) runTurn(ctx context.Context, lt *liveTurn, req agent.Request, l, csrf string) {
	ctx = agent.WithDeltas(ctx, func(text string) {
		if text != "" {
			lt.emit(map[string]any{"type": "delta", "text": text})
		}
	})
	ctx = agent.WithToolEvents(ctx, func(ev agent.ToolEvent) {
		m := map[string]any{"type": "tool", "phase": ev.Phase, "id": ev.ID, "name": ev.Name}
		switch ev.Phase {
		case "call":
			m["args"] = prettyJSON(ev.Args)
		case "result":
			m["result"], m["is_error"] = ev.Result, ev.IsError
		case "pending":
			m["request_id"] = ev.RequestID
		}
		lt.emit(m)
	})
	res, err := d.a.Invoke(ctx, req)
	lt.mu.Lock()
	stopped := lt.stopped
	lt.mu.Unlock()
	switch {
	case err != nil && stopped:
		lt.finish(map[string]any{"type": "final", "ok": false, "stopped": true, "message": t(l, "Stopped.")})
	case err != nil:
		lt.finish(map[string]any{"type": "final", "ok": false, "error": agent.ErrorCode(err), "message": err.Error()})
	case res.PendingApproval != nil:
		card := ""
		if ar, gerr := d.a.Gate().Get(ctx, res.PendingApproval.RequestID); gerr == nil {
			card = d.fragment(approvalCard(l, csrf, ar, "/?"+chatTarget{Actor: req.ActorID, Session: req.SessionID}.query()))
		}
		lt.finish(map[string]any{"type": "final", "ok": false, "error": "APPROVAL_PENDING", "text": res.Text,
			"html": replyHTML(res.Text), "approval": res.PendingApproval, "card": card})
	default:
		lt.finish(map[string]any{"type": "final", "ok": true, "text": res.Text, "html": replyHTML(res.Text),
			"session_id": res.SessionID, "turn_id": res.TurnID})
	}
}

// fragment renders a part of a page (an approval card) to a string.
func (d *Dashboard) fragment(n g.Node) string {
	var buf bytes.Buffer
	if err := n.Render(&buf); err != nil {
		d.log.Error("dashboard fragment failed", "err", err)
		return ""
	}
	return buf.String()
}

// turnEvents streams a turn's events as Server-Sent Events, "id: n" and
// "data: {json}", from Last-Event-ID on; it ends after the final event
// (204 when a reconnect finds nothing left, which stops EventSource).
func (d *Dashboard) turnEvents(w http.ResponseWriter, r *http.Request) {
	lt := d.turns.get(r.PathValue("id"))
	if lt == nil {
		d.fail(w, r, http.StatusNotFound, errors.New("no such turn"))
		return
	}
	next := 0
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		if n, err := strconv.Atoi(id); err == nil && n >= 0 {
			next = n + 1
		}
	}
	lt.mu.Lock()
	if next > len(lt.events) {
		// An ID this turn never sent: replay from the start.
		next = 0
	}
	over := lt.done && next >= len(lt.events)
	lt.mu.Unlock()
	if over {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		d.fail(w, r, http.StatusInternalServerError, errors.New("streaming unsupported"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	for {
		lt.mu.Lock()
		evs := lt.events[next:]
		done, wake := lt.done, lt.wake
		lt.mu.Unlock()
		for _, b := range evs {
			fmt.Fprintf(w, "id: %d\ndata: %s\n\n", next, b)
			next++
		}
		fl.Flush()
		if done {
			return
		}
		select {
		case <-wake:
		case <-r.Context().Done():
			return
		case <-d.closing:
			return
		}
	}
}

// turnStop aborts a running turn ("Stop").
func (d *Dashboard) turnStop(w http.ResponseWriter, r *http.Request) {
	lt := d.turns.get(r.PathValue("id"))
	if lt == nil {
		d.fail(w, r, http.StatusNotFound, errors.New("no such turn"))
		return
	}
	lt.mu.Lock()
	if !lt.done {
		lt.stopped = true
	}
	lt.mu.Unlock()
	lt.cancel()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"ok": true})
}

// deliveries streams replies produced outside a request (a turn resumed
// after an approval, a scheduled run) for ?actor= as Server-Sent Events
// {"text","html","at"}.
func (d *Dashboard) deliveries(w http.ResponseWriter, r *http.Request) {
	tg, err := targetOf(r.URL.Query())
	if err != nil {
		d.fail(w, r, 0, err)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		d.fail(w, r, http.StatusInternalServerError, errors.New("streaming unsupported"))
		return
	}
	ch, stop, err := d.a.Subscribe(tg.Actor)
	if err != nil {
		w.Header().Set("Retry-After", "5")
		d.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	defer stop()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 3000\n: subscribed\n\n")
	fl.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-d.closing:
			return
		case <-d.a.Stopping():
			return
		case <-r.Context().Done():
			return
		case <-keep.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			fl.Flush()
		case dl, ok := <-ch:
			if !ok {
				return
			}
			b, _ := json.Marshal(map[string]any{"text": dl.Text, "html": replyHTML(dl.Text), "at": dl.At, "channel": dl.Channel})
			fmt.Fprintf(w, "data: %s\n\n", b)
			fl.Flush()
		}
	}
}
