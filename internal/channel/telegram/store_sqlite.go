package telegram

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tendrilai/tendril/internal/sqlitewal"
)

const sqliteSchema = `
CREATE TABLE IF NOT EXISTS telegram_updates (
	update_id   INTEGER PRIMARY KEY,
	chat_id     INTEGER NOT NULL,
	kind        TEXT NOT NULL,
	media_group TEXT NOT NULL DEFAULT '',
	body        BLOB NOT NULL,
	received_ms INTEGER NOT NULL,
	state       TEXT NOT NULL,
	note        TEXT NOT NULL DEFAULT '',
	done_ms     INTEGER NOT NULL DEFAULT 0,
	result      BLOB -- turn result saved before the reply is sent; see saveResult
);
CREATE INDEX IF NOT EXISTS telegram_updates_pending ON telegram_updates(chat_id, update_id) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS telegram_updates_received ON telegram_updates(received_ms);
CREATE TABLE IF NOT EXISTS telegram_pairing (
	code       TEXT PRIMARY KEY,
	chat_id    INTEGER NOT NULL,
	user_id    INTEGER NOT NULL,
	name       TEXT NOT NULL,
	created_ms INTEGER NOT NULL,
	expires_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS telegram_allowed (
	chat_id  INTEGER PRIMARY KEY,
	name     TEXT NOT NULL DEFAULT '',
	via      TEXT NOT NULL DEFAULT '',
	added_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS telegram_sessions (
	key        TEXT PRIMARY KEY, -- "<chat id>" for a DM, "<chat id>:<user id>" in a group
	session_id TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS telegram_approval_messages (
	request_id TEXT PRIMARY KEY,
	chat_id    INTEGER NOT NULL,
	message_id INTEGER NOT NULL,
	actor_id   TEXT NOT NULL,
	decided    INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS telegram_forget_requests (
	nonce      TEXT PRIMARY KEY,
	chat_id    INTEGER NOT NULL,
	actor_id   TEXT NOT NULL,
	expires_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS telegram_chat_leases (
	chat_id    INTEGER PRIMARY KEY,
	owner      TEXT NOT NULL,
	expires_ms INTEGER NOT NULL
);
`

// legacyTables are the table names of stores written before the tables
// took the telegram_ prefix shared with PostgreSQL; OpenStore renames them.
var legacyTables = []string{"updates", "pairing", "allowed", "sessions", "approval_messages", "forget_requests"}

// sqliteOwner is the lease owner of every SQLite store: a home is served
// by one process, so a restarted server takes over the chats its killed
// predecessor held at once instead of waiting for their leases to expire.
const sqliteOwner = "sqlite"

// OpenStore opens (creating if needed) the SQLite store in dir (WAL,
// synchronous=FULL, so a committed update survives power loss). The server
// and the CLI may open it at once. A store written by an older version,
// with unprefixed table names, is upgraded in place.
func OpenStore(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("telegram store: empty directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("telegram store: %w", err)
	}
	path := filepath.Join(dir, StoreFile)
	dsn := sqlitewal.FileURI(path) + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("telegram store %s: %w", path, err)
	}
	// One connection: writes are serialised in-process; other processes
	// wait on busy_timeout.
	db.SetMaxOpenConns(1)
	if err := migrateSQLite(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("telegram store %s: schema: %w", path, err)
	}
	return &Store{db: sqlDB{DB: db, d: sqliteDialect}, owner: sqliteOwner}, nil
}

// migrateSQLite renames legacy tables and creates missing ones, in one
// immediate transaction so a concurrent CLI sees either schema whole.
func migrateSQLite(db *sql.DB) error {
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	exists := func(name string) (bool, error) {
		var n int
		err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, name).Scan(&n)
		return n > 0, err
	}
	for _, old := range legacyTables {
		had, err := exists(old)
		if err != nil {
			return err
		}
		has, err := exists("telegram_" + old)
		if err != nil {
			return err
		}
		if had && !has {
			if _, err := tx.ExecContext(ctx, `ALTER TABLE "`+old+`" RENAME TO "telegram_`+old+`"`); err != nil {
				return fmt.Errorf("rename %s: %w", old, err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `DROP INDEX IF EXISTS updates_pending; DROP INDEX IF EXISTS updates_received;`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, sqliteSchema); err != nil {
		return err
	}
	var hasResult int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('telegram_updates') WHERE name = 'result'`).Scan(&hasResult); err != nil {
		return err
	}
	if hasResult == 0 { // a store written before turn results were saved
		if _, err := tx.ExecContext(ctx, `ALTER TABLE telegram_updates ADD COLUMN result BLOB`); err != nil {
			return fmt.Errorf("add telegram_updates.result: %w", err)
		}
	}
	return tx.Commit()
}
