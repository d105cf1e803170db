// Package telegram is Tendril's Telegram channel (SPEC §7.1): the webhook
// POST /telegram/webhook, durable and ordered processing of updates, access
// control by pairing and allow-list, commands, photos and albums for the
// vision path, approvals with inline buttons, and outbound messages through
// github.com/go-telegram/bot rendered from Markdown to Telegram HTML.
//
// Every accepted update is committed to the store before the webhook answers
// 200, de-duplicated by update_id for 24 h, and processed one chat at a time
// in update_id order. The store is SQLite in the home (OpenStore,
// synchronous=FULL) or PostgreSQL shared by several instances
// (OpenPostgresStore, SPEC §9): there a chat is processed by whichever
// instance holds its lease, a new update is announced with NOTIFY, and the
// chats of an instance that died are taken over when its database session
// ends (the lease is an advisory lock, see lease_pg.go). Every update is
// answered exactly once while the instances live; a reply in flight when
// its instance died may be sent once more (see drainChat).
// Updates left unprocessed by a crash are processed on the next Start, or
// by another instance.
package telegram

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-telegram/bot"

	"github.com/tendrilai/tendril/internal/agent"
)

// Defaults for Options fields left zero.
const (
	DefaultAPIURL             = "https://api.telegram.org"
	DefaultAlbumDebounce      = 2 * time.Second
	DefaultTypingInterval     = 4 * time.Second // Telegram shows an action for ≤ 5 s
	DefaultMaxPhotoBytes      = 20 << 20        // getFile limit for bots
	DefaultPairingTTL         = time.Hour
	DefaultMaxPendingPairings = 3
	DefaultDedupTTL           = 24 * time.Hour
	DefaultSendRetries        = 12
	DefaultLeaseTTL           = 30 * time.Second
	DefaultPollInterval       = 10 * time.Second
	MaxWebhookBody            = 1 << 20 // bytes; larger bodies get 413
	MaxAlbumImages            = 10      // Telegram albums hold at most 10 items
	SecretHeader              = "X-Telegram-Bot-Api-Secret-Token"
	WebhookPath               = "/telegram/webhook"
)

// ErrNoSecret is returned by New when Options.WebhookSecret is empty: the
// webhook must never run unauthenticated.
var ErrNoSecret = errors.New("telegram: TELEGRAM_WEBHOOK_SECRET is required to run the webhook")

// ErrNoToken is returned by New when Options.BotToken is empty.
var ErrNoToken = errors.New("telegram: TELEGRAM_BOT_TOKEN is required")

// Options configures a Channel. Zero fields take the defaults above.
type Options struct {
	BotToken      string // TELEGRAM_BOT_TOKEN; required
	WebhookSecret string // TELEGRAM_WEBHOOK_SECRET; required, compared in constant time
	APIURL        string // TELEGRAM_API_URL; default DefaultAPIURL
	// Dir is the SQLite store directory (StoreDir(home)); required unless
	// Store is set.
	Dir string
	// Store, when set, is used instead of opening Dir: typically
	// OpenPostgresStore for instances sharing a database. The caller
	// closes it, after Close.
	Store *Store

	// AllowedChatIDs may talk to the bot without pairing (config plus
	// TELEGRAM_ALLOWED_CHAT_IDS). Paired chats are added by the CLI.
	AllowedChatIDs []int64
	// BotUsername without "@", for group mentions; learned with getMe at
	// Start when empty.
	BotUsername string
	// GroupReplyAll makes the bot answer every group message, not only
	// those that mention it or reply to it.
	GroupReplyAll bool

	AlbumDebounce      time.Duration
	TypingInterval     time.Duration
	MaxPhotoBytes      int64
	PairingTTL         time.Duration
	MaxPendingPairings int
	DedupTTL           time.Duration
	// SendRetries bounds the retries of one Bot API call after 429 answers
	// and transient failures (default DefaultSendRetries, 12: with backoff
	// capped at a minute, about 7 minutes of outage).
	SendRetries int
	// LeaseTTL is how long a chat lease lasts without renewal (renewed
	// every third of it while the chat is processed). On SQLite it is the
	// delay before another process takes over the chats of one that died.
	// On PostgreSQL a lease is an advisory lock that ends with its
	// holder's database session, so a slow instance never loses a chat it
	// is working on and a killed one loses its chats at once; LeaseTTL
	// there is the period of the lock connection's health check and about
	// how long the server takes to notice a lost host (TCP keepalives).
	LeaseTTL time.Duration
	// PollInterval is the period of the fallback scan for pending updates
	// no worker has (a lost notification, an expired lease).
	PollInterval time.Duration

	Clock      Clock        // nil: the system clock
	HTTPClient *http.Client // nil: a client with a 60 s timeout
	Logger     *slog.Logger // nil: slog.Default()
}

// Clock is the time source; tests inject a fake one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Approver decides a paused tool call (SPEC §6.3). requestID is the
// PendingApproval.RequestID the channel showed; actorID is who pressed the
// button ("telegram:<user id>"). It returns the resumed turn's result (which
// may be nil, or pause again), or an error when the request is unknown,
// expired, already decided or bound to someone else.
type Approver interface {
	Decide(ctx context.Context, requestID string, approve bool, actorID string) (*agent.Result, error)
}

// MemoryLister backs /memory and /forget for one actor.
type MemoryLister interface {
	// Remember returns what is remembered about actorID, one fact a line.
	Remember(ctx context.Context, actorID string) ([]string, error)
	// Forget deletes everything remembered about actorID.
	Forget(ctx context.Context, actorID string) error
}

// Deps are the channel's collaborators. Invoker is required; without
// Approver the approval buttons and /approve answer that approvals are
// unavailable; without Memory /memory and /forget do.
type Deps struct {
	Invoker  agent.Invoker
	Approver Approver
	Memory   MemoryLister
}

// Channel is a running Telegram channel. Create it with New, mount Handler
// at WebhookPath, then Start; Stop ends the workers.
type Channel struct {
	opts     Options
	deps     Deps
	store    *Store
	ownStore bool // opened by New from Dir, closed by Close
	bot      *bot.Bot
	http     *http.Client
	clock    Clock
	log      *slog.Logger

	secretSum [32]byte
	allowed   map[int64]bool
	botID     int64

	mu       sync.Mutex
	username string
	workers  map[int64]*worker
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	running  bool
}

type worker struct {
	kick  chan struct{}
	timed bool // waiting for an album's debounce window; guarded by Channel.mu
}

// New validates opts, opens the store in opts.Dir (unless opts.Store is
// set) and prepares the Bot API client. It fails with ErrNoSecret,
// ErrNoToken, or a store error.
func New(opts Options, deps Deps) (*Channel, error) {
	if opts.WebhookSecret == "" {
		return nil, ErrNoSecret
	}
	if strings.TrimSpace(opts.BotToken) == "" {
		return nil, ErrNoToken
	}
	if deps.Invoker == nil {
		return nil, errors.New("telegram: Deps.Invoker is required")
	}
	if opts.APIURL == "" {
		opts.APIURL = DefaultAPIURL
	}
	opts.APIURL = strings.TrimRight(opts.APIURL, "/")
	if opts.AlbumDebounce <= 0 {
		opts.AlbumDebounce = DefaultAlbumDebounce
	}
	if opts.TypingInterval <= 0 {
		opts.TypingInterval = DefaultTypingInterval
	}
	if opts.MaxPhotoBytes <= 0 {
		opts.MaxPhotoBytes = DefaultMaxPhotoBytes
	}
	if opts.PairingTTL <= 0 {
		opts.PairingTTL = DefaultPairingTTL
	}
	if opts.MaxPendingPairings <= 0 {
		opts.MaxPendingPairings = DefaultMaxPendingPairings
	}
	if opts.DedupTTL <= 0 {
		opts.DedupTTL = DefaultDedupTTL
	}
	if opts.SendRetries <= 0 {
		opts.SendRetries = DefaultSendRetries
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = DefaultLeaseTTL
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	c := &Channel{
		opts:     opts,
		deps:     deps,
		clock:    opts.Clock,
		log:      opts.Logger,
		http:     opts.HTTPClient,
		allowed:  map[int64]bool{},
		username: strings.TrimPrefix(opts.BotUsername, "@"),
		workers:  map[int64]*worker{},
	}
	if c.clock == nil {
		c.clock = systemClock{}
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.http == nil {
		c.http = &http.Client{Timeout: 60 * time.Second}
	}
	for _, id := range opts.AllowedChatIDs {
		c.allowed[id] = true
	}
	c.secretSum = sha256.Sum256([]byte(opts.WebhookSecret))
	b, err := NewBot(opts.BotToken, opts.APIURL, c.http)
	if err != nil {
		return nil, err
	}
	c.bot = b
	c.botID = b.ID()
	if opts.Store != nil {
		c.store = opts.Store
		return c, nil
	}
	st, err := OpenStore(opts.Dir)
	if err != nil {
		return nil, err
	}
	c.store, c.ownStore = st, true
	return c, nil
}

// NewBot returns a go-telegram/bot client for token against apiURL
// (TELEGRAM_API_URL) without calling getMe. The CLI uses it too.
func NewBot(token, apiURL string, client *http.Client) (*bot.Bot, error) {
	if client == nil {
		client = &http.Client{Timeout: 60 * time.Second}
	}
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	b, err := bot.New(token,
		bot.WithServerURL(strings.TrimRight(apiURL, "/")),
		bot.WithSkipGetMe(),
		bot.WithHTTPClient(client.Timeout, client),
		bot.WithErrorsHandler(func(error) {}),
	)
	if err != nil {
		return nil, fmt.Errorf("telegram bot client: %w", err)
	}
	return b, nil
}

// Store returns the channel's store (for pairing management in-process).
func (c *Channel) Store() *Store { return c.store }

// Close stops the workers (as Stop) and closes the store it opened (not
// one passed in Options.Store).
func (c *Channel) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.Stop(ctx)
	if !c.ownStore {
		return nil
	}
	return c.store.Close()
}

// Handler returns the webhook handler for POST WebhookPath. It answers 401
// when the secret header does not match (nothing read or stored), 405 for
// other methods, 413 above MaxWebhookBody, 400 for malformed JSON or a
// missing update_id, 503 when the store fails, and 200 once the update is
// durably stored (or was a duplicate, or is a kind the bot ignores).
func (c *Channel) Handler() http.Handler { return http.HandlerFunc(c.serveWebhook) }

type webhookReply struct {
	OK          bool   `json:"ok"`
	Duplicate   bool   `json:"duplicate,omitempty"`
	Ignored     string `json:"ignored,omitempty"`
	Error       string `json:"error,omitempty"`
	Description string `json:"description,omitempty"`
}

func (c *Channel) serveWebhook(w http.ResponseWriter, r *http.Request) {
	got := sha256.Sum256([]byte(r.Header.Get(SecretHeader)))
	if subtle.ConstantTimeCompare(got[:], c.secretSum[:]) != 1 || r.Header.Get(SecretHeader) == "" {
		writeReply(w, http.StatusUnauthorized, webhookReply{Error: "UNAUTHORIZED", Description: "missing or wrong " + SecretHeader})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeReply(w, http.StatusMethodNotAllowed, webhookReply{Error: "METHOD_NOT_ALLOWED", Description: "use POST"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWebhookBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeReply(w, http.StatusRequestEntityTooLarge, webhookReply{Error: "TOO_LARGE", Description: fmt.Sprintf("update body exceeds %d bytes", MaxWebhookBody)})
			return
		}
		writeReply(w, http.StatusBadRequest, webhookReply{Error: "INVALID_REQUEST", Description: "reading body: " + err.Error()})
		return
	}
	var u update
	var probe struct {
		UpdateID *int64 `json:"update_id"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		writeReply(w, http.StatusBadRequest, webhookReply{Error: "INVALID_JSON", Description: "update is not valid JSON: " + err.Error()})
		return
	}
	if probe.UpdateID == nil {
		writeReply(w, http.StatusBadRequest, webhookReply{Error: "INVALID_REQUEST", Description: "update has no update_id"})
		return
	}
	if err := json.Unmarshal(body, &u); err != nil {
		writeReply(w, http.StatusBadRequest, webhookReply{Error: "INVALID_JSON", Description: "update does not match the Bot API Update shape: " + err.Error()})
		return
	}
	kind, chatID, group, ok := classify(&u)
	su := storedUpdate{UpdateID: u.UpdateID, ChatID: chatID, Kind: kind, MediaGroup: group, Body: body, ReceivedMS: c.clock.Now().UnixMilli(), State: statePending}
	if !ok {
		su.Kind = unknownKind(body)
		su.State, su.Note = stateIgnored, "unsupported update kind "+su.Kind
	}
	inserted, err := c.store.insertUpdate(r.Context(), su)
	if err != nil {
		c.log.Error("telegram: store update", "update_id", u.UpdateID, "err", err)
		writeReply(w, http.StatusServiceUnavailable, webhookReply{Error: "STORE_UNAVAILABLE", Description: "update not stored; retry"})
		return
	}
	switch {
	case !inserted:
		writeReply(w, http.StatusOK, webhookReply{OK: true, Duplicate: true})
	case !ok:
		writeReply(w, http.StatusOK, webhookReply{OK: true, Ignored: su.Note})
	default:
		writeReply(w, http.StatusOK, webhookReply{OK: true})
		c.kick(chatID)
	}
}

func writeReply(w http.ResponseWriter, code int, v webhookReply) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Start processes stored and new updates until Stop or ctx ends. It learns
// the bot's username with getMe when Options.BotUsername is empty (a
// failure is logged; group mentions then match only replies to the bot).
func (c *Channel) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return errors.New("telegram: already started")
	}
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.running = true
	c.workers = map[int64]*worker{} // workers of an earlier run have exited
	needName := c.username == ""
	c.mu.Unlock()
	if needName {
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		me, err := c.bot.GetMe(gctx)
		cancel()
		if err == nil && me != nil {
			c.mu.Lock()
			c.username = me.Username
			c.mu.Unlock()
		} else {
			c.log.Warn("telegram: getMe failed; set telegram.botUsername for group mentions", "err", err)
		}
	}
	if err := c.poll(); err != nil {
		c.Stop(context.Background())
		return err
	}
	c.wg.Add(2)
	go c.purgeLoop()
	go c.pollLoop()
	if c.store.pool != nil {
		c.wg.Add(1)
		go c.listenLoop()
	}
	return nil
}

// poll wakes the worker of every chat with pending updates that no live
// instance holds, except chats whose local worker is waiting out an album's
// debounce window (it wakes itself).
func (c *Channel) poll() error {
	chats, err := c.store.claimableChats(c.ctx)
	if err != nil {
		return err
	}
	for _, id := range chats {
		c.mu.Lock()
		w := c.workers[id]
		timed := w != nil && w.timed
		c.mu.Unlock()
		if !timed {
			c.kick(id)
		}
	}
	return nil
}

// pollLoop is the fallback for lost notifications and expired leases.
func (c *Channel) pollLoop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(c.opts.PollInterval):
		}
		if err := c.poll(); err != nil && c.ctx.Err() == nil {
			c.log.Warn("telegram: scan for pending updates", "err", err)
		}
	}
}

// listenLoop wakes workers on NOTIFY from other instances (PostgreSQL),
// reconnecting after a failure.
func (c *Channel) listenLoop() {
	defer c.wg.Done()
	backoff := time.Second
	for c.ctx.Err() == nil {
		err := c.store.listen(c.ctx, func() {
			backoff = time.Second
			// Announcements while not listening are lost: catch up.
			if err := c.poll(); err != nil && c.ctx.Err() == nil {
				c.log.Warn("telegram: scan for pending updates", "err", err)
			}
		}, c.kick)
		if c.ctx.Err() != nil {
			return
		}
		c.log.Warn("telegram: listening for new updates failed; retrying", "err", err, "retry_in", backoff)
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
	}
}

// Stop ends the workers and waits for them, or for ctx. An update being
// processed when Stop cancels it stays pending and is processed again on
// the next Start.
func (c *Channel) Stop(ctx context.Context) error {
	c.mu.Lock()
	if !c.running {
		c.mu.Unlock()
		return nil
	}
	c.running = false
	c.cancel()
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Channel) botUsername() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.username
}

func (c *Channel) purgeLoop() {
	defer c.wg.Done()
	for {
		now := c.clock.Now()
		if err := c.store.purge(c.ctx, now.Add(-c.opts.DedupTTL), now); err != nil && c.ctx.Err() == nil {
			c.log.Warn("telegram: purge", "err", err)
		}
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(time.Hour):
		}
	}
}

// kick wakes (or starts) the worker of chatID.
func (c *Channel) kick(chatID int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return
	}
	w := c.workers[chatID]
	if w == nil {
		w = &worker{kick: make(chan struct{}, 1)}
		c.workers[chatID] = w
		c.wg.Add(1)
		go c.runWorker(chatID, w)
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

const workerIdle = time.Minute

// runWorker processes one chat's updates in update_id order. It exits after
// a minute without work, or when the channel stops.
func (c *Channel) runWorker(chatID int64, w *worker) {
	defer c.wg.Done()
	for {
		wait, waiting := c.drainChat(c.ctx, chatID)
		var timer <-chan time.Time
		if waiting {
			timer = c.clock.After(wait)
		}
		c.mu.Lock()
		w.timed = waiting
		c.mu.Unlock()
		idle := time.NewTimer(workerIdle)
		select {
		case <-c.ctx.Done():
			idle.Stop()
			c.mu.Lock()
			if c.workers[chatID] == w {
				delete(c.workers, chatID)
			}
			c.mu.Unlock()
			return
		case <-w.kick:
		case <-timer:
		case <-idle.C:
			c.mu.Lock()
			if len(w.kick) == 0 && !waiting {
				delete(c.workers, chatID)
				c.mu.Unlock()
				return
			}
			c.mu.Unlock()
		}
		idle.Stop()
	}
}

// ProcessChat processes chatID's pending updates now, in update_id order,
// under the chat's lease. It returns retryIn 0 when the chat is drained or
// another instance holds it (that instance processes what is pending), and
// retryIn > 0 when an album is still inside its debounce window or the
// store failed: call again after retryIn. It is what each per-chat worker
// runs, and can be the body of a job queue's per-chat job (River). ctx
// ending stops it; an update cut short stays pending.
func (c *Channel) ProcessChat(ctx context.Context, chatID int64) (retryIn time.Duration) {
	wait, waiting := c.drainChat(ctx, chatID)
	if !waiting {
		return 0
	}
	return max(wait, time.Millisecond)
}

// errLeaseLost cancels processing when the chat's lease could not be
// renewed before it expired: another instance may now process the chat.
var errLeaseLost = errors.New("telegram: chat lease lost")

// drainChat processes chatID's pending updates while holding the chat's
// lease (see lease.go), then releases it.
//
// Delivery is exactly once while the instances live: an update is taken
// only under the chat's lease, and its outcome is recorded before the
// lease is given up. It is at-least-once in one window: an instance that
// dies (or loses its PostgreSQL lock connection) after Telegram accepted
// a reply and before the outcome was recorded leaves the update pending,
// and the instance that takes the chat over sends the reply again
// (sendMessage has no idempotency key). The turn itself is not run again
// when its result was saved (saveResult) before the holder died. It returns how long to wait when
// an album is still collecting parts (waiting), and 0, false when the chat
// is drained or another instance holds it (that instance will process what
// is pending). It is the body a job queue worker would run per chat.
func (c *Channel) drainChat(ctx context.Context, chatID int64) (wait time.Duration, waiting bool) {
	for ctx.Err() == nil {
		claimed, err := c.store.claimChat(ctx, chatID, c.opts.LeaseTTL)
		if err != nil {
			// The claim may have committed before the error (a cancelled
			// context races the server): give it back, or the chat would
			// wait for the lease to expire.
			c.release(ctx, chatID)
			if ctx.Err() == nil {
				c.log.Error("telegram: claim chat", "chat_id", chatID, "err", err)
			}
			return time.Second, true
		}
		if !claimed {
			c.log.Debug("telegram: chat held by another instance", "chat_id", chatID)
			return 0, false
		}
		wait, waiting, lost := c.drainHeld(ctx, chatID, c.store.leaseLost())
		if waiting || lost {
			return wait, waiting
		}
		// An update inserted by an instance whose claim failed while this
		// one held the lease is committed by now: look once more.
		more, err := c.store.hasPending(ctx, chatID)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Error("telegram: read pending update", "chat_id", chatID, "err", err)
			}
			return time.Second, true
		}
		if !more {
			return 0, false
		}
	}
	return 0, false
}

// drainHeld runs drain under a claimed lease, renewing it every third of
// LeaseTTL, and releases it at the end. lost reports that renewal failed
// and processing was cancelled.
func (c *Channel) drainHeld(ctx context.Context, chatID int64, gone <-chan struct{}) (wait time.Duration, waiting, lost bool) {
	lctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.renewLoop(lctx, cancel, chatID, gone)
	}()
	wait, waiting = c.drain(lctx, chatID)
	lost = errors.Is(context.Cause(lctx), errLeaseLost)
	cancel(nil)
	<-done
	if lost {
		c.log.Warn("telegram: chat lease lost; another instance takes over", "chat_id", chatID)
	}
	c.release(ctx, chatID)
	return wait, waiting, lost
}

// release gives up chatID's lease, also when ctx has ended (Stop).
func (c *Channel) release(ctx context.Context, chatID int64) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.store.releaseChat(rctx, chatID); err != nil {
		c.log.Warn("telegram: release chat lease", "chat_id", chatID, "err", err)
	}
}

// renewLoop keeps chatID's lease until ctx ends, cancelling ctx with
// errLeaseLost when another owner has it, renewals kept failing until it
// expired, or gone is closed (every lease of the store was lost at once).
func (c *Channel) renewLoop(ctx context.Context, cancel context.CancelCauseFunc, chatID int64, gone <-chan struct{}) {
	ttl := c.opts.LeaseTTL
	t := time.NewTicker(max(ttl/3, time.Millisecond))
	defer t.Stop()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-gone:
			cancel(errLeaseLost)
			return
		case <-t.C:
		}
		held, err := c.store.renewChat(ctx, chatID, ttl)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && held:
			renewed = time.Now()
		case err == nil:
			cancel(errLeaseLost)
			return
		default:
			c.log.Warn("telegram: renew chat lease", "chat_id", chatID, "err", err)
			if time.Since(renewed) >= ttl {
				cancel(errLeaseLost)
				return
			}
		}
	}
}

// drain processes pending updates of chatID until none is left or an
// album is still collecting parts; then it returns how long to wait.
func (c *Channel) drain(ctx context.Context, chatID int64) (wait time.Duration, waiting bool) {
	for ctx.Err() == nil {
		u, err := c.store.nextPending(ctx, chatID)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Error("telegram: read pending update", "chat_id", chatID, "err", err)
			}
			return time.Second, true
		}
		if u == nil {
			return 0, false
		}
		batch := []storedUpdate{*u}
		if u.MediaGroup != "" {
			parts, err := c.store.pendingGroup(ctx, chatID, u.MediaGroup)
			if err != nil {
				return time.Second, true
			}
			var last int64
			for _, p := range parts {
				last = max(last, p.ReceivedMS)
			}
			elapsed := c.clock.Now().Sub(time.UnixMilli(last))
			if elapsed < c.opts.AlbumDebounce && len(parts) < MaxAlbumImages {
				return c.opts.AlbumDebounce - elapsed, true
			}
			batch = parts[:min(len(parts), MaxAlbumImages)]
		}
		c.processBatch(ctx, batch)
	}
	return 0, false
}

// processBatch handles one update (or one album) and records the outcome.
// A panic on hostile input is recovered and recorded as a failure.
func (c *Channel) processBatch(ctx context.Context, batch []storedUpdate) {
	ids := make([]int64, len(batch))
	for i, b := range batch {
		ids[i] = b.UpdateID
	}
	state, note := stateFailed, ""
	defer func() {
		if r := recover(); r != nil {
			state, note = stateFailed, fmt.Sprintf("panic: %v", r)
			c.log.Error("telegram: panic processing update", "update_ids", ids, "panic", r)
		}
		if ctx.Err() != nil && state != stateDone && state != stateIgnored {
			return // stopped mid-way (or lease lost): leave pending
		}
		if err := c.store.finish(context.WithoutCancel(ctx), ids, state, note, c.clock.Now()); err != nil {
			c.log.Error("telegram: record update outcome", "update_ids", ids, "err", err)
		}
	}()
	var err error
	state, note, err = c.handle(ctx, batch)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		state, note = stateFailed, err.Error()
		c.log.Error("telegram: process update", "update_ids", ids, "err", err)
	}
}
