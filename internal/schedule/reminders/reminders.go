// Package reminders is the built-in `reminders` tool (SPEC §5): create,
// list and cancel one-shot and recurring schedules (SPEC §7.2) for the
// calling actor. It is class write, so every call passes the approval gate.
package reminders

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/tool"
)

// Jobs is the part of *schedule.Scheduler the tool uses.
type Jobs interface {
	Add(ctx context.Context, spec schedule.JobSpec) (schedule.Job, error)
	Get(ctx context.Context, id string) (schedule.Job, error)
	List(ctx context.Context, f schedule.Filter) ([]schedule.Job, error)
	Remove(ctx context.Context, id string) error
}

// Options configures the tool. Zero fields take the defaults noted.
type Options struct {
	// MaxPerActor caps the jobs one actor may hold (default 50), not
	// counting done one-shots (schedule.StatusDone), which the store
	// bounds by schedule.MaxDone.
	MaxPerActor int
}

// Tool implements tool.Tool for reminders.
type Tool struct {
	jobs Jobs
	max  int
}

var _ tool.Tool = (*Tool)(nil)

// New returns the reminders tool over jobs (normally the server's
// *schedule.Scheduler).
func New(jobs Jobs, opts Options) *Tool {
	if opts.MaxPerActor <= 0 {
		opts.MaxPerActor = 50
	}
	return &Tool{jobs: jobs, max: opts.MaxPerActor}
}

// Name implements tool.Tool.
func (*Tool) Name() string { return "reminders" }

// Class implements tool.Tool: write (the gate asks by default).
func (*Tool) Class() tool.Class { return tool.ClassWrite }

// Description implements tool.Tool.
func (*Tool) Description() string {
	return `Create, list and cancel reminders and recurring check-ins for the current user.
action=create needs text (what to remind about or do) and exactly one of:
  at: a one-off time, RFC 3339 with offset ("2026-06-02T09:00:00+02:00") or relative ("in 2h", "in 3 days");
  every: an interval ("12h", "7d");
  cron: a 5-field cron expression ("0 8 * * 1-5") with tz, an IANA zone ("Europe/Berlin"; default UTC).
At run time you are asked to carry out the text; reply NOTHING_DUE if there is nothing to tell the user.
action=list shows this user's reminders with their ids; a one-off that already fired has status "done" and its last_run;
action=cancel removes the one with id.`
}

var schema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "action": {"type": "string", "enum": ["create", "list", "cancel"]},
    "text":   {"type": "string", "description": "create: what to remind about or do, max 4000 bytes"},
    "at":     {"type": "string", "description": "create, one-off: RFC 3339 time or relative like \"in 2h\""},
    "every":  {"type": "string", "description": "create, recurring: interval like \"12h\" or \"7d\" (min 1m)"},
    "cron":   {"type": "string", "description": "create, recurring: 5-field cron expression, e.g. \"0 8 * * *\""},
    "tz":     {"type": "string", "description": "IANA time zone for cron (and local at times), e.g. \"Europe/Berlin\""},
    "id":     {"type": "string", "description": "cancel: the reminder id from create or list"}
  },
  "required": ["action"],
  "additionalProperties": false
}`)

// Schema implements tool.Tool.
func (*Tool) Schema() json.RawMessage { return schema }

// Args are the tool's arguments.
type Args struct {
	Action string `json:"action"`
	Text   string `json:"text,omitempty"`
	At     string `json:"at,omitempty"`
	Every  string `json:"every,omitempty"`
	Cron   string `json:"cron,omitempty"`
	TZ     string `json:"tz,omitempty"`
	ID     string `json:"id,omitempty"`
}

// Reminder is how a job is shown to the model.
type Reminder struct {
	ID      string `json:"id"`
	Text    string `json:"text"`
	Kind    string `json:"kind"`
	Spec    string `json:"spec"`
	TZ      string `json:"tz,omitempty"`
	NextRun string `json:"next_run"` // RFC 3339 in TZ (UTC if none)
	Status  string `json:"status"`
	LastRun string `json:"last_run,omitempty"`
}

// Run implements tool.Tool. Errors (bad arguments, unknown ids, limits) are
// meant for the model to read and correct.
func (t *Tool) Run(ctx context.Context, call tool.Call) (string, error) {
	actor := strings.TrimSpace(call.ActorID)
	if actor == "" {
		return "", errors.New("reminders: no actor for this conversation")
	}
	var a Args
	dec := json.NewDecoder(bytes.NewReader(call.Args))
	dec.DisallowUnknownFields()
	if len(bytes.TrimSpace(call.Args)) == 0 {
		return "", errors.New("reminders: arguments missing; want {\"action\": \"create|list|cancel\", ...}")
	}
	if err := dec.Decode(&a); err != nil {
		return "", fmt.Errorf("reminders: bad arguments: %v", err)
	}
	switch a.Action {
	case "create":
		return t.create(ctx, call, actor, a)
	case "list":
		return t.list(ctx, actor)
	case "cancel":
		return t.cancel(ctx, actor, a.ID)
	case "":
		return "", errors.New("reminders: action is required: create, list or cancel")
	default:
		return "", fmt.Errorf("reminders: unknown action %q: want create, list or cancel", a.Action)
	}
}

// ChatOf derives the delivery channel and chat from a call: the call's
// channel (else the actor's prefix), and for an actor "<channel>:<id>" the
// chat id ("telegram:123" → "telegram", "123").
func ChatOf(call tool.Call) (channel, chat string) {
	channel = strings.TrimSpace(call.Channel)
	prefix, rest, ok := strings.Cut(strings.TrimSpace(call.ActorID), ":")
	if channel == "" && ok {
		channel = prefix
	}
	if ok && prefix == channel {
		chat = rest
	}
	return channel, chat
}

func (t *Tool) create(ctx context.Context, call tool.Call, actor string, a Args) (string, error) {
	if strings.TrimSpace(a.Text) == "" {
		return "", errors.New("reminders: create needs text")
	}
	if a.ID != "" {
		return "", errors.New("reminders: create takes no id")
	}
	mine, err := t.jobs.List(ctx, schedule.Filter{ActorID: actor})
	if err != nil {
		return "", fmt.Errorf("reminders: %w", err)
	}
	live := 0
	for _, j := range mine {
		if j.Status != schedule.StatusDone {
			live++
		}
	}
	if live >= t.max {
		return "", fmt.Errorf("reminders: limit of %d reminders reached; cancel some first", t.max)
	}
	channel, chat := ChatOf(call)
	j, err := t.jobs.Add(ctx, schedule.JobSpec{
		Name: name(a.Text),
		At:   a.At, Every: a.Every, Cron: a.Cron, TZ: a.TZ,
		Task:    a.Text,
		ActorID: actor, Channel: channel, ChatID: chat, SessionID: call.SessionID,
		Source: schedule.SourceTool,
	})
	if err != nil {
		return "", fmt.Errorf("reminders: %w", err)
	}
	return encode(map[string]any{"created": view(j)})
}

func (t *Tool) list(ctx context.Context, actor string) (string, error) {
	js, err := t.jobs.List(ctx, schedule.Filter{ActorID: actor})
	if err != nil {
		return "", fmt.Errorf("reminders: %w", err)
	}
	out := make([]Reminder, 0, len(js))
	for _, j := range js {
		out = append(out, view(j))
	}
	return encode(map[string]any{"reminders": out, "count": len(out)})
}

func (t *Tool) cancel(ctx context.Context, actor, id string) (string, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return "", errors.New("reminders: cancel needs id (see action=list)")
	}
	j, err := t.jobs.Get(ctx, id)
	if err != nil && !errors.Is(err, schedule.ErrNotFound) {
		return "", fmt.Errorf("reminders: %w", err)
	}
	// Another actor's job is reported exactly like a missing one.
	if err != nil || j.ActorID != actor {
		return "", fmt.Errorf("reminders: no reminder with id %q for this user (see action=list)", id)
	}
	if j.Source == schedule.SourceConfig {
		return "", fmt.Errorf("reminders: %q comes from the server's configuration (tendril.json) and can only be removed there", id)
	}
	if err := t.jobs.Remove(ctx, id); err != nil {
		if errors.Is(err, schedule.ErrNotFound) {
			return "", fmt.Errorf("reminders: no reminder with id %q for this user (see action=list)", id)
		}
		return "", fmt.Errorf("reminders: %w", err)
	}
	return encode(map[string]any{"cancelled": view(j)})
}

func name(text string) string {
	s := strings.Join(strings.Fields(text), " ")
	r := []rune(s)
	if len(r) > 60 {
		s = string(r[:59]) + "…"
	}
	return s
}

func view(j schedule.Job) Reminder {
	loc := time.UTC
	if j.TZ != "" {
		if l, err := time.LoadLocation(j.TZ); err == nil {
			loc = l
		}
	}
	r := Reminder{ID: j.ID, Text: j.Task, Kind: string(j.Kind), Spec: j.Spec, TZ: j.TZ,
		NextRun: j.NextRun.In(loc).Format(time.RFC3339), Status: string(j.Status)}
	if !j.LastRun.IsZero() {
		r.LastRun = j.LastRun.In(loc).Format(time.RFC3339)
	}
	return r
}

func encode(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("reminders: %w", err)
	}
	return string(b), nil
}
