-- Sessions (SPEC §3) in PostgreSQL: pgstore.
--
-- session_key is the SHA-256 of the length-prefixed agent, channel and
-- session ID (pgstore.keyDigest): the IDs themselves may hold NUL and be up
-- to 64 KiB, which neither TEXT nor a btree index entry accepts, so they
-- are kept as BYTEA beside the digest. Node IDs are BYTEA for the same
-- reason (NUL is valid UTF-8). The node itself is session.Node's JSON, the
-- same bytes as a JSONL line; it is JSON, not JSONB, because JSONB refuses
-- \u0000 inside strings. (JSON operators such as ->> also fail on such a
-- row; role and ts are columns for queries.)

-- One row per non-empty session: its key and active leaf. Append moves the
-- leaf by compare-and-set on this row, SetLeaf moves it too; both add 1 to
-- version. nodes counts the session's nodes and is the last seq.
CREATE TABLE session_leaves (
    session_key BYTEA       PRIMARY KEY,
    agent       BYTEA       NOT NULL,
    channel     BYTEA       NOT NULL,
    session_id  BYTEA       NOT NULL,
    leaf_id     BYTEA       NOT NULL,
    version     BIGINT      NOT NULL,
    nodes       BIGINT      NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- List(agent) without a scan of every session.
CREATE INDEX session_leaves_agent ON session_leaves (sha256(agent));

-- Every node, never updated. seq is the 1-based append order within the
-- session; (session_key, node_id) serves Path's walk up parent_id.
CREATE TABLE session_nodes (
    session_key BYTEA       NOT NULL REFERENCES session_leaves ON DELETE CASCADE,
    seq         BIGINT      NOT NULL,
    node_id     BYTEA       NOT NULL,
    parent_id   BYTEA,
    role        TEXT        NOT NULL,
    ts          BIGINT      NOT NULL,
    node        JSON        NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (session_key, seq),
    UNIQUE (session_key, node_id)
);
