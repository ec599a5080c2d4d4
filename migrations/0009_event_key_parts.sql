-- The parts of the cache key the hook recorded at compile time (JSON: triton_key digest,
-- source_hash, backend_hash, options_hash, env_vars, python, triton_dir): the explainer
-- compares them instead of inferring what is not on disk.
ALTER TABLE events ADD COLUMN parts_json TEXT;
CREATE INDEX events_key_parts ON events(key) WHERE parts_json IS NOT NULL;
