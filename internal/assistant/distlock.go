package assistant

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5/pgxpool"
)

// turnLocks extends the in-process session queue and actor locks across
// instances sharing one database (SPEC §9: "a chat's turns are
// serialised across instances"). With no database it is a no-op: one
// process owns the home and the in-process locks suffice.
type turnLocks interface {
	// turn holds the session's exclusive lock and the actor's shared lock
	// until release.
	turn(ctx context.Context, session, actor string) (release func(), err error)
	// forget holds the actor's exclusive lock until release: no instance
	// runs a turn of the actor meanwhile.
	forget(ctx context.Context, actor string) (release func(), err error)
}

type localLocks struct{}

func (localLocks) turn(context.Context, string, string) (func(), error) { return func() {}, nil }
func (localLocks) forget(context.Context, string) (func(), error)       { return func() {}, nil }

// Advisory lock classes (the first key of pg_advisory_lock(int, int)).
const (
	lockClassSession = 0x7473 // "ts"
	lockClassActor   = 0x7461 // "ta"
)

// pgLocks takes PostgreSQL session-level advisory locks, each on a
// connection held for the lock's lifetime. A dead instance's connection
// closes and the server releases its locks, so a kill -9 never strands a
// chat. Waiters queue in the server's lock queue; ctx cancels the wait.
type pgLocks struct{ pool *pgxpool.Pool }

func (l pgLocks) acquire(ctx context.Context, sqls []string, args [][]any) (func(), error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("turn lock: %w", err)
	}
	n := 0
	unlock := func() {
		// Unlock on a fresh context: the turn's may be done.
		ctx := context.Background()
		for i := n - 1; i >= 0; i-- {
			if _, err := conn.Exec(ctx, "SELECT "+unlockOf[sqls[i]], args[i]...); err != nil {
				// The connection is unusable: closing it releases every lock.
				conn.Hijack().Close(ctx)
				return
			}
		}
		conn.Release()
	}
	for i, q := range sqls {
		if _, err := conn.Exec(ctx, "SELECT "+q, args[i]...); err != nil {
			unlock()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("turn lock: %w", err)
		}
		n++
	}
	return unlock, nil
}

const (
	lockX = "pg_advisory_lock($1::int, $2::int)"
	lockS = "pg_advisory_lock_shared($1::int, $2::int)"
)

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

func (l pgLocks) turn(ctx context.Context, session, actor string) (func(), error) {
	// Session first, then actor, in every caller: no lock-order cycle.
	return l.acquire(ctx, []string{lockX, lockS},
		[][]any{{lockClassSession, lockKey(session)}, {lockClassActor, lockKey(actor)}})
}

func (l pgLocks) forget(ctx context.Context, actor string) (func(), error) {
	return l.acquire(ctx, []string{lockX}, [][]any{{lockClassActor, lockKey(actor)}})
}
