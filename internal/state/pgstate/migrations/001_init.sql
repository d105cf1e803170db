-- Internal state per actor (SPEC §6.1, §9): the current record and the
-- last changes with their causes.
CREATE TABLE state_actors (
	actor      TEXT PRIMARY KEY,
	-- state.Record as JSON: values (the six-value vector, as of
	-- state->>'updated_at'), level, turns, turns_in_critical, saturated,
	-- recent. JSON null only inside the transaction creating the row.
	state      JSONB NOT NULL,
	level      TEXT NOT NULL,            -- NORMAL | WARNING | CRITICAL as stored (before decay)
	version    BIGINT NOT NULL,          -- number of updates applied
	last_seq   BIGINT NOT NULL DEFAULT 0, -- seq of the newest change
	updated_at TIMESTAMPTZ NOT NULL DEFAULT now() -- server time of the last update
);

CREATE TABLE state_changes (
	actor      TEXT NOT NULL REFERENCES state_actors (actor) ON DELETE CASCADE,
	seq        BIGINT NOT NULL,          -- 1, 2, … per actor
	change     JSON NOT NULL,            -- state.Change, kept verbatim
	created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
	PRIMARY KEY (actor, seq)
);
