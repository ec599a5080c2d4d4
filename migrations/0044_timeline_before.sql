-- The timeline of a database made before 0041, filled in from what it holds, as the landing
-- scans would have written it (db/timeline.rs). 0041 gave those scans no Triton version: the
-- next scan of their root compared with nothing, so an upgrade after the migration made no
-- event, and the upgrades and mass invalidations before it were missing.
-- A scan's Triton version: that of the newest entry (by compile time) of its root first seen at
-- or before it. A change between two scans of a root: a `triton` event. A stored landing report
-- (`scan:TO:FROM`) that invalidated at least 10 entries and a quarter of the scan before's
-- (timeline::MASS_MIN): an `invalidation` event, its main cause the most given (ties: the order
-- of explain::Cause::ORDER). Rows already written stay. The Python of the hook's compiles is not
-- filled in: hook events are not tied to a root.
-- Linear in entries and scans: one pass over entries (the newest each scan brought: SQLite takes
-- the bare columns from the row of MAX), windows over scans per root (the newest so far: compile
-- time zero-padded before the version, so the greater string is the newer; the scan before).
CREATE TEMP TABLE brought AS
SELECT first_scan_id AS scan_id, MAX(created_at) AS at, triton_version
FROM entries WHERE triton_version IS NOT NULL AND created_at IS NOT NULL
GROUP BY first_scan_id;
CREATE TEMP TABLE so_far (scan_id INTEGER PRIMARY KEY, newest TEXT);
INSERT INTO so_far
SELECT s.id, MAX(printf('%020d', b.at) || b.triton_version)
    OVER (PARTITION BY s.machine_id, s.root ORDER BY s.id ROWS UNBOUNDED PRECEDING)
FROM scans s LEFT JOIN brought b ON b.scan_id = s.id;
UPDATE scans SET
    triton_version = (SELECT substr(newest, 21) FROM so_far WHERE so_far.scan_id = scans.id),
    triton_at = (SELECT CAST(substr(newest, 1, 20) AS INTEGER) FROM so_far WHERE so_far.scan_id = scans.id)
WHERE triton_version IS NULL;
DROP TABLE brought;
DROP TABLE so_far;

INSERT OR IGNORE INTO timeline(at, machine_id, scan_id, from_scan_id, kind, before, after)
SELECT scanned_at, machine_id, id, prev_id, 'triton', prev_version, triton_version
FROM (SELECT s.scanned_at, s.machine_id, s.id, s.triton_version,
             LAG(s.id) OVER w AS prev_id, LAG(s.triton_version) OVER w AS prev_version
      FROM scans s WINDOW w AS (PARTITION BY s.machine_id, s.root ORDER BY s.id))
WHERE prev_version <> triton_version
ORDER BY id;

INSERT OR IGNORE INTO timeline(at, machine_id, scan_id, from_scan_id, kind, after, count, base)
SELECT s.scanned_at, s.machine_id, s.id, json_extract(r.head_json, '$.from'), 'invalidation',
    (SELECT json_extract(c.value, '$.cause') FROM json_each(r.head_json, '$.by_cause') c
     ORDER BY json_extract(c.value, '$.count') DESC,
         CASE json_extract(c.value, '$.cause')
             WHEN 'compiler' THEN 0 WHEN 'backend' THEN 1 WHEN 'env' THEN 2 WHEN 'source' THEN 3
             WHEN 'options' THEN 4 WHEN 'none' THEN 5 ELSE 6 END
     LIMIT 1),
    json_extract(r.head_json, '$.invalidated'), json_extract(r.head_json, '$.old_entries')
FROM inv_reports r
JOIN scans s ON s.id = json_extract(r.head_json, '$.to')
WHERE r.spec >= 'scan:' AND r.spec < 'scan;'
  AND json_extract(r.head_json, '$.invalidated') >= 10
  AND json_extract(r.head_json, '$.invalidated') * 4 >= json_extract(r.head_json, '$.old_entries')
ORDER BY s.id;
