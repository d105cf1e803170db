-- The turn result of a pending update, saved after the turn ran and before
-- its reply is sent (JSON of agent.Result). An instance that takes over a
-- chat whose previous holder died between the two delivers it without
-- running the turn again. Cleared when the update's outcome is recorded.
ALTER TABLE telegram_updates ADD COLUMN result BYTEA;
