-- What hits saved (issue 35): each hit's compile time, and its sums beside the history
-- aggregates (0015, 0024). Never edit once landed.
--
-- A hit saved the compile its entry once took. The hook records that time on the `compile` event
-- of the same machine and key: the latest one at or before the hit, else the first after it (a
-- clock step). Like `counted_miss`, it depends only on the rows of the hit's own (machine, key),
-- so an ingest re-counts it with the keys it touched (`db/history_agg.rs::account`).

-- For a `hit` counted into the aggregates: its entry's compile time (ms); NULL when the hook saw
-- no timed compile of that key on that machine (the time saved is unknown, not 0).
ALTER TABLE events ADD COLUMN saved_ms REAL;

-- `saved_ms` sums the hits' compile times, `saved` counts the hits that had one.
ALTER TABLE history_hours ADD COLUMN saved_ms REAL NOT NULL DEFAULT 0;
ALTER TABLE history_hours ADD COLUMN saved INTEGER NOT NULL DEFAULT 0;
ALTER TABLE history_machine_hours ADD COLUMN saved_ms REAL NOT NULL DEFAULT 0;
ALTER TABLE history_machine_hours ADD COLUMN saved INTEGER NOT NULL DEFAULT 0;
ALTER TABLE history_kernel_hours ADD COLUMN saved_ms REAL NOT NULL DEFAULT 0;
ALTER TABLE history_kernel_hours ADD COLUMN saved INTEGER NOT NULL DEFAULT 0;
ALTER TABLE history_kernels ADD COLUMN saved_ms REAL NOT NULL DEFAULT 0;
ALTER TABLE history_kernels ADD COLUMN saved INTEGER NOT NULL DEFAULT 0;
ALTER TABLE history_fleet_hours ADD COLUMN saved_ms REAL NOT NULL DEFAULT 0;
ALTER TABLE history_fleet_hours ADD COLUMN saved INTEGER NOT NULL DEFAULT 0;
ALTER TABLE history_machines ADD COLUMN saved_ms REAL NOT NULL DEFAULT 0;
ALTER TABLE history_machines ADD COLUMN saved INTEGER NOT NULL DEFAULT 0;
ALTER TABLE history_machine_kernels ADD COLUMN saved_ms REAL NOT NULL DEFAULT 0;
ALTER TABLE history_machine_kernels ADD COLUMN saved INTEGER NOT NULL DEFAULT 0;

-- Backfill: the same rule as `db/history_agg.rs::account`, once over every counted hit.
UPDATE events SET saved_ms = COALESCE(
    (SELECT c.compile_ms FROM events c WHERE c.machine_id = events.machine_id AND c.key = events.key AND c.event = 'compile'
      AND c.compile_ms IS NOT NULL AND c.ts_us <= events.ts_us ORDER BY c.ts_us DESC, c.id DESC LIMIT 1),
    (SELECT c.compile_ms FROM events c WHERE c.machine_id = events.machine_id AND c.key = events.key AND c.event = 'compile'
      AND c.compile_ms IS NOT NULL AND c.ts_us > events.ts_us ORDER BY c.ts_us ASC, c.id ASC LIMIT 1))
WHERE event = 'hit' AND counted_miss IS NOT NULL;

CREATE TEMP TABLE saved_sums AS
SELECT machine_id, COALESCE(kernel, '(unknown)') AS kernel, (ts / 3600000) * 3600000 AS hour,
       TOTAL(saved_ms) AS saved_ms, COUNT(saved_ms) AS saved
FROM events WHERE saved_ms IS NOT NULL GROUP BY 1, 2, 3;

UPDATE history_hours SET saved_ms = s.saved_ms, saved = s.saved FROM temp.saved_sums s
WHERE s.machine_id = history_hours.machine_id AND s.kernel = history_hours.kernel AND s.hour = history_hours.hour;
UPDATE history_machine_hours SET saved_ms = s.saved_ms, saved = s.saved
FROM (SELECT machine_id, hour, TOTAL(saved_ms) AS saved_ms, SUM(saved) AS saved FROM temp.saved_sums GROUP BY 1, 2) s
WHERE s.machine_id = history_machine_hours.machine_id AND s.hour = history_machine_hours.hour;
UPDATE history_kernel_hours SET saved_ms = s.saved_ms, saved = s.saved
FROM (SELECT kernel, hour, TOTAL(saved_ms) AS saved_ms, SUM(saved) AS saved FROM temp.saved_sums GROUP BY 1, 2) s
WHERE s.kernel = history_kernel_hours.kernel AND s.hour = history_kernel_hours.hour;
UPDATE history_kernels SET saved_ms = s.saved_ms, saved = s.saved
FROM (SELECT kernel, TOTAL(saved_ms) AS saved_ms, SUM(saved) AS saved FROM temp.saved_sums GROUP BY 1) s
WHERE s.kernel = history_kernels.kernel;
UPDATE history_fleet_hours SET saved_ms = s.saved_ms, saved = s.saved
FROM (SELECT hour, TOTAL(saved_ms) AS saved_ms, SUM(saved) AS saved FROM temp.saved_sums GROUP BY 1) s
WHERE s.hour = history_fleet_hours.hour;
UPDATE history_machines SET saved_ms = s.saved_ms, saved = s.saved
FROM (SELECT machine_id, TOTAL(saved_ms) AS saved_ms, SUM(saved) AS saved FROM temp.saved_sums GROUP BY 1) s
WHERE s.machine_id = history_machines.machine_id;
UPDATE history_machine_kernels SET saved_ms = s.saved_ms, saved = s.saved
FROM (SELECT machine_id, kernel, TOTAL(saved_ms) AS saved_ms, SUM(saved) AS saved FROM temp.saved_sums GROUP BY 1, 2) s
WHERE s.machine_id = history_machine_kernels.machine_id AND s.kernel = history_machine_kernels.kernel;

DROP TABLE temp.saved_sums;

-- The overview's figures per machine over the last week: hours from a given one, grouped by
-- machine, read from one index range (`db/headline.rs`).
CREATE INDEX history_machine_hours_recent
    ON history_machine_hours(hour, machine_id, hits, misses, inferred, compile_ms, timed, hook_events, saved_ms, saved);
