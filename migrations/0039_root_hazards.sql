-- Where each cache root of a machine sits, as its latest scan that reported it saw it
-- (scan::hazards: file system type, free bytes and inodes, orphaned temp dirs, hook hosts):
-- one row per (machine, root), replaced by each landed scan that carries hazards. The machine
-- page and /metrics read it; warnings are derived from the figures when read.
CREATE TABLE root_hazards (
    machine_id   INTEGER NOT NULL REFERENCES machines(id),
    root         TEXT NOT NULL,
    scan_id      INTEGER NOT NULL,
    reported_at  INTEGER NOT NULL,   -- unix ms
    hazards_json TEXT NOT NULL,      -- model::Hazards (warnings left out)
    PRIMARY KEY (machine_id, root)
);
CREATE INDEX root_hazards_root ON root_hazards(root);
