package telegram

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/channel/telegram/telegramtest"
	"github.com/tendrilai/tendril/internal/pg"
	"github.com/tendrilai/tendril/internal/testenv"
)

const testSecret = "s3cret-token_ABC"

// fakeClock is a manual clock. With auto set, After fires at once (and
// records the wait), so retry_after is observable without sleeping.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	auto    bool
	waits   []time.Duration
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waits = append(c.waits, d)
	if c.auto || d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{c.now.Add(d), ch})
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	keep := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			keep = append(keep, w)
		}
	}
	c.waiters = keep
}

func (c *fakeClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// run advances the clock by step every few real milliseconds until the
// test ends: an accelerated clock for debounce windows.
func (c *fakeClock) run(t testing.TB, step time.Duration) {
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				c.Advance(step)
			}
		}
	}()
}

// fakeInvoker records requests and answers with reply (default: echo).
type fakeInvoker struct {
	mu    sync.Mutex
	reqs  []agent.Request
	reply func(agent.Request) (*agent.Result, error)
	gate  chan struct{} // when non-nil, each Invoke waits for a receive
}

func (f *fakeInvoker) Invoke(ctx context.Context, req agent.Request) (*agent.Result, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	reply, gate := f.reply, f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if reply != nil {
		return reply(req)
	}
	return &agent.Result{Text: "echo: " + req.Message}, nil
}

func (f *fakeInvoker) Requests() []agent.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]agent.Request(nil), f.reqs...)
}

type fakeApprover struct {
	mu    sync.Mutex
	calls []string
	res   *agent.Result
	err   error
}

func (a *fakeApprover) Decide(ctx context.Context, id string, approve bool, actor string) (*agent.Result, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, fmt.Sprintf("%s %v %s", id, approve, actor))
	return a.res, a.err
}

func (a *fakeApprover) Calls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...)
}

type fakeMemory struct {
	mu     sync.Mutex
	facts  map[string][]string
	forgot []string
}

func (m *fakeMemory) Remember(ctx context.Context, actor string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.facts[actor], nil
}

func (m *fakeMemory) Forget(ctx context.Context, actor string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgot = append(m.forgot, actor)
	delete(m.facts, actor)
	return nil
}

type harness struct {
	t     testing.TB
	srv   *telegramtest.Server
	ch    *Channel
	inv   *fakeInvoker
	appr  *fakeApprover
	mem   *fakeMemory
	clock *fakeClock
	dir   string
	pgURL string // non-empty: every open uses a PostgreSQL store on this database
}

// backendEnv selects the store of the harness: unset or "sqlite" for the
// SQLite store in a temporary directory, "postgres" to run the same tests
// on a PostgreSQL store (testenv.PostgresSchema), e.g.
//
//	TENDRIL_TG_BACKEND=postgres go test ./internal/channel/telegram/
const backendEnv = "TENDRIL_TG_BACKEND"

// newHarness builds a channel against a fake Bot API; chat 70001 is
// allowed unless opts changes AllowedChatIDs. It is not started.
func newHarness(t testing.TB, mod func(*Options)) *harness {
	t.Helper()
	h := &harness{
		t:     t,
		srv:   telegramtest.New(t),
		inv:   &fakeInvoker{},
		appr:  &fakeApprover{},
		mem:   &fakeMemory{facts: map[string][]string{}},
		clock: newFakeClock(),
		dir:   t.TempDir(),
	}
	if os.Getenv(backendEnv) == "postgres" {
		h.pgURL = testenv.PostgresSchema(t)
	}
	h.ch = h.open(mod)
	return h
}

// openPostgres opens a pool and a store on url, closed when the test ends.
func openPostgres(t testing.TB, url string) *Store {
	t.Helper()
	ctx := context.Background()
	pool, err := pg.Open(ctx, url, pg.Options{})
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	t.Cleanup(pool.Close)
	st, err := OpenPostgresStore(ctx, pool)
	if err != nil {
		t.Fatalf("OpenPostgresStore: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func (h *harness) open(mod func(*Options)) *Channel {
	h.t.Helper()
	opts := Options{
		BotToken:       telegramtest.Token,
		WebhookSecret:  testSecret,
		APIURL:         h.srv.URL,
		Dir:            h.dir,
		AllowedChatIDs: []int64{70001},
		Clock:          h.clock,
		Logger:         slog.New(slog.NewTextHandler(testLogOut(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if h.pgURL != "" {
		opts.Store = openPostgres(h.t, h.pgURL)
	}
	if mod != nil {
		mod(&opts)
	}
	ch, err := New(opts, Deps{Invoker: h.inv, Approver: h.appr, Memory: h.mem})
	if err != nil {
		h.t.Fatalf("New: %v", err)
	}
	h.t.Cleanup(func() { ch.Close() })
	return ch
}

func (h *harness) start() {
	h.t.Helper()
	if err := h.ch.Start(context.Background()); err != nil {
		h.t.Fatalf("Start: %v", err)
	}
}

// post delivers body to the webhook with the given secret ("" = none).
func (h *harness) postWith(body, secret string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, WebhookPath, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		req.Header.Set(SecretHeader, secret)
	}
	rec := httptest.NewRecorder()
	h.ch.Handler().ServeHTTP(rec, req)
	return rec
}

func (h *harness) post(body string) *httptest.ResponseRecorder {
	h.t.Helper()
	rec := h.postWith(body, testSecret)
	if rec.Code != http.StatusOK {
		h.t.Fatalf("webhook answered %d: %s", rec.Code, rec.Body)
	}
	return rec
}

// waitDone waits until every id has left the pending state and returns the
// notes by id.
func (h *harness) waitDone(ids ...int64) map[int64]string {
	h.t.Helper()
	notes := map[int64]string{}
	h.srv.WaitFor(h.t, 20*time.Second, fmt.Sprintf("updates %v processed", ids), func() bool {
		for _, id := range ids {
			st, note, err := h.ch.store.updateState(context.Background(), id)
			if err != nil || st == "" || st == statePending {
				return false
			}
			notes[id] = st + ": " + note
		}
		return true
	})
	return notes
}

func textUpdate(id int64, chatID, userID int64, text string) string {
	chatType := "private"
	if chatID < 0 {
		chatType = "supergroup"
	}
	b, _ := json.Marshal(map[string]any{
		"update_id": id,
		"message": map[string]any{
			"message_id": id % 100000, "date": 1764489600,
			"from": map[string]any{"id": userID, "is_bot": false, "first_name": "U" + fmt.Sprint(userID)},
			"chat": map[string]any{"id": chatID, "type": chatType},
			"text": text,
		},
	})
	return string(b)
}

func callbackUpdate(id int64, fromID, chatID int64, messageID int, data string) string {
	b, _ := json.Marshal(map[string]any{
		"update_id": id,
		"callback_query": map[string]any{
			"id":            fmt.Sprintf("cb%d", id),
			"from":          map[string]any{"id": fromID, "is_bot": false, "first_name": "X"},
			"message":       map[string]any{"message_id": messageID, "date": 1, "chat": map[string]any{"id": chatID, "type": "private"}, "text": "x"},
			"chat_instance": "1",
			"data":          data,
		},
	})
	return string(b)
}

// sampleUpdates reads shared/data/telegram/updates.jsonl with _comment
// stripped, keyed by update_id, in file order.
func sampleUpdates(t testing.TB) (ids []int64, bodies map[int64]string, comments map[int64]string) {
	t.Helper()
	f, err := os.Open("../../../../shared/data/telegram/updates.jsonl")
	if err != nil {
		t.Skipf("sample updates not available: %v", err)
	}
	defer f.Close()
	bodies, comments = map[int64]string{}, map[int64]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("sample line: %v", err)
		}
		comment, _ := m["_comment"].(string)
		delete(m, "_comment")
		b, _ := json.Marshal(m)
		id := int64(m["update_id"].(float64))
		ids = append(ids, id)
		bodies[id] = string(b)
		comments[id] = comment
	}
	return ids, bodies, comments
}

func testLogOut() io.Writer {
	if os.Getenv("TENDRIL_TG_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}
