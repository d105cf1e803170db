-- Telegram channel state shared by every instance (SPEC §7.1, §9).

-- Accepted webhook updates. The primary key is the update_id
-- de-duplication: of two instances receiving one update, one insert wins.
CREATE TABLE telegram_updates (
	update_id   BIGINT PRIMARY KEY,
	chat_id     BIGINT NOT NULL,
	kind        TEXT NOT NULL,
	media_group TEXT NOT NULL DEFAULT '',
	body        BYTEA NOT NULL,
	received_ms BIGINT NOT NULL,        -- ms since the Unix epoch
	state       TEXT NOT NULL,          -- pending | done | ignored | failed
	note        TEXT NOT NULL DEFAULT '',
	done_ms     BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX telegram_updates_pending ON telegram_updates (chat_id, update_id) WHERE state = 'pending';
CREATE INDEX telegram_updates_received ON telegram_updates (received_ms);

-- Pending pairing codes of unknown senders.
CREATE TABLE telegram_pairing (
	code       TEXT PRIMARY KEY,
	chat_id    BIGINT NOT NULL,
	user_id    BIGINT NOT NULL,
	name       TEXT NOT NULL,
	created_ms BIGINT NOT NULL,
	expires_ms BIGINT NOT NULL
);

-- Chats let in by pairing.
CREATE TABLE telegram_allowed (
	chat_id  BIGINT PRIMARY KEY,
	name     TEXT NOT NULL DEFAULT '',
	via      TEXT NOT NULL DEFAULT '',
	added_ms BIGINT NOT NULL
);

-- The chat→session map: "<chat id>" for a DM, "<chat id>:<user id>" in a group.
CREATE TABLE telegram_sessions (
	key        TEXT PRIMARY KEY,
	session_id TEXT NOT NULL
);

-- Approval prompts sent with Approve/Deny buttons.
CREATE TABLE telegram_approval_messages (
	request_id TEXT PRIMARY KEY,
	chat_id    BIGINT NOT NULL,
	message_id BIGINT NOT NULL,
	actor_id   TEXT NOT NULL,
	decided    INTEGER NOT NULL DEFAULT 0
);

-- Pending /forget confirmations.
CREATE TABLE telegram_forget_requests (
	nonce      TEXT PRIMARY KEY,
	chat_id    BIGINT NOT NULL,
	actor_id   TEXT NOT NULL,
	expires_ms BIGINT NOT NULL
);
CREATE INDEX telegram_forget_requests_actor ON telegram_forget_requests (actor_id);

-- Per-chat processing leases: the instance named by owner processes the
-- chat until expires_ms (database clock, ms since the Unix epoch).
CREATE TABLE telegram_chat_leases (
	chat_id    BIGINT PRIMARY KEY,
	owner      TEXT NOT NULL,
	expires_ms BIGINT NOT NULL
);
