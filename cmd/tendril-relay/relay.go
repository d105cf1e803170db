package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore"
)

// SecretHeader is Telegram's webhook secret header, lower-cased as API
// Gateway HTTP APIs (payload format 2.0) deliver header names.
const SecretHeader = "x-telegram-bot-api-secret-token"

// MinSessionIDLen is AgentCore's minimum runtime session id length.
const MinSessionIDLen = 33

// MaxResponseBytes bounds how much of the runtime's answer the relay reads.
const MaxResponseBytes = 1 << 20

// Invoker is the part of the bedrockagentcore client the relay uses.
type Invoker interface {
	InvokeAgentRuntime(ctx context.Context, in *bedrockagentcore.InvokeAgentRuntimeInput, opts ...func(*bedrockagentcore.Options)) (*bedrockagentcore.InvokeAgentRuntimeOutput, error)
}

// Relay turns API Gateway webhook deliveries from Telegram and EventBridge
// Scheduler events into InvokeAgentRuntime calls on one AgentCore runtime.
type Relay struct {
	Client     Invoker
	RuntimeARN string // agent runtime ARN
	Qualifier  string // endpoint name; "" is the runtime's DEFAULT endpoint
	// WebhookSecret is TELEGRAM_WEBHOOK_SECRET; without it every webhook
	// delivery is refused.
	WebhookSecret string
	// Timeout bounds one InvokeAgentRuntime call (a cold microVM start
	// included); default 25 s, under Telegram's webhook timeout.
	Timeout time.Duration
	Log     *slog.Logger
}

// Handle is the Lambda handler. An event with "requestContext" is an API
// Gateway HTTP API request (payload format 2.0) carrying a Telegram update;
// anything else is an EventBridge Scheduler input and becomes a cron
// invocation (see cronPayload). The error return is used only for events
// the relay cannot answer at all; HTTP failures are HTTP responses.
func (r *Relay) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe struct {
		RequestContext json.RawMessage `json:"requestContext"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("event is not a JSON object: %w", err)
	}
	if len(probe.RequestContext) > 0 {
		var req events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, fmt.Errorf("API Gateway event: %w", err)
		}
		return r.Webhook(ctx, req), nil
	}
	return r.Cron(ctx, raw)
}

func respond(status int, body string) events.APIGatewayV2HTTPResponse {
	return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: map[string]string{"Content-Type": "application/json"}, Body: body}
}

// Webhook checks the Telegram secret in constant time (401 and no
// invocation on a mismatch), then invokes the runtime with
// {"invocation_type":"webhook","channel":"telegram","update":{...}} on the
// chat's runtime session and answers 200 once the runtime has stored the
// update (Tendril acknowledges before it processes). A failed invocation
// answers 502 so Telegram delivers again; update_id de-duplication in
// Tendril makes that safe.
func (r *Relay) Webhook(ctx context.Context, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	got := sha256.Sum256([]byte(header(req.Headers, SecretHeader)))
	want := sha256.Sum256([]byte(r.WebhookSecret))
	if r.WebhookSecret == "" || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return respond(http.StatusUnauthorized, `{"ok":false,"error":"UNAUTHORIZED"}`)
	}
	if req.RequestContext.HTTP.Method != "" && req.RequestContext.HTTP.Method != http.MethodPost {
		return respond(http.StatusMethodNotAllowed, `{"ok":false,"error":"METHOD_NOT_ALLOWED"}`)
	}
	body := []byte(req.Body)
	if req.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(req.Body)
		if err != nil {
			return respond(http.StatusBadRequest, `{"ok":false,"error":"INVALID_REQUEST"}`)
		}
		body = b
	}
	chat, err := ChatOf(body)
	if err != nil {
		r.log().Warn("telegram update refused", "err", err)
		return respond(http.StatusBadRequest, `{"ok":false,"error":"INVALID_REQUEST"}`)
	}
	payload, _ := json.Marshal(map[string]any{"invocation_type": "webhook", "channel": "telegram", "update": json.RawMessage(body)})
	if _, err := r.invoke(ctx, TelegramSessionID(chat), payload); err != nil {
		r.log().Error("invoke agent runtime for a telegram update", "chat", chat, "err", err)
		return respond(http.StatusBadGateway, `{"ok":false,"error":"RUNTIME_UNAVAILABLE"}`)
	}
	return respond(http.StatusOK, `{"ok":true}`)
}

// Cron invokes the runtime for an EventBridge Scheduler event. The
// schedule's input is a JSON object; "invocation_type" is set to "cron"
// and "channel" defaults to "cron". Without "message" Tendril runs its due
// jobs (the schedule is the clock); with one, it is a turn. "name" (or
// "job") picks the runtime session, default "tick". It returns the
// runtime's JSON answer.
func (r *Relay) Cron(ctx context.Context, raw json.RawMessage) (any, error) {
	var in map[string]any
	if err := json.Unmarshal(raw, &in); err != nil || in == nil {
		return nil, errors.New("scheduler input must be a JSON object")
	}
	// An EventBridge rule's "Scheduled Event" carries no input of ours.
	if _, ok := in["detail-type"]; ok {
		in = map[string]any{}
	}
	in["invocation_type"] = "cron"
	if _, ok := in["channel"]; !ok {
		in["channel"] = "cron"
	}
	name, _ := in["name"].(string)
	if name == "" {
		name, _ = in["job"].(string)
	}
	if name == "" {
		name = "tick"
	}
	payload, _ := json.Marshal(in)
	out, err := r.invoke(ctx, CronSessionID(name), payload)
	if err != nil {
		return nil, fmt.Errorf("invoke agent runtime for schedule %q: %w", name, err)
	}
	var v any
	if json.Unmarshal(out, &v) != nil {
		v = map[string]any{"ok": true, "text": string(out)}
	}
	return v, nil
}

// invoke calls InvokeAgentRuntime and reads the answer.
func (r *Relay) invoke(ctx context.Context, session string, payload []byte) ([]byte, error) {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 25 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	in := &bedrockagentcore.InvokeAgentRuntimeInput{
		AgentRuntimeArn:  aws.String(r.RuntimeARN),
		Payload:          payload,
		ContentType:      aws.String("application/json"),
		Accept:           aws.String("application/json"),
		RuntimeSessionId: aws.String(session),
	}
	if r.Qualifier != "" {
		in.Qualifier = aws.String(r.Qualifier)
	}
	out, err := r.Client.InvokeAgentRuntime(ctx, in)
	if err != nil {
		return nil, err
	}
	if out.Response == nil {
		return nil, nil
	}
	defer out.Response.Close()
	b, err := io.ReadAll(io.LimitReader(out.Response, MaxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("read runtime response: %w", err)
	}
	if out.StatusCode != nil && *out.StatusCode >= 300 {
		return b, fmt.Errorf("runtime answered %d: %s", *out.StatusCode, bytes.TrimSpace(b))
	}
	return b, nil
}

func (r *Relay) log() *slog.Logger {
	if r.Log == nil {
		return slog.Default()
	}
	return r.Log
}

// header finds a header by name, case-insensitively.
func header(h map[string]string, name string) string {
	if v, ok := h[name]; ok {
		return v
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// ChatOf returns the chat id of a Telegram Update (message, edited_message,
// channel_post, edited_channel_post, callback_query.message), else the
// sender's id (callback queries on old messages, inline queries). An
// update without update_id or any chat is an error.
func ChatOf(update []byte) (int64, error) {
	type chat struct {
		ID *int64 `json:"id"`
	}
	type msg struct {
		Chat chat `json:"chat"`
	}
	var u struct {
		UpdateID          *int64 `json:"update_id"`
		Message           *msg   `json:"message"`
		EditedMessage     *msg   `json:"edited_message"`
		ChannelPost       *msg   `json:"channel_post"`
		EditedChannelPost *msg   `json:"edited_channel_post"`
		CallbackQuery     *struct {
			From    chat `json:"from"`
			Message *msg `json:"message"`
		} `json:"callback_query"`
	}
	if err := json.Unmarshal(update, &u); err != nil {
		return 0, fmt.Errorf("update is not JSON: %w", err)
	}
	if u.UpdateID == nil {
		return 0, errors.New("update has no update_id")
	}
	for _, m := range []*msg{u.Message, u.EditedMessage, u.ChannelPost, u.EditedChannelPost} {
		if m != nil && m.Chat.ID != nil {
			return *m.Chat.ID, nil
		}
	}
	if q := u.CallbackQuery; q != nil {
		if q.Message != nil && q.Message.Chat.ID != nil {
			return *q.Message.Chat.ID, nil
		}
		if q.From.ID != nil {
			return *q.From.ID, nil
		}
	}
	return 0, errors.New("update names no chat")
}

// TelegramSessionID is the runtime session of a chat:
// "tendril-telegram-chat-" then "m" for a negative (group) id, then the
// absolute id zero-padded to 20 digits — 42 or 43 characters, one per chat,
// so each chat keeps its own microVM.
func TelegramSessionID(chat int64) string {
	sign := ""
	u := uint64(chat)
	if chat < 0 {
		sign, u = "m", uint64(-chat)
	}
	return fmt.Sprintf("tendril-telegram-chat-%s%020d", sign, u)
}

// CronSessionID is the runtime session of a schedule: "tendril-cron-" and
// the first 32 hex digits of the SHA-256 of its name (45 characters).
func CronSessionID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "tendril-cron-" + hex.EncodeToString(sum[:16])
}
