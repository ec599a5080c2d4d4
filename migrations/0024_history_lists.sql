-- History lists kept at ingest (issue 14): the roll-ups of `history_hours` (0015) that the
-- history pages and `/api/v1/history` read whole, so that no request sums a machine's or the
-- fleet's hours. Never edit once landed.
--
-- Written by the same ingest as 0015's tables (`db/history_agg.rs::apply`), from the same
-- differences, in the same transaction: each row equals the sum of its `history_hours` rows.

-- The fleet per UTC hour: the fleet chart and its per-hour table (was: every machine's hours
-- summed per request, ~7 ms at 20 machines × 720 hours).
CREATE TABLE history_fleet_hours (
    hour        INTEGER PRIMARY KEY,
    hits        INTEGER NOT NULL,
    misses      INTEGER NOT NULL,
    compiles    INTEGER NOT NULL,
    inferred    INTEGER NOT NULL,
    compile_ms  REAL NOT NULL,
    timed       INTEGER NOT NULL,
    hook_events INTEGER NOT NULL
) WITHOUT ROWID;

-- Each machine over all time: the fleet's per-machine table.
CREATE TABLE history_machines (
    machine_id  INTEGER PRIMARY KEY,
    hits        INTEGER NOT NULL,
    misses      INTEGER NOT NULL,
    compiles    INTEGER NOT NULL,
    inferred    INTEGER NOT NULL,
    compile_ms  REAL NOT NULL,
    timed       INTEGER NOT NULL,
    hook_events INTEGER NOT NULL
) WITHOUT ROWID;

-- Each (machine, kernel) over all time: a machine's "kernels that miss most", paged from the
-- index (was: the machine's 14,400 kernel-hours summed twice per request), and a kernel's
-- per-machine table.
CREATE TABLE history_machine_kernels (
    machine_id  INTEGER NOT NULL,
    kernel      TEXT NOT NULL,
    hits        INTEGER NOT NULL,
    misses      INTEGER NOT NULL,
    compiles    INTEGER NOT NULL,
    inferred    INTEGER NOT NULL,
    compile_ms  REAL NOT NULL,
    timed       INTEGER NOT NULL,
    hook_events INTEGER NOT NULL,
    PRIMARY KEY (machine_id, kernel)
) WITHOUT ROWID;
CREATE INDEX history_machine_kernels_misses ON history_machine_kernels(machine_id, misses DESC, compile_ms DESC, kernel);
CREATE INDEX history_machine_kernels_kernel ON history_machine_kernels(kernel, machine_id);

-- Backfill from the hour tables (0015 counted every stored row into them).
INSERT INTO history_fleet_hours
SELECT hour, SUM(hits), SUM(misses), SUM(compiles), SUM(inferred), SUM(compile_ms), SUM(timed), SUM(hook_events)
FROM history_machine_hours GROUP BY hour;
INSERT INTO history_machines
SELECT machine_id, SUM(hits), SUM(misses), SUM(compiles), SUM(inferred), SUM(compile_ms), SUM(timed),
       SUM(hook_events)
FROM history_machine_hours GROUP BY machine_id;
INSERT INTO history_machine_kernels
SELECT machine_id, kernel, SUM(hits), SUM(misses), SUM(compiles), SUM(inferred), SUM(compile_ms), SUM(timed),
       SUM(hook_events)
FROM history_hours GROUP BY machine_id, kernel;

-- The kernel page's sample entries named in their cell ("<machine>\t<key>" of `sample_min` and
-- `sample_max`, filled by the summary rebuild, `db/rebuild.rs`): a page read ~150 entry rows of a
-- kernel by id for their names, random pages of the largest table (cold, 1 s under load at
-- 450,000 entries). Filled here for the cells already built (30,000 cells at 1.25M entries: two
-- look-ups each); where NULL (an entry gone since) the page reads the names by id as before.
ALTER TABLE page_variant_cells ADD COLUMN sample_min_ref TEXT;
ALTER TABLE page_variant_cells ADD COLUMN sample_max_ref TEXT;
UPDATE page_variant_cells SET
    sample_min_ref = (SELECT m.name || char(9) || e.key FROM entries e JOIN machines m ON m.id = e.machine_id
                      WHERE e.id = page_variant_cells.sample_min),
    sample_max_ref = (SELECT m.name || char(9) || e.key FROM entries e JOIN machines m ON m.id = e.machine_id
                      WHERE e.id = page_variant_cells.sample_max);
