-- History from aggregates kept at ingest (issue 14). Never edit once landed.
--
-- What one hook event or one entry compile time counts for depends only on the rows of the same
-- (machine, key): the lookup before a `compile` (was it a `miss`?), the hook `compile` events
-- near an mtime (is the compile inferred?). So each row carries what it was counted as, the
-- hour tables hold the sums, and an ingest re-counts the keys it touched (`db/history_agg.rs`),
-- applying the difference to the sums. A re-read event line is stored once (0007), so nothing is
-- counted twice.

-- NULL: not yet counted into the hour tables; else whether the event counts as a miss
-- (a `miss`, or a `compile` with no `miss` just before it in its process).
ALTER TABLE events ADD COLUMN counted_miss INTEGER;
-- The kernel this compile time is counted under as an inferred compile; NULL: not inferred (a
-- hook compile event accounts for it, or its entry is not a compiled kernel).
ALTER TABLE entry_compiles ADD COLUMN inferred_kernel TEXT;

-- Sums per machine, kernel ('(unknown)' when the hook named none) and UTC hour (unix ms), and
-- the same rolled up per machine and per kernel. `compile_ms` sums the hook's compile times;
-- `timed` counts the compiles that carried one (none: the time is unknown, not 0).
CREATE TABLE history_hours (
    machine_id  INTEGER NOT NULL,
    kernel      TEXT NOT NULL,
    hour        INTEGER NOT NULL,
    hits        INTEGER NOT NULL,
    misses      INTEGER NOT NULL,
    compiles    INTEGER NOT NULL,
    inferred    INTEGER NOT NULL,
    compile_ms  REAL NOT NULL,
    timed       INTEGER NOT NULL,
    hook_events INTEGER NOT NULL,
    PRIMARY KEY (machine_id, kernel, hour)
) WITHOUT ROWID;
CREATE INDEX history_hours_kernel ON history_hours(kernel, machine_id, hour);
CREATE TABLE history_machine_hours (
    machine_id  INTEGER NOT NULL,
    hour        INTEGER NOT NULL,
    hits        INTEGER NOT NULL,
    misses      INTEGER NOT NULL,
    compiles    INTEGER NOT NULL,
    inferred    INTEGER NOT NULL,
    compile_ms  REAL NOT NULL,
    timed       INTEGER NOT NULL,
    hook_events INTEGER NOT NULL,
    PRIMARY KEY (machine_id, hour)
) WITHOUT ROWID;
CREATE TABLE history_kernel_hours (
    kernel      TEXT NOT NULL,
    hour        INTEGER NOT NULL,
    hits        INTEGER NOT NULL,
    misses      INTEGER NOT NULL,
    compiles    INTEGER NOT NULL,
    inferred    INTEGER NOT NULL,
    compile_ms  REAL NOT NULL,
    timed       INTEGER NOT NULL,
    hook_events INTEGER NOT NULL,
    PRIMARY KEY (kernel, hour)
) WITHOUT ROWID;
-- Kernels with any history, and their totals over all time (the unfiltered kernel table,
-- sorted by misses without summing hours).
CREATE TABLE history_kernels (
    kernel      TEXT PRIMARY KEY,
    hits        INTEGER NOT NULL,
    misses      INTEGER NOT NULL,
    compiles    INTEGER NOT NULL,
    inferred    INTEGER NOT NULL,
    compile_ms  REAL NOT NULL,
    timed       INTEGER NOT NULL,
    hook_events INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX history_kernels_misses ON history_kernels(misses DESC, compile_ms DESC, kernel);
-- The inferred compiles of a machine and time range (minute and second buckets, ranges not on
-- whole hours) without a join through entries.
CREATE INDEX entry_compiles_inferred ON entry_compiles(compiled_at) WHERE inferred_kernel IS NOT NULL;

-- Backfill from the events and compile times already stored: the same counting as
-- `db/history.rs::fresh` (the reference computation), once over everything.
UPDATE events SET counted_miss = x.m
FROM (SELECT id, (event = 'miss' OR (event = 'compile' AND prev IS NOT 'miss')) AS m
      FROM (SELECT id, event,
                   LAG(event) OVER (PARTITION BY machine_id, host, pid, key ORDER BY ts_us, seq, id) AS prev
            FROM events)) AS x
WHERE events.id = x.id;

UPDATE entry_compiles SET inferred_kernel = (
    SELECT COALESCE(en.kernel, '(unknown)') FROM entries en
    WHERE en.id = entry_compiles.entry_id AND en.kind IN ('kernel', 'binary_only')
      AND NOT EXISTS (SELECT 1 FROM events x
                      WHERE x.machine_id = en.machine_id AND x.key = en.key AND x.event = 'compile'
                        AND x.ts BETWEEN entry_compiles.compiled_at - 2000
                                     AND entry_compiles.compiled_at + CAST(COALESCE(x.compile_ms, 0) AS INTEGER) + 2000
                        AND NOT EXISTS (SELECT 1 FROM entry_compiles o
                                        WHERE o.entry_id = entry_compiles.entry_id
                                          AND ABS(x.ts - o.compiled_at) < ABS(x.ts - entry_compiles.compiled_at))));

INSERT INTO history_hours(machine_id, kernel, hour, hits, misses, compiles, inferred, compile_ms, timed, hook_events)
SELECT machine_id, kernel, hour, SUM(hits), SUM(misses), SUM(compiles), SUM(inferred), SUM(compile_ms), SUM(timed),
       SUM(hook_events)
FROM (SELECT machine_id, COALESCE(kernel, '(unknown)') AS kernel, (ts / 3600000) * 3600000 AS hour,
             SUM(event = 'hit') AS hits, SUM(counted_miss) AS misses, SUM(event = 'compile') AS compiles, 0 AS inferred,
             TOTAL(CASE WHEN event = 'compile' THEN compile_ms END) AS compile_ms,
             COUNT(CASE WHEN event = 'compile' THEN compile_ms END) AS timed, COUNT(*) AS hook_events
      FROM events GROUP BY 1, 2, 3
      UNION ALL
      SELECT en.machine_id, c.inferred_kernel, (c.compiled_at / 3600000) * 3600000, 0, COUNT(*), COUNT(*), COUNT(*),
             0, 0, 0
      FROM entry_compiles c JOIN entries en ON en.id = c.entry_id
      WHERE c.inferred_kernel IS NOT NULL GROUP BY 1, 2, 3)
GROUP BY 1, 2, 3;

INSERT INTO history_machine_hours
SELECT machine_id, hour, SUM(hits), SUM(misses), SUM(compiles), SUM(inferred), SUM(compile_ms), SUM(timed),
       SUM(hook_events)
FROM history_hours GROUP BY machine_id, hour;
INSERT INTO history_kernel_hours
SELECT kernel, hour, SUM(hits), SUM(misses), SUM(compiles), SUM(inferred), SUM(compile_ms), SUM(timed),
       SUM(hook_events)
FROM history_hours GROUP BY kernel, hour;
INSERT INTO history_kernels
SELECT kernel, SUM(hits), SUM(misses), SUM(compiles), SUM(inferred), SUM(compile_ms), SUM(timed), SUM(hook_events)
FROM history_hours GROUP BY kernel;
