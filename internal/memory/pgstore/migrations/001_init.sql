-- Memory store (SPEC §4, §9): the rows are the source of truth.
--
-- Every write of an actor takes the next value of memory_version_seq as
-- the actor's version (memory_actors.version, bumped in the same
-- transaction, whose row lock serialises the actor's writers) and stamps
-- the rows it writes with it, so another instance can catch up by reading
-- only the rows with a newer version. A deletion (event expiry) also sets
-- reset_version: a cache older than that reloads the actor.
CREATE SEQUENCE memory_version_seq;

CREATE TABLE memory_actors (
    actor         TEXT PRIMARY KEY,
    version       BIGINT NOT NULL,
    reset_version BIGINT NOT NULL
);

CREATE TABLE memory_records (
    id            TEXT PRIMARY KEY,
    actor         TEXT NOT NULL,
    namespace     TEXT NOT NULL,
    strategy      TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('active', 'superseded', 'staged', 'rejected')),
    content       TEXT NOT NULL,
    metadata      JSONB,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    sources       TEXT[] NOT NULL DEFAULT '{}',
    importance    DOUBLE PRECISION NOT NULL DEFAULT 0,
    superseded_by TEXT GENERATED ALWAYS AS (metadata ->> 'supersededBy') STORED,
    version       BIGINT NOT NULL,
    tsv           TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED
);
CREATE INDEX memory_records_actor_version ON memory_records (actor, version);
CREATE INDEX memory_records_namespace ON memory_records (namespace text_pattern_ops);
CREATE INDEX memory_records_staged ON memory_records (actor, created_at) WHERE status = 'staged';
CREATE INDEX memory_records_tsv ON memory_records USING GIN (tsv);

CREATE TABLE memory_events (
    id       TEXT PRIMARY KEY,
    actor    TEXT NOT NULL,
    session  TEXT NOT NULL,
    role     TEXT NOT NULL,
    text     TEXT NOT NULL,
    ts       TIMESTAMPTZ NOT NULL,
    metadata JSONB,
    version  BIGINT NOT NULL,
    tsv      TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED
);
CREATE INDEX memory_events_actor_version ON memory_events (actor, version);
CREATE INDEX memory_events_actor_session ON memory_events (actor, session, ts);
CREATE INDEX memory_events_ts ON memory_events (ts);
CREATE INDEX memory_events_tsv ON memory_events USING GIN (tsv);

CREATE TABLE memory_rejections (
    actor TEXT NOT NULL,
    hash  TEXT NOT NULL,
    PRIMARY KEY (actor, hash)
);

-- Embeddings of records and events (pgvector is optional and not used:
-- vectors are scored per actor in the process).
CREATE TABLE memory_vectors (
    id      TEXT PRIMARY KEY,
    actor   TEXT NOT NULL,
    vec     REAL[] NOT NULL,
    version BIGINT NOT NULL
);
CREATE INDEX memory_vectors_actor_version ON memory_vectors (actor, version);
