-- Run history: the newest schedule.MaxRuns runs of each job. Rows go with
-- their job (ON DELETE CASCADE).
CREATE TABLE IF NOT EXISTS schedule_runs (
    seq      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id   TEXT NOT NULL REFERENCES schedule_jobs (id) ON DELETE CASCADE,
    started  TIMESTAMPTZ NOT NULL,
    finished TIMESTAMPTZ NOT NULL,
    outcome  TEXT NOT NULL,
    detail   TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS schedule_runs_job ON schedule_runs (job_id, finished, seq);
