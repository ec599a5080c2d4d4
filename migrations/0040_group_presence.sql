-- A group file whose children all sit in the entry's dir enters its fact by their names, not by
-- its bytes (model::Entry::fact), so the same files at another path are the same fact. What is
-- the machine's own is kept on its row: `group_at`, the dir the children name when it is not
-- root/dir (a cache written through a symlinked path), and the group file's sha256 and size
-- when they are not the fact's (fact_files holds the first writer's). `fact_texts.group_json`
-- of such a fact holds the names only (model::GroupInfo::stored_json), read back with the row's
-- own dir (db::entries::entry_detail).
ALTER TABLE entries ADD COLUMN group_at TEXT;
ALTER TABLE entries ADD COLUMN group_sha256 TEXT;
ALTER TABLE entries ADD COLUMN group_bytes INTEGER;

DROP VIEW entry_files;
CREATE VIEW entry_files(entry_id, name, ext, bytes, sha256) AS
    SELECT entry_id, name, ext, bytes, sha256 FROM artifacts
    UNION ALL
    SELECT e.id, f.name, f.ext,
           CASE WHEN f.ext = 'grp' AND e.group_sha256 IS NOT NULL THEN e.group_bytes ELSE f.bytes END,
           CASE WHEN f.ext = 'grp' AND e.group_sha256 IS NOT NULL THEN e.group_sha256 ELSE f.sha256 END
    FROM entries e JOIN fact_files f ON f.fact = e.fact;
