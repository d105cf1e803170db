-- Each actor's consolidation generation: advanced by every extraction
-- write that consolidated the actor's long-term records, and checked in the
-- same transaction against the value read before the listing the
-- consolidation decided on, so two instances never both act on a stale
-- listing (optimistic concurrency; see Pipeline.extractSession).
CREATE TABLE IF NOT EXISTS memory_pipeline_consolidations (
	actor_id TEXT PRIMARY KEY,
	gen      BIGINT NOT NULL
);
