-- Each vector names the embedding model that made it and the MD5 (hex) of
-- the text it embeds: a different model, dimension or changed record
-- content makes the vector stale, and the store re-embeds instead of
-- mixing vectors. Vectors written before this migration carry model ''
-- and are re-embedded by the first configured embedder.
ALTER TABLE memory_vectors ADD COLUMN model TEXT NOT NULL DEFAULT '';
ALTER TABLE memory_vectors ADD COLUMN hash TEXT NOT NULL DEFAULT '';
