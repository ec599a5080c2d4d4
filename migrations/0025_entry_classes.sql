-- Nearest neighbours group candidates by what the analysis reads of them (issue 14): an
-- entry's class is a digest of its stored compared inputs but its key and machine (kernel,
-- metadata but its `hash` — the key again —, binary, code digest, relocation, `.source`/`.ttir`
-- blobs: `db/classes.rs`). Entries of one class compare alike with any entry whose key is
-- neither's, so a request analyses and reads one member of each, not every key of the kernel.
-- The entry's machine, key and kind are kept beside it, by kernel (entries with a kernel name): a request places a kernel's candidates
-- from its variant rows and these, without reading the entries' rows. Never edit once landed.
--
-- Written by ingest with the entry's row, in the same transaction (`db/ingest.rs`). Rows of a
-- database migrated from before are listed in `entry_classes_pending` (the live entries of a
-- kernel, from the variant index alone: no read of the entries table) and computed by the
-- server in the background (`db::classes::fill_pending`); until then an entry without a class
-- is placed and compared on its own, as before.
CREATE TABLE entry_classes (
    kernel     TEXT NOT NULL,
    entry_id   INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE ON UPDATE CASCADE,
    class      BLOB NOT NULL,
    machine_id INTEGER NOT NULL,
    key        TEXT NOT NULL,
    kind       TEXT NOT NULL,
    PRIMARY KEY (kernel, entry_id)
) WITHOUT ROWID;

-- Stored by kernel: a kernel's rows sit together (a request reads all of them, ~1,500 on the
-- bench fleet: a few pages, not one page each). By entry: ingest replaces an entry's row, and
-- a deleted entry's row goes with it.
CREATE UNIQUE INDEX entry_classes_entry ON entry_classes(entry_id);

CREATE TABLE entry_classes_pending (
    entry_id INTEGER PRIMARY KEY
);

INSERT INTO entry_classes_pending(entry_id)
    SELECT id FROM entries INDEXED BY entries_variant WHERE kernel IS NOT NULL AND removed_at IS NULL;
