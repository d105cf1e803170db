-- The approval gate's hash-chained ledger (SPEC §6.3, §9). One row per
-- ledger entry; line is the entry's RFC 8785 canonical JSON exactly as
-- hashed (without a trailing newline) and is the only column verification
-- trusts: seq, type, request_id and hash are copies for operators and for
-- the indexes below. Rows are appended under a transaction-scoped advisory
-- lock, so seq order is chain order across every instance.
CREATE TABLE approval_ledger (
	seq        BIGINT PRIMARY KEY CHECK (seq > 0),
	type       TEXT NOT NULL,
	request_id TEXT,
	hash       TEXT NOT NULL CHECK (hash ~ '^[0-9a-f]{64}$'),
	line       TEXT NOT NULL,
	created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Exactly once, enforced by the database as well as by the gate: one
-- decision and one execution per approval request.
CREATE UNIQUE INDEX approval_ledger_one_decision ON approval_ledger (request_id) WHERE type = 'decision';
CREATE UNIQUE INDEX approval_ledger_one_execute ON approval_ledger (request_id) WHERE type = 'execute' AND request_id IS NOT NULL;

-- Ledgers moved aside by an operator reset of a broken chain; nothing is
-- ever deleted.
CREATE TABLE approval_ledger_archive (
	archive     TEXT NOT NULL,
	seq         BIGINT NOT NULL,
	type        TEXT NOT NULL,
	request_id  TEXT,
	hash        TEXT NOT NULL,
	line        TEXT NOT NULL,
	created_at  TIMESTAMPTZ NOT NULL,
	archived_at TIMESTAMPTZ NOT NULL DEFAULT now(),
	PRIMARY KEY (archive, seq)
);

-- Paused turns, content-addressed: ref is the lower-case hex SHA-256 of
-- payload, which is kept byte for byte (BYTEA, not JSONB). They live
-- beside the ledger, never in it, so forgetting an actor can delete them.
CREATE TABLE approval_resume (
	ref        TEXT PRIMARY KEY CHECK (ref ~ '^[0-9a-f]{64}$'),
	payload    BYTEA NOT NULL,
	created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
