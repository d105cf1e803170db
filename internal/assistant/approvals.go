package assistant

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/approval"
)

// ResumeTimeout bounds one resumed turn (the model and tool calls after an
// approval).
const ResumeTimeout = 5 * time.Minute

// ErrNotYours: an actor tried to decide another actor's approval.
var ErrNotYours = errors.New("this approval belongs to someone else")

// Decide approves or denies a pending approval request. by is recorded in
// the ledger ("cli:ana", "telegram:123", "web:owner"). When actorID is not
// empty the request must belong to that actor (channel buttons); operators
// pass "". The paused turn resumes on a goroutine the assistant owns and
// replies on its channel. Errors: approval.ErrNotFound, ErrAlreadyDecided,
// ErrExpired, ErrLedgerBroken, ErrNotYours.
func (a *Assistant) Decide(ctx context.Context, requestID string, approve bool, by, actorID string) (approval.Request, error) {
	req, err := a.gate.Get(ctx, requestID)
	if err != nil {
		return req, err
	}
	if actorID != "" && req.ActorID != actorID {
		return req, ErrNotYours
	}
	if err := a.gate.Decide(ctx, requestID, approve, by); err != nil {
		return req, err
	}
	return a.gate.Get(ctx, requestID)
}

// Yolo opens the YOLO window for d (capped at approval.MaxYolo), or closes
// it when d is 0, and returns its end.
func (a *Assistant) Yolo(ctx context.Context, d time.Duration, by string) (time.Time, error) {
	return a.gate.Yolo(ctx, d, by)
}

// onDecision resumes a paused turn when its approval is decided, here or
// in another process (seen through gate.Refresh).
func (a *Assistant) onDecision(req approval.Request, approved bool) {
	if len(req.Resume) == 0 {
		return
	}
	reason, outcome := "", outcomeApproved
	if !approved {
		reason, outcome = "denied by "+req.DecidedBy, outcomeDenied
	}
	a.resume(req, approved, reason, outcome)
}

// Deliver implements agent.Deliverer for turns that finish outside the
// request that started them (resumed after an approval): Telegram pushes
// to the chat; every other channel publishes to Subscribe's listeners
// (the CLI chat, the dashboard), and the reply is in the session anyway.
func (a *Assistant) Deliver(ctx context.Context, channel, actorID string, meta map[string]any, text string) error {
	chat := ""
	switch v := meta["telegram_chat_id"].(type) {
	case float64:
		chat = strconv.FormatInt(int64(v), 10)
	case int64:
		chat = strconv.FormatInt(v, 10)
	case string:
		chat = v
	}
	if chat == "" {
		chat, _ = meta["chat_id"].(string)
	}
	if chat == "" && channel == "telegram" {
		chat = strings.TrimPrefix(actorID, "telegram:")
	}
	return a.deliverTo(ctx, channel, actorID, chat, text)
}

// deliverTo sends text on a channel: Telegram pushes to chatID; other
// channels publish to subscribers of the actor, on every instance sharing
// the database (deliveryBus).
func (a *Assistant) deliverTo(ctx context.Context, channel, actorID, chatID, text string) error {
	if channel == "telegram" {
		if a.telegram == nil {
			return ErrNoTelegram
		}
		return a.telegram.Deliver(ctx, chatID, text)
	}
	d := Delivery{Channel: channel, ActorID: actorID, ChatID: chatID, Text: text, At: time.Now().UTC()}
	a.hub.publish(d)
	if a.bus != nil {
		// Listeners on the other instances too; the reply is in the
		// session whatever happens here.
		if err := a.bus.publish(ctx, d); err != nil {
			a.log.Warn("delivery to the other instances failed", "channel", channel, "err", err)
		}
	}
	return nil
}

// telegramApprover decides approvals from inline buttons and /approve; the
// resumed turn replies through Deliver.
type telegramApprover struct{ a *Assistant }

func (t telegramApprover) Decide(ctx context.Context, requestID string, approve bool, actorID string) (*agent.Result, error) {
	_, err := t.a.Decide(ctx, requestID, approve, actorID, actorID)
	return nil, err
}

// telegramMemory backs /memory and /forget.
type telegramMemory struct{ a *Assistant }

func (m telegramMemory) Remember(ctx context.Context, actorID string) ([]string, error) {
	recs, err := m.a.Records(ctx, RecordsQuery{ActorID: actorID})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range recs {
		tag := "[Inferred]"
		if r.Explicit() {
			tag = "[Explicit]"
		}
		out = append(out, tag+" "+r.Content)
	}
	return out, nil
}

// Forget from Telegram ("forget everything") includes the conversation.
func (m telegramMemory) Forget(ctx context.Context, actorID string) error {
	rep, err := m.a.Forget(ctx, ForgetRequest{ActorID: actorID, Sessions: true})
	if err != nil {
		return err
	}
	if rep.Remaining != 0 {
		return fmt.Errorf("forget %s: %d items remain", actorID, rep.Remaining)
	}
	return nil
}
