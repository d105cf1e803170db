package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/tendrilai/tendril/internal/agent"
)

// UserHeader names the caller in AgentCore (InvokeAgentRuntime's
// runtimeUserId); DefaultActor derives an actor from it.
const UserHeader = "X-Amzn-Bedrock-AgentCore-Runtime-User-Id"

// WebhookSecretHeader is Telegram's webhook secret header; the runtime sets
// it when it hands an update that arrived as an invocation to the webhook.
const WebhookSecretHeader = "X-Telegram-Bot-Api-Secret-Token"

// DefaultActor is the actor of an AgentCore invocation whose body names
// none: "agentcore:<runtime user id>" when the X-Amzn-Bedrock-AgentCore-
// Runtime-User-Id header holds a valid ID, else "agentcore:owner". AgentCore
// has authenticated the caller, so it is the deployment's owner (or the
// user the platform names), never an anonymous stranger.
func DefaultActor(hdr http.Header) string {
	if u := strings.TrimSpace(hdr.Get(UserHeader)); u != "" {
		if id := "agentcore:" + u; agent.ValidateID(id) == nil {
			return id
		}
	}
	return "agentcore:owner"
}

// message returns the turn's text from "message", or its aliases "prompt"
// and "input" (a string, or an object holding "prompt" or "message"), in
// that order; nil when none is present.
func (in *invocation) message() (*string, error) {
	if in.Message != nil {
		return in.Message, nil
	}
	if in.Prompt != nil {
		return in.Prompt, nil
	}
	raw := bytes.TrimSpace(in.Input)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return &text, nil
	}
	var obj struct {
		Prompt  *string `json:"prompt"`
		Message *string `json:"message"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, errors.New(`"input" must be a string or an object with "prompt" or "message"`)
	}
	if obj.Message != nil {
		return obj.Message, nil
	}
	if obj.Prompt != nil {
		return obj.Prompt, nil
	}
	return nil, errors.New(`"input" has neither "prompt" nor "message"`)
}

// serveUpdate hands a Telegram update that arrived as an invocation to the
// webhook handler and maps its answer onto the invocation envelope:
// {"ok":true,"text":"","metadata":{"invocation_type":"webhook","webhook":{...}}}
// once the update is stored (or was a duplicate, or is ignored), else the
// error envelope with the webhook's status.
func (s *Server) serveUpdate(ctx context.Context, update json.RawMessage) (int, map[string]any) {
	if s.opt.Webhook == nil || s.opt.WebhookSecret == "" {
		return http.StatusBadRequest, map[string]any{"ok": false, "error": "INVALID_REQUEST",
			"message": "this runtime has no Telegram bot: set TELEGRAM_BOT_TOKEN and TELEGRAM_WEBHOOK_SECRET"}
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "/telegram/webhook", bytes.NewReader(update))
	if err != nil {
		return http.StatusInternalServerError, map[string]any{"ok": false, "error": "INTERNAL_ERROR", "message": err.Error()}
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(WebhookSecretHeader, s.opt.WebhookSecret)
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	s.opt.Webhook.ServeHTTP(rec, r)
	var reply map[string]any
	_ = json.Unmarshal(rec.body.Bytes(), &reply)
	if rec.status != http.StatusOK {
		code, _ := reply["error"].(string)
		msg, _ := reply["description"].(string)
		if code == "" {
			code = "INTERNAL_ERROR"
		}
		if msg == "" {
			msg = fmt.Sprintf("telegram webhook answered %d", rec.status)
		}
		s.countError(code)
		return rec.status, map[string]any{"ok": false, "error": code, "message": msg}
	}
	return http.StatusOK, map[string]any{"ok": true, "text": "", "metadata": map[string]any{"invocation_type": "webhook", "webhook": reply}}
}

// serveTick runs the jobs due now: {"ok":true,"text":"","metadata":
// {"invocation_type":"cron","jobs_run":N}}.
func (s *Server) serveTick(ctx context.Context) (int, map[string]any) {
	if s.opt.Tick == nil {
		return http.StatusBadRequest, map[string]any{"ok": false, "error": "INVALID_REQUEST",
			"message": `a cron invocation without "message" runs due jobs, and this server has no scheduler`}
	}
	n, err := s.opt.Tick(ctx)
	if err != nil {
		err = fmt.Errorf("run due jobs: %w", err)
		status, code, msg := http.StatusInternalServerError, "INTERNAL_ERROR", err.Error()
		if Unavailable(err) {
			status, code = http.StatusServiceUnavailable, "NOT_READY"
		} else if rerr := s.ready.get(ctx); rerr != nil {
			err = fmt.Errorf("%w; %w", err, rerr)
			status, code, msg = http.StatusServiceUnavailable, "NOT_READY", err.Error()
		}
		if !IsLocal(ctx) {
			if safe := SafeMessage(err); safe != msg {
				s.opt.Logger.Warn("cron invocation failed; connection details withheld from the client", "err", err)
				msg = safe
			}
		}
		s.countError(code)
		return status, map[string]any{"ok": false, "error": code, "message": msg}
	}
	return http.StatusOK, map[string]any{"ok": true, "text": "", "metadata": map[string]any{"invocation_type": "cron", "jobs_run": n}}
}

// recorder is the in-process ResponseWriter of serveUpdate.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
}
func (r *recorder) Write(p []byte) (int, error) {
	r.wrote = true
	return r.body.Write(p)
}
