-- no-transaction
-- Facts once per content, machines as presence (issue 17). What an entry's files say (kernel,
-- variant, resources, the fact digest) is a function of its content: it moves to `facts`, one
-- row per distinct fact, with the indexes that pair and list variants. A row of `entries` is
-- now a machine's presence of a fact: where (machine, root id, dir when it is not the key),
-- its own file signature, compile time, size and relocation, first/last seen, removed. `roots`
-- names each root path once. `entry_rows` joins them back into the columns `entries` had, for
-- reading; writers write `facts` and `entries` (db/ingest.rs).
--
-- Runs outside sqlx's transaction so that foreign keys can be off while `entries` is rebuilt
-- (its children reference it by id, and ids are kept); its own transaction makes it whole or
-- nothing. Never edit once landed.
PRAGMA foreign_keys = OFF;
BEGIN;

CREATE TABLE roots (
    id   INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE
);
INSERT INTO roots(path) SELECT DISTINCT root FROM entries ORDER BY root;

-- One row per fact (model::Entry::fact). Rows stored before facts existed (fact NULL) keep
-- one row each, with their own texts; rows with a fact read their texts from `fact_texts`.
CREATE TABLE facts (
    id              INTEGER PRIMARY KEY,
    fact            TEXT UNIQUE,
    key             TEXT NOT NULL,
    kind            TEXT NOT NULL,
    kernel          TEXT,
    backend         TEXT,
    arch            TEXT,
    warp_size       INTEGER,
    num_warps       INTEGER,
    num_stages      INTEGER,
    num_ctas        INTEGER,
    triton_version  TEXT,
    meta_hash       TEXT,
    signature       TEXT,
    shapes          TEXT,
    registers       INTEGER,
    spills          INTEGER,
    shared_bytes    INTEGER,
    partial         TEXT,
    binary_sha256   TEXT,
    resources_json  TEXT,
    metadata_json   TEXT,
    group_json      TEXT,
    -- the entry row it was first made from (this migration only; NULL for later rows)
    first_entry     INTEGER
);
INSERT INTO facts(fact, key, kind, kernel, backend, arch, warp_size, num_warps, num_stages, num_ctas,
                  triton_version, meta_hash, signature, shapes, registers, spills, shared_bytes, partial,
                  binary_sha256, resources_json, metadata_json, group_json, first_entry)
    SELECT fact, key, kind, kernel, backend, arch, warp_size, num_warps, num_stages, num_ctas, triton_version,
           meta_hash, signature, shapes, registers, spills, shared_bytes, partial, binary_sha256,
           resources_json, metadata_json, group_json, id
    FROM entries
    WHERE fact IS NULL OR id = (SELECT MIN(d.id) FROM entries d WHERE d.fact = entries.fact)
    ORDER BY id;
CREATE INDEX facts_first_entry ON facts(first_entry) WHERE first_entry IS NOT NULL;

CREATE TABLE entries_presence (
    id              INTEGER PRIMARY KEY,
    machine_id      INTEGER NOT NULL REFERENCES machines(id),
    root_id         INTEGER NOT NULL REFERENCES roots(id),
    key             TEXT NOT NULL,
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
    UNIQUE (machine_id, key)
);
INSERT INTO entries_presence(id, machine_id, root_id, key, fact_id, dir, sig, bytes, created_at, relocated,
                             first_scan_id, last_scan_id, first_seen_at, last_seen_at, removed_at, removed_scan_id,
                             group_at, group_sha256, group_bytes)
    SELECT e.id, e.machine_id, r.id, e.key,
           COALESCE((SELECT f.id FROM facts f WHERE f.fact = e.fact),
                    (SELECT f.id FROM facts f WHERE f.first_entry = e.id)),
           NULLIF(e.dir, e.key), e.sig, e.bytes, e.created_at, e.relocated, e.first_scan_id, e.last_scan_id,
           e.first_seen_at, e.last_seen_at, e.removed_at, e.removed_scan_id, e.group_at, e.group_sha256, e.group_bytes
    FROM entries e JOIN roots r ON r.path = e.root
    ORDER BY e.id;
DROP INDEX facts_first_entry;
UPDATE facts SET first_entry = NULL;

-- what read or wrote the old table by name
DROP VIEW entry_files;
DROP TRIGGER report_gen_ir_insert;
DROP TRIGGER report_gen_ir_delete;
DROP TRIGGER page_dirty_best_insert;
DROP TRIGGER page_dirty_best_update;
DROP TRIGGER page_dirty_best_delete;
DROP TABLE entries;
ALTER TABLE entries_presence RENAME TO entries;

-- A machine's entries; a fact's holders (live or not from the index alone); a root's entries;
-- removed rows by age.
CREATE INDEX entries_fact ON entries(fact_id, machine_id, removed_at);
CREATE INDEX entries_machine_root ON entries(machine_id, root_id, removed_at);
CREATE INDEX entries_created ON entries(machine_id, created_at);
CREATE INDEX entries_removed ON entries(removed_at) WHERE removed_at IS NOT NULL;
-- Variants, listings, same binary, keys: once per fact, not per machine.
CREATE INDEX facts_key ON facts(key);
CREATE INDEX facts_kernel ON facts(kernel, num_warps, num_stages, key);
CREATE INDEX facts_variant ON facts(kernel, signature, shapes, num_warps, num_stages);
CREATE INDEX facts_kernel_variants ON facts(kernel, backend, arch, triton_version, num_warps, num_stages);
CREATE INDEX facts_binary ON facts(binary_sha256) WHERE binary_sha256 IS NOT NULL;
CREATE INDEX facts_unnamed ON facts(kind) WHERE kernel IS NULL;

-- The entries as they were read before the split: every column, one row per machine's entry.
CREATE VIEW entry_rows AS
    SELECT e.id, e.machine_id, r.path AS root, COALESCE(e.dir, e.key) AS dir, f.key, f.kind, f.kernel, f.backend,
           f.arch, f.warp_size, f.num_warps, f.num_stages, f.num_ctas, f.triton_version, f.meta_hash,
           f.signature, f.shapes, e.created_at, e.bytes, f.registers, f.spills, f.shared_bytes,
           f.resources_json, f.metadata_json, f.group_json, e.relocated, f.partial, f.binary_sha256, e.sig,
           e.first_scan_id, e.last_scan_id, e.first_seen_at, e.last_seen_at, e.removed_at, e.removed_scan_id,
           f.fact, e.group_at, e.group_sha256, e.group_bytes, e.fact_id, e.root_id
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
WHEN OLD.key IS NOT NEW.key OR OLD.fact_id IS NOT NEW.fact_id OR OLD.root_id IS NOT NEW.root_id
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
CREATE TRIGGER page_dirty_entry_update AFTER UPDATE ON entries BEGIN
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
