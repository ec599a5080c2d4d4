-- The fleet timeline (the overview's "what changed"): one row per event, written as scans land
-- (db::timeline). Read newest first, a page at a time, through timeline_at.
-- Per scan: the Triton version of the newest entry its root compiled so far and the Python of
-- the newest hook compile so far (with when), carried from scan to scan of the root; a change
-- between two scans of a root is a timeline event.
ALTER TABLE scans ADD COLUMN triton_version TEXT;
ALTER TABLE scans ADD COLUMN triton_at INTEGER;
ALTER TABLE scans ADD COLUMN python TEXT;
ALTER TABLE scans ADD COLUMN python_at INTEGER;

CREATE TABLE timeline (
    id              INTEGER PRIMARY KEY,
    at              INTEGER NOT NULL,        -- when the scan that saw it was made
    machine_id      INTEGER NOT NULL REFERENCES machines(id),
    scan_id         INTEGER NOT NULL,
    from_scan_id    INTEGER,                 -- the root's scan before (triton, python, invalidation)
    kind            TEXT NOT NULL,           -- new_machine | triton | python | invalidation
    before          TEXT,                    -- triton/python: the old value
    after           TEXT,                    -- triton/python: the new one; invalidation: its main cause
    count           INTEGER,                 -- invalidation: entries invalidated
    base            INTEGER,                 -- invalidation: entries of the scan before
    UNIQUE (scan_id, kind)
);
CREATE INDEX timeline_at ON timeline(at, id);
CREATE INDEX timeline_machine ON timeline(machine_id);

-- Machines of a database made before this: their first scan.
INSERT INTO timeline(at, machine_id, scan_id, kind)
SELECT s.scanned_at, s.machine_id, s.id, 'new_machine' FROM scans s
WHERE s.id = (SELECT MIN(t.id) FROM scans t WHERE t.machine_id = s.machine_id);
