-- Run history: the newest schedule.MaxRuns runs of each job. Times are
-- unix milliseconds UTC. Rows go with their job (ON DELETE CASCADE; the
-- store opens connections with foreign_keys on).
CREATE TABLE schedule_runs (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id   TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    started  INTEGER NOT NULL,
    finished INTEGER NOT NULL,
    outcome  TEXT NOT NULL,
    detail   TEXT NOT NULL DEFAULT ''
);
CREATE INDEX schedule_runs_job ON schedule_runs (job_id, finished, seq);
