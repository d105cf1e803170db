package assistant

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tendrilai/tendril/internal/session"
)

// turnLocks extends the in-process session queue and actor locks across
// instances sharing one database (SPEC §9: "a chat's turns are
// serialised across instances"). With no database it is a no-op: one
// process owns the home and the in-process locks suffice.
type turnLocks interface {
	// turn holds the session's exclusive lock and the actor's shared lock
	// until release. The returned context carries the lock, so the
	// session store refuses to write once the lock is lost (lockedSessions).
	// waiting, when not nil, is called once before the turn blocks for a
	// lock another instance holds (not when the locks are free).
	turn(ctx context.Context, session, actor string, waiting func()) (lctx context.Context, release func(), err error)
	// forget holds the actor's exclusive lock until release: no instance
	// runs a turn of the actor meanwhile.
	forget(ctx context.Context, actor string) (release func(), err error)
}

type localLocks struct{}

func (localLocks) turn(ctx context.Context, _, _ string, _ func()) (context.Context, func(), error) {
	return ctx, func() {}, nil
}
func (localLocks) forget(context.Context, string) (func(), error) { return func() {}, nil }

// Advisory lock classes (the first key of pg_advisory_lock(int, int)).
const (
	lockClassSession = 0x7473 // "ts"
	lockClassActor   = 0x7461 // "ta"
)

// pgLocks takes PostgreSQL session-level advisory locks, each on a
// connection held for the lock's lifetime. A dead instance's connection
// closes and the server releases its locks, so a kill -9 never strands a
// chat. Waiters queue in the server's lock queue; ctx cancels the wait. A
// connection lost while waiting is replaced and the wait retried.
type pgLocks struct{ pool *pgxpool.Pool }

// heldLock is one acquired set of advisory locks on one connection.
type heldLock struct {
	mu   sync.Mutex
	conn *pgxpool.Conn
	sqls []string
	args [][]any
	done bool
}

// check fails when the lock's connection is gone (the server terminated
// it, or the process was frozen past a failover): the server has then
// released the locks, and another instance may hold them.
func (h *heldLock) check(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return errors.New("lock released")
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return h.conn.Ping(pctx)
}

func (h *heldLock) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return
	}
	h.done = true
	// Unlock on a fresh context: the turn's may be done.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := len(h.sqls) - 1; i >= 0; i-- {
		if _, err := h.conn.Exec(ctx, "SELECT "+unlockOf[h.sqls[i]], h.args[i]...); err != nil {
			// The connection is unusable: closing it releases every lock.
			h.conn.Hijack().Close(ctx)
			return
		}
	}
	h.conn.Release()
}

func (l pgLocks) acquire(ctx context.Context, sqls []string, args [][]any, waiting func()) (*heldLock, error) {
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		h, err := l.acquireOnce(ctx, sqls, args, waiting)
		if err == nil || ctx.Err() != nil {
			return h, err
		}
		// A connection terminated while waiting (failover, restart, an
		// operator's pg_terminate_backend): take a fresh one and wait again.
		last = err
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("turn lock: %w", last)
}

func (l pgLocks) acquireOnce(ctx context.Context, sqls []string, args [][]any, waiting func()) (*heldLock, error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	h := &heldLock{conn: conn}
	for i, q := range sqls {
		if waiting != nil {
			// Try first: only a lock that is taken makes the caller wait.
			var got bool
			if err := conn.QueryRow(ctx, "SELECT "+tryOf[q], args[i]...).Scan(&got); err != nil {
				h.release()
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return nil, err
			}
			if got {
				h.sqls, h.args = append(h.sqls, q), append(h.args, args[i])
				continue
			}
			waiting()
			waiting = nil
		}
		if _, err := conn.Exec(ctx, "SELECT "+q, args[i]...); err != nil {
			h.release()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		h.sqls, h.args = append(h.sqls, q), append(h.args, args[i])
	}
	return h, nil
}

const (
	lockX = "pg_advisory_lock($1::int, $2::int)"
	lockS = "pg_advisory_lock_shared($1::int, $2::int)"
)

var tryOf = map[string]string{
	lockX: "pg_try_advisory_lock($1::int, $2::int)",
	lockS: "pg_try_advisory_lock_shared($1::int, $2::int)",
}

var unlockOf = map[string]string{
	lockX: "pg_advisory_unlock($1::int, $2::int)",
	lockS: "pg_advisory_unlock_shared($1::int, $2::int)",
}

// lockKey hashes a name (any bytes, NUL included) to the second key of
// a two-key advisory lock (FNV-1a, 32 bits). Two names that collide only
// share a lock: a turn may wait for an unrelated session's, never run
// beside its own.
func lockKey(name string) int32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int32(h.Sum32())
}

func (l pgLocks) turn(ctx context.Context, session, actor string, waiting func()) (context.Context, func(), error) {
	// Session first, then actor, in every caller: no lock-order cycle.
	h, err := l.acquire(ctx, []string{lockX, lockS},
		[][]any{{lockClassSession, lockKey(session)}, {lockClassActor, lockKey(actor)}}, waiting)
	if err != nil {
		return nil, nil, err
	}
	return context.WithValue(ctx, heldLockKey{}, h), h.release, nil
}

func (l pgLocks) forget(ctx context.Context, actor string) (func(), error) {
	h, err := l.acquire(ctx, []string{lockX}, [][]any{{lockClassActor, lockKey(actor)}}, nil)
	if err != nil {
		return nil, err
	}
	return h.release, nil
}

type heldLockKey struct{}

// ErrLockLost: the turn's session lock went away before its nodes were
// written (its connection was terminated, for example while the process
// was frozen); nothing of the turn is stored, since another instance may
// have run a turn of the session meanwhile. It wraps ErrNotReady: the
// database connection went away, so the client may send the message
// again (503 NOT_READY over HTTP).
var ErrLockLost = fmt.Errorf("%w: the turn lost its session lock", ErrNotReady)

// lockedSessions is the session store of an assistant on a database: an
// append made under a turn lock first checks that the lock is still held,
// so a turn that was frozen past its lock never writes behind a turn that
// ran meanwhile.
type lockedSessions struct{ session.Store }

// Ping checks the wrapped store's server when it has one (Redis), so that
// readiness sees a Redis outage with a database set too.
func (s lockedSessions) Ping(ctx context.Context) error {
	if p, ok := s.Store.(interface{ Ping(context.Context) error }); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (s lockedSessions) Append(ctx context.Context, key session.Key, nodes ...session.Node) error {
	if h, ok := ctx.Value(heldLockKey{}).(*heldLock); ok {
		if err := h.check(ctx); err != nil {
			return fmt.Errorf("%w: %v", ErrLockLost, err)
		}
	}
	return s.Store.Append(ctx, key, nodes...)
}
