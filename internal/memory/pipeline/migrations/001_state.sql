-- The memory pipeline's state beside River's job table (SPEC §4.3): turn
-- counters, extraction cursors and job generations per session, harvest
-- cursors, forget epochs and rejection hashes. Times are Unix milliseconds
-- (last_turn_at, created_at) or nanoseconds (cursor_ts).
CREATE TABLE IF NOT EXISTS memory_pipeline_sessions (
	agent_id      TEXT NOT NULL,
	actor_id      TEXT NOT NULL,
	session_id    TEXT NOT NULL,
	pending_turns INTEGER NOT NULL DEFAULT 0,
	last_turn_at  BIGINT NOT NULL DEFAULT 0,
	idle_done     INTEGER NOT NULL DEFAULT 0,
	cursor_id     TEXT NOT NULL DEFAULT '',
	cursor_ts     BIGINT NOT NULL DEFAULT 0,
	gen           BIGINT NOT NULL DEFAULT 0,
	idle_gen      BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (agent_id, actor_id, session_id)
);
CREATE INDEX IF NOT EXISTS memory_pipeline_sessions_actor ON memory_pipeline_sessions (actor_id);
CREATE TABLE IF NOT EXISTS memory_pipeline_harvest (
	agent_id  TEXT NOT NULL,
	actor_id  TEXT NOT NULL,
	cursor_ts BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (agent_id, actor_id)
);
CREATE TABLE IF NOT EXISTS memory_pipeline_forgotten (
	actor_id TEXT PRIMARY KEY,
	epoch    BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS memory_pipeline_rejections (
	actor_id   TEXT NOT NULL,
	hash       TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (actor_id, hash)
);
