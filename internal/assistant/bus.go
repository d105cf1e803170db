package assistant

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// deliveryBus carries deliveries (replies of turns resumed after an
// approval, scheduled runs on channels that cannot push) between the
// instances that share a PostgreSQL database, so that a listener on one
// instance (an SSE /deliveries stream, a CLI chat, the dashboard) hears a
// reply produced on another: without it, which replies a listener sees
// depends on which instance happened to resume the turn.
//
// Each delivery is a row of tendril_deliveries keyed by a random 128-bit
// key, announced with NOTIFY tendril_deliveries carrying the key
// (https://www.postgresql.org/docs/current/sql-notify.html: a payload is
// at most 8,000 bytes, a reply may be longer). Every instance LISTENs,
// reads the row by key and hands it to its hub, except its own (its hub
// had it at once). A random key, not a serial, so that another deployment
// on the same database in another schema, which hears the same channel,
// finds no row of its own by it. Rows older than deliveryKeep are pruned
// (every deliveryPruneEvery, by a publishing or listening process), and
// Forget deletes an actor's.
// Delivery stays best effort, as the hub is: one published while an
// instance's listening connection is down is not replayed to it; the reply
// is in the session either way.
type deliveryBus struct {
	pool   *pgxpool.Pool
	hub    *hub
	log    *slog.Logger
	origin string // this process's key: its own rows are skipped

	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// pruned is when this process last pruned (unix nanoseconds).
	pruned atomic.Int64
}

const (
	deliveryChannel = "tendril_deliveries"
	deliveryKeep    = 10 * time.Minute
	// deliveryPruneEvery is how often a process prunes: on a publish
	// after this long, and from its listener while it listens.
	deliveryPruneEvery = time.Minute
)

// newDeliveryBus creates the table when missing. The listener starts with
// the first subscriber (listen).
func newDeliveryBus(ctx context.Context, pool *pgxpool.Pool, h *hub, log *slog.Logger) (*deliveryBus, error) {
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS tendril_deliveries (
		key        TEXT PRIMARY KEY,
		origin     TEXT NOT NULL,
		payload    JSONB NOT NULL,
		created_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("deliveries: create table: %w", err)
	}
	b := &deliveryBus{pool: pool, hub: h, log: log, origin: randomKey(), done: make(chan struct{})}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b, nil
}

func randomKey() string {
	var k [16]byte
	rand.Read(k[:])
	return hex.EncodeToString(k[:])
}

// publish stores d and announces it to the other instances.
func (b *deliveryBus) publish(ctx context.Context, d Delivery) error {
	payload, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if _, err := b.pool.Exec(ctx, `WITH ins AS (
		INSERT INTO tendril_deliveries (key, origin, payload) VALUES ($1, $2, $3) RETURNING key)
		SELECT pg_notify('`+deliveryChannel+`', key) FROM ins`, randomKey(), b.origin, payload); err != nil {
		return fmt.Errorf("deliveries: publish: %w", err)
	}
	b.pruneDue(ctx)
	return nil
}

// pruneDue deletes the rows older than deliveryKeep when this process
// has not for deliveryPruneEvery.
func (b *deliveryBus) pruneDue(ctx context.Context) {
	last := b.pruned.Load()
	now := time.Now().UnixNano()
	if now-last < int64(deliveryPruneEvery) || !b.pruned.CompareAndSwap(last, now) {
		return
	}
	if _, err := b.pool.Exec(ctx, `DELETE FROM tendril_deliveries WHERE created_at < now() - make_interval(secs => $1)`,
		deliveryKeep.Seconds()); err != nil {
		b.log.Warn("deliveries: prune failed", "err", err)
	}
}

// forget deletes every delivery of actorID (Forget).
func (b *deliveryBus) forget(ctx context.Context, actorID string) error {
	if _, err := b.pool.Exec(ctx, `DELETE FROM tendril_deliveries WHERE payload->>'actor_id' = $1`, actorID); err != nil {
		return fmt.Errorf("deliveries: forget: %w", err)
	}
	return nil
}

// listen starts the listener once; ready (nil: none) is called each time
// it is LISTENing, for tests.
func (b *deliveryBus) listen(ready func()) {
	b.once.Do(func() { go b.run(ready) })
}

// stop ends the listener and waits for it.
func (b *deliveryBus) stop() {
	b.cancel()
	started := true
	b.once.Do(func() { started = false })
	if started {
		<-b.done
	}
}

// run LISTENs until stop, reconnecting after a lost connection.
func (b *deliveryBus) run(ready func()) {
	defer close(b.done)
	for {
		err := b.listenOnce(ready)
		if b.ctx.Err() != nil {
			return
		}
		b.log.Warn("deliveries: listener lost its connection; reconnecting", "err", err)
		select {
		case <-b.ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (b *deliveryBus) listenOnce(ready func()) error {
	c, err := b.pool.Acquire(b.ctx)
	if err != nil {
		return err
	}
	// Hijacked: a LISTENing connection never goes back to the pool.
	conn := c.Hijack()
	defer conn.Close(context.Background())
	if _, err := conn.Exec(b.ctx, "LISTEN "+deliveryChannel); err != nil {
		return err
	}
	if ready != nil {
		ready()
	}
	for {
		// Woken at least every deliveryPruneEvery to prune, so that rows
		// of a deployment that stopped publishing do not stay.
		wctx, cancel := context.WithTimeout(b.ctx, deliveryPruneEvery)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			if b.ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				b.pruneDue(b.ctx)
				continue
			}
			return err
		}
		b.receive(n.Payload)
	}
}

// receive hands the delivery stored under key to the hub, unless this
// process published it or the row is not this deployment's.
func (b *deliveryBus) receive(key string) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	var origin string
	var payload []byte
	err := b.pool.QueryRow(ctx, `SELECT origin, payload FROM tendril_deliveries WHERE key = $1`, key).Scan(&origin, &payload)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && origin == b.origin {
		return
	}
	if err != nil {
		b.log.Warn("deliveries: read failed", "err", err)
		return
	}
	var d Delivery
	if err := json.Unmarshal(payload, &d); err != nil {
		b.log.Warn("deliveries: unreadable row", "key", key, "err", err)
		return
	}
	b.hub.publish(d)
}
