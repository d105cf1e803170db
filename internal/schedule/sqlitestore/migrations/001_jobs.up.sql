-- Times are unix milliseconds UTC; 0 means unset.
CREATE TABLE jobs (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL DEFAULT '',
    kind        TEXT NOT NULL,
    spec        TEXT NOT NULL,
    tz          TEXT NOT NULL DEFAULT '',
    task        TEXT NOT NULL,
    actor_id    TEXT NOT NULL,
    channel     TEXT NOT NULL DEFAULT '',
    chat_id     TEXT NOT NULL DEFAULT '',
    session_id  TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    next_run    INTEGER NOT NULL,
    last_run    INTEGER NOT NULL DEFAULT 0,
    attempts    INTEGER NOT NULL DEFAULT 0,
    status      TEXT NOT NULL,
    source      TEXT NOT NULL,
    last_error  TEXT NOT NULL DEFAULT '',
    lease_owner TEXT NOT NULL DEFAULT '',
    lease_until INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX jobs_due ON jobs (status, next_run);
CREATE INDEX jobs_actor ON jobs (actor_id);
CREATE UNIQUE INDEX jobs_config_name ON jobs (name) WHERE source = 'config';
