package telegram

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"
)

// StoreFile is the SQLite file, inside the directory given to OpenStore,
// that holds accepted updates, de-duplication, pairing codes, the paired
// allow-list and per-chat sessions. The CLI and the server share it.
const StoreFile = "telegram.db"

// StoreDir returns the conventional store directory under a Tendril home.
func StoreDir(home string) string { return filepath.Join(home, "telegram") }

// Update states in the store.
const (
	statePending = "pending" // accepted, not yet processed
	stateDone    = "done"    // processed (note says how)
	stateIgnored = "ignored" // accepted and deliberately not acted on
	stateFailed  = "failed"  // processing failed; not retried
)

// Pairing errors callers branch on.
var (
	ErrPairingNotFound = errors.New("pairing code not found")
	ErrPairingExpired  = errors.New("pairing code expired")
	ErrTooManyPending  = errors.New("too many pending pairing codes")
)

// pairingAlphabet has no 0/O/1/I, so codes survive being read aloud.
const pairingAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

// Pairing is a pending request from an unknown sender to talk to the bot.
type Pairing struct {
	Code      string    `json:"code"`
	ChatID    int64     `json:"chat_id"`
	UserID    int64     `json:"user_id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// storedUpdate is one accepted webhook update.
type storedUpdate struct {
	UpdateID   int64
	ChatID     int64
	Kind       string
	MediaGroup string
	Body       []byte
	ReceivedMS int64
	State      string
	Note       string
}

// Store is the channel's durable state: accepted updates and their
// update_id de-duplication, per-chat leases, pairing codes, the paired
// allow-list, the chat→session map, approval prompts and /forget
// confirmations. One implementation serves two backends through
// database/sql: SQLite in a home directory (OpenStore) and PostgreSQL on a
// shared pool (OpenPostgresStore), where several `tendril serve` instances
// share every row. It is safe for concurrent use.
type Store struct {
	db    sqlDB
	pool  *pgxpool.Pool // PostgreSQL: source of the LISTEN connection; nil on SQLite
	owner string        // lease owner of this instance (see claimChat)
	locks *chatLocks    // PostgreSQL: chat leases as advisory locks; nil on SQLite
}

// Close releases the store's database handle. On PostgreSQL the shared
// pool stays open: it belongs to the caller.
func (s *Store) Close() error {
	if s.locks != nil {
		s.locks.close()
	}
	return s.db.Close()
}

// leaseLost returns a channel closed when the chat leases held now are
// lost all at once (PostgreSQL: the lock connection failed), or nil.
func (s *Store) leaseLost() <-chan struct{} {
	if s.locks == nil {
		return nil
	}
	return s.locks.lostChan()
}

// insertUpdate stores u durably. inserted is false when update_id was
// already seen (a redelivery) and nothing was written.
func (s *Store) insertUpdate(ctx context.Context, u storedUpdate) (inserted bool, err error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO telegram_updates(update_id, chat_id, kind, media_group, body, received_ms, state, note)
		VALUES(?,?,?,?,?,?,?,?) ON CONFLICT(update_id) DO NOTHING`,
		u.UpdateID, u.ChatID, u.Kind, u.MediaGroup, u.Body, u.ReceivedMS, u.State, u.Note)
	if err != nil {
		return false, fmt.Errorf("store update %d: %w", u.UpdateID, err)
	}
	n, err := res.RowsAffected()
	if err != nil || n != 1 {
		return false, err
	}
	if s.db.d.notify != "" && u.State == statePending {
		// Best effort: the fallback poll finds the update if this is lost.
		if _, err := s.db.ExecContext(ctx, s.db.d.notify, notifyPayload(u.ChatID, s.owner)); err != nil {
			return true, nil
		}
	}
	return true, nil
}

const updateCols = `update_id, chat_id, kind, media_group, body, received_ms, state, note`

func scanUpdate(sc interface{ Scan(...any) error }) (storedUpdate, error) {
	var u storedUpdate
	err := sc.Scan(&u.UpdateID, &u.ChatID, &u.Kind, &u.MediaGroup, &u.Body, &u.ReceivedMS, &u.State, &u.Note)
	return u, err
}

// nextPending returns the pending update of chatID with the lowest
// update_id, or nil.
func (s *Store) nextPending(ctx context.Context, chatID int64) (*storedUpdate, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+updateCols+` FROM telegram_updates WHERE chat_id = ? AND state = 'pending' ORDER BY update_id LIMIT 1`, chatID)
	u, err := scanUpdate(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("next pending update for chat %d: %w", chatID, err)
	}
	return &u, nil
}

// pendingGroup returns the pending updates of one album, by update_id.
func (s *Store) pendingGroup(ctx context.Context, chatID int64, group string) ([]storedUpdate, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+updateCols+` FROM telegram_updates WHERE chat_id = ? AND media_group = ? AND state = 'pending' ORDER BY update_id`, chatID, group)
	if err != nil {
		return nil, fmt.Errorf("album %s: %w", group, err)
	}
	defer rows.Close()
	var out []storedUpdate
	for rows.Next() {
		u, err := scanUpdate(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// pendingChats lists chats with unprocessed updates (work left by a crash).
func (s *Store) pendingChats(ctx context.Context) ([]int64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT chat_id FROM telegram_updates WHERE state = 'pending'`)
	if err != nil {
		return nil, fmt.Errorf("pending chats: %w", err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// finish records the outcome of processing updates.
func (s *Store) finish(ctx context.Context, ids []int64, state, note string, now time.Time) error {
	for _, id := range ids {
		if _, err := s.db.ExecContext(ctx, `UPDATE telegram_updates SET state = ?, note = ?, done_ms = ?, result = NULL WHERE update_id = ?`, state, note, now.UnixMilli(), id); err != nil {
			return fmt.Errorf("finish update %d: %w", id, err)
		}
	}
	return nil
}

// saveResult keeps the turn result (JSON) of the pending update id until
// finish, so that a worker taking the update over after its holder died
// between the turn and the reply delivers it without a second turn.
func (s *Store) saveResult(ctx context.Context, id int64, result []byte) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE telegram_updates SET result = ? WHERE update_id = ? AND state = 'pending'`, result, id); err != nil {
		return fmt.Errorf("save turn result of update %d: %w", id, err)
	}
	return nil
}

// savedResult returns the turn result saved for the pending update id, or
// nil.
func (s *Store) savedResult(ctx context.Context, id int64) ([]byte, error) {
	var result []byte
	err := s.db.QueryRowContext(ctx, `SELECT result FROM telegram_updates WHERE update_id = ? AND state = 'pending'`, id).Scan(&result)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("saved turn result of update %d: %w", id, err)
	}
	return result, nil
}

// updateState returns the state and note of an update ("" when unknown).
func (s *Store) updateState(ctx context.Context, id int64) (state, note string, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT state, note FROM telegram_updates WHERE update_id = ?`, id).Scan(&state, &note)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", nil
	}
	return state, note, err
}

// Pending returns how many accepted updates wait to be processed: state
// pending, which includes the update a chat's worker is handling right now
// and album parts still inside their debounce window. Processed, ignored
// and failed updates (kept for the de-duplication TTL) are not counted. It
// is the Telegram queue depth for metrics.
func (s *Store) Pending(ctx context.Context) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM telegram_updates WHERE state = 'pending'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("telegram store: count pending updates: %w", err)
	}
	return n, nil
}

// ErrBadActor is returned by ForgetActor for an empty actor ID.
var ErrBadActor = errors.New("telegram store: empty actor id")

// ForgetActor deletes, in one transaction, everything the store keeps of
// actorID, and returns how many rows it removed (0 when there was
// nothing). Actor IDs are "telegram:<id>", where <id> is the sender's user
// ID, or the chat's ID for a channel post (see senderOf); in a private
// chat the chat ID is the user ID. Removed are:
//
//   - stored updates of the actor's private chat, and every other stored
//     update the actor sent: messages, edits and posts whose sender is the
//     actor, button presses by the actor, and updates of kinds the channel
//     ignores whose from/user (or private chat) is the actor. Updates sent
//     by other people that merely quote or mention the actor are theirs
//     and age out with the de-duplication TTL. A removed update_id is no
//     longer de-duplicated;
//   - pairing requests of the actor's chat or by the actor;
//   - the pairing approval of the actor's chat (the allowed row), so an
//     actor who was let in by pairing must pair again. The config
//     allow-list (Options.AllowedChatIDs, TELEGRAM_ALLOWED_CHAT_IDS) is
//     configuration, not stored here, and is not changed: a listed chat is
//     still served without pairing;
//   - the chat→session entries of the actor: "<id>" (their private chat)
//     and "<chat>:<id>" (their slot in each group);
//   - saved approval-prompt messages and pending /forget confirmations of
//     the actor or of their private chat.
//
// For a chat actor (a negative ID: a channel, or a group posting as
// itself) only what that actor sent and its session slots go; the chat's
// other rows belong to the people in it.
//
// An update of the actor that a worker is processing at this moment is
// deleted too; that turn still runs to its end (it records no outcome).
// An actorID that is not "telegram:<integer>" has no Telegram chat: only
// rows recorded under exactly that actor ID (approval prompts, /forget
// confirmations) are removed. It fails with ErrBadActor for "", or with
// the database's error, in which case nothing is removed.
func (s *Store) ForgetActor(ctx context.Context, actorID string) (removed int, err error) {
	if strings.TrimSpace(actorID) == "" {
		return 0, ErrBadActor
	}
	id, isTelegram := telegramID(actorID)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("telegram store: forget %s: %w", actorID, err)
	}
	defer tx.Rollback()
	total := 0
	exec := func(q string, args ...any) error {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		total += int(n)
		return err
	}
	type stmt struct {
		q    string
		args []any
	}
	steps := []stmt{
		{`DELETE FROM telegram_approval_messages WHERE actor_id = ?`, []any{actorID}},
		{`DELETE FROM telegram_forget_requests WHERE actor_id = ?`, []any{actorID}},
	}
	if isTelegram {
		idStr := strconv.FormatInt(id, 10)
		// The actor's slot in every chat: "<id>" (private) and "<chat>:<id>".
		steps = append(steps, stmt{`DELETE FROM telegram_sessions WHERE key = ? OR key LIKE '%:' || CAST(? AS TEXT)`, []any{idStr, idStr}})
		if id > 0 {
			// A user: their private chat has the same ID, and all of it is
			// theirs. (Negative IDs are groups and channels, shared with
			// other people: only what the actor sent goes, below.)
			steps = append(steps, []stmt{
				{`DELETE FROM telegram_approval_messages WHERE chat_id = ?`, []any{id}},
				{`DELETE FROM telegram_forget_requests WHERE chat_id = ?`, []any{id}},
				{`DELETE FROM telegram_pairing WHERE chat_id = ? OR user_id = ?`, []any{id, id}},
				{`DELETE FROM telegram_allowed WHERE chat_id = ?`, []any{id}},
				{`DELETE FROM telegram_updates WHERE chat_id = ?`, []any{id}},
			}...)
		}
	}
	for _, st := range steps {
		if err := exec(st.q, st.args...); err != nil {
			return 0, fmt.Errorf("telegram store: forget %s: %w", actorID, err)
		}
	}
	if isTelegram {
		// Updates in shared chats (groups, channels, button presses under
		// messages there) name the sender only in the body.
		ids, err := updatesOf(ctx, tx, id, actorID)
		if err != nil {
			return 0, fmt.Errorf("telegram store: forget %s: %w", actorID, err)
		}
		for _, uid := range ids {
			if err := exec(`DELETE FROM telegram_updates WHERE update_id = ?`, uid); err != nil {
				return 0, fmt.Errorf("telegram store: forget %s: %w", actorID, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("telegram store: forget %s: %w", actorID, err)
	}
	return total, nil
}

// telegramID parses "telegram:<integer>".
func telegramID(actorID string) (int64, bool) {
	rest, ok := strings.CutPrefix(actorID, "telegram:")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	return id, err == nil
}

// updatesOf returns the stored update_ids whose sender (sentBy) is
// actorID. Bot API bodies write IDs as plain JSON integers, so a body that
// does not contain the ID's digits is skipped without decoding.
func updatesOf(ctx context.Context, tx sqlTx, id int64, actorID string) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT update_id, body FROM telegram_updates WHERE `+tx.d.bodyContains, []byte(strconv.FormatInt(id, 10)))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var uid int64
		var body []byte
		if err := rows.Scan(&uid, &body); err != nil {
			return nil, err
		}
		if sentBy(body, actorID) {
			out = append(out, uid)
		}
	}
	return out, rows.Err()
}

// sentBy reports whether the stored update body was sent by actorID, as
// handle attributes it: the sender of a message, edit or channel post
// (senderOf), the user who pressed a button, and for kinds the channel
// ignores (reactions, member updates, join requests, …) the object's
// from, user or actor_chat, or its chat when that is private.
func sentBy(body []byte, actorID string) bool {
	var u update
	if json.Unmarshal(body, &u) == nil {
		if u.CallbackQuery != nil {
			return "telegram:"+strconv.FormatInt(u.CallbackQuery.From.ID, 10) == actorID
		}
		if m := u.messageOf(); m != nil {
			return senderOf(m).actorID == actorID
		}
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return false
	}
	for k, raw := range fields {
		if k == "update_id" {
			continue
		}
		var o struct {
			From      *user `json:"from"`
			User      *user `json:"user"`
			ActorChat *chat `json:"actor_chat"`
			Chat      *chat `json:"chat"`
		}
		if json.Unmarshal(raw, &o) != nil {
			continue
		}
		for _, id := range []*int64{idOfUser(o.From), idOfUser(o.User), idOfChat(o.ActorChat, false), idOfChat(o.Chat, true)} {
			if id != nil && "telegram:"+strconv.FormatInt(*id, 10) == actorID {
				return true
			}
		}
	}
	return false
}

func idOfUser(u *user) *int64 {
	if u == nil {
		return nil
	}
	return &u.ID
}

func idOfChat(c *chat, privateOnly bool) *int64 {
	if c == nil || privateOnly && c.Type != "private" {
		return nil
	}
	return &c.ID
}

// countUpdates returns how many updates are stored.
func (s *Store) countUpdates(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM telegram_updates`).Scan(&n)
	return n, err
}

// purge forgets processed updates received before cutoff (the update_id
// de-duplication TTL) and expired pairing and forget requests.
func (s *Store) purge(ctx context.Context, cutoff, now time.Time) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM telegram_updates WHERE state != 'pending' AND received_ms < ?`, cutoff.UnixMilli()); err != nil {
		return fmt.Errorf("purge updates: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM telegram_pairing WHERE expires_ms < ?`, now.UnixMilli()); err != nil {
		return fmt.Errorf("purge pairing: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM telegram_forget_requests WHERE expires_ms < ?`, now.UnixMilli()); err != nil {
		return fmt.Errorf("purge forget requests: %w", err)
	}
	return nil
}

// RequestPairing returns the pending pairing code of chatID, or creates one
// valid for ttl. fresh reports a new code. At most maxPending unexpired codes
// exist at once; beyond that it returns ErrTooManyPending.
func (s *Store) RequestPairing(ctx context.Context, chatID, userID int64, name string, now time.Time, ttl time.Duration, maxPending int) (p Pairing, fresh bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Pairing{}, false, err
	}
	defer tx.Rollback()
	if q := s.db.d.lockPairing; q != "" {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return Pairing{}, false, fmt.Errorf("pairing lock: %w", err)
		}
	}
	nowMS := now.UnixMilli()
	var code string
	var created, expires int64
	err = tx.QueryRowContext(ctx, `SELECT code, created_ms, expires_ms FROM telegram_pairing WHERE chat_id = ? AND expires_ms > ? ORDER BY created_ms DESC LIMIT 1`, chatID, nowMS).Scan(&code, &created, &expires)
	if err == nil {
		return Pairing{Code: code, ChatID: chatID, UserID: userID, Name: name, CreatedAt: time.UnixMilli(created), ExpiresAt: time.UnixMilli(expires)}, false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Pairing{}, false, fmt.Errorf("pairing lookup: %w", err)
	}
	var pending int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM telegram_pairing WHERE expires_ms > ?`, nowMS).Scan(&pending); err != nil {
		return Pairing{}, false, fmt.Errorf("pairing count: %w", err)
	}
	if pending >= maxPending {
		return Pairing{}, false, ErrTooManyPending
	}
	p = Pairing{Code: newPairingCode(), ChatID: chatID, UserID: userID, Name: name, CreatedAt: time.UnixMilli(nowMS), ExpiresAt: time.UnixMilli(nowMS + ttl.Milliseconds())}
	if _, err := tx.ExecContext(ctx, `INSERT INTO telegram_pairing(code, chat_id, user_id, name, created_ms, expires_ms) VALUES(?,?,?,?,?,?)`,
		p.Code, p.ChatID, p.UserID, p.Name, p.CreatedAt.UnixMilli(), p.ExpiresAt.UnixMilli()); err != nil {
		return Pairing{}, false, fmt.Errorf("pairing insert: %w", err)
	}
	return p, true, tx.Commit()
}

func newPairingCode() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = pairingAlphabet[int(b[i])%len(pairingAlphabet)] // 256 % 32 == 0: unbiased
	}
	return string(b)
}

// ListPairings returns the unexpired pairing requests, oldest first.
func (s *Store) ListPairings(ctx context.Context, now time.Time) ([]Pairing, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT code, chat_id, user_id, name, created_ms, expires_ms FROM telegram_pairing WHERE expires_ms > ? ORDER BY created_ms`, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("list pairings: %w", err)
	}
	defer rows.Close()
	out := []Pairing{}
	for rows.Next() {
		var p Pairing
		var c, e int64
		if err := rows.Scan(&p.Code, &p.ChatID, &p.UserID, &p.Name, &c, &e); err != nil {
			return nil, err
		}
		p.CreatedAt, p.ExpiresAt = time.UnixMilli(c), time.UnixMilli(e)
		out = append(out, p)
	}
	return out, rows.Err()
}

// ApprovePairing allows the chat that requested code (case-insensitive) and
// removes the code. It returns ErrPairingNotFound or ErrPairingExpired.
func (s *Store) ApprovePairing(ctx context.Context, code string, now time.Time) (Pairing, error) {
	code = strings.ToUpper(strings.TrimSpace(code))
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Pairing{}, err
	}
	defer tx.Rollback()
	var p Pairing
	var c, e int64
	// DELETE … RETURNING: of two instances approving one code at once,
	// exactly one gets the row.
	err = tx.QueryRowContext(ctx, `DELETE FROM telegram_pairing WHERE code = ? RETURNING code, chat_id, user_id, name, created_ms, expires_ms`, code).Scan(&p.Code, &p.ChatID, &p.UserID, &p.Name, &c, &e)
	if errors.Is(err, sql.ErrNoRows) {
		return Pairing{}, fmt.Errorf("%w: %q", ErrPairingNotFound, code)
	}
	if err != nil {
		return Pairing{}, fmt.Errorf("approve pairing: %w", err)
	}
	p.CreatedAt, p.ExpiresAt = time.UnixMilli(c), time.UnixMilli(e)
	if !now.Before(p.ExpiresAt) {
		if err := tx.Commit(); err != nil {
			return Pairing{}, err
		}
		return Pairing{}, fmt.Errorf("%w: %q expired at %s", ErrPairingExpired, code, p.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO telegram_allowed(chat_id, name, via, added_ms) VALUES(?,?,?,?)
		ON CONFLICT(chat_id) DO UPDATE SET name = excluded.name, via = excluded.via`, p.ChatID, p.Name, "pairing "+code, now.UnixMilli()); err != nil {
		return Pairing{}, err
	}
	return p, tx.Commit()
}

// isAllowed reports whether chatID was approved through pairing.
func (s *Store) isAllowed(ctx context.Context, chatID int64) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM telegram_allowed WHERE chat_id = ?`, chatID).Scan(&n)
	return n > 0, err
}

func (s *Store) sessionID(ctx context.Context, key string) (string, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT session_id FROM telegram_sessions WHERE key = ?`, key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, err
}

func (s *Store) setSessionID(ctx context.Context, key, id string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO telegram_sessions(key, session_id) VALUES(?,?)
		ON CONFLICT(key) DO UPDATE SET session_id = excluded.session_id`, key, id)
	return err
}

type approvalMessage struct {
	RequestID string
	ChatID    int64
	MessageID int
	ActorID   string
	Decided   bool
}

func (s *Store) saveApprovalMessage(ctx context.Context, m approvalMessage) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO telegram_approval_messages(request_id, chat_id, message_id, actor_id) VALUES(?,?,?,?)
		ON CONFLICT(request_id) DO UPDATE SET chat_id = excluded.chat_id, message_id = excluded.message_id, actor_id = excluded.actor_id`,
		m.RequestID, m.ChatID, m.MessageID, m.ActorID)
	return err
}

func (s *Store) approvalMessage(ctx context.Context, requestID string) (*approvalMessage, error) {
	var m approvalMessage
	err := s.db.QueryRowContext(ctx, `SELECT request_id, chat_id, message_id, actor_id, decided FROM telegram_approval_messages WHERE request_id = ?`, requestID).
		Scan(&m.RequestID, &m.ChatID, &m.MessageID, &m.ActorID, &m.Decided)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return &m, err
}

func (s *Store) markApprovalDecided(ctx context.Context, requestID string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE telegram_approval_messages SET decided = 1 WHERE request_id = ?`, requestID)
	return err
}

func (s *Store) saveForget(ctx context.Context, nonce string, chatID int64, actorID string, expires time.Time) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO telegram_forget_requests(nonce, chat_id, actor_id, expires_ms) VALUES(?,?,?,?)`, nonce, chatID, actorID, expires.UnixMilli())
	return err
}

// takeForget removes the forget confirmation request nonce of chatID and
// actorID and returns when it expires; ok is false when there is none. A
// press from another chat or user finds none and leaves the request for
// its owner.
func (s *Store) takeForget(ctx context.Context, nonce string, chatID int64, actorID string) (expires time.Time, ok bool, err error) {
	var e int64
	err = s.db.QueryRowContext(ctx, `DELETE FROM telegram_forget_requests WHERE nonce = ? AND chat_id = ? AND actor_id = ? RETURNING expires_ms`, nonce, chatID, actorID).Scan(&e)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	return time.UnixMilli(e), true, nil
}
