-- An entry's files (name, type, size, sha256), stored once per fact (model::fact_digest names
-- them): every machine holding the same files points at one list. A row of `entries` with a
-- fact has no `artifacts` rows; rows stored before 0032 (no fact) keep theirs. `entry_files`
-- reads both as one list per entry, as `artifacts` was read.
CREATE TABLE fact_files (
    fact    TEXT NOT NULL,
    name    TEXT NOT NULL,
    ext     TEXT NOT NULL,
    bytes   INTEGER NOT NULL,
    sha256  TEXT NOT NULL,
    PRIMARY KEY (fact, name)
) WITHOUT ROWID;
CREATE INDEX fact_files_sha ON fact_files(sha256);

-- rows written between 0032 and this migration have a fact and their own artifacts: moved
INSERT OR IGNORE INTO fact_files(fact, name, ext, bytes, sha256)
    SELECT e.fact, a.name, a.ext, a.bytes, a.sha256 FROM artifacts a JOIN entries e ON e.id = a.entry_id
    WHERE e.fact IS NOT NULL;
DELETE FROM artifacts WHERE entry_id IN (SELECT id FROM entries WHERE fact IS NOT NULL);

CREATE VIEW entry_files(entry_id, name, ext, bytes, sha256) AS
    SELECT entry_id, name, ext, bytes, sha256 FROM artifacts
    UNION ALL
    SELECT e.id, f.name, f.ext, f.bytes, f.sha256 FROM entries e JOIN fact_files f ON f.fact = e.fact;
