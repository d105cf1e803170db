-- The job generations a turn last queued a job for: queued_gen for the
-- memory.extract job of the session's current gen, idle_queued_gen for the
-- memory.idle job of its current idle_gen. While they match, the job waits
-- and a turn need not insert it again (each insert attempt is a River
-- insert on the turn's path). -1: none queued yet.
ALTER TABLE memory_pipeline_sessions ADD COLUMN IF NOT EXISTS queued_gen BIGINT NOT NULL DEFAULT -1;
ALTER TABLE memory_pipeline_sessions ADD COLUMN IF NOT EXISTS idle_queued_gen BIGINT NOT NULL DEFAULT -1;
