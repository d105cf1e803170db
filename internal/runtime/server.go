// Package runtime is Tendril's HTTP server: the AgentCore Runtime contract
// (GET /ping, POST /invocations, /ws), the readiness probe GET /readyz,
// /metrics, and mounting of channel and management routes, with token auth
// and graceful shutdown. With
// Options.AgentCore it runs in AgentCore Runtime mode (agentcore.go).
package runtime

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/metrics"
)

// SessionHeader supplies session_id when the body has none (AgentCore).
const SessionHeader = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"

// Options configure the server.
type Options struct {
	Addr         string // default 127.0.0.1:8080
	AuthToken    string // required for non-loopback addresses
	MaxBodyBytes int64  // /invocations body limit, default 8 MiB
	// TurnTimeout bounds one turn (model retries and tool calls included);
	// default 5 minutes. A client that disconnects does not cancel its turn:
	// it completes and is stored in the session.
	TurnTimeout time.Duration
	// ShutdownGrace bounds how long in-flight requests may finish after
	// Shutdown begins.
	ShutdownGrace time.Duration
	Invoker       agent.Invoker
	Tracker       *Tracker
	Metrics       *metrics.Metrics
	Logger        *slog.Logger

	// AgentCore selects AgentCore Runtime mode (TENDRIL_RUNTIME=agentcore):
	// GET /ping, POST /invocations and /ws are open on any address because
	// the platform authenticates callers (SigV4 or OAuth) before traffic
	// reaches the container; routes mounted with auth (dashboard,
	// management API, /metrics) exist only when AuthToken is set, and then
	// need it. A body without actor_id gets DefaultActor.
	AgentCore bool
	// Webhook takes the Telegram updates that arrive as invocations
	// ({"invocation_type":"webhook","update":{...}}, sent by
	// cmd/tendril-relay): each is served to it as POST /telegram/webhook
	// carrying WebhookSecret in X-Telegram-Bot-Api-Secret-Token, so it is
	// stored, de-duplicated and answered exactly as a direct webhook. Nil
	// refuses such invocations.
	Webhook       http.Handler
	WebhookSecret string
	// Tick runs the scheduled jobs due now for a cron invocation without a
	// message ({"invocation_type":"cron"}: EventBridge Scheduler through
	// the relay) and returns how many runs it started. Nil refuses them.
	Tick func(ctx context.Context) (int, error)
}

// Server is the HTTP runtime.
type Server struct {
	opt   Options
	mux   *http.ServeMux
	root  http.Handler // mux behind the JSON 405 of the API routes
	http  *http.Server
	local *http.Server
	ready *readiness
	// shutting is set when Shutdown begins: GET /readyz answers 503.
	shutting atomic.Bool
}

// ErrUnsafeAddr is returned by New for a non-loopback address without an
// auth token.
var ErrUnsafeAddr = errors.New("refusing to listen on a non-loopback address without TENDRIL_AUTH_TOKEN: set TENDRIL_AUTH_TOKEN, or bind 127.0.0.1")

// New validates the options and builds the routes.
func New(opt Options) (*Server, error) {
	if opt.Addr == "" {
		opt.Addr = "127.0.0.1:8080"
	}
	if opt.MaxBodyBytes <= 0 {
		opt.MaxBodyBytes = 8 << 20
	}
	if opt.ShutdownGrace <= 0 {
		opt.ShutdownGrace = 30 * time.Second
	}
	if opt.TurnTimeout <= 0 {
		opt.TurnTimeout = 5 * time.Minute
	}
	if opt.Tracker == nil {
		opt.Tracker = NewTracker(nil)
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Invoker == nil {
		return nil, errors.New("runtime: an Invoker is required")
	}
	loop, err := IsLoopback(opt.Addr)
	if err != nil {
		return nil, err
	}
	if !loop && opt.AuthToken == "" && !opt.AgentCore {
		return nil, ErrUnsafeAddr
	}
	s := &Server{opt: opt, mux: http.NewServeMux()}
	// The API's routes answer a wrong method here, in JSON, before the
	// dashboard's catch-all "/" could answer it with an HTML page.
	s.root = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if MethodNotAllowed(w, r, s.mux) {
			return
		}
		s.mux.ServeHTTP(w, r)
	})
	check := func(context.Context) error { return nil }
	if rc, ok := opt.Invoker.(ReadinessChecker); ok {
		check = rc.CheckReady
	}
	s.ready = newReadiness(check, opt.Logger)
	// /ping is AgentCore's liveness contract (Healthy or HealthyBusy, never
	// anything else); whether a turn could run is /readyz's answer.
	s.mux.HandleFunc("GET /ping", s.handlePing)
	s.mux.HandleFunc("GET /readyz", s.handleReady)
	s.mux.Handle("POST /invocations", s.contract(http.HandlerFunc(s.handleInvocations)))
	s.mux.Handle("GET /ws", s.contract(http.HandlerFunc(s.handleWS)))
	if opt.Metrics != nil {
		s.Mount("GET /metrics", opt.Metrics.Handler(), true)
	}
	s.http = &http.Server{Addr: opt.Addr, Handler: s.root, ReadHeaderTimeout: 10 * time.Second}
	return s, nil
}

// loopbackHost reports whether a Host header value (host or host:port)
// names the loopback interface.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsLoopback reports whether addr ("host:port") binds only loopback.
// An empty host or 0.0.0.0/:: binds every interface and is not loopback.
func IsLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false, nil // a hostname may resolve anywhere
	}
	return ip.IsLoopback(), nil
}

// Mount adds a route. With auth, requests need "Authorization: Bearer
// <token>" when a token is configured. In AgentCore mode a route with auth
// is not mounted at all unless a token is configured (it answers 404).
func (s *Server) Mount(pattern string, h http.Handler, auth bool) {
	if auth {
		if s.opt.AgentCore && s.opt.AuthToken == "" {
			s.opt.Logger.Debug("agentcore mode without TENDRIL_AUTH_TOKEN: route not mounted", "pattern", pattern)
			return
		}
		h = s.auth(h)
	}
	s.mux.Handle(pattern, h)
}

// MountSelfAuth adds a route that authenticates on its own (the dashboard:
// bearer token or sign-in cookie, loopback Host/Origin without a token).
// Like an auth route it is not mounted in AgentCore mode unless a token is
// configured.
func (s *Server) MountSelfAuth(pattern string, h http.Handler) {
	if s.opt.AgentCore && s.opt.AuthToken == "" {
		s.opt.Logger.Debug("agentcore mode without TENDRIL_AUTH_TOKEN: route not mounted", "pattern", pattern)
		return
	}
	s.mux.Handle(pattern, h)
}

// contract guards the AgentCore contract's routes (/invocations, /ws):
// open in AgentCore mode, where the platform has authenticated the caller,
// else behind auth.
func (s *Server) contract(h http.Handler) http.Handler {
	if s.opt.AgentCore {
		return h
	}
	return s.auth(h)
}

// Handler returns the root handler (for tests).
func (s *Server) Handler() http.Handler { return s.root }

// routeMethods are the methods MethodNotAllowed tries, in the order an
// Allow header lists them.
var routeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// MethodNotAllowed answers r with a JSON 405 METHOD_NOT_ALLOWED and an
// Allow header when mux routes r's path only under other methods, and
// reports whether it did. Only patterns with a method ("POST
// /invocations") count: a catch-all without one ("/", "/api/v1/")
// matches every method and so says nothing about which are allowed.
func MethodNotAllowed(w http.ResponseWriter, r *http.Request, mux *http.ServeMux) bool {
	if _, p := mux.Handler(r); hasMethod(p) {
		return false
	}
	var allow []string
	for _, m := range routeMethods {
		// mux.Handler reads only the method, host and URL.
		if _, p := mux.Handler(&http.Request{Method: m, Host: r.Host, URL: r.URL}); hasMethod(p) {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		return false
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, strings.Join(allow, " or ")))
	return true
}

// hasMethod reports whether a ServeMux pattern ("[METHOD ][HOST]/[PATH]")
// names a method.
func hasMethod(pattern string) bool {
	sp := strings.IndexByte(pattern, ' ')
	return sp >= 0 && sp < strings.IndexByte(pattern, '/')
}

// Serve accepts connections on l until Shutdown.
func (s *Server) Serve(l net.Listener) error {
	err := s.http.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// localKey marks requests that arrived on the local management socket.
type localKey struct{}

// LocalHandler is the root handler for trusted local callers (the unix
// socket in $TENDRIL_HOME, whose file mode admits only the home's owner,
// and the CLI's in-process client): token and Host/Origin checks are
// skipped because the caller already has the home's files.
func (s *Server) LocalHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.root.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), localKey{}, true)))
	})
}

// IsLocal reports whether a request (by its context) came through
// LocalHandler: the management socket or the CLI's in-process client.
func IsLocal(ctx context.Context) bool {
	local, _ := ctx.Value(localKey{}).(bool)
	return local
}

// ServeLocal serves LocalHandler on l (a unix socket) until Shutdown.
func (s *Server) ServeLocal(l net.Listener) error {
	s.local = &http.Server{Handler: s.LocalHandler(), ReadHeaderTimeout: 10 * time.Second}
	err := s.local.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Listen opens the configured address.
func (s *Server) Listen() (net.Listener, error) { return net.Listen("tcp", s.opt.Addr) }

// Drain makes GET /readyz answer 503 "shutting down" while the server goes
// on serving every request, so that load balancers take the instance out
// of rotation before Shutdown closes its listener (config shutdownDelay).
func (s *Server) Drain() { s.shutting.Store(true) }

// Shutdown stops accepting connections and waits up to ShutdownGrace for
// in-flight requests (turns) to finish.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutting.Store(true)
	ctx, cancel := context.WithTimeout(ctx, s.opt.ShutdownGrace)
	defer cancel()
	var lerr error
	if s.local != nil {
		lerr = s.local.Shutdown(ctx)
	}
	return errors.Join(s.http.Shutdown(ctx), lerr)
}

// auth guards the API. With a token, requests need "Authorization: Bearer
// <token>". Without one (loopback only), the request must also name a
// loopback Host and, from a browser, a loopback Origin: otherwise a web page
// could reach the API through DNS rebinding or a cross-site form post.
func (s *Server) auth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsLocal(r.Context()) {
			h.ServeHTTP(w, r)
			return
		}
		if s.opt.AuthToken == "" {
			if !loopbackHost(r.Host) {
				writeError(w, http.StatusForbidden, "FORBIDDEN", "Host "+r.Host+" is not a loopback name; set TENDRIL_AUTH_TOKEN to serve other hosts")
				return
			}
			if o := r.Header.Get("Origin"); o != "" && o != "null" {
				u, err := url.Parse(o)
				if err != nil || !loopbackHost(u.Host) {
					writeError(w, http.StatusForbidden, "FORBIDDEN", "cross-origin request refused")
					return
				}
			} else if o == "null" {
				writeError(w, http.StatusForbidden, "FORBIDDEN", "cross-origin request refused")
				return
			}
		}
		if s.opt.AuthToken != "" {
			// The scheme is case-insensitive (RFC 7235 §2.1).
			got := r.Header.Get("Authorization")
			if len(got) > 7 && strings.EqualFold(got[:7], "bearer ") {
				got = got[7:]
			} else {
				got = ""
			}
			if subtle.ConstantTimeCompare([]byte(got), []byte(s.opt.AuthToken)) != 1 {
				writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "missing or wrong bearer token")
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) handlePing(w http.ResponseWriter, _ *http.Request) {
	status, changed := s.opt.Tracker.Status()
	writeJSON(w, http.StatusOK, map[string]any{"status": status, "time_of_last_update": changed})
}

// invocation is the wire form of POST /invocations.
type invocation struct {
	Message *string `json:"message"`
	// Prompt and Input are aliases of Message that AgentCore clients send;
	// Input may also be an object holding "prompt" or "message".
	Prompt         *string         `json:"prompt"`
	Input          json.RawMessage `json:"input"`
	Update         json.RawMessage `json:"update"` // a Telegram Update (invocation_type webhook)
	ActorID        string          `json:"actor_id"`
	UserID         string          `json:"user_id"`
	SessionID      string          `json:"session_id"`
	Channel        string          `json:"channel"`
	ChatType       string          `json:"chat_type"`
	InvocationType string          `json:"invocation_type"`
	Images         []wireImage     `json:"images"`
	Metadata       map[string]any  `json:"metadata"`
}

type wireImage struct {
	Data      string `json:"data"`
	MediaType string `json:"media_type"`
}

func (s *Server) handleInvocations(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	c, status, code, msg := s.decodeInvocation(w, r)
	if code != "" {
		s.countError(code)
		writeError(w, status, code, msg)
		return
	}
	ctx, cancel := s.turnContext(r)
	defer cancel()
	switch c.kind {
	case callUpdate:
		status, body := s.serveUpdate(ctx, c.update)
		writeJSON(w, status, body)
		return
	case callTick:
		status, body := s.serveTick(ctx)
		writeJSON(w, status, body)
		return
	}
	req := c.req
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		s.stream(ctx, w, req)
		return
	}
	res, err := s.opt.Invoker.Invoke(ctx, req)
	if err != nil {
		status, code, msg := s.errorStatus(r.Context(), err)
		writeError(w, status, code, msg)
		return
	}
	status = http.StatusOK
	if res.PendingApproval != nil {
		// The turn is paused, not failed: 202 with the APPROVAL_PENDING
		// envelope; the reply arrives on the channel once decided.
		status = http.StatusAccepted
	}
	w.Header().Set("Server-Timing", ServerTiming(res.ModelTime, time.Since(start)))
	writeJSON(w, status, successBody(res))
}

// ServerTiming is the Server-Timing header value (W3C Server Timing,
// https://www.w3.org/TR/server-timing/) of a turn answered by POST
// /invocations: "model;dur=M, tendril;dur=T, total;dur=S", in milliseconds
// with three decimals. model is the wall time of the turn's model calls,
// total the request's time in the handler (body read to reply), and
// tendril their difference: the latency Tendril adds to the model's.
func ServerTiming(model, total time.Duration) string {
	model = min(model, total)
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) }
	return `model;dur=` + ms(model) + `;desc="model calls", tendril;dur=` + ms(total-model) + `;desc="added by Tendril", total;dur=` + ms(total)
}

func (s *Server) countError(code string) {
	if s.opt.Metrics != nil {
		s.opt.Metrics.Errors.WithLabelValues(code).Inc()
	}
}

// ResponseBody is the JSON body of POST /invocations for a turn's result
// or error: {"ok":true,"text",...,"metadata"} or the error envelope
// {"ok":false,"error":CODE,"message"}.
func ResponseBody(res *agent.Result, err error) map[string]any {
	if err != nil {
		_, code, msg, _ := errorStatus(err, false, nil)
		return map[string]any{"ok": false, "error": code, "message": msg}
	}
	return successBody(res)
}

func successBody(res *agent.Result) map[string]any {
	meta := map[string]any{"session_id": res.SessionID, "turn_id": res.TurnID, "memories_used": res.MemoriesUsed}
	if res.Model != "" {
		meta["model"] = res.Model
	}
	for k, v := range res.Metadata {
		meta[k] = v
	}
	if res.PendingApproval != nil {
		return map[string]any{"ok": false, "error": "APPROVAL_PENDING", "message": res.Text,
			"approval": res.PendingApproval, "metadata": meta}
	}
	return map[string]any{"ok": true, "text": res.Text, "metadata": meta}
}

// BodyReadTimeout bounds reading an /invocations body (8 MiB at most):
// past it the request fails 408 and the connection is closed.
var BodyReadTimeout = 30 * time.Second

// call kinds: a turn, a Telegram update, or a cron tick.
const (
	callTurn = iota
	callUpdate
	callTick
)

// call is one decoded invocation.
type call struct {
	kind   int
	req    agent.Request   // callTurn
	update json.RawMessage // callUpdate
}

// decodeInvocation reads, parses and validates the body. On failure it
// returns the HTTP status, error code and message.
func (s *Server) decodeInvocation(w http.ResponseWriter, r *http.Request) (call, int, string, string) {
	body := http.MaxBytesReader(w, r.Body, s.opt.MaxBodyBytes)
	// A client that stops sending its body mid-way must not hold the
	// connection forever (headers already have ReadHeaderTimeout). The
	// deadline is cleared once the body is read: the server's background
	// read that notices a client going away during the turn must not time
	// out (it would cancel the turn).
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(BodyReadTimeout)) // unsupported (e.g. a test recorder): no deadline
	b, err := io.ReadAll(body)
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		// the rest of the body is not awaited: the reply closes the connection
		w.Header().Set("Connection", "close")
		return call{}, http.StatusRequestTimeout, "INVALID_REQUEST", fmt.Sprintf("request body not received within %s", BodyReadTimeout)
	}
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return call{}, http.StatusRequestEntityTooLarge, "INVALID_REQUEST", fmt.Sprintf("request body exceeds %d bytes", s.opt.MaxBodyBytes)
		}
		return call{}, http.StatusBadRequest, "INVALID_REQUEST", "reading body: " + err.Error()
	}
	return s.parseInvocation(b, r.Header)
}

// parseInvocation parses one invocation body (POST /invocations, or a /ws
// text frame); hdr supplies the session header.
func (s *Server) parseInvocation(b []byte, hdr http.Header) (call, int, string, string) {
	var req agent.Request
	var in invocation
	if err := json.Unmarshal(b, &in); err != nil {
		return call{}, http.StatusBadRequest, "INVALID_REQUEST", "body is not valid JSON: " + err.Error()
	}
	if in.InvocationType == "webhook" && len(in.Update) > 0 && string(in.Update) != "null" {
		return call{kind: callUpdate, update: in.Update}, 0, "", ""
	}
	msg, err := in.message()
	if err != nil {
		return call{}, http.StatusBadRequest, "INVALID_REQUEST", err.Error()
	}
	if msg == nil && in.InvocationType == "cron" && len(in.Images) == 0 {
		return call{kind: callTick}, 0, "", ""
	}
	if msg == nil {
		return call{}, http.StatusBadRequest, "INVALID_REQUEST", `"message" (or its alias "prompt" or "input") is required`
	}
	in.Message = msg
	req = agent.Request{Message: *in.Message, ActorID: in.ActorID, SessionID: in.SessionID, Channel: in.Channel,
		ChatType: in.ChatType, InvocationType: in.InvocationType, Metadata: in.Metadata}
	if req.ActorID == "" {
		req.ActorID = in.UserID
	}
	if req.SessionID == "" {
		req.SessionID = hdr.Get(SessionHeader)
	}
	if s.opt.AgentCore {
		if u := strings.TrimSpace(hdr.Get(UserHeader)); u != "" {
			// AgentCore authenticated this user (OAuth): the body may not
			// name another actor, or any caller could read anyone's memory.
			if req.ActorID != "" && req.ActorID != DefaultActor(hdr) {
				return call{}, http.StatusForbidden, "FORBIDDEN", "actor_id must be the authenticated runtime user (" + UserHeader + ")"
			}
			req.ActorID = DefaultActor(hdr)
		} else if req.ActorID == "" {
			req.ActorID = DefaultActor(hdr)
		}
	}
	if req.ActorID == "" {
		return call{}, http.StatusBadRequest, "INVALID_ACTOR_ID", `"actor_id" (or "user_id") is required`
	}
	if err := agent.ValidateActorID(req.ActorID); err != nil {
		return call{}, http.StatusBadRequest, "INVALID_ACTOR_ID", "actor_id " + err.Error()
	}
	for i, img := range in.Images {
		data, err := base64.StdEncoding.DecodeString(img.Data)
		if err != nil {
			return call{}, http.StatusBadRequest, "INVALID_REQUEST", fmt.Sprintf("images[%d].data is not base64: %v", i, err)
		}
		req.Images = append(req.Images, agent.Image{Data: data, MediaType: img.MediaType})
	}
	if *in.Message == "" && len(req.Images) == 0 {
		return call{}, http.StatusBadRequest, "INVALID_REQUEST", `"message" is empty`
	}
	return call{kind: callTurn, req: req}, 0, "", ""
}

// errorStatus maps an Invoke error to the HTTP status, code and message
// for the caller of ctx (see errorStatus). An error that names no failed
// dependency but came while one is down (a database connection cut
// mid-query reads as a bare "unexpected EOF") is NOT_READY too: the
// readiness check, cached as for GET /readyz, decides. The error is logged
// whole when the message leaves part of it out.
func (s *Server) errorStatus(ctx context.Context, err error) (int, string, string) {
	status, code, msg, withheld := errorStatus(err, IsLocal(ctx), func() error { return s.ready.get(ctx) })
	if withheld {
		s.opt.Logger.Warn("request failed; connection details withheld from the client", "code", code, "err", err)
	}
	return status, code, msg
}

// errorStatus maps an Invoke error to the HTTP status, code and message.
// A dependency that could not be reached is 503 NOT_READY whatever code
// the turn gave it: a database connection lost half-way through a turn
// comes back as an internal error, a pgconn timeout as a model error
// (context.DeadlineExceeded). So is an internal error while ready, when
// not nil, reports a dependency down; its answer is added to the message.
// The message drops a leading "CODE: " so the code is not said twice. For
// a 5xx it is SafeMessage's (no user, database, host or port; withheld
// reports that it differs) unless local: callers that own the home (the
// management socket, the CLI in-process) see the error whole.
func errorStatus(err error, local bool, ready func() error) (status int, code, msg string, withheld bool) {
	code = agent.ErrorCode(err)
	prefix := code + ": "
	if (code == "INTERNAL_ERROR" && Unavailable(err)) || (code == "MODEL_ERROR" && databaseUnavailable(err)) {
		code = "NOT_READY"
	} else if code == "INTERNAL_ERROR" && ready != nil {
		if rerr := ready(); rerr != nil {
			code, err = "NOT_READY", fmt.Errorf("%w; %w", err, rerr)
		}
	}
	msg = strings.TrimPrefix(err.Error(), prefix)
	status, code = codeStatus(code)
	if status >= 500 && !local {
		if safe := strings.TrimPrefix(SafeMessage(err), prefix); safe != msg {
			msg, withheld = safe, true
		}
	}
	return status, code, msg, withheld
}

// codeStatus returns the HTTP status of an error code, and the code the
// client sees: INTERNAL_ERROR for codes it does not know.
func codeStatus(code string) (int, string) {
	switch code {
	case "INVALID_REQUEST", "INVALID_ACTOR_ID":
		return http.StatusBadRequest, code
	case "FORBIDDEN":
		return http.StatusForbidden, code
	case "MODEL_NOT_CONFIGURED", "NOT_READY":
		return http.StatusServiceUnavailable, code
	case "MODEL_ERROR":
		return http.StatusBadGateway, code
	case "APPROVAL_PENDING", "ACTOR_FORGOTTEN":
		// A turn of the session waits for an approval (a paused turn
		// itself is answered 202 before this, with its request); or the
		// actor was forgotten while the message waited, and it did not run.
		return http.StatusConflict, code
	}
	return http.StatusInternalServerError, "INTERNAL_ERROR"
}

// stream answers with Server-Sent Events: a "start" frame, "delta" frames
// with the reply text as the model streams it, then a "final" frame holding
// the same JSON body as the non-streaming response (or the error envelope).
// With tools, deltas may include text the model wrote before a tool call.
// turnContext detaches the turn from the client connection (a dropped
// client must not throw away a turn the model already answered) and bounds
// it by TurnTimeout.
func (s *Server) turnContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), s.opt.TurnTimeout)
}

func (s *Server) stream(ctx context.Context, w http.ResponseWriter, req agent.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR", "streaming unsupported")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	frame := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	s.runFrames(ctx, req, frame)
}

// ApprovalWaitReporter is implemented by an Invoker that can say which
// approval requests a turn waits behind before it runs (a paused turn of
// the same session): the turns of the returned context call report once
// for each. *assistant.Assistant implements it.
type ApprovalWaitReporter interface {
	WithApprovalWait(ctx context.Context, report func(agent.PendingApproval)) context.Context
}

// runFrames runs one turn and reports it as frames: {"type":"start"},
// {"type":"approval_wait","approval":{request_id,tool_name,args,expires_at}}
// for each approval the turn waits behind (when the Invoker is an
// ApprovalWaitReporter) and {"type":"approval_decided","approval":{…,
// "status"}} once that request no longer waits for a decision, {"type":"delta","text"} as the model streams (or
// the finished reply in chunks when it cannot), then {"type":"final",...}
// holding the /invocations body or the error envelope. SSE and /ws share
// it.
func (s *Server) runFrames(ctx context.Context, req agent.Request, frame func(v any)) {
	frame(map[string]any{"type": "start"})
	var mu sync.Mutex
	streamed := false
	if w, ok := s.opt.Invoker.(ApprovalWaitReporter); ok {
		ctx = w.WithApprovalWait(ctx, func(p agent.PendingApproval) {
			mu.Lock()
			defer mu.Unlock()
			typ := "approval_wait"
			if p.Status != "" {
				typ = "approval_decided"
			}
			frame(map[string]any{"type": typ, "approval": p})
		})
	}
	ctx = agent.WithDeltas(ctx, func(text string) {
		if text == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		streamed = true
		frame(map[string]any{"type": "delta", "text": text})
	})
	res, err := s.opt.Invoker.Invoke(ctx, req)
	if err != nil {
		_, code, msg := s.errorStatus(ctx, err)
		frame(map[string]any{"type": "final", "ok": false, "error": code, "message": msg})
		return
	}
	mu.Lock()
	sent := streamed
	mu.Unlock()
	if !sent {
		for _, chunk := range chunkText(res.Text, 256) {
			frame(map[string]any{"type": "delta", "text": chunk})
		}
	}
	body := successBody(res)
	body["type"] = "final"
	frame(body)
}

// chunkText splits s into pieces of at most n bytes on rune boundaries.
func chunkText(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && (s[cut]&0xC0) == 0x80 {
			cut--
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"ok": false, "error": code, "message": msg})
}
