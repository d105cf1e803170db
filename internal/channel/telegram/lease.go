package telegram

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// A chat lease (table telegram_chat_leases on SQLite, an advisory lock on
// PostgreSQL: see lease_pg.go) is how several instances on one
// database process each chat's updates one at a time, in update_id order:
// a worker processes a chat only while it holds the chat's lease, renews it
// while it works, and releases it when the chat has nothing left. A lease
// whose holder died (kill -9, a lost host) expires after its TTL by the
// database clock, and then any instance may take the chat; the updates it
// left pending are still in telegram_updates, so none is lost.
//
// The lease is independent of who runs the worker: a per-chat goroutine
// today, a job queue worker (River) that calls Channel.ProcessChat tomorrow.

// newOwner names this process's leases: host, pid and a random suffix, so
// two stores in one process (tests) are distinct owners too.
func newOwner() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// claimChat takes chatID's lease for ttl, or extends it when this store
// already holds it. claimed is false when another owner holds an unexpired
// lease. On SQLite the insert-or-update is one statement, so of several
// claiming at once exactly one wins; on PostgreSQL it is
// pg_try_advisory_lock on the store's lock connection, which holds the
// chat until releaseChat or until that connection ends (ttl only sets its
// keepalives, see keepaliveSQL).
func (s *Store) claimChat(ctx context.Context, chatID int64, ttl time.Duration) (claimed bool, err error) {
	if s.locks != nil {
		ok, err := s.locks.claim(ctx, chatID, ttl)
		if err != nil {
			return false, fmt.Errorf("claim chat %d: %w", chatID, err)
		}
		return ok, nil
	}
	now := s.db.d.nowMS
	res, err := s.db.ExecContext(ctx, `INSERT INTO telegram_chat_leases(chat_id, owner, expires_ms) VALUES(?, ?, `+now+` + ?)
		ON CONFLICT(chat_id) DO UPDATE SET owner = excluded.owner, expires_ms = excluded.expires_ms
		WHERE telegram_chat_leases.owner = excluded.owner OR telegram_chat_leases.expires_ms <= `+now,
		chatID, s.owner, ttl.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("claim chat %d: %w", chatID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("claim chat %d: %w", chatID, err)
	}
	return n == 1, nil
}

// renewChat extends this store's lease of chatID by ttl from now. held is
// false when the lease is gone or another owner took it after it expired.
// On PostgreSQL it checks that the lock connection is alive and holds the
// chat (a lock does not expire).
func (s *Store) renewChat(ctx context.Context, chatID int64, ttl time.Duration) (held bool, err error) {
	if s.locks != nil {
		return s.locks.renew(ctx, chatID)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE telegram_chat_leases SET expires_ms = `+s.db.d.nowMS+` + ? WHERE chat_id = ? AND owner = ?`,
		ttl.Milliseconds(), chatID, s.owner)
	if err != nil {
		return false, fmt.Errorf("renew chat %d: %w", chatID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("renew chat %d: %w", chatID, err)
	}
	return n == 1, nil
}

// releaseChat gives up this store's lease of chatID (no-op when not held).
func (s *Store) releaseChat(ctx context.Context, chatID int64) error {
	if s.locks != nil {
		if err := s.locks.release(ctx, chatID); err != nil {
			return fmt.Errorf("release chat %d: %w", chatID, err)
		}
		return nil
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM telegram_chat_leases WHERE chat_id = ? AND owner = ?`, chatID, s.owner); err != nil {
		return fmt.Errorf("release chat %d: %w", chatID, err)
	}
	return nil
}

// claimableChats lists chats with pending updates whose lease is free,
// expired or this store's own: the work of a dead instance, of a lost
// notification, or left by this store's predecessor (SQLite).
func (s *Store) claimableChats(ctx context.Context) ([]int64, error) {
	q, args := `SELECT DISTINCT u.chat_id FROM telegram_updates u
		LEFT JOIN telegram_chat_leases l ON l.chat_id = u.chat_id
		WHERE u.state = 'pending' AND (l.chat_id IS NULL OR l.owner = ? OR l.expires_ms <= `+s.db.d.nowMS+`)`, []any{s.owner}
	if s.locks != nil {
		// pg_locks shows a bigint advisory key as classid (high 32 bits)
		// and objid (low 32 bits), with objsubid 1.
		q, args = `SELECT DISTINCT u.chat_id FROM telegram_updates u
		WHERE u.state = 'pending' AND NOT EXISTS (SELECT 1 FROM pg_locks l
			WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
			AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND CAST(l.classid AS BIGINT) = (CAST(? AS BIGINT) + u.chat_id) >> 32
			AND CAST(l.objid AS BIGINT) = (CAST(? AS BIGINT) + u.chat_id) & 4294967295
			AND l.pid <> ?)`, []any{chatLockBase, chatLockBase, int64(s.locks.ownPID())}
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("claimable chats: %w", err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("claimable chats: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// hasPending reports whether chatID has a pending update.
func (s *Store) hasPending(ctx context.Context, chatID int64) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM telegram_updates WHERE chat_id = ? AND state = 'pending' LIMIT 1) p`, chatID).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("pending updates of chat %d: %w", chatID, err)
	}
	return n > 0, nil
}

// notifyChannel is the PostgreSQL NOTIFY channel announcing new pending
// updates; the payload is notifyPayload.
const notifyChannel = "telegram_updates"

// notifyPayload is "<chat id> <owner>": the chat to wake, and who inserted
// the update (that instance has already woken its own worker).
func notifyPayload(chatID int64, owner string) string {
	return strconv.FormatInt(chatID, 10) + " " + owner
}

func parseNotifyPayload(p string) (chatID int64, owner string, ok bool) {
	id, owner, _ := strings.Cut(p, " ")
	chatID, err := strconv.ParseInt(id, 10, 64)
	return chatID, owner, err == nil
}
