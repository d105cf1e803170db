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

// A message that waits for another instance's turn of its session (the
// session's database lock, not this process's queue) and meanwhile sees
// its actor forgotten is not run afterwards: ACTOR_FORGOTTEN, as on one
// instance (TestForgetDropsQueuedMessage). Before, it read the forget
// epoch only when it waited in this process, so it ran and wrote the
// actor back.
func TestForgetDropsMessageQueuedOnAnotherInstance(t *testing.T) {
	url := testenv.PostgresSchema(t)
	t.Setenv("TENDRIL_DATABASE_URL", url)
	fake := modeltest.NewOpenAI(t)
	cfg := testConfig(t, fake, nil)
	// a and b serve; c forgets, as the CLI does beside them.
	a, b, c := openConfig(t, cfg, true), openConfig(t, cfg, true), openConfig(t, cfg, false)
	ctx := context.Background()

	hold := make(chan struct{})
	fake.Push(modeltest.Reply{Text: "slow answer", Hold: hold})
	first := make(chan error, 1)
	go func() {
		_, err := a.Invoke(ctx, agent.Request{Message: "I grow figs", ActorID: "api:jay", Channel: "api", SessionID: "s"})
		first <- err
	}()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	sessionKey := int64(uint32(lockKey("api\x00" + agent.SessionOwner("api:jay", "api") + agent.SessionSep + "s")))
	actorKey := int64(uint32(lockKey("api:jay")))
	waiters := func(objid int64) int {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype='advisory' AND NOT granted AND objid=$1`, objid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	holders := func(objid int64) int {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype='advisory' AND granted AND objid=$1`, objid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) { // a hang guard, not a timing assertion
				t.Fatalf("never: %s", what)
			}
		}
	}
	waitUntil("the first turn holds its session lock", func() bool { return holders(sessionKey) > 0 })

	queued := make(chan error, 1)
	go func() {
		_, err := b.Invoke(ctx, agent.Request{Message: "my locker code is 4711", ActorID: "api:jay", Channel: "api", SessionID: "s"})
		queued <- err
	}()
	waitUntil("the second message waits for the session lock", func() bool { return waiters(sessionKey) > 0 })
	forgot := make(chan error, 1)
	go func() {
		_, err := c.Forget(ctx, ForgetRequest{ActorID: "api:jay", Sessions: true})
		forgot <- err
	}()
	waitUntil("the forget waits for the actor's lock", func() bool { return waiters(actorKey) > 0 })
	close(hold)

	for _, w := range []struct {
		name string
		ch   chan error
		want func(error) bool
	}{
		{"first turn", first, func(err error) bool { return err == nil }},
		{"forget", forgot, func(err error) bool { return err == nil }},
		{"queued message", queued, func(err error) bool {
			return errors.Is(err, agent.ErrActorForgotten) && agent.ErrorCode(err) == "ACTOR_FORGOTTEN"
		}},
	} {
		select {
		case err := <-w.ch:
			if !w.want(err) {
				t.Fatalf("%s: %v", w.name, err)
			}
		case <-time.After(time.Minute): // a hang guard
			t.Fatalf("%s never returned", w.name)
		}
	}
	assertStaysForgotten(t, a, "api:jay", fake, "4711")
}
