// Package schedule runs scheduled jobs (SPEC §7.2): one-shot `at` jobs,
// `every` intervals and `cron` expressions in an IANA time zone. Jobs live in
// a Store (SQLite by default, Postgres when scaled out), and every run is
// claimed atomically with a lease so that several instances sharing a store
// fire each run exactly once.
//
// Definitions come from tendril.json (SyncConfigJobs), the CLI (`tendril
// cron ...`), the management API (POST /api/v1/jobs), the dashboard and
// the `reminders` tool (package schedule/reminders); Job.Source says which.
//
// Run semantics:
//   - A run calls Runner.RunJob (package schedule/agentrunner makes it an
//     agent turn with invocation_type=cron); a reply that is only
//     NOTHING_DUE sends nothing, anything else goes to Deliverer.Deliver.
//   - After a run the next slot is the first regular slot after the time
//     the run ended, so slots missed while the server was down collapse
//     into one run at start-up.
//   - A failed run (runner or delivery error) is retried after 60s, 120s and
//     300s (Options.Backoff), but never later than the next regular slot.
//     After the last retry the job waits for its next regular slot; an `at`
//     job becomes StatusFailed (it stays listed; `tendril cron run` retries).
//   - An `at` job becomes StatusDone after a successful run: it never fires
//     again but stays listed, with its run history, so that `tendril cron
//     history` shows when it fired and what it delivered. Each actor keeps
//     its newest MaxDone done jobs; older ones go, with their runs.
//   - A run is claimed in the store with a lease before it starts; only the
//     claimer runs it, so instances sharing a store fire each run once. If
//     an instance dies mid-run the run is retried after the lease expires.
//   - Cron across DST: see Job.nextAfter (02:30 on a spring-forward day is
//     skipped; on a fall-back day it fires once).
package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
	"github.com/robfig/cron/v3"
)

// Kind is how a job's runs are spaced.
type Kind string

const (
	// KindAt runs once at an instant (Spec is RFC 3339). After a successful
	// run the job is StatusDone (kept, with its history, but never due).
	KindAt Kind = "at"
	// KindEvery runs at a fixed interval (Spec is a Go duration or "30d").
	KindEvery Kind = "every"
	// KindCron runs on a 5-field cron expression (Spec) in the IANA time
	// zone TZ, parsed by github.com/robfig/cron/v3.
	KindCron Kind = "cron"
)

// Status is a job's lifecycle state.
type Status string

const (
	// StatusActive jobs are scheduled at NextRun.
	StatusActive Status = "active"
	// StatusFailed is an `at` job whose run and every retry failed; it never
	// runs again by itself and stays listed until removed or run by hand.
	StatusFailed Status = "failed"
	// StatusPaused jobs never fire until resumed (Scheduler.Resume), which
	// schedules the next slot after the time of resuming; slots that passed
	// while paused are not run.
	StatusPaused Status = "paused"
	// StatusDone is an `at` job that ran successfully: it never runs again
	// by itself (Scheduler.RunNow runs it again) and stays listed, with its
	// run history, until removed, its actor is removed, or it is among an
	// actor's done jobs beyond the newest MaxDone (Store.Finish).
	StatusDone Status = "done"
)

// Source says where a job definition came from.
type Source string

const (
	SourceConfig Source = "config" // tendril.json schedule.jobs, upserted by name
	SourceCLI    Source = "cli"    // tendril cron add
	SourceTool   Source = "tool"   // the reminders tool
	SourceWeb    Source = "web"    // the dashboard's Schedules form
	SourceAPI    Source = "api"    // POST /api/v1/jobs over HTTP
)

// NothingDue is the reply with which a run says there is nothing to tell the
// user; the scheduler delivers nothing for it (SPEC §7.2).
const NothingDue = "NOTHING_DUE"

// Limits on job definitions.
const (
	// MinEvery is the shortest `every` interval accepted.
	MinEvery = time.Minute
	// MaxTaskLen bounds Task, in bytes.
	MaxTaskLen = 4000
	// MaxNameLen bounds Name, in bytes.
	MaxNameLen = 200
)

var (
	// ErrNotFound is returned for an unknown job ID (or one that belongs to
	// another actor, for actor-scoped calls).
	ErrNotFound = errors.New("job not found")
	// ErrExists is returned when a job ID, or a config job's name, is taken.
	ErrExists = errors.New("job already exists")
	// ErrLeaseLost is returned by Store.Finish when the run's lease is no
	// longer held by the caller (it expired and was claimed again, or the
	// job was deleted meanwhile).
	ErrLeaseLost = errors.New("job lease lost")
	// ErrBadSpec wraps every validation error of a job definition.
	ErrBadSpec = errors.New("bad job spec")
)

// Job is one stored schedule. Times are UTC, truncated to milliseconds; a
// zero LastRun means never run.
type Job struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Kind      Kind      `json:"kind"`
	Spec      string    `json:"spec"`         // RFC 3339 instant, interval, or cron expression
	TZ        string    `json:"tz,omitempty"` // IANA zone for cron jobs; "" = UTC
	Task      string    `json:"task"`         // what the agent is asked to do
	ActorID   string    `json:"actor_id"`
	Channel   string    `json:"channel"`
	ChatID    string    `json:"chat_id,omitempty"`
	SessionID string    `json:"session_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	NextRun   time.Time `json:"next_run"`
	LastRun   time.Time `json:"last_run,omitzero"`
	// Attempts counts consecutive failed runs of the current slot (0 after a
	// success); it indexes Options.Backoff.
	Attempts  int    `json:"attempts"`
	Status    Status `json:"status"`
	Source    Source `json:"source"`
	LastError string `json:"last_error,omitempty"`
}

// JobSpec is a job definition as a user writes it, before validation.
// Exactly one of At, Every and Cron is set (Kind may be left empty and is
// then inferred; if set it must agree).
type JobSpec struct {
	Name string `json:"name"`
	Kind Kind   `json:"kind,omitempty"`
	// At is RFC 3339 ("2026-12-01T09:00:00+01:00"), a local time
	// "2006-01-02T15:04[:05]" read in TZ, or relative "in 2h" / "in 3 days".
	At    string `json:"at,omitempty"`
	Every string `json:"every,omitempty"` // "90m", "12h", "30d"
	Cron  string `json:"cron,omitempty"`  // "0 8 * * *", "@daily"
	TZ    string `json:"tz,omitempty"`    // IANA zone, e.g. "Europe/Berlin"

	Task      string `json:"task"`
	ActorID   string `json:"actor_id"`
	Channel   string `json:"channel"`
	ChatID    string `json:"chat_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	Source    Source `json:"source,omitempty"`
}

func badSpec(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrBadSpec, fmt.Sprintf(format, a...))
}

// NewJob validates spec and returns a job with a fresh ULID, CreatedAt = now
// and its first NextRun after now. It fails with ErrBadSpec for a missing
// task or actor, zero or several of At/Every/Cron, an unparsable value, an
// unknown time zone, an interval under MinEvery, or an `at` not after now.
func NewJob(spec JobSpec, now time.Time) (Job, error) {
	return newJob(spec, now, true)
}

func newJob(spec JobSpec, now time.Time, requireFuture bool) (Job, error) {
	now = normTime(now)
	j := Job{
		Name:      strings.TrimSpace(spec.Name),
		TZ:        strings.TrimSpace(spec.TZ),
		Task:      strings.TrimSpace(spec.Task),
		ActorID:   strings.TrimSpace(spec.ActorID),
		Channel:   strings.TrimSpace(spec.Channel),
		ChatID:    strings.TrimSpace(spec.ChatID),
		SessionID: strings.TrimSpace(spec.SessionID),
		Source:    spec.Source,
		CreatedAt: now,
		Status:    StatusActive,
	}
	if j.Source == "" {
		j.Source = SourceCLI
	}
	switch j.Source {
	case SourceConfig, SourceCLI, SourceTool, SourceWeb, SourceAPI:
	default:
		return Job{}, badSpec("unknown source %q", j.Source)
	}
	set := 0
	for _, s := range []string{spec.At, spec.Every, spec.Cron} {
		if strings.TrimSpace(s) != "" {
			set++
		}
	}
	if set != 1 {
		return Job{}, badSpec("give exactly one of at, every or cron")
	}
	switch {
	case strings.TrimSpace(spec.At) != "":
		j.Kind = KindAt
		if j.Source == SourceConfig && strings.HasPrefix(strings.ToLower(strings.TrimSpace(spec.At)), "in ") {
			return Job{}, badSpec("at %q: a config job needs an absolute time", spec.At)
		}
		if j.TZ != "" {
			if _, err := loadLocation(j.TZ); err != nil {
				return Job{}, err
			}
		}
		t, err := ParseAt(spec.At, j.TZ, now)
		if err != nil {
			return Job{}, err
		}
		if requireFuture && !t.After(now) {
			return Job{}, badSpec("at %s is not in the future (now %s)", t.Format(time.RFC3339), now.Format(time.RFC3339))
		}
		j.Spec = t.Format(time.RFC3339Nano)
	case strings.TrimSpace(spec.Every) != "":
		j.Kind = KindEvery
		j.Spec = strings.TrimSpace(spec.Every)
		if j.TZ != "" {
			return Job{}, badSpec("tz applies to cron and at jobs only")
		}
	default:
		j.Kind = KindCron
		j.Spec = strings.TrimSpace(spec.Cron)
	}
	if spec.Kind != "" && spec.Kind != j.Kind {
		return Job{}, badSpec("kind %q does not match the %s value given", spec.Kind, j.Kind)
	}
	if err := j.Validate(); err != nil {
		return Job{}, err
	}
	next, err := j.nextAfter(time.Time{}, now)
	if err != nil {
		return Job{}, err
	}
	j.NextRun = next
	j.ID = NewID()
	return j, nil
}

// NewID returns a new job ID: a ULID (26 Crockford base-32 characters).
func NewID() string { return ulid.Make().String() }

// Validate checks a stored job's definition (not its schedule state): see
// NewJob for the errors.
func (j Job) Validate() error {
	if j.Task == "" {
		return badSpec("task is empty")
	}
	if len(j.Task) > MaxTaskLen {
		return badSpec("task is %d bytes, over the %d limit", len(j.Task), MaxTaskLen)
	}
	if len(j.Name) > MaxNameLen {
		return badSpec("name is %d bytes, over the %d limit", len(j.Name), MaxNameLen)
	}
	if j.ActorID == "" {
		return badSpec("actor_id is empty")
	}
	// A run sends the task as a turn's message, which refuses a NUL byte
	// and invalid UTF-8 (so every run of such a job would fail), and
	// PostgreSQL stores neither in a text column.
	for _, s := range []string{j.Task, j.Name, j.ActorID, j.Channel, j.ChatID, j.SessionID, j.Spec, j.TZ} {
		if !utf8.ValidString(s) {
			return badSpec("%q is not valid UTF-8", s)
		}
	}
	if strings.IndexByte(j.Task, 0) >= 0 {
		return badSpec("task holds a NUL byte")
	}
	for _, s := range []string{j.Name, j.ActorID, j.Channel, j.ChatID, j.SessionID} {
		if strings.IndexFunc(s, unicode.IsControl) >= 0 {
			return badSpec("control characters in %q", s)
		}
	}
	switch j.Kind {
	case KindAt:
		if _, err := time.Parse(time.RFC3339Nano, j.Spec); err != nil {
			return badSpec("at %q is not RFC 3339", j.Spec)
		}
	case KindEvery:
		if _, err := ParseEvery(j.Spec); err != nil {
			return err
		}
	case KindCron:
		if _, err := parseCron(j.Spec, j.TZ); err != nil {
			return err
		}
	default:
		return badSpec("unknown kind %q (want at, every or cron)", j.Kind)
	}
	return nil
}

// ParseEvery parses an `every` interval: a Go duration ("90m", "1h30m") or a
// whole or fractional number of days ("30d", "1.5d", "1d12h"). It fails with
// ErrBadSpec for anything else or an interval under MinEvery.
func ParseEvery(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	d, err := parseDuration(s)
	if err != nil {
		return 0, badSpec("every %q: want a duration like 90m, 12h or 30d", s)
	}
	if d < MinEvery {
		return 0, badSpec("every %q is shorter than the %s minimum", s, MinEvery)
	}
	return d, nil
}

// parseDuration is time.ParseDuration plus d (24h) and w (7d) units, which
// may lead: "1d12h", "2w".
func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("empty")
	}
	var total time.Duration
	rest := s
	for _, u := range []struct {
		suffix string
		unit   time.Duration
	}{{"w", 7 * 24 * time.Hour}, {"d", 24 * time.Hour}} {
		i := strings.Index(rest, u.suffix)
		if i <= 0 {
			continue
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil || n < 0 || n*float64(u.unit) > float64(maxSpan) {
			return 0, fmt.Errorf("bad number %q", rest[:i])
		}
		total += time.Duration(n * float64(u.unit))
		rest = rest[i+1:]
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil {
			return 0, err
		}
		if d < 0 {
			return 0, errors.New("negative")
		}
		total += d
	}
	if total > maxSpan {
		return 0, errors.New("longer than 100 years")
	}
	return total, nil
}

// maxSpan bounds intervals and relative times, far below time.Duration's
// ~292-year range so sums cannot overflow.
const maxSpan = 100 * 365 * 24 * time.Hour

var relUnits = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
}

// ParseAt parses an `at` value relative to now: RFC 3339 with an offset,
// a local "2006-01-02T15:04[:05]" (or with a space) read in tz (UTC when
// tz is ""), or "in <duration>" such as "in 2h", "in 90m", "in 3 days",
// "in 1 hour 30 minutes". It does not check that the result is in the future.
func ParseAt(s, tz string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return normTime(t), nil
	}
	if rel, ok := strings.CutPrefix(strings.ToLower(s), "in "); ok {
		d, err := parseRelative(rel)
		if err != nil {
			return time.Time{}, badSpec("at %q: %v", s, err)
		}
		return normTime(now.Add(d)), nil
	}
	loc := time.UTC
	if tz != "" {
		l, err := loadLocation(tz)
		if err != nil {
			return time.Time{}, err
		}
		loc = l
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return normTime(t), nil
		}
	}
	return time.Time{}, badSpec("at %q: want RFC 3339 (2026-12-01T09:00:00+01:00) or relative (in 2h)", s)
}

func parseRelative(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, err := parseDuration(strings.ReplaceAll(s, " ", "")); err == nil && d > 0 {
		return d, nil
	}
	// "1 hour 30 minutes", "2 days and 3 hours", "3days"
	fields := strings.Fields(strings.ReplaceAll(strings.ReplaceAll(s, ",", " "), " and ", " "))
	var toks []string
	for _, f := range fields {
		i := strings.IndexFunc(f, func(r rune) bool { return !unicode.IsDigit(r) && r != '.' })
		if i > 0 {
			toks = append(toks, f[:i], f[i:])
		} else {
			toks = append(toks, f)
		}
	}
	if len(toks) == 0 || len(toks)%2 != 0 {
		return 0, errors.New("want a duration like 2h, 90m or 3 days")
	}
	var total time.Duration
	for i := 0; i < len(toks); i += 2 {
		n, err := strconv.ParseFloat(toks[i], 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad number %q", toks[i])
		}
		u, ok := relUnits[toks[i+1]]
		if !ok {
			return 0, fmt.Errorf("unknown unit %q", toks[i+1])
		}
		if n*float64(u) > float64(maxSpan) {
			return 0, errors.New("longer than 100 years")
		}
		total += time.Duration(n * float64(u))
		if total > maxSpan {
			return 0, errors.New("longer than 100 years")
		}
	}
	if total <= 0 {
		return 0, errors.New("duration must be positive")
	}
	return total, nil
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseCron parses a standard 5-field expression or a descriptor (@daily,
// @hourly, ...) in tz. The zone goes in TZ, never inline (TZ=/CRON_TZ=), and
// "@every" belongs to the every kind.
func parseCron(expr, tz string) (cron.Schedule, error) {
	e := strings.TrimSpace(expr)
	if e == "" {
		return nil, badSpec("cron expression is empty")
	}
	if strings.HasPrefix(e, "TZ=") || strings.HasPrefix(e, "CRON_TZ=") {
		return nil, badSpec("cron %q: give the time zone in tz, not inline", expr)
	}
	if strings.HasPrefix(e, "@every") {
		return nil, badSpec("cron %q: use an every job for intervals", expr)
	}
	loc := time.UTC
	if tz != "" {
		l, err := loadLocation(tz)
		if err != nil {
			return nil, err
		}
		loc = l
	}
	s, err := cronParser.Parse(sundaySeven(e))
	if err != nil {
		return nil, badSpec("cron %q: %v (want 5 fields: minute hour day-of-month month day-of-week)", expr, err)
	}
	if ss, ok := s.(*cron.SpecSchedule); ok {
		ss.Location = loc
	}
	return s, nil
}

// sundaySeven rewrites 7 in the day-of-week field of a 5-field expression
// as 0: Vixie cron, cronie and crontab(5) take both 0 and 7 for Sunday,
// the parser only 0–6. "7" becomes "0", and a range ending at 7 ("5-7",
// "1-7/2") becomes the days it names ("5,6,0", "1,3,5,0"). Anything else
// is left to the parser, which names what is wrong.
func sundaySeven(expr string) string {
	f := strings.Fields(expr)
	if len(f) != 5 || !strings.Contains(f[4], "7") {
		return expr
	}
	items := strings.Split(f[4], ",")
	for i, it := range items {
		if it == "7" {
			items[i] = "0"
			continue
		}
		rng, step, hasStep := strings.Cut(it, "/")
		lo, hi, ok := strings.Cut(rng, "-")
		if !ok || hi != "7" {
			continue
		}
		a, err1 := strconv.Atoi(lo)
		st, err2 := 1, error(nil)
		if hasStep {
			st, err2 = strconv.Atoi(step)
		}
		if err1 != nil || err2 != nil || a < 0 || a > 7 || st < 1 {
			continue
		}
		var days []string
		for d := a; d <= 7; d += st {
			days = append(days, strconv.Itoa(d%7))
		}
		items[i] = strings.Join(days, ",")
	}
	f[4] = strings.Join(items, ",")
	return strings.Join(f, " ")
}

func loadLocation(tz string) (*time.Location, error) {
	// time.LoadLocation reads files: refuse path tricks before it does.
	if tz == "" || strings.Contains(tz, "..") || strings.HasPrefix(tz, "/") || strings.ContainsAny(tz, "\\\x00") || len(tz) > 64 {
		return nil, badSpec("unknown time zone %q (want an IANA name like Europe/Berlin)", tz)
	}
	if strings.EqualFold(tz, "local") {
		return nil, badSpec("time zone %q is ambiguous; name an IANA zone like Europe/Berlin", tz)
	}
	l, err := time.LoadLocation(tz)
	if err != nil {
		return nil, badSpec("unknown time zone %q (want an IANA name like Europe/Berlin)", tz)
	}
	return l, nil
}

// nextAfter returns the job's regular slot strictly after now. prev is the
// slot that just ran (zero when scheduling the first run).
//
//   - at: the instant itself (only meaningful for the first run).
//   - every: CreatedAt + n·interval for the least n that lands after now,
//     so missed slots collapse into one run and neither retries nor RunNow
//     shift the grid.
//   - cron: robfig's Next(now) in TZ. On a DST fall-back day robfig fires a
//     fixed time in the repeated hour twice ("30 2 * * *" at 02:30 CEST and
//     again at 02:30 CET); like Vixie cron we skip a next slot whose
//     wall-clock minute equals prev's, so it fires once. Expressions whose
//     hour field matches every hour ("0 * * * *") keep both real hours. On a
//     spring-forward day robfig skips a time that does not exist (02:30 in
//     Europe/Berlin on the last Sunday of March): that day has no run.
func (j Job) nextAfter(prev, now time.Time) (time.Time, error) {
	switch j.Kind {
	case KindAt:
		t, err := time.Parse(time.RFC3339Nano, j.Spec)
		if err != nil {
			return time.Time{}, badSpec("at %q is not RFC 3339", j.Spec)
		}
		return normTime(t), nil
	case KindEvery:
		d, err := ParseEvery(j.Spec)
		if err != nil {
			return time.Time{}, err
		}
		anchor := j.CreatedAt
		if anchor.IsZero() || anchor.After(now) {
			anchor = now
		}
		n := now.Sub(anchor)/d + 1
		return normTime(anchor.Add(n * d)), nil
	case KindCron:
		s, err := parseCron(j.Spec, j.TZ)
		if err != nil {
			return time.Time{}, err
		}
		next := s.Next(now)
		if !prev.IsZero() && !next.IsZero() && isSpec(s) && !everyHour(s) {
			loc := s.(*cron.SpecSchedule).Location // robfig returns times in now's zone
			pw, nw := prev.In(loc), next.In(loc)
			if pw.Format("2006-01-02 15:04") == nw.Format("2006-01-02 15:04") && !pw.Equal(nw) {
				next = s.Next(next)
			}
		}
		if next.IsZero() {
			return time.Time{}, badSpec("cron %q never fires", j.Spec)
		}
		return normTime(next), nil
	}
	return time.Time{}, badSpec("unknown kind %q", j.Kind)
}

func isSpec(s cron.Schedule) bool { _, ok := s.(*cron.SpecSchedule); return ok }

// everyHour reports whether a cron schedule's hour field matches all 24 hours.
func everyHour(s cron.Schedule) bool {
	ss, ok := s.(*cron.SpecSchedule)
	return ok && ss.Hour&(1<<24-1) == 1<<24-1
}

// normTime is the stored form: UTC, millisecond precision, so that the
// claim's next_run equality holds in every backend.
func normTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Millisecond)
}
