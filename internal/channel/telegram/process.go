package telegram

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/channel/telegram/tgmd"
)

// Prompts used when the user sends photos without a caption.
const (
	DefaultPhotoPrompt = "What can you tell me about this photo?"
	DefaultAlbumPrompt = "What can you tell me about these photos?"
)

// handle processes one update, or the parts of one album, and returns the
// state and note to record.
func (c *Channel) handle(ctx context.Context, batch []storedUpdate) (string, string, error) {
	first := batch[0]
	var u update
	if err := json.Unmarshal(first.Body, &u); err != nil {
		return stateFailed, "stored body does not decode: " + err.Error(), nil
	}
	if u.CallbackQuery != nil {
		return c.handleCallback(ctx, u.CallbackQuery)
	}
	m := u.messageOf()
	if m == nil {
		return stateIgnored, "no message in update", nil
	}
	var parts []*message
	if len(batch) > 1 {
		for _, b := range batch {
			var pu update
			if json.Unmarshal(b.Body, &pu) == nil && pu.messageOf() != nil {
				parts = append(parts, pu.messageOf())
			}
		}
	} else {
		parts = []*message{m}
	}
	return c.handleMessage(ctx, first.UpdateID, first.Kind, parts)
}

// sender describes who sent a message.
type sender struct {
	actorID  string // telegram:<user id>, or telegram:<chat id> for channel posts
	userID   int64
	name     string
	chatType string // dm | group
}

func senderOf(m *message) sender {
	s := sender{chatType: "group"}
	if m.Chat.Type == "private" {
		s.chatType = "dm"
	}
	switch {
	case m.From != nil:
		s.userID = m.From.ID
		s.name = strings.TrimSpace(m.From.FirstName + " " + m.From.LastName)
		if m.From.Username != "" {
			s.name += " (@" + m.From.Username + ")"
		}
	case m.SenderChat != nil:
		s.userID = m.SenderChat.ID
		s.name = m.SenderChat.Title
	default:
		s.userID = m.Chat.ID
		s.name = m.Chat.Title
	}
	s.actorID = "telegram:" + strconv.FormatInt(s.userID, 10)
	return s
}

// sessionKey names the sender's conversation slot: the chat for a DM, the
// chat and user in a group (so /new there affects only the sender).
func (s sender) sessionKey(chatID int64) string {
	if s.chatType == "dm" {
		return strconv.FormatInt(chatID, 10)
	}
	return fmt.Sprintf("%d:%d", chatID, s.userID)
}

// allowedChat reports whether chatID (or, in a group, the sending user) is
// on the allow-list from config or pairing.
func (c *Channel) allowedChat(ctx context.Context, chatID, userID int64) (bool, error) {
	if c.allowed[chatID] || (userID != 0 && userID != chatID && c.allowed[userID]) {
		return true, nil
	}
	ok, err := c.store.isAllowed(ctx, chatID)
	if err != nil || ok {
		return ok, err
	}
	if userID != 0 && userID != chatID {
		return c.store.isAllowed(ctx, userID)
	}
	return false, nil
}

// handleMessage answers a message (or an album, parts) of update
// updateID, the first of its batch.
func (c *Channel) handleMessage(ctx context.Context, updateID int64, kind string, parts []*message) (string, string, error) {
	m := parts[0]
	s := senderOf(m)
	chatID := m.Chat.ID
	if m.From != nil && m.From.IsBot && m.From.ID == c.botID {
		return stateIgnored, "own message", nil
	}
	ok, err := c.allowedChat(ctx, chatID, s.userID)
	if err != nil {
		return "", "", err
	}
	if !ok {
		if m.Chat.Type != "private" || m.From == nil {
			return stateIgnored, "chat not allowed", nil
		}
		return c.pair(ctx, chatID, s)
	}

	text := m.Text
	entities := m.Entities
	if text == "" {
		text, entities = m.Caption, m.CaptionEntities
	}
	for _, p := range parts[1:] {
		if text == "" && p.Caption != "" {
			text, entities = p.Caption, p.CaptionEntities
		}
	}
	if s.chatType == "group" && kind != kindChannelPost {
		mentioned, stripped := c.mentioned(m, text, entities)
		if !mentioned && !c.opts.GroupReplyAll {
			return stateIgnored, "group message without mention", nil
		}
		text = stripped
	}
	if cmd, arg, ok := c.command(text); ok && kind != kindEditedMessage {
		if handled, note, err := c.runCommand(ctx, chatID, s, cmd, arg); handled {
			return stateDone, note, err
		}
	}

	var photos []photoSize
	for _, p := range parts {
		if ps, ok := largestPhoto(p.Photo, c.opts.MaxPhotoBytes); ok {
			photos = append(photos, ps)
		} else if len(p.Photo) > 0 {
			photos = append(photos, photoSize{FileSize: -1}) // marker: too large
		}
	}
	if strings.TrimSpace(text) == "" && len(photos) == 0 {
		return stateIgnored, "no text or photo (unsupported message content)", nil
	}

	stopTyping := c.typing(ctx, chatID)
	defer stopTyping()

	var images []agent.Image
	tooLarge := 0
	for _, p := range photos {
		if p.FileSize < 0 {
			tooLarge++
			continue
		}
		img, err := c.download(ctx, p)
		if errors.Is(err, errTooLarge) {
			tooLarge++
			continue
		}
		if err != nil {
			return "", "", err
		}
		images = append(images, img)
	}
	if tooLarge > 0 && len(images) == 0 {
		msg := "That photo is larger than 20 MB, the most Telegram lets me download. Please send a smaller version."
		if tooLarge > 1 {
			msg = "Those photos are larger than 20 MB each, the most Telegram lets me download. Please send smaller versions."
		}
		if err := c.Send(ctx, chatID, msg); err != nil {
			return "", "", err
		}
		return stateDone, "photo too large", nil
	}
	if strings.TrimSpace(text) == "" {
		text = DefaultPhotoPrompt
		if len(images) > 1 {
			text = DefaultAlbumPrompt
		}
	}
	if tooLarge > 0 {
		text += fmt.Sprintf("\n\n(%d of the photos were over 20 MB and could not be downloaded.)", tooLarge)
	}
	if kind == kindEditedMessage {
		text = "[Edited message] " + text
	}
	if r := m.ReplyToMessage; r != nil {
		text = "[Replying to: " + replyContext(m) + "]\n" + text
	}

	sessionID, err := c.store.sessionID(ctx, s.sessionKey(chatID))
	if err != nil {
		return "", "", err
	}
	if sessionID == "" && s.chatType == "group" {
		// Never continue a person's private conversation in a group.
		sessionID = fmt.Sprintf("tg-%d-%d", chatID, s.userID)
	}
	req := agent.Request{
		Message:        text,
		ActorID:        s.actorID,
		SessionID:      sessionID,
		Channel:        "telegram",
		ChatType:       s.chatType,
		InvocationType: "webhook",
		Images:         images,
		Metadata: map[string]any{
			"telegram_chat_id":    chatID,
			"telegram_message_id": m.MessageID,
			"telegram_update":     kind,
			"sender_name":         s.name,
		},
	}
	if m.Chat.Title != "" {
		req.Metadata["telegram_chat_title"] = m.Chat.Title
	}
	// A previous holder of the chat that died after the turn and before
	// recording the reply saved the turn's result: deliver it, do not run
	// the turn again (its reply may have reached Telegram already; see
	// drainChat on at-least-once).
	var res *agent.Result
	saved, err := c.store.savedResult(ctx, updateID)
	if err != nil {
		return "", "", err
	}
	if saved != nil {
		var r agent.Result
		if err := json.Unmarshal(saved, &r); err == nil {
			c.log.Info("telegram: delivering the saved turn result of an earlier attempt", "update_id", updateID, "chat_id", chatID)
			if err := c.deliverResult(ctx, chatID, s.actorID, &r); err != nil {
				return "", "", err
			}
			return stateDone, "replied (turn result of an earlier attempt)", nil
		}
	}
	res, err = c.deps.Invoker.Invoke(ctx, req)
	if res != nil && (err == nil || res.PendingApproval != nil) {
		if b, jerr := json.Marshal(res); jerr == nil {
			if serr := c.store.saveResult(context.WithoutCancel(ctx), updateID, b); serr != nil {
				c.log.Warn("telegram: save turn result", "update_id", updateID, "err", serr)
			}
		}
	}
	if err != nil && (res == nil || res.PendingApproval == nil) {
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
		c.log.Error("telegram: turn failed", "chat_id", chatID, "actor_id", s.actorID, "err", err)
		if serr := c.Send(ctx, chatID, failedTurnReply(err)); serr != nil {
			return "", "", serr
		}
		return stateDone, "turn failed: " + err.Error(), nil
	}
	if err := c.deliverResult(ctx, chatID, s.actorID, res); err != nil {
		return "", "", err
	}
	note := "replied"
	if len(images) > 0 {
		note = fmt.Sprintf("replied (%d images)", len(images))
	}
	return stateDone, note, nil
}

// replyContext quotes the message being replied to, shortened.
func replyContext(m *message) string {
	r := m.ReplyToMessage
	q := ""
	switch {
	case m.Quote != nil && m.Quote.Text != "":
		q = m.Quote.Text
	case r.Text != "":
		q = r.Text
	case r.Caption != "":
		q = r.Caption
	case len(r.Photo) > 0:
		q = "a photo"
	default:
		q = "an earlier message"
	}
	q = strings.Join(strings.Fields(q), " ")
	if rs := []rune(q); len(rs) > 300 {
		q = string(rs[:300]) + "…"
	}
	return q
}

// mentioned reports whether a group message addresses the bot: an
// @username mention, a text_mention of the bot, or a reply to the bot. It
// returns the text with the mention removed.
func (c *Channel) mentioned(m *message, text string, entities []entity) (bool, string) {
	name := c.botUsername()
	for i := len(entities) - 1; i >= 0; i-- {
		e := entities[i]
		switch e.Type {
		case "mention":
			if name != "" && strings.EqualFold(sliceUTF16(text, e.Offset, e.Length), "@"+name) {
				return true, strings.TrimSpace(cutUTF16(text, e.Offset, e.Length))
			}
		case "text_mention":
			if e.User != nil && e.User.ID == c.botID {
				return true, text
			}
		case "bot_command":
			cmd := sliceUTF16(text, e.Offset, e.Length)
			if _, at, ok := strings.Cut(cmd, "@"); ok && name != "" && strings.EqualFold(at, name) {
				return true, text
			}
		}
	}
	if r := m.ReplyToMessage; r != nil && r.From != nil && r.From.IsBot &&
		(r.From.ID == c.botID || name != "" && strings.EqualFold(r.From.Username, name)) {
		return true, text
	}
	return false, text
}

// command splits "/cmd[@bot] args". Commands addressed to another bot are
// not ours.
func (c *Channel) command(text string) (cmd, arg string, ok bool) {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "/") {
		return "", "", false
	}
	head, rest, _ := strings.Cut(text, " ")
	head, at, hasAt := strings.Cut(head[1:], "@")
	if hasAt && !strings.EqualFold(at, c.botUsername()) {
		return "", "", false
	}
	return strings.ToLower(head), strings.TrimSpace(rest), head != ""
}

// runCommand handles the built-in commands; unknown ones go to the agent.
func (c *Channel) runCommand(ctx context.Context, chatID int64, s sender, cmd, arg string) (bool, string, error) {
	switch cmd {
	case "start":
		return true, "command /start", c.Send(ctx, chatID, "Hi! I'm Tendril, your assistant. Just write to me; send photos if you like.\n\n"+
			"Commands:\n- /new: start a new conversation\n- /memory: what I remember about you\n- /forget: forget what I remember about you\n- /approve <id>: approve a pending action")
	case "new":
		id := fmt.Sprintf("tg-%d-%s", chatID, randomHex(6))
		if s.chatType == "group" {
			id = fmt.Sprintf("tg-%d-%d-%s", chatID, s.userID, randomHex(6))
		}
		if err := c.store.setSessionID(ctx, s.sessionKey(chatID), id); err != nil {
			return true, "", err
		}
		return true, "command /new", c.Send(ctx, chatID, "Started a new conversation.")
	case "memory", "forget":
		if s.chatType != "dm" {
			// What Tendril remembers about someone is private.
			return true, "command /" + cmd + " refused in a group", c.Send(ctx, chatID, "For privacy, use /"+cmd+" in a private chat with me.")
		}
	}
	switch cmd {
	case "memory":
		if c.deps.Memory == nil {
			return true, "command /memory", c.Send(ctx, chatID, "Memory is not available right now.")
		}
		facts, err := c.deps.Memory.Remember(ctx, s.actorID)
		if err != nil {
			c.log.Error("telegram: /memory", "actor_id", s.actorID, "err", err)
			return true, "command /memory failed: " + err.Error(), c.Send(ctx, chatID, "Sorry, I couldn't read my memory just now.")
		}
		if len(facts) == 0 {
			return true, "command /memory", c.Send(ctx, chatID, "I don't remember anything about you yet.")
		}
		var b strings.Builder
		b.WriteString("**What I remember about you:**\n\n")
		for _, f := range facts {
			b.WriteString("- " + strings.Join(strings.Fields(f), " ") + "\n")
		}
		return true, "command /memory", c.Send(ctx, chatID, b.String())
	case "forget":
		if c.deps.Memory == nil {
			return true, "command /forget", c.Send(ctx, chatID, "Memory is not available right now.")
		}
		nonce := randomHex(8)
		if err := c.store.saveForget(ctx, nonce, chatID, s.actorID, c.clock.Now().Add(10*time.Minute)); err != nil {
			return true, "", err
		}
		kb := inlineKeyboard([]button{{"Yes, forget everything", "forget:yes:" + nonce}, {"No, keep it", "forget:no:" + nonce}})
		_, err := c.sendHTML(ctx, chatID, "<b>Forget everything I remember about you?</b>\nThis cannot be undone.", kb)
		return true, "command /forget (asked for confirmation)", err
	case "approve", "deny":
		if arg == "" {
			return true, "command /" + cmd, c.Send(ctx, chatID, "Usage: /"+cmd+" <request id>")
		}
		id := strings.Fields(arg)[0]
		if am, err := c.store.approvalMessage(ctx, id); err != nil {
			return true, "", err
		} else if am != nil && am.ActorID != s.actorID {
			return true, "command /" + cmd + " refused: another actor's request", c.Send(ctx, chatID, "Only the person who asked can decide this.")
		}
		return true, "command /" + cmd, c.decide(ctx, chatID, s.actorID, id, cmd == "approve", nil)
	}
	return false, "", nil
}

// decide applies an approval decision and delivers the resumed turn. cb is
// the button press, if any, answered exactly once.
func (c *Channel) decide(ctx context.Context, chatID int64, actorID, requestID string, approve bool, cb *callbackQuery) error {
	answer := func(text string, alert bool) error {
		if cb == nil {
			if alert {
				return c.Send(ctx, chatID, text)
			}
			return nil
		}
		return c.answerCallback(ctx, cb.ID, text, alert)
	}
	if c.deps.Approver == nil {
		return answer("Approvals are not available here.", true)
	}
	stopTyping := c.typing(ctx, chatID)
	defer stopTyping()
	res, err := c.deps.Approver.Decide(ctx, requestID, approve, actorID)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return answer("This approval request is not valid any more: "+shortErr(err), true)
	}
	_ = c.store.markApprovalDecided(ctx, requestID)
	verdict := "Approved."
	if !approve {
		verdict = "Denied."
	}
	if err := answer(verdict, false); err != nil {
		return err
	}
	if am, _ := c.store.approvalMessage(ctx, requestID); am != nil {
		c.removeButtons(ctx, am.ChatID, am.MessageID)
	}
	if cb == nil {
		if err := c.Send(ctx, chatID, verdict); err != nil {
			return err
		}
	}
	return c.deliverResult(ctx, chatID, actorID, res)
}

func shortErr(err error) string {
	s := err.Error()
	if rs := []rune(s); len(rs) > 150 {
		s = string(rs[:150]) + "…"
	}
	return s
}

// handleCallback answers an inline button press. Approval buttons are
// bound to the message, chat and actor they were sent for; anything else
// (stale, foreign, forged) gets an alert and changes nothing.
func (c *Channel) handleCallback(ctx context.Context, q *callbackQuery) (string, string, error) {
	actorID := "telegram:" + strconv.FormatInt(q.From.ID, 10)
	var chatID int64
	var msgID int
	if q.Message != nil {
		chatID, msgID = q.Message.Chat.ID, q.Message.MessageID
	}
	alert := func(text, note string) (string, string, error) {
		return stateIgnored, note, c.answerCallback(ctx, q.ID, text, true)
	}
	action, rest, _ := strings.Cut(q.Data, ":")
	switch action {
	case "approve", "deny":
		am, err := c.store.approvalMessage(ctx, rest)
		if err != nil {
			return "", "", err
		}
		switch {
		case am == nil || am.ChatID != chatID || am.MessageID != msgID:
			return alert("This button is not valid any more.", "stale or foreign approval button")
		case am.ActorID != actorID:
			return alert("Only the person who asked can decide this.", "approval button pressed by another user")
		case am.Decided:
			return alert("This was already decided.", "approval already decided")
		}
		return stateDone, "approval " + action, c.decide(ctx, chatID, actorID, rest, action == "approve", q)
	case "forget":
		answer, nonce, _ := strings.Cut(rest, ":")
		expires, ok, err := c.store.takeForget(ctx, nonce, chatID, actorID)
		if err != nil {
			return "", "", err
		}
		if !ok || !c.clock.Now().Before(expires) {
			return alert("This button is not valid any more.", "stale or foreign forget button")
		}
		c.removeButtons(ctx, chatID, msgID)
		if answer != "yes" {
			if err := c.answerCallback(ctx, q.ID, "Kept.", false); err != nil {
				return "", "", err
			}
			return stateDone, "forget cancelled", c.Send(ctx, chatID, "Okay, I kept everything.")
		}
		if c.deps.Memory == nil {
			return alert("Memory is not available right now.", "forget without memory")
		}
		if err := c.deps.Memory.Forget(ctx, actorID); err != nil {
			c.log.Error("telegram: forget", "actor_id", actorID, "err", err)
			return alert("Sorry, forgetting failed. Please try again.", "forget failed: "+err.Error())
		}
		if err := c.answerCallback(ctx, q.ID, "Forgotten.", false); err != nil {
			return "", "", err
		}
		return stateDone, "forgot memory", c.Send(ctx, chatID, "Done. I've forgotten what I remembered about you.")
	}
	return alert("Unknown button.", "unknown callback data")
}

// deliverResult sends a turn's text and, when it paused, the approval
// prompt with Approve and Deny buttons.
func (c *Channel) deliverResult(ctx context.Context, chatID int64, actorID string, res *agent.Result) error {
	if res == nil {
		return nil
	}
	if err := c.Send(ctx, chatID, res.Text); err != nil {
		return err
	}
	pa := res.PendingApproval
	if pa == nil {
		return nil
	}
	args := pa.Args
	if rs := []rune(args); len(rs) > 1500 {
		args = string(rs[:1500]) + "…"
	}
	var b strings.Builder
	b.WriteString("<b>Approval needed</b>\nTool: <code>" + tgmd.Escape(pa.ToolName) + "</code>\n")
	if strings.TrimSpace(args) != "" {
		b.WriteString("<pre>" + tgmd.Escape(args) + "</pre>\n")
	}
	if pa.ExpiresAt > 0 {
		b.WriteString("Expires at " + time.Unix(pa.ExpiresAt, 0).UTC().Format("15:04:05 UTC") + ".\n")
	}
	approveData, denyData := "approve:"+pa.RequestID, "deny:"+pa.RequestID
	var kb any
	if len(approveData) <= 64 { // callback_data is 1-64 bytes
		kb = inlineKeyboard([]button{{"Approve", approveData}, {"Deny", denyData}})
	}
	b.WriteString("Or reply /approve " + tgmd.Escape(pa.RequestID))
	msgID, err := c.sendHTML(ctx, chatID, b.String(), kb)
	if err != nil {
		return err
	}
	return c.store.saveApprovalMessage(ctx, approvalMessage{RequestID: pa.RequestID, ChatID: chatID, MessageID: msgID, ActorID: actorID})
}

// pair answers an unknown private sender with a pairing code.
func (c *Channel) pair(ctx context.Context, chatID int64, s sender) (string, string, error) {
	p, fresh, err := c.store.RequestPairing(ctx, chatID, s.userID, s.name, c.clock.Now(), c.opts.PairingTTL, c.opts.MaxPendingPairings)
	if errors.Is(err, ErrTooManyPending) {
		_, serr := c.sendHTML(ctx, chatID, "I don't know you yet, and too many pairing requests are waiting. Please try again later.", nil)
		return stateDone, "pairing refused: too many pending", serr
	}
	if err != nil {
		return "", "", err
	}
	mins := int(p.ExpiresAt.Sub(c.clock.Now()).Round(time.Minute).Minutes())
	msg := fmt.Sprintf("I don't know you yet. Your pairing code is <code>%s</code>.\nAsk the owner to run:\n<code>tendril pairing approve %s</code>\nThe code expires in %d minutes.", p.Code, p.Code, mins)
	if _, err := c.sendHTML(ctx, chatID, msg, nil); err != nil {
		return "", "", err
	}
	if fresh {
		return stateDone, "pairing code issued", nil
	}
	return stateDone, "pairing code repeated", nil
}

// largestPhoto picks the biggest size whose file_size is within limit
// (sizes with no file_size are assumed to fit; the download enforces it).
func largestPhoto(sizes []photoSize, limit int64) (photoSize, bool) {
	best, found := photoSize{}, false
	for _, p := range sizes {
		if p.FileID == "" || p.FileSize > limit {
			continue
		}
		if !found || p.Width*p.Height > best.Width*best.Height || p.Width*p.Height == best.Width*best.Height && p.FileSize > best.FileSize {
			best, found = p, true
		}
	}
	return best, found
}

var errTooLarge = errors.New("file too large")

// download fetches a photo through getFile and the file endpoint
// (https://core.telegram.org/bots/api#getfile), refusing more than
// MaxPhotoBytes.
func (c *Channel) download(ctx context.Context, p photoSize) (agent.Image, error) {
	f, err := c.bot.GetFile(ctx, &bot.GetFileParams{FileID: p.FileID})
	if err != nil {
		if strings.Contains(err.Error(), "file is too big") {
			return agent.Image{}, errTooLarge
		}
		return agent.Image{}, fmt.Errorf("getFile %s: %w", p.FileID, err)
	}
	if f.FileSize > c.opts.MaxPhotoBytes {
		return agent.Image{}, errTooLarge
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.bot.FileDownloadLink(f), nil)
	if err != nil {
		return agent.Image{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return agent.Image{}, fmt.Errorf("download %s: %w", f.FilePath, redact(err, c.opts.BotToken))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return agent.Image{}, fmt.Errorf("download %s: HTTP %d", f.FilePath, resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.opts.MaxPhotoBytes+1))
	if err != nil {
		return agent.Image{}, fmt.Errorf("download %s: %w", f.FilePath, err)
	}
	if int64(len(data)) > c.opts.MaxPhotoBytes {
		return agent.Image{}, errTooLarge
	}
	mt := http.DetectContentType(data)
	if !strings.HasPrefix(mt, "image/") {
		mt = "image/jpeg" // Telegram re-encodes photos as JPEG
	}
	return agent.Image{Data: data, MediaType: mt}, nil
}

func redact(err error, token string) error {
	if token == "" {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), token, "***"))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// failedTurnReply is what the chat is told when its turn failed: a
// message the turn refuses (agent.ErrInvalidRequest: a NUL byte, over
// 256 KiB, no visible text) is named, since sending it again cannot help;
// anything else may pass, so the person is asked to try again.
func failedTurnReply(err error) string {
	if errors.Is(err, agent.ErrInvalidRequest) {
		why := err.Error()
		if _, after, ok := strings.Cut(why, agent.ErrInvalidRequest.Error()+": "); ok {
			why = after
		}
		return "Sorry, I can't take that message (" + why + "). Sending it again won't help; please change it."
	}
	return "Sorry, I couldn't answer that just now. Please try again in a moment."
}
