-- Removed entries by when they went: ageing them out (`serve --keep-removed`, db/retention.rs)
-- finds the old ones without reading every entry. Partial: live entries are not in it.
CREATE INDEX entries_removed ON entries(removed_at) WHERE removed_at IS NOT NULL;
