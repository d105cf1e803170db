// Package mgmt is Tendril's management API: JSON over HTTP for every
// operation of the application layer (package assistant), mounted by the
// runtime under /api/v1 (bearer token when TENDRIL_AUTH_TOKEN is set) and
// served on the unix socket $TENDRIL_HOME/tendril.sock for the CLI. Client
// is its Go client; the CLI uses it against a running server, or against
// an in-process Assistant when none runs, so both paths are one.
//
// Errors are {"ok":false,"error":CODE,"message":text}: 400
// INVALID_REQUEST, 403 FORBIDDEN, 404 NOT_FOUND, 409 CONFLICT (decided,
// expired, ledger broken, not configured), 503 NOT_READY (a dependency
// such as the database is unreachable: try again), 500 INTERNAL_ERROR.
// A 5xx message names no user, database, host or port except on the
// management socket (runtime.SafeMessage); the error is logged whole.
package mgmt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/approval"
	"github.com/tendrilai/tendril/internal/assistant"
	"github.com/tendrilai/tendril/internal/channel/telegram"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/runtime"
	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/web/dashboard"
	"github.com/tendrilai/tendril/internal/web/sanitize"
)

// Prefix is the path prefix of every route.
const Prefix = "/api/v1"

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 1 << 20

type api struct {
	a   *assistant.Assistant
	log *slog.Logger
}

// Handler serves the management API over a.
func Handler(a *assistant.Assistant) http.Handler {
	h := &api{a: a, log: a.Logger()}
	mux := http.NewServeMux()
	route := func(pattern string, f func(w http.ResponseWriter, r *http.Request) (any, error)) {
		method, path, _ := strings.Cut(pattern, " ")
		mux.HandleFunc(method+" "+Prefix+path, func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
			v, err := f(w, r)
			if err != nil {
				h.writeError(w, r, err)
				return
			}
			if v != nil {
				writeJSON(w, http.StatusOK, v)
			}
		})
	}
	route("GET /memory/actors", h.memoryActors)
	route("GET /memory/search", h.memorySearch)
	route("GET /memory/records", h.memoryRecords)
	route("GET /memory/records/{id}", h.memoryRecord)
	route("POST /memory/forget", h.memoryForget)
	route("POST /memory/rebuild", h.memoryRebuild)
	route("POST /memory/export", h.memoryExport)
	route("POST /memory/harvest", h.memoryHarvest)
	route("GET /memory/staging", h.stagingList)
	route("POST /memory/staging/{id}/approve", h.stagingApprove)
	route("POST /memory/staging/{id}/reject", h.stagingReject)

	route("GET /approvals", h.approvalsList)
	route("POST /approvals/{id}/approve", h.decide(true))
	route("POST /approvals/{id}/deny", h.decide(false))
	route("POST /approvals/yolo", h.yolo)
	route("POST /approvals/reset", h.reset)

	route("GET /sessions", h.sessionsList)
	route("GET /sessions/{key}", h.sessionShow)
	route("POST /sessions/{key}/branch", h.sessionBranch)
	route("GET /sessions/{key}/export", h.sessionExport)
	route("POST /sessions/clear", h.sessionsClear)

	route("GET /jobs", h.jobsList)
	route("POST /jobs", h.jobsAdd)
	route("DELETE /jobs/{ref}", h.jobsRemove)
	route("POST /jobs/{ref}/run", h.jobsRun)
	route("POST /jobs/{ref}/pause", h.jobsPause)
	route("POST /jobs/{ref}/resume", h.jobsResume)
	route("GET /jobs/{ref}/history", h.jobsHistory)

	route("GET /pairing", h.pairingList)
	route("POST /pairing/{code}/approve", h.pairingApprove)

	route("POST /dashboard/link", h.dashboardLink)

	route("GET /state", h.stateList)
	route("GET /state/{actor}", h.stateShow)

	mux.HandleFunc("GET "+Prefix+"/deliveries", h.deliveries)
	mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		if runtime.MethodNotAllowed(w, r, mux) {
			return
		}
		writeJSON(w, http.StatusNotFound, errorBody("NOT_FOUND", "no such endpoint: "+r.Method+" "+r.URL.Path))
	})
	return mux
}

// errorBody is an error response. Its message never carries a
// bidirectional control as such (escaped as \u202e, so a hostile ID
// cannot reorder what an operator reads) and is cut at maxMessage bytes,
// so a 100 KB ID in a path is not echoed back whole.
func errorBody(code, msg string) map[string]any {
	return map[string]any{"ok": false, "error": code, "message": clipMessage(sanitize.EscapeBidi(msg))}
}

// maxMessage bounds an error message, in bytes.
const maxMessage = 1024

func clipMessage(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", msg[:cut], len(msg))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// status maps an operation's error to an HTTP status and code.
func status(err error) (int, string) {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, "INVALID_REQUEST"
	case errors.Is(err, assistant.ErrInvalid), errors.Is(err, approval.ErrInvalidID), errors.Is(err, approval.ErrInvalidBy),
		errors.Is(err, errBadBody):
		return http.StatusBadRequest, "INVALID_REQUEST"
	case errors.Is(err, assistant.ErrNotYours):
		return http.StatusForbidden, "FORBIDDEN"
	case errors.Is(err, memory.ErrNotFound), errors.Is(err, schedule.ErrNotFound), errors.Is(err, approval.ErrNotFound),
		errors.Is(err, assistant.ErrNoSession), errors.Is(err, assistant.ErrNoNode), errors.Is(err, session.ErrNotFound), errors.Is(err, telegram.ErrPairingNotFound):
		return http.StatusNotFound, "NOT_FOUND"
	case errors.Is(err, approval.ErrAlreadyDecided), errors.Is(err, approval.ErrExpired), errors.Is(err, approval.ErrLedgerBroken),
		errors.Is(err, approval.ErrNotBroken), errors.Is(err, approval.ErrRulesChanged), errors.Is(err, approval.ErrConsumed),
		errors.Is(err, assistant.ErrNoTelegram), errors.Is(err, telegram.ErrPairingExpired):
		return http.StatusConflict, "CONFLICT"
	case runtime.Unavailable(err), errors.Is(err, context.DeadlineExceeded):
		// A dependency is down or did not answer in time (a pool
		// connection not acquired before the deadline): the request may
		// succeed once it is back, as a turn's NOT_READY says.
		return http.StatusServiceUnavailable, "NOT_READY"
	}
	return http.StatusInternalServerError, "INTERNAL_ERROR"
}

// writeError answers a failed operation. An internal error while the
// assistant is not ready (a database connection cut mid-query reads as a
// bare "unexpected EOF") is 503 NOT_READY, with the readiness check's
// answer added. A 5xx is logged whole and, but on the management socket
// (whose caller owns the home), answered with runtime.SafeMessage: no
// user, database, host or port.
func (h *api) writeError(w http.ResponseWriter, r *http.Request, err error) {
	st, code := status(err)
	if st == http.StatusInternalServerError {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		rerr := h.a.CheckReady(ctx)
		cancel()
		if rerr != nil {
			st, code, err = http.StatusServiceUnavailable, "NOT_READY", fmt.Errorf("%w; %w", err, rerr)
		}
	}
	msg := err.Error()
	if st >= 500 {
		h.log.Warn("management request failed", "method", r.Method, "path", r.URL.Path, "code", code, "err", err)
		if !runtime.IsLocal(r.Context()) {
			msg = runtime.SafeMessage(err)
		}
	}
	writeJSON(w, st, errorBody(code, msg))
}

// readyTimeout bounds the readiness check of a failed request.
const readyTimeout = 2 * time.Second

var errBadBody = errors.New("malformed JSON body")

func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return fmt.Errorf("%w: %v", errBadBody, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: one JSON value expected", errBadBody)
	}
	return nil
}

// boolParam reads the boolean query parameter name. Absent or empty is
// false; otherwise every value given must be one strconv.ParseBool
// accepts, and the first counts (as url.Values.Get). Anything else
// ("maybe", "yes", "on") is an ErrInvalid naming the parameter: read as
// false it would silently drop what the caller asked for.
func boolParam(r *http.Request, name string) (bool, error) {
	vs := r.URL.Query()[name]
	out := false
	for i, v := range vs {
		if v == "" {
			continue
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("%w: %s %.64q: want true or false (also 1, t, T, TRUE, True, 0, f, F, FALSE, False)", assistant.ErrInvalid, name, v)
		}
		if i == 0 {
			out = b
		}
	}
	return out, nil
}

func (h *api) memoryActors(w http.ResponseWriter, r *http.Request) (any, error) {
	actors, err := h.a.MemoryActors(r.Context())
	return map[string]any{"actors": actors}, err
}

func (h *api) memorySearch(w http.ResponseWriter, r *http.Request) (any, error) {
	q := r.URL.Query()
	if !strings.ContainsFunc(q.Get("q"), func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
		// Blank, punctuation or invisible characters only: nothing to
		// rank by (it listed every record with score 0 once); listing is
		// GET /memory/records.
		return nil, fmt.Errorf("%w: q: search needs words to rank by; GET %s/memory/records lists an actor's records", assistant.ErrInvalid, Prefix)
	}
	var k int
	if v := q.Get("k"); v != "" {
		var err error
		if k, err = strconv.Atoi(v); err != nil {
			return nil, fmt.Errorf("%w: k %q: want a whole number of results (1 to %d)", assistant.ErrInvalid, v, assistant.MaxSearchK)
		}
	}
	explain, err := boolParam(r, "explain")
	if err != nil {
		return nil, err
	}
	hits, err := h.a.Search(r.Context(), assistant.SearchQuery{ActorID: q.Get("actor"), AgentID: q.Get("agent"), Text: q.Get("q"),
		K: k, Filters: q["filter"], Statuses: q["status"], Explain: explain, Engine: q.Get("engine")})
	if hits == nil {
		hits = []memory.Hit{}
	}
	return hits, err
}

func (h *api) memoryRecords(w http.ResponseWriter, r *http.Request) (any, error) {
	q := r.URL.Query()
	events, err := boolParam(r, "events")
	if err != nil {
		return nil, err
	}
	return h.a.Records(r.Context(), assistant.RecordsQuery{ActorID: q.Get("actor"), AgentID: q.Get("agent"),
		Namespace: q.Get("namespace"), Statuses: q["status"], Events: events})
}

func (h *api) memoryRecord(w http.ResponseWriter, r *http.Request) (any, error) {
	return h.a.Record(r.Context(), r.PathValue("id"))
}

func (h *api) memoryForget(w http.ResponseWriter, r *http.Request) (any, error) {
	var req assistant.ForgetRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return h.a.Forget(r.Context(), req)
}

func (h *api) memoryRebuild(w http.ResponseWriter, r *http.Request) (any, error) {
	start := time.Now()
	n := 0
	warnings, err := h.a.Rebuild(r.Context(), func(_, total int) { n = total })
	if warnings == nil {
		warnings = []string{}
	}
	return map[string]any{"actors": n, "seconds": time.Since(start).Seconds(), "warnings": warnings}, err
}

func (h *api) memoryExport(w http.ResponseWriter, r *http.Request) (any, error) {
	var req struct {
		Dir string `json:"dir"`
	}
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	dir, n, err := h.a.ExportMemory(r.Context(), req.Dir)
	if err != nil {
		return nil, err
	}
	return map[string]any{"files": n, "dir": dir}, nil
}

func (h *api) memoryHarvest(w http.ResponseWriter, r *http.Request) (any, error) {
	var req assistant.HarvestRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return h.a.Harvest(r.Context(), req)
}

func (h *api) stagingList(w http.ResponseWriter, r *http.Request) (any, error) {
	recs, err := h.a.Staged(r.Context(), r.URL.Query().Get("actor"))
	return map[string]any{"staged": recs}, err
}

func (h *api) stagingApprove(w http.ResponseWriter, r *http.Request) (any, error) {
	return h.a.ApproveStaged(r.Context(), r.PathValue("id"))
}

func (h *api) stagingReject(w http.ResponseWriter, r *http.Request) (any, error) {
	id := r.PathValue("id")
	return map[string]any{"rejected": id}, h.a.RejectStaged(r.Context(), id)
}

// ApprovalList is GET /approvals.
type ApprovalList struct {
	Requests  []approval.Request     `json:"requests"`
	Broken    *approval.VerifyReport `json:"broken"`
	YoloUntil *time.Time             `json:"yolo_until"`
	Ledger    string                 `json:"ledger"`
}

func (h *api) approvalsList(w http.ResponseWriter, r *http.Request) (any, error) {
	all, err := boolParam(r, "all")
	if err != nil {
		return nil, err
	}
	g := h.a.Gate()
	var reqs []approval.Request
	if all {
		reqs, err = g.List(r.Context())
	} else {
		reqs, err = g.Pending(r.Context())
	}
	if reqs == nil {
		reqs = []approval.Request{}
	}
	out := ApprovalList{Requests: reqs, Broken: g.Broken(), Ledger: g.Path()}
	if until, ok := g.YoloUntil(); ok {
		out.YoloUntil = &until
	}
	return out, err
}

// Decision is the body of POST /approvals/{id}/approve|deny. By names who
// decides ("cli:ana"), as approval.ValidateBy requires (non-blank, at most
// approval.MaxByBytes bytes, no control characters); another value is a
// 400 INVALID_REQUEST and nothing is written.
type Decision struct {
	By string `json:"by"`
}

func (h *api) decide(approve bool) func(w http.ResponseWriter, r *http.Request) (any, error) {
	return func(w http.ResponseWriter, r *http.Request) (any, error) {
		var d Decision
		if err := decode(r, &d); err != nil {
			return nil, err
		}
		id := r.PathValue("id")
		if !approval.ValidRequestID(id) {
			return nil, fmt.Errorf("%w: %s is not a request ID", approval.ErrInvalidID, approval.QuoteID(id))
		}
		if err := approval.ValidateBy(d.By); err != nil {
			return nil, err
		}
		return h.a.Decide(r.Context(), id, approve, d.By, "")
	}
}

// YoloRequest is the body of POST /approvals/yolo: seconds from 0 to
// approval.MaxYolo (1,800); 0 closes the window. By names who opens or
// closes it, checked like Decision.By. Either out of range is a 400
// INVALID_REQUEST and nothing is written.
type YoloRequest struct {
	Seconds float64 `json:"seconds"`
	By      string  `json:"by"`
}

func (h *api) yolo(w http.ResponseWriter, r *http.Request) (any, error) {
	var y YoloRequest
	if err := decode(r, &y); err != nil {
		return nil, err
	}
	if !(y.Seconds >= 0 && y.Seconds <= approval.MaxYolo.Seconds()) {
		// checked before the conversion: 1e18 s overflows a Duration
		return nil, fmt.Errorf("%w: seconds must be from 0 to %g (0 closes the window)", assistant.ErrInvalid, approval.MaxYolo.Seconds())
	}
	if err := approval.ValidateBy(y.By); err != nil {
		return nil, err
	}
	until, err := h.a.Yolo(r.Context(), time.Duration(y.Seconds*float64(time.Second)), y.By)
	return map[string]any{"until": until, "open": y.Seconds > 0}, err
}

func (h *api) reset(w http.ResponseWriter, r *http.Request) (any, error) {
	var req struct {
		By     string `json:"by"`
		Reason string `json:"reason"`
	}
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if req.Reason == "" || req.By == "" {
		return nil, fmt.Errorf("%w: reason and by are required", assistant.ErrInvalid)
	}
	return map[string]any{"ledger": h.a.Gate().Path()}, h.a.Gate().Reset(r.Context(), req.By, req.Reason)
}

func (h *api) key(r *http.Request) (session.Key, error) {
	return h.a.ParseSessionKey(r.URL.Query().Get("agent"), r.PathValue("key"))
}

func (h *api) sessionsList(w http.ResponseWriter, r *http.Request) (any, error) {
	return h.a.ListSessions(r.Context(), r.URL.Query().Get("agent"))
}

func (h *api) sessionShow(w http.ResponseWriter, r *http.Request) (any, error) {
	k, err := h.key(r)
	if err != nil {
		return nil, err
	}
	return h.a.Session(r.Context(), k)
}

func (h *api) sessionBranch(w http.ResponseWriter, r *http.Request) (any, error) {
	k, err := h.key(r)
	if err != nil {
		return nil, err
	}
	var req struct {
		From string `json:"from"`
	}
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if req.From == "" {
		return nil, fmt.Errorf("%w: from (a node ID) is required", assistant.ErrInvalid)
	}
	return map[string]any{"key": k.String(), "leaf": req.From}, h.a.BranchFrom(r.Context(), k, req.From)
}

func (h *api) sessionExport(w http.ResponseWriter, r *http.Request) (any, error) {
	k, err := h.key(r)
	if err != nil {
		return nil, err
	}
	format := r.URL.Query().Get("format")
	if _, err := h.a.Session(r.Context(), k); err != nil {
		return nil, err
	}
	ct := map[string]string{session.FormatJSON: "application/json", session.FormatJSONL: "application/x-ndjson", session.FormatMD: "text/markdown; charset=utf-8"}[format]
	if ct == "" {
		return nil, fmt.Errorf("%w: format must be json, jsonl or md, not %q", assistant.ErrInvalid, format)
	}
	w.Header().Set("Content-Type", ct)
	// Headers are sent with the first byte; a failure midway truncates.
	return nil, h.a.ExportSession(r.Context(), k, format, w)
}

// ClearRequest is the body of POST /sessions/clear.
type ClearRequest struct {
	Agent string   `json:"agent,omitempty"`
	Keys  []string `json:"keys,omitempty"`
	All   bool     `json:"all,omitempty"`
}

func (h *api) sessionsClear(w http.ResponseWriter, r *http.Request) (any, error) {
	var req ClearRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	switch {
	case len(req.Keys) == 0 && !req.All:
		return nil, fmt.Errorf("%w: give keys or all", assistant.ErrInvalid)
	case len(req.Keys) > 0 && req.All:
		return nil, fmt.Errorf("%w: give keys or all, not both", assistant.ErrInvalid)
	}
	var keys []session.Key
	for _, s := range req.Keys {
		k, err := h.a.ParseSessionKey(req.Agent, s)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	cleared, err := h.a.ClearSessions(r.Context(), req.Agent, keys, req.All)
	return map[string]any{"cleared": cleared}, err
}

func (h *api) jobsList(w http.ResponseWriter, r *http.Request) (any, error) {
	return h.a.Jobs(r.Context(), r.URL.Query().Get("actor"))
}

// jobsAdd records where the job came from: the CLI when the request
// arrived on the local socket (or in-process), else the HTTP API, which
// may not claim another source.
func (h *api) jobsAdd(w http.ResponseWriter, r *http.Request) (any, error) {
	var spec schedule.JobSpec
	if err := decode(r, &spec); err != nil {
		return nil, err
	}
	switch {
	case runtime.IsLocal(r.Context()):
		if spec.Source == "" {
			spec.Source = schedule.SourceCLI
		}
	case spec.Source == "" || spec.Source == schedule.SourceAPI:
		spec.Source = schedule.SourceAPI
	default:
		return nil, fmt.Errorf("%w: source %q: a job added over the HTTP API has source %q", assistant.ErrInvalid, spec.Source, schedule.SourceAPI)
	}
	return h.a.AddJob(r.Context(), spec)
}

func (h *api) jobsRemove(w http.ResponseWriter, r *http.Request) (any, error) {
	return h.a.RemoveJob(r.Context(), r.PathValue("ref"))
}

func (h *api) jobsRun(w http.ResponseWriter, r *http.Request) (any, error) {
	return h.a.RunJobNow(r.Context(), r.PathValue("ref"))
}

func (h *api) jobsPause(w http.ResponseWriter, r *http.Request) (any, error) {
	return h.a.PauseJob(r.Context(), r.PathValue("ref"))
}

func (h *api) jobsResume(w http.ResponseWriter, r *http.Request) (any, error) {
	return h.a.ResumeJob(r.Context(), r.PathValue("ref"))
}

func (h *api) jobsHistory(w http.ResponseWriter, r *http.Request) (any, error) {
	return h.a.JobHistory(r.Context(), r.PathValue("ref"))
}

func (h *api) pairingList(w http.ResponseWriter, r *http.Request) (any, error) {
	return h.a.Pairings(r.Context())
}

func (h *api) pairingApprove(w http.ResponseWriter, r *http.Request) (any, error) {
	code := strings.ToUpper(strings.TrimSpace(r.PathValue("code")))
	if len(code) != 8 {
		return nil, fmt.Errorf("%w: pairing code %q must be 8 characters", assistant.ErrInvalid, code)
	}
	return h.a.ApprovePairing(r.Context(), code)
}

func (h *api) stateList(w http.ResponseWriter, r *http.Request) (any, error) {
	actors, err := h.a.StateActors(r.Context())
	if err != nil {
		return nil, err
	}
	snaps := []any{}
	for _, ac := range actors {
		s, err := h.a.StateSnapshot(r.Context(), ac)
		if err != nil {
			return nil, err
		}
		s.History = nil
		snaps = append(snaps, s)
	}
	return map[string]any{"actors": snaps}, nil
}

// DashboardLink is the answer of POST /dashboard/link.
type DashboardLink struct {
	// Link signs a browser in to this server's dashboard once, within
	// dashboard.LinkTTL (dashboard.SignInLink); without an auth token it
	// is the dashboard's plain address.
	Link string `json:"link"`
}

// dashboardLink makes a sign-in link with the running server's own
// address and token, which a CLI's environment may not have.
func (h *api) dashboardLink(w http.ResponseWriter, r *http.Request) (any, error) {
	cfg := h.a.Config()
	return DashboardLink{Link: dashboard.SignInLink(dashboard.BaseURL(cfg.Addr), cfg.AuthToken, time.Now())}, nil
}

// stateShow answers an actor's internal state (assistant.StateSnapshot
// refuses an ID no turn can have: a 400, not a default state), its
// history cut to the last ?limit= changes (a whole number; 0 or absent:
// all).
func (h *api) stateShow(w http.ResponseWriter, r *http.Request) (any, error) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: limit %.64q: want a whole number of changes (0: all)", assistant.ErrInvalid, v)
		}
		limit = n
	}
	s, err := h.a.StateSnapshot(r.Context(), r.PathValue("actor"))
	if err != nil {
		return nil, err
	}
	if limit > 0 && len(s.History) > limit {
		s.History = s.History[len(s.History)-limit:]
	}
	return s, nil
}

// deliveries streams replies produced outside a request (turns resumed
// after an approval) as Server-Sent Events: "data: <Delivery JSON>".
func (h *api) deliveries(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, errorBody("INTERNAL_ERROR", "streaming unsupported"))
		return
	}
	actor := r.URL.Query().Get("actor")
	// Checked as the other read routes check an actor (an ID stored before
	// IDs refused invisible characters can still be listened for).
	if err := agent.ValidateStoredID(actor); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody("INVALID_REQUEST", "actor "+err.Error()))
		return
	}
	ch, cancel, err := h.a.Subscribe(actor)
	if err != nil {
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, errorBody("TOO_MANY_LISTENERS", err.Error()))
		return
	}
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": subscribed\n\n")
	fl.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-h.a.Stopping():
			return
		case <-r.Context().Done():
			return
		case <-keep.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			fl.Flush()
		case d, ok := <-ch:
			if !ok {
				return
			}
			b, _ := json.Marshal(d)
			fmt.Fprintf(w, "data: %s\n\n", b)
			fl.Flush()
		}
	}
}
