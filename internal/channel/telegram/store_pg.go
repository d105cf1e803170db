package telegram

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tendrilai/tendril/internal/pg"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrations returns the PostgreSQL schema of the store: tables
// telegram_updates, telegram_pairing, telegram_allowed, telegram_sessions,
// telegram_approval_messages, telegram_forget_requests and
// telegram_chat_leases, as scripts named "telegram/NNN_name.sql".
func Migrations() []pg.Migration { return pg.FromFS("telegram", migrationFS, "migrations") }

// OpenPostgresStore applies Migrations to pool (see pg.Migrate) and returns
// a store on it. Every instance opened on one database shares all rows:
// update_id de-duplication, chat leases (one instance processes a chat at
// a time), pairing and the chat→session map. New pending updates are
// announced with NOTIFY on the channel "telegram_updates". Close leaves
// pool open; it belongs to the caller.
func OpenPostgresStore(ctx context.Context, pool *pgxpool.Pool) (*Store, error) {
	if pool == nil {
		return nil, errors.New("telegram store: nil pool")
	}
	if _, err := pg.Migrate(ctx, pool, Migrations()); err != nil {
		return nil, fmt.Errorf("telegram store: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	return &Store{db: sqlDB{DB: db, d: postgresDialect}, pool: pool, owner: newOwner(), locks: newChatLocks(pool)}, nil
}

// listen holds a dedicated connection LISTENing on notifyChannel and calls
// wake for every announced update inserted by another store. ready runs
// once the connection listens (after a reconnect, to catch up on what was
// announced meanwhile). It returns when ctx ends or the connection fails.
func (s *Store) listen(ctx context.Context, ready func(), wake func(chatID int64)) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("telegram listen: %w", err)
	}
	// Hijacked: the connection leaves the pool for good, so a LISTEN never
	// leaks into a pooled connection, and it is closed on return.
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN `+notifyChannel); err != nil {
		return fmt.Errorf("telegram listen: %w", err)
	}
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("telegram listen: %w", err)
		}
		chatID, owner, ok := parseNotifyPayload(n.Payload)
		if ok && owner != s.owner {
			wake(chatID)
		}
	}
}
