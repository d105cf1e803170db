package assistant

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/channel/telegram"
	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/schedule/reminders"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/state"
	"github.com/tendrilai/tendril/internal/tool"
)

// SessionRow is one session in a listing.
type SessionRow struct {
	Key      string `json:"key"` // "<channel>:<id>"
	AgentID  string `json:"agentId"`
	Channel  string `json:"channel"`
	ID       string `json:"id"`
	Nodes    int    `json:"nodes"`
	Branches int    `json:"branches"`
	Leaf     string `json:"leaf"`
	LastText string `json:"lastText"`
}

// ParseSessionKey parses "<channel>:<id>" for agentID ("" = the configured
// agent). Errors wrap ErrInvalid.
func (a *Assistant) ParseSessionKey(agentID, key string) (session.Key, error) {
	k, err := session.ParseKey(a.agentID(agentID), key)
	if err != nil {
		return k, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return k, nil
}

// ListSessions lists the sessions of agentID ("" = configured agent).
func (a *Assistant) ListSessions(ctx context.Context, agentID string) ([]SessionRow, error) {
	keys, err := a.sessions.List(ctx, a.agentID(agentID))
	if err != nil {
		return nil, err
	}
	rows := []SessionRow{}
	for _, k := range keys {
		nodes, err := a.sessions.Nodes(ctx, k)
		if err != nil {
			return nil, err
		}
		br, err := session.Branches(ctx, a.sessions, k)
		if err != nil {
			return nil, err
		}
		r := SessionRow{Key: k.String(), AgentID: k.AgentID, Channel: k.Channel, ID: k.ID, Nodes: len(nodes), Branches: len(br)}
		for _, b := range br {
			if b.Active {
				r.Leaf, r.LastText = b.LeafID, b.LastText
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// SessionTree is a whole session: every node, the active leaf and the
// active path (root first).
type SessionTree struct {
	Key        string         `json:"key"`
	Leaf       string         `json:"leaf"`
	Nodes      []session.Node `json:"nodes"`
	ActivePath []session.Node `json:"activePath"`
	// Branches has one entry per leaf, the active one marked.
	Branches []session.Branch `json:"branches"`
}

// ErrNoSession: the session has no nodes.
var ErrNoSession = errors.New("no such session")

// ErrNoNode: the session exists but has no node with the ID given. It
// also matches session.ErrNotFound, so callers that map "not found" to
// 404 keep doing so.
var ErrNoNode error = noNodeError{}

type noNodeError struct{}

func (noNodeError) Error() string        { return "no such node" }
func (noNodeError) Is(target error) bool { return target == session.ErrNotFound }

// Session returns a session's tree. Errors: ErrNoSession, ErrInvalid.
func (a *Assistant) Session(ctx context.Context, k session.Key) (SessionTree, error) {
	nodes, err := a.sessions.Nodes(ctx, k)
	if err != nil {
		return SessionTree{}, err
	}
	if len(nodes) == 0 {
		return SessionTree{}, fmt.Errorf("%w: %s for agent %s", ErrNoSession, k, k.AgentID)
	}
	leaf, err := a.sessions.Leaf(ctx, k)
	if err != nil {
		return SessionTree{}, err
	}
	path, err := a.sessions.Path(ctx, k, leaf, 0)
	if err != nil {
		return SessionTree{}, err
	}
	br, err := session.Branches(ctx, a.sessions, k)
	if err != nil {
		return SessionTree{}, err
	}
	return SessionTree{Key: k.String(), Leaf: leaf, Nodes: nodes, ActivePath: path, Branches: br}, nil
}

// BranchFrom makes nodeID the active leaf of a session, so the next
// message starts a new branch there (or switches to an existing leaf). A
// turn of the session in flight (here or on another instance) finishes
// first, on the branch it was answered from: the branch takes the turn
// locks, as a turn does. Errors: ErrNoSession, ErrNoNode.
func (a *Assistant) BranchFrom(ctx context.Context, k session.Key, nodeID string) error {
	err := a.betweenTurns(ctx, k, func(lctx context.Context) error { return session.BranchFrom(lctx, a.sessions, k, nodeID) })
	if errors.Is(err, session.ErrNotFound) {
		if _, serr := a.Session(ctx, k); serr != nil {
			return serr
		}
		return fmt.Errorf("%w: session %s has no node %q (see tendril session show --tree)", ErrNoNode, k, nodeID)
	}
	return err
}

// betweenTurns runs fn with the session of k to itself: after its turn in
// flight, if any, and before the next (the session's queue in this process,
// then its turn lock across processes and instances). ErrNotReady when the
// lock cannot be taken.
func (a *Assistant) betweenTurns(ctx context.Context, k session.Key, fn func(lctx context.Context) error) error {
	channel := k.Channel
	if channel == "" {
		channel = "api"
	}
	release, err := a.sessionQueue.lock(ctx, channel+"\x00"+k.ID)
	if err != nil {
		return err
	}
	defer release()
	lctx, dunlock, err := a.locks.turn(ctx, channel+"\x00"+k.ID, "", nil)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotReady, err)
	}
	defer dunlock()
	return fn(lctx)
}

// ExportSession writes a session as json, jsonl or md to w.
func (a *Assistant) ExportSession(ctx context.Context, k session.Key, format string, w io.Writer) error {
	switch format {
	case session.FormatJSON, session.FormatJSONL, session.FormatMD:
	default:
		return invalidf("format must be json, jsonl or md, not %q", format)
	}
	if _, err := a.Session(ctx, k); err != nil {
		return err
	}
	return session.Export(ctx, a.sessions, k, format, w)
}

// ClearSessions deletes sessions for good: the given keys, or with all
// every session of agentID. It returns the cleared keys.
func (a *Assistant) ClearSessions(ctx context.Context, agentID string, keys []session.Key, all bool) ([]string, error) {
	if all {
		var err error
		if keys, err = a.sessions.List(ctx, a.agentID(agentID)); err != nil {
			return nil, err
		}
	}
	cleared := []string{}
	for _, k := range keys {
		// After the session's turn in flight, as BranchFrom: a turn that
		// finished after the clear would write its message and reply back.
		if err := a.betweenTurns(ctx, k, func(lctx context.Context) error { return a.sessions.Clear(lctx, k) }); err != nil {
			if errors.Is(err, session.ErrNotFound) {
				return cleared, fmt.Errorf("%w: %s for agent %s", ErrNoSession, k, k.AgentID)
			}
			return cleared, err
		}
		cleared = append(cleared, k.String())
	}
	return cleared, nil
}

// Jobs lists scheduled jobs (of one actor when actorID is set), earliest
// next run first.
func (a *Assistant) Jobs(ctx context.Context, actorID string) ([]schedule.Job, error) {
	jobs, err := a.scheduler.List(ctx, schedule.Filter{ActorID: actorID})
	if jobs == nil {
		jobs = []schedule.Job{}
	}
	return jobs, err
}

// AddJob adds a job. A name is required and unique per actor; the actor
// must be one /invocations accepts (agent.ValidateActorID), or every run
// would fail. Channel and chat default from the actor. Errors: ErrInvalid
// (bad spec, duplicate name).
func (a *Assistant) AddJob(ctx context.Context, spec schedule.JobSpec) (schedule.Job, error) {
	spec.Name = strings.TrimSpace(spec.Name)
	if spec.Name == "" {
		return schedule.Job{}, invalidf("a name is required")
	}
	// A name is shown and looked up like an ID: the same characters.
	if err := agent.ValidateID(spec.Name); err != nil {
		return schedule.Job{}, invalidf("name %v", err)
	}
	if spec.Task == "" {
		return schedule.Job{}, invalidf("a task is required")
	}
	if err := agent.ValidateActorID(spec.ActorID); err != nil {
		return schedule.Job{}, invalidf("actor %v", err)
	}
	// Every run sends these as a turn's: one that /invocations refuses
	// would fail each run, retried for ever.
	for _, f := range []struct{ name, v string }{{"channel", spec.Channel}, {"chat", spec.ChatID}, {"session", spec.SessionID}} {
		if f.v == "" {
			continue
		}
		if err := agent.ValidateID(f.v); err != nil {
			return schedule.Job{}, invalidf("%s %v", f.name, err)
		}
	}
	// The reply's channel and chat default from the actor's two parts:
	// without them a job would deliver nowhere.
	if c, id, ok := strings.Cut(spec.ActorID, ":"); !ok || strings.TrimSpace(c) == "" || strings.TrimSpace(id) == "" {
		return schedule.Job{}, invalidf("actor %q: want <channel>:<id>, e.g. telegram:123", spec.ActorID)
	}
	ch, chat := reminders.ChatOf(tool.Call{Channel: spec.Channel, ActorID: spec.ActorID})
	if spec.Channel == "" {
		spec.Channel = ch
	}
	if spec.ChatID == "" {
		spec.ChatID = chat
	}
	if spec.Source == "" {
		spec.Source = schedule.SourceCLI
	}
	same, err := a.scheduler.List(ctx, schedule.Filter{ActorID: spec.ActorID, Name: spec.Name})
	if err != nil {
		return schedule.Job{}, err
	}
	same = slices.DeleteFunc(same, func(j schedule.Job) bool { return j.Status == schedule.StatusDone })
	if len(same) > 0 { // a fired one-shot (done) keeps its name for its history only
		return schedule.Job{}, invalidf("%s already has a job named %q (%s); remove it first or pick another name", spec.ActorID, spec.Name, same[0].ID)
	}
	j, err := a.scheduler.Add(ctx, spec)
	if errors.Is(err, schedule.ErrBadSpec) {
		return j, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return j, err
}

// ResolveJob finds a job by ID, or else by its unique name. Errors:
// schedule.ErrNotFound, ErrInvalid (ambiguous name).
func (a *Assistant) ResolveJob(ctx context.Context, ref string) (schedule.Job, error) {
	j, err := a.scheduler.Get(ctx, ref)
	if err == nil || !errors.Is(err, schedule.ErrNotFound) {
		return j, err
	}
	named, err := a.scheduler.List(ctx, schedule.Filter{Name: ref})
	if err != nil {
		return schedule.Job{}, err
	}
	if len(named) == 0 {
		shown := fmt.Sprintf("%q", ref)
		if r := []rune(ref); len(r) > 64 { // not a hostile megabyte echoed whole
			shown = fmt.Sprintf("%q… (%d bytes)", string(r[:64]), len(ref))
		}
		return schedule.Job{}, fmt.Errorf("%w: no job with id or name %s", schedule.ErrNotFound, shown)
	}
	// A name may be shared by one live job and fired one-shots (done) of
	// the same actor: the live job wins, then the last one to fire.
	live := slices.DeleteFunc(slices.Clone(named), func(j schedule.Job) bool { return j.Status == schedule.StatusDone })
	switch {
	case len(live) == 1:
		return live[0], nil
	case len(live) == 0:
		last := named[0]
		for _, j := range named[1:] {
			if j.LastRun.After(last.LastRun) {
				last = j
			}
		}
		if n := len(named); n > 1 && !sameActor(named) {
			return schedule.Job{}, invalidf("%d fired jobs of different actors are named %q; give the id", n, ref)
		}
		return last, nil
	}
	return schedule.Job{}, invalidf("%d jobs are named %q; give the id", len(live), ref)
}

// sameActor reports whether jobs all belong to one actor.
func sameActor(jobs []schedule.Job) bool {
	for _, j := range jobs[1:] {
		if j.ActorID != jobs[0].ActorID {
			return false
		}
	}
	return true
}

// RemoveJob removes a job by ID or unique name and returns it.
func (a *Assistant) RemoveJob(ctx context.Context, ref string) (schedule.Job, error) {
	j, err := a.ResolveJob(ctx, ref)
	if err != nil {
		return j, err
	}
	return j, a.scheduler.Remove(ctx, j.ID)
}

// RunJobNow makes a job due at once and wakes the scheduler of this
// process (when it runs one; another instance sharing the store picks it
// up at its next poll).
func (a *Assistant) RunJobNow(ctx context.Context, ref string) (schedule.Job, error) {
	j, err := a.ResolveJob(ctx, ref)
	if err != nil {
		return j, err
	}
	return a.scheduler.RunNow(ctx, j.ID)
}

// PauseJob pauses a job by ID or unique name (it stops firing until
// resumed) and returns it. Errors: schedule.ErrNotFound, ErrInvalid
// (ambiguous name).
func (a *Assistant) PauseJob(ctx context.Context, ref string) (schedule.Job, error) {
	j, err := a.ResolveJob(ctx, ref)
	if err != nil {
		return j, err
	}
	if err := notDone(j, "pause"); err != nil {
		return j, err
	}
	return a.scheduler.Pause(ctx, j.ID)
}

// notDone refuses to pause or resume a fired one-shot (done): it will not
// fire again, so there is nothing to pause or resume.
func notDone(j schedule.Job, verb string) error {
	if j.Status != schedule.StatusDone {
		return nil
	}
	return fmt.Errorf("%w: job %s (%q) fired at %s and is done, so there is nothing to %s; run it again with cron run, or add a new job",
		ErrInvalid, j.ID, j.Name, j.LastRun.UTC().Format(time.RFC3339), verb)
}

// ResumeJob resumes a paused job by ID or unique name: its next run is its
// first slot after now (missed runs are not replayed). Errors:
// schedule.ErrNotFound, ErrInvalid (ambiguous name).
func (a *Assistant) ResumeJob(ctx context.Context, ref string) (schedule.Job, error) {
	j, err := a.ResolveJob(ctx, ref)
	if err != nil {
		return j, err
	}
	if err := notDone(j, "resume"); err != nil {
		return j, err
	}
	j, err = a.scheduler.Resume(ctx, j.ID)
	if errors.Is(err, schedule.ErrBadSpec) {
		return j, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return j, err
}

// JobHistory returns a job's last runs (at most schedule.MaxRuns), newest
// first, by ID or unique name. Errors: schedule.ErrNotFound, ErrInvalid
// (ambiguous name).
func (a *Assistant) JobHistory(ctx context.Context, ref string) ([]schedule.Run, error) {
	j, err := a.ResolveJob(ctx, ref)
	if err != nil {
		return nil, err
	}
	return a.scheduler.History(ctx, j.ID)
}

// Pairings lists pending Telegram pairing codes.
func (a *Assistant) Pairings(ctx context.Context) ([]telegram.Pairing, error) {
	if a.tgStore == nil {
		return []telegram.Pairing{}, nil
	}
	list, err := a.tgStore.ListPairings(ctx, time.Now())
	if list == nil {
		list = []telegram.Pairing{}
	}
	return list, err
}

// ApprovePairing approves a pairing code: its chat may talk to Tendril.
func (a *Assistant) ApprovePairing(ctx context.Context, code string) (telegram.Pairing, error) {
	if a.tgStore == nil {
		return telegram.Pairing{}, ErrNoTelegram
	}
	return a.tgStore.ApprovePairing(ctx, code, time.Now())
}

// StateSnapshot returns an actor's internal state with decay applied.
//
// Errors: ErrInvalid for an actor ID no turn can have (agent.ValidateStoredID:
// an actor stored before IDs refused invisible characters stays readable)
// or one the state store refuses (state.ErrInvalidActor); the store's
// own failures as they are.
func (a *Assistant) StateSnapshot(ctx context.Context, actorID string) (state.Snapshot, error) {
	if err := agent.ValidateStoredID(actorID); err != nil {
		return state.Snapshot{}, invalidf("actor %v", err)
	}
	s, err := a.state.Snapshot(ctx, actorID)
	if errors.Is(err, state.ErrInvalidActor) {
		return state.Snapshot{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return s, err
}

// StateActors lists the actors with internal state.
func (a *Assistant) StateActors(ctx context.Context) ([]string, error) {
	return a.state.Actors(ctx)
}
