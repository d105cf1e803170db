CREATE TABLE IF NOT EXISTS schedule_jobs (
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
    created_at  TIMESTAMPTZ NOT NULL,
    next_run    TIMESTAMPTZ NOT NULL,
    last_run    TIMESTAMPTZ,
    attempts    INTEGER NOT NULL DEFAULT 0,
    status      TEXT NOT NULL,
    source      TEXT NOT NULL,
    last_error  TEXT NOT NULL DEFAULT '',
    lease_owner TEXT NOT NULL DEFAULT '',
    lease_until TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS schedule_jobs_due ON schedule_jobs (status, next_run);
CREATE INDEX IF NOT EXISTS schedule_jobs_actor ON schedule_jobs (actor_id);
CREATE UNIQUE INDEX IF NOT EXISTS schedule_jobs_config_name ON schedule_jobs (name) WHERE source = 'config';
