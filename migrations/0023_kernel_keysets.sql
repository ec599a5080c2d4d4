-- Per machine and kernel, the keys of its live kernel entries summed up as one digest, so that
-- a machine-pair invalidation report reads only the kernels whose key sets differ between the
-- two machines: a kernel with the same keys on both sides is all kept, whatever its entries
-- hold (db/keysets.rs, explain/load.rs::machine_sides). Filled per machine when its
-- generation (report_gens) has moved since: `kernel_keysets_gen` is the generation the rows
-- were computed at. Nothing to backfill: an empty table is filled on first use.
CREATE TABLE kernel_keysets (
    machine_id INTEGER NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
    kernel     TEXT NOT NULL,
    entries    INTEGER NOT NULL,  -- live kernel entries (roots together)
    keys       INTEGER NOT NULL,  -- distinct keys among them
    relocated  INTEGER NOT NULL,  -- entries whose group file points elsewhere
    digest     BLOB NOT NULL,     -- sha256 of the distinct keys, sorted, one per line
    PRIMARY KEY (machine_id, kernel)
) WITHOUT ROWID;

CREATE TABLE kernel_keysets_gen (
    machine_id INTEGER PRIMARY KEY REFERENCES machines(id) ON DELETE CASCADE,
    gen        INTEGER NOT NULL
);
