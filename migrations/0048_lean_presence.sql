-- no-transaction
-- A leaner presence row (issue 17). What a machine's entry holds that is not its own moves out:
-- - its key: the row names it by `key_id` into `keys` (one row per distinct key); the key's
--   text is its fact's (`facts.key`, the same for every entry of the fact). The unique
--   (machine, key) becomes (machine_id, key_id): ~100 B less a row and its unique index.
-- - its autotune results: a function of its `.autotune.json` file, so of its fact
--   (`fact_autotune`, once per fact, was `autotune`, once per machine's entry).
-- - its Inductor module link: the module its TTIR's first line names, so its fact's
--   (`fact_modules`, was `entry_modules`, once per machine's entry).
-- - its dir stamp: a column of the row (was `entry_stamps`, a table of its own).
-- The summary marks do not fire on a dir stamp alone.
--
-- Runs outside sqlx's transaction so that foreign keys can be off while `entries` is rebuilt
-- (ids are kept); its own transaction makes it whole or nothing. Never edit once landed.
PRAGMA foreign_keys = OFF;
BEGIN;

CREATE TABLE keys (
    id  INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE
);
INSERT INTO keys(key) SELECT DISTINCT key FROM entries ORDER BY key;

CREATE TABLE entries_lean (
    id              INTEGER PRIMARY KEY,
    machine_id      INTEGER NOT NULL REFERENCES machines(id),
    root_id         INTEGER NOT NULL REFERENCES roots(id),
    key_id          INTEGER NOT NULL REFERENCES keys(id),
    fact_id         INTEGER NOT NULL REFERENCES facts(id),
    dir             TEXT,                    -- relative to the root; NULL: the key
    sig             TEXT NOT NULL,           -- names, sizes and mtimes of the files: re-read only when it changes
    bytes           INTEGER NOT NULL,
    created_at      INTEGER,                 -- metadata file mtime = compile time
    relocated       INTEGER NOT NULL DEFAULT 0,
    first_scan_id   INTEGER NOT NULL,
    last_scan_id    INTEGER NOT NULL,
    first_seen_at   INTEGER NOT NULL,
    last_seen_at    INTEGER NOT NULL,
    removed_at      INTEGER,
    removed_scan_id INTEGER,
    group_at        TEXT,
    group_sha256    TEXT,
    group_bytes     INTEGER,
    stamp           TEXT,                    -- the dir's inode, mtime and ctime (scan/fsat.rs)
    UNIQUE (machine_id, key_id)
);
INSERT INTO entries_lean(id, machine_id, root_id, key_id, fact_id, dir, sig, bytes, created_at, relocated,
                         first_scan_id, last_scan_id, first_seen_at, last_seen_at, removed_at, removed_scan_id,
                         group_at, group_sha256, group_bytes, stamp)
    SELECT e.id, e.machine_id, e.root_id, k.id, e.fact_id, e.dir, e.sig, e.bytes, e.created_at, e.relocated,
           e.first_scan_id, e.last_scan_id, e.first_seen_at, e.last_seen_at, e.removed_at, e.removed_scan_id,
           e.group_at, e.group_sha256, e.group_bytes, s.stamp
    FROM entries e JOIN keys k ON k.key = e.key LEFT JOIN entry_stamps s ON s.entry_id = e.id
    ORDER BY e.id;
DROP TABLE entry_stamps;

-- Autotune results once per fact (an entry's rows are its fact's; any holder's rows will do).
CREATE TABLE fact_autotune (
    fact_id      INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
    idx          INTEGER NOT NULL,
    config_json  TEXT NOT NULL,
    num_warps    INTEGER,
    num_stages   INTEGER,
    timings_json TEXT NOT NULL,
    best_ms      REAL,
    winner       INTEGER NOT NULL,
    PRIMARY KEY (fact_id, idx)
) WITHOUT ROWID;
INSERT OR IGNORE INTO fact_autotune(fact_id, idx, config_json, num_warps, num_stages, timings_json, best_ms, winner)
    SELECT e.fact_id, a.idx, a.config_json, a.num_warps, a.num_stages, a.timings_json, a.best_ms, a.winner
    FROM autotune a JOIN entries e ON e.id = a.entry_id
    ORDER BY a.entry_id, a.idx;
DROP TABLE autotune;

-- The Inductor module a fact's TTIR names (db/inductor.rs::link_modules), once per fact.
CREATE TABLE fact_modules (
    fact_id INTEGER PRIMARY KEY REFERENCES facts(id) ON DELETE CASCADE,
    module  TEXT NOT NULL
);
INSERT OR IGNORE INTO fact_modules(fact_id, module)
    SELECT e.fact_id, em.module FROM entry_modules em JOIN entries e ON e.id = em.entry_id ORDER BY em.entry_id;
CREATE INDEX fact_modules_module ON fact_modules(module);
DROP TABLE entry_modules;

-- what reads the old table by name
DROP VIEW entry_rows;
DROP VIEW entry_files;
DROP TRIGGER report_gen_ir_insert;
DROP TRIGGER report_gen_ir_delete;
DROP TRIGGER page_dirty_best_insert;
DROP TRIGGER page_dirty_best_update;
DROP TRIGGER page_dirty_best_delete;
DROP TABLE entries;
ALTER TABLE entries_lean RENAME TO entries;

CREATE INDEX entries_fact ON entries(fact_id, machine_id, removed_at);
CREATE INDEX entries_machine_root ON entries(machine_id, root_id, removed_at);
CREATE INDEX entries_created ON entries(machine_id, created_at);
CREATE INDEX entries_removed ON entries(removed_at) WHERE removed_at IS NOT NULL;

-- The entries as they were read before the split: every column, one row per machine's entry.
CREATE VIEW entry_rows AS
    SELECT e.id, e.machine_id, r.path AS root, COALESCE(e.dir, f.key) AS dir, f.key, f.kind, f.kernel, f.backend,
           f.arch, f.warp_size, f.num_warps, f.num_stages, f.num_ctas, f.triton_version, f.meta_hash,
           f.signature, f.shapes, e.created_at, e.bytes, f.registers, f.spills, f.shared_bytes,
           f.resources_json, f.metadata_json, f.group_json, e.relocated, f.partial, f.binary_sha256, e.sig,
           e.first_scan_id, e.last_scan_id, e.first_seen_at, e.last_seen_at, e.removed_at, e.removed_scan_id,
           f.fact, e.group_at, e.group_sha256, e.group_bytes, e.fact_id, e.root_id, e.key_id, e.stamp
    FROM entries e JOIN facts f ON f.id = e.fact_id LEFT JOIN roots r ON r.id = e.root_id;
-- (`LEFT JOIN roots`: every row has its root, and a query that reads no root column skips the
-- join; a filter on `root` makes it an inner join again)

CREATE VIEW entry_files(entry_id, name, ext, bytes, sha256) AS
    SELECT entry_id, name, ext, bytes, sha256 FROM artifacts
    UNION ALL
    SELECT e.id, ff.name, ff.ext,
           CASE WHEN ff.ext = 'grp' AND e.group_sha256 IS NOT NULL THEN e.group_bytes ELSE ff.bytes END,
           CASE WHEN ff.ext = 'grp' AND e.group_sha256 IS NOT NULL THEN e.group_sha256 ELSE ff.sha256 END
    FROM entries e JOIN facts f ON f.id = e.fact_id JOIN fact_files ff ON ff.fact = f.fact;

-- Report generations: a machine's entries changed (what a stored report was computed from).
CREATE TRIGGER report_gen_entry_insert AFTER INSERT ON entries BEGIN
    INSERT INTO report_gens(machine_id, gen) VALUES (NEW.machine_id, 1)
        ON CONFLICT(machine_id) DO UPDATE SET gen = gen + 1;
END;
CREATE TRIGGER report_gen_entry_delete AFTER DELETE ON entries BEGIN
    INSERT INTO report_gens(machine_id, gen) VALUES (OLD.machine_id, 1)
        ON CONFLICT(machine_id) DO UPDATE SET gen = gen + 1;
END;
CREATE TRIGGER report_gen_entry_update AFTER UPDATE ON entries
WHEN OLD.key_id IS NOT NEW.key_id OR OLD.fact_id IS NOT NEW.fact_id OR OLD.root_id IS NOT NEW.root_id
  OR OLD.machine_id IS NOT NEW.machine_id OR OLD.relocated IS NOT NEW.relocated
  OR OLD.first_scan_id IS NOT NEW.first_scan_id OR OLD.removed_scan_id IS NOT NEW.removed_scan_id
  OR OLD.removed_at IS NOT NEW.removed_at
BEGIN
    INSERT INTO report_gens(machine_id, gen) VALUES (NEW.machine_id, 1)
        ON CONFLICT(machine_id) DO UPDATE SET gen = gen + 1;
    INSERT INTO report_gens(machine_id, gen) VALUES (OLD.machine_id, 1)
        ON CONFLICT(machine_id) DO UPDATE SET gen = gen + 1;
END;
CREATE TRIGGER report_gen_ir_insert AFTER INSERT ON artifacts WHEN NEW.ext IN ('source', 'ttir') BEGIN
    INSERT INTO report_gens(machine_id, gen) SELECT machine_id, 1 FROM entries WHERE id = NEW.entry_id
        ON CONFLICT(machine_id) DO UPDATE SET gen = gen + 1;
END;
CREATE TRIGGER report_gen_ir_delete AFTER DELETE ON artifacts WHEN OLD.ext IN ('source', 'ttir') BEGIN
    INSERT INTO report_gens(machine_id, gen) SELECT machine_id, 1 FROM entries WHERE id = OLD.entry_id
        ON CONFLICT(machine_id) DO UPDATE SET gen = gen + 1;
END;

-- Live entries per machine and kernel (0027), the kernel read from the entry's fact.
CREATE TRIGGER entry_counts_insert AFTER INSERT ON entries WHEN NEW.removed_at IS NULL BEGIN
    INSERT INTO machine_counts(machine_id, live) VALUES (NEW.machine_id, 1)
        ON CONFLICT(machine_id) DO UPDATE SET live = live + 1;
    INSERT INTO entry_counts(machine_id, named, kernel, live)
        SELECT NEW.machine_id, f.kernel IS NOT NULL, COALESCE(f.kernel, ''), 1 FROM facts f WHERE f.id = NEW.fact_id
        ON CONFLICT(machine_id, named, kernel) DO UPDATE SET live = live + 1;
END;
CREATE TRIGGER entry_counts_delete AFTER DELETE ON entries WHEN OLD.removed_at IS NULL BEGIN
    UPDATE machine_counts SET live = live - 1 WHERE machine_id = OLD.machine_id;
    UPDATE entry_counts SET live = live - 1
        WHERE machine_id = OLD.machine_id
          AND (named, kernel) = (SELECT f.kernel IS NOT NULL, COALESCE(f.kernel, '') FROM facts f WHERE f.id = OLD.fact_id);
END;
CREATE TRIGGER entry_counts_update AFTER UPDATE OF machine_id, fact_id, removed_at ON entries
WHEN (OLD.removed_at IS NULL) IS NOT (NEW.removed_at IS NULL)
  OR OLD.fact_id IS NOT NEW.fact_id OR OLD.machine_id IS NOT NEW.machine_id BEGIN
    UPDATE machine_counts SET live = live - 1 WHERE OLD.removed_at IS NULL AND machine_id = OLD.machine_id;
    UPDATE entry_counts SET live = live - 1
        WHERE OLD.removed_at IS NULL AND machine_id = OLD.machine_id
          AND (named, kernel) = (SELECT f.kernel IS NOT NULL, COALESCE(f.kernel, '') FROM facts f WHERE f.id = OLD.fact_id);
    INSERT INTO machine_counts(machine_id, live) SELECT NEW.machine_id, 1 WHERE NEW.removed_at IS NULL
        ON CONFLICT(machine_id) DO UPDATE SET live = live + 1;
    INSERT INTO entry_counts(machine_id, named, kernel, live)
        SELECT NEW.machine_id, f.kernel IS NOT NULL, COALESCE(f.kernel, ''), 1 FROM facts f
        WHERE f.id = NEW.fact_id AND NEW.removed_at IS NULL
        ON CONFLICT(machine_id, named, kernel) DO UPDATE SET live = live + 1;
END;

-- Summary marks (0045), the kernel read from the entry's fact.
CREATE TRIGGER page_dirty_entry_insert AFTER INSERT ON entries BEGIN
    INSERT INTO page_dirty_machines(machine_id, gen) VALUES (new.machine_id, (SELECT gen FROM page_gen WHERE id = 1))
        ON CONFLICT(machine_id) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
    INSERT INTO page_dirty_kernels(kernel, gen)
        SELECT f.kernel, (SELECT gen FROM page_gen WHERE id = 1) FROM facts f
        WHERE f.id = new.fact_id AND f.kernel IS NOT NULL
        ON CONFLICT(kernel) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
END;
-- (not on a dir stamp alone: a re-scan restamps dirs whose files did not change)
CREATE TRIGGER page_dirty_entry_update AFTER UPDATE OF machine_id, root_id, key_id, fact_id, dir, sig, bytes,
    created_at, relocated, first_scan_id, last_scan_id, first_seen_at, last_seen_at, removed_at, removed_scan_id,
    group_at, group_sha256, group_bytes ON entries BEGIN
    INSERT INTO page_dirty_machines(machine_id, gen)
        SELECT m, (SELECT gen FROM page_gen WHERE id = 1) FROM (SELECT old.machine_id AS m UNION SELECT new.machine_id)
        WHERE true
        ON CONFLICT(machine_id) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
    INSERT INTO page_dirty_kernels(kernel, gen)
        SELECT f.kernel, (SELECT gen FROM page_gen WHERE id = 1) FROM facts f
        WHERE f.id IN (old.fact_id, new.fact_id) AND f.kernel IS NOT NULL
        ON CONFLICT(kernel) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
END;
CREATE TRIGGER page_dirty_entry_delete AFTER DELETE ON entries BEGIN
    INSERT INTO page_dirty_machines(machine_id, gen) VALUES (old.machine_id, (SELECT gen FROM page_gen WHERE id = 1))
        ON CONFLICT(machine_id) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
    INSERT INTO page_dirty_kernels(kernel, gen)
        SELECT f.kernel, (SELECT gen FROM page_gen WHERE id = 1) FROM facts f
        WHERE f.id = old.fact_id AND f.kernel IS NOT NULL
        ON CONFLICT(kernel) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
END;
CREATE TRIGGER page_dirty_best_insert AFTER INSERT ON best_configs BEGIN
    INSERT INTO page_dirty_kernels(kernel, gen)
        SELECT kernel, (SELECT gen FROM page_gen WHERE id = 1) FROM entry_rows
        WHERE machine_id = new.machine_id AND key = new.triton_cache_hash AND kernel IS NOT NULL
        ON CONFLICT(kernel) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
END;
CREATE TRIGGER page_dirty_best_update AFTER UPDATE ON best_configs
WHEN old.triton_cache_hash IS NOT new.triton_cache_hash OR old.machine_id IS NOT new.machine_id BEGIN
    INSERT INTO page_dirty_kernels(kernel, gen)
        SELECT kernel, (SELECT gen FROM page_gen WHERE id = 1) FROM entry_rows
        WHERE ((machine_id = old.machine_id AND key = old.triton_cache_hash)
           OR (machine_id = new.machine_id AND key = new.triton_cache_hash)) AND kernel IS NOT NULL
        ON CONFLICT(kernel) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
END;
CREATE TRIGGER page_dirty_best_delete AFTER DELETE ON best_configs BEGIN
    INSERT INTO page_dirty_kernels(kernel, gen)
        SELECT kernel, (SELECT gen FROM page_gen WHERE id = 1) FROM entry_rows
        WHERE machine_id = old.machine_id AND key = old.triton_cache_hash AND kernel IS NOT NULL
        ON CONFLICT(kernel) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
END;

COMMIT;
PRAGMA foreign_keys = ON;
