package telegram

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// On PostgreSQL a chat lease is a session-level advisory lock held on one
// dedicated connection per store (chatLocks), not a row with an expiry.
//
// A TTL lease cannot exclude a holder that is alive but slow: a process
// starved of CPU, of pool connections or of I/O for longer than the TTL
// loses its lease without noticing, another instance takes the chat and
// processes the very update the first one is still working on, and both
// answer it. (Under a loaded machine this answered updates twice in the
// multi-instance end-to-end test.) An advisory lock lasts exactly as long
// as the holder's database session: a slow process keeps its chats, while
// a process that dies (kill -9: its socket closes) loses them at once, and
// a lost host loses them when the server's TCP keepalives on the lock
// connection give up (set from the lease TTL, see keepaliveSQL).
//
// Every lock of a store lives on its one connection. When that connection
// fails, every lock is gone at once; each holder is told through
// lostChan and stops (the update it was answering stays pending and is
// answered by the instance that takes the chat: at-least-once only in that
// window).

// chatLockBase offsets chat IDs (|id| < 2^52 in the Bot API) into a range
// of single-bigint advisory lock keys that no other lock of Tendril uses
// (pg.Migrate's and the pairing lock are far outside it).
const chatLockBase int64 = 0x5447 << 48 // "TG"

func chatLockKey(chatID int64) int64 { return chatLockBase + chatID }

// lockOpTimeout bounds one statement on the lock connection. A timed-out
// statement leaves the connection in an unknown state: it is closed, which
// releases every lock (and every holder is told).
const lockOpTimeout = 10 * time.Second

type chatLocks struct {
	pool *pgxpool.Pool

	mu   sync.Mutex
	pc   *pgxpool.Conn // held from the pool for as long as it lives
	conn *pgx.Conn
	pid  uint32         // backend pid of conn, 0 when not connected
	held map[int64]bool // chats whose lock conn holds
	lost chan struct{}  // closed when conn's locks are gone
}

func newChatLocks(pool *pgxpool.Pool) *chatLocks {
	return &chatLocks{pool: pool, held: map[int64]bool{}, lost: make(chan struct{})}
}

// keepaliveSQL makes the server notice a lost host within about ttl: it
// probes an idle lock connection after ttl/3 and gives up after three
// unanswered probes ttl/9 apart (whole seconds, at least 1).
func keepaliveSQL(ttl time.Duration) string {
	idle := max(int(ttl/3/time.Second), 1)
	interval := max(int(ttl/9/time.Second), 1)
	return fmt.Sprintf("SET tcp_keepalives_idle = %d; SET tcp_keepalives_interval = %d; SET tcp_keepalives_count = 3", idle, interval)
}

// connect returns the lock connection, opening it when needed. l.mu is held.
func (l *chatLocks) connect(ctx context.Context, ttl time.Duration) (*pgx.Conn, error) {
	if l.conn != nil && !l.conn.IsClosed() {
		return l.conn, nil
	}
	l.dropLocked()
	// Held, not hijacked: the lock connection counts against the pool's
	// MaxConns, so the store opens no connection beyond the pool's. It
	// goes back only closed (dropLocked), so its locks and settings never
	// leak into pooled work.
	pc, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	conn := pc.Conn()
	if _, err := conn.Exec(ctx, keepaliveSQL(ttl)); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		pc.Release()
		return nil, err
	}
	l.pc, l.conn, l.pid = pc, conn, conn.PgConn().PID()
	return conn, nil
}

// dropLocked closes the lock connection, which releases all its locks, and
// tells their holders. l.mu is held.
func (l *chatLocks) dropLocked() {
	if l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		l.conn.Close(ctx)
		cancel()
		l.pc.Release() // closed: the pool destroys it
		l.pc, l.conn, l.pid = nil, nil, 0
	}
	if len(l.held) > 0 {
		clear(l.held)
		close(l.lost)
		l.lost = make(chan struct{})
	}
}

// opContext runs lock statements on their own deadline: cancelling a
// statement mid-way would close the connection and drop every lock.
func opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), lockOpTimeout)
}

func (l *chatLocks) claim(ctx context.Context, chatID int64, ttl time.Duration) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[chatID] {
		return true, nil // re-entrant for its owner, without stacking
	}
	octx, cancel := opContext(ctx)
	defer cancel()
	conn, err := l.connect(octx, ttl)
	if err != nil {
		return false, err
	}
	var ok bool
	if err := conn.QueryRow(octx, `SELECT pg_try_advisory_lock($1)`, chatLockKey(chatID)).Scan(&ok); err != nil {
		l.dropLocked()
		return false, err
	}
	if ok {
		l.held[chatID] = true
	}
	return ok, nil
}

// renew checks that the lock connection is alive and still holds chatID.
func (l *chatLocks) renew(ctx context.Context, chatID int64) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held[chatID] || l.conn == nil {
		return false, nil
	}
	octx, cancel := opContext(ctx)
	defer cancel()
	if err := l.conn.Ping(octx); err != nil {
		l.dropLocked() // its locks are gone (or soon will be): say so now
		return false, nil
	}
	return true, nil
}

func (l *chatLocks) release(ctx context.Context, chatID int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held[chatID] {
		return nil
	}
	delete(l.held, chatID)
	octx, cancel := opContext(ctx)
	defer cancel()
	var ok bool
	if err := l.conn.QueryRow(octx, `SELECT pg_advisory_unlock($1)`, chatLockKey(chatID)).Scan(&ok); err != nil {
		l.dropLocked()
		return err
	}
	if !ok {
		return errors.New("advisory lock was not held")
	}
	return nil
}

// lostChan is closed when the locks held now are lost.
func (l *chatLocks) lostChan() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// ownPID is the backend pid of the lock connection (0: none).
func (l *chatLocks) ownPID() uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pid
}

func (l *chatLocks) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropLocked()
}
