-- Summaries kept as data arrives (issue 17): after a landing only the machines and kernels whose
-- entries changed are summed again (`db/rebuild.rs`), not the whole fleet. Never
-- edit once landed.

-- The generation a change is marked with. A summary update first moves `gen` on, then sums the
-- marks of the generations before it from one snapshot and drops exactly those marks when it
-- writes its sums: a change that lands meanwhile is marked with the new generation and stays
-- marked. `applied`: the newest generation whose sums are written (an older update that commits
-- later, e.g. from another server on this database, writes nothing).
CREATE TABLE page_gen (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    gen     INTEGER NOT NULL,
    applied INTEGER NOT NULL
);
INSERT INTO page_gen(id, gen, applied) VALUES (1, 1, 0);

-- Machines and kernels whose summary rows are out of date, written by the triggers below in the
-- transaction that changed the data (every writer of `entries` and `best_configs` included).
CREATE TABLE page_dirty_machines (
    machine_id  INTEGER PRIMARY KEY,
    gen         INTEGER NOT NULL
);
CREATE TABLE page_dirty_kernels (
    kernel  TEXT PRIMARY KEY,
    gen     INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TRIGGER page_dirty_entry_insert AFTER INSERT ON entries BEGIN
    INSERT INTO page_dirty_machines(machine_id, gen) VALUES (new.machine_id, (SELECT gen FROM page_gen WHERE id = 1))
        ON CONFLICT(machine_id) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
    INSERT INTO page_dirty_kernels(kernel, gen)
        SELECT new.kernel, (SELECT gen FROM page_gen WHERE id = 1) WHERE new.kernel IS NOT NULL
        ON CONFLICT(kernel) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
END;
CREATE TRIGGER page_dirty_entry_update AFTER UPDATE ON entries BEGIN
    INSERT INTO page_dirty_machines(machine_id, gen)
        SELECT m, (SELECT gen FROM page_gen WHERE id = 1) FROM (SELECT old.machine_id AS m UNION SELECT new.machine_id)
        WHERE true
        ON CONFLICT(machine_id) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
    INSERT INTO page_dirty_kernels(kernel, gen)
        SELECT k, (SELECT gen FROM page_gen WHERE id = 1) FROM (SELECT old.kernel AS k UNION SELECT new.kernel)
        WHERE k IS NOT NULL
        ON CONFLICT(kernel) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
END;
CREATE TRIGGER page_dirty_entry_delete AFTER DELETE ON entries BEGIN
    INSERT INTO page_dirty_machines(machine_id, gen) VALUES (old.machine_id, (SELECT gen FROM page_gen WHERE id = 1))
        ON CONFLICT(machine_id) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
    INSERT INTO page_dirty_kernels(kernel, gen)
        SELECT old.kernel, (SELECT gen FROM page_gen WHERE id = 1) WHERE old.kernel IS NOT NULL
        ON CONFLICT(kernel) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
END;
-- A best config counts in the grid cell of the entry it names (same machine, same key).
CREATE TRIGGER page_dirty_best_insert AFTER INSERT ON best_configs BEGIN
    INSERT INTO page_dirty_kernels(kernel, gen)
        SELECT kernel, (SELECT gen FROM page_gen WHERE id = 1) FROM entries
        WHERE machine_id = new.machine_id AND key = new.triton_cache_hash AND kernel IS NOT NULL
        ON CONFLICT(kernel) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
END;
CREATE TRIGGER page_dirty_best_update AFTER UPDATE ON best_configs
WHEN old.triton_cache_hash IS NOT new.triton_cache_hash OR old.machine_id IS NOT new.machine_id BEGIN
    INSERT INTO page_dirty_kernels(kernel, gen)
        SELECT kernel, (SELECT gen FROM page_gen WHERE id = 1) FROM entries
        WHERE ((machine_id = old.machine_id AND key = old.triton_cache_hash)
           OR (machine_id = new.machine_id AND key = new.triton_cache_hash)) AND kernel IS NOT NULL
        ON CONFLICT(kernel) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
END;
CREATE TRIGGER page_dirty_best_delete AFTER DELETE ON best_configs BEGIN
    INSERT INTO page_dirty_kernels(kernel, gen)
        SELECT kernel, (SELECT gen FROM page_gen WHERE id = 1) FROM entries
        WHERE machine_id = old.machine_id AND key = old.triton_cache_hash AND kernel IS NOT NULL
        ON CONFLICT(kernel) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
END;

-- Bytes by artifact type per machine: the fleet's `page_ext_stats` is their sum (a few rows per
-- machine), so a landing sums only its machine's files.
CREATE TABLE page_machine_ext (
    machine_id  INTEGER NOT NULL,
    ext         TEXT NOT NULL,
    files       INTEGER NOT NULL,
    bytes       INTEGER NOT NULL,
    PRIMARY KEY (machine_id, ext)
) WITHOUT ROWID;

-- The kernel list's filter choices are dropped when no summary row has them any more: looked up.
CREATE INDEX page_kernel_stats_backend ON page_kernel_stats(backend);
CREATE INDEX page_kernel_stats_arch ON page_kernel_stats(arch);
CREATE INDEX page_kernel_stats_version ON page_kernel_stats(triton_version);

-- `page_machine_ext` starts empty: the next page builds every table once from the data.
DELETE FROM page_stats_version;
