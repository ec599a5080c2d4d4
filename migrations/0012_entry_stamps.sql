-- The dir stamp of an entry (inode, mtime and ctime of its key dir, `scan/fsat.rs::Stamp`) as
-- the last scan that trusted it saw it: a re-scan skips the per-file stats of a key dir whose
-- stamp is unchanged (docs/ARCHITECTURE.md, "The re-scan dir stamp"). A table of its own, not a
-- column of `entries`: an entry's stamp is stored also when its files did not change (the first
-- scan after this migration, a dir touched), and rewriting the wide entry rows for that
-- rewrote the whole table. No row: the next scan lists the dir file by file.
CREATE TABLE entry_stamps (
    entry_id INTEGER PRIMARY KEY REFERENCES entries(id),
    stamp TEXT NOT NULL
);
