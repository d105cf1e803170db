package assistant

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/testenv"
)

// A turn whose session lock is lost mid-turn (its connection terminated,
// as after a freeze past a failover) stores nothing: another instance may
// have run a turn of the session meanwhile.
func TestTurnThatLostItsLockWritesNothing(t *testing.T) {
	url := testenv.PostgresSchema(t)
	t.Setenv("TENDRIL_DATABASE_URL", url)
	fake := modeltest.NewOpenAI(t)
	a := openTestApp(t, fake)
	ctx := context.Background()
	// The model answers late enough that the kill below lands first even
	// on a loaded CI machine.
	fake.Push(modeltest.Reply{Text: "slow answer", Delay: 4 * time.Second})
	done := make(chan error, 1)
	go func() {
		_, err := a.Invoke(ctx, agent.Request{Message: "hello", ActorID: "api:lost", Channel: "api", SessionID: "s"})
		done <- err
	}()
	// Wait until the turn holds its lock, then end the lock's connection.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Only this turn's lock: other test binaries share the server and
	// hold session locks of their own.
	objid := int64(uint32(lockKey("api\x00" + agent.SessionOwner("api:lost", "api") + agent.SessionSep + "s")))
	actorID := int64(uint32(lockKey("api:lost")))
	var killed int
	for deadline := time.Now().Add(10 * time.Second); killed == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the turn never took its session lock")
		}
		// Kill only once the turn holds both its locks (session, then
		// actor, on one connection): a kill between the two makes the
		// turn retry on a fresh connection, and it then rightly answers.
		rows, err := conn.Query(ctx, `SELECT s.pid, pg_terminate_backend(s.pid) FROM pg_locks s
			JOIN pg_locks a ON a.pid = s.pid AND a.locktype = 'advisory' AND a.classid = $3 AND a.objid::bigint = $4 AND a.granted
			WHERE s.locktype = 'advisory' AND s.classid = $1 AND s.objid::bigint = $2 AND s.granted`,
			lockClassSession, objid, lockClassActor, actorID)
		if err != nil {
			t.Fatal(err)
		}
		var pids []int32
		for rows.Next() {
			var pid int32
			var ok bool
			if err := rows.Scan(&pid, &ok); err != nil {
				t.Fatal(err)
			}
			pids = append(pids, pid)
			killed++
		}
		rows.Close()
		// pg_terminate_backend only signals: wait until the backend is gone.
		for _, pid := range pids {
			for gone := false; !gone; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("backend %d still there after pg_terminate_backend", pid)
				}
				var n int
				if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n); err != nil {
					t.Fatal(err)
				}
				gone = n == 0
			}
		}
	}
	err = <-done
	if !errors.Is(err, ErrLockLost) || !errors.Is(err, ErrNotReady) {
		t.Fatalf("turn after losing its lock: %v, want ErrLockLost, which is NOT_READY (503)", err)
	}
	key, err := a.ParseSessionKey("", "api:lost~s")
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := a.sessions.Nodes(ctx, key)
	if err != nil || len(nodes) != 0 {
		t.Fatalf("the turn wrote %d nodes (%v)", len(nodes), err)
	}
	// The next turn takes a fresh lock and answers.
	fake.Push(modeltest.Reply{Text: "fine"})
	res, err := a.Invoke(ctx, agent.Request{Message: "again", ActorID: "api:lost", Channel: "api", SessionID: "s"})
	if err != nil || res.Text != "fine" {
		t.Fatalf("next turn: %+v %v", res, err)
	}
}
