-- Invalidation reports kept, not recomputed (issue 14 item 2).
--
-- `report_gens` counts the changes to what a machine's reports read: its kernel entries (rows
-- added, removed, or a column a report reads changed), their .source/.ttir artifacts, and the
-- hook's events that carry key parts or compile times. Triggers keep it, so every writer (local
-- scan, upload ingest, rebuild) is covered. A stored report remembers the generation of both
-- of its machines: when either moved, the report is computed again on its next visit.
CREATE TABLE report_gens (
    machine_id INTEGER PRIMARY KEY,
    gen        INTEGER NOT NULL
);

CREATE TRIGGER report_gen_entry_insert AFTER INSERT ON entries BEGIN
    INSERT INTO report_gens(machine_id, gen) VALUES (NEW.machine_id, 1)
        ON CONFLICT(machine_id) DO UPDATE SET gen = gen + 1;
END;
CREATE TRIGGER report_gen_entry_delete AFTER DELETE ON entries BEGIN
    INSERT INTO report_gens(machine_id, gen) VALUES (OLD.machine_id, 1)
        ON CONFLICT(machine_id) DO UPDATE SET gen = gen + 1;
END;
CREATE TRIGGER report_gen_entry_update AFTER UPDATE ON entries
WHEN OLD.key IS NOT NEW.key OR OLD.kind IS NOT NEW.kind OR OLD.kernel IS NOT NEW.kernel
  OR OLD.root IS NOT NEW.root OR OLD.machine_id IS NOT NEW.machine_id
  OR OLD.metadata_json IS NOT NEW.metadata_json OR OLD.binary_sha256 IS NOT NEW.binary_sha256
  OR OLD.resources_json IS NOT NEW.resources_json OR OLD.relocated IS NOT NEW.relocated
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
CREATE TRIGGER report_gen_event AFTER INSERT ON events
WHEN NEW.parts_json IS NOT NULL OR NEW.event = 'compile' BEGIN
    INSERT INTO report_gens(machine_id, gen) VALUES (NEW.machine_id, 1)
        ON CONFLICT(machine_id) DO UPDATE SET gen = gen + 1;
END;

-- One stored report: `spec` names it (`scan:<to>:<from>` or `pair:<a>\n<b>`), `head_json` holds
-- its counts, summary and per-cause totals.
CREATE TABLE inv_reports (
    id         INTEGER PRIMARY KEY,
    spec       TEXT NOT NULL UNIQUE,
    old_gen    INTEGER NOT NULL,
    new_gen    INTEGER NOT NULL,
    head_json  TEXT NOT NULL,
    computed_at INTEGER NOT NULL,
    compute_ms INTEGER NOT NULL
);

-- Its rows. `list`: 0 invalidated, 1 new, 2 removed; `seq`: order of the fresh computation;
-- `rank`: page order within a cause (its kernels with most recompiles first). `key` is the new
-- key (the old one for removed), `why` an index into `inv_whys`. `flags`: 1 identical binary,
-- 2 identical machine code, 4 the new entry is relocated.
CREATE TABLE inv_rows (
    report_id  INTEGER NOT NULL REFERENCES inv_reports(id) ON DELETE CASCADE,
    list       INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    rank       INTEGER NOT NULL,
    cause      TEXT,
    kernel     TEXT NOT NULL,
    key        TEXT NOT NULL,
    old_key    TEXT,
    why        INTEGER,
    flags      INTEGER NOT NULL,
    compile_ms REAL,
    PRIMARY KEY (report_id, list, seq)
) WITHOUT ROWID;
CREATE INDEX inv_rows_cause ON inv_rows(report_id, list, cause, rank);

-- The distinct reasons (a row's summary) of a report, with how many rows give each.
CREATE TABLE inv_whys (
    report_id INTEGER NOT NULL REFERENCES inv_reports(id) ON DELETE CASCADE,
    id        INTEGER NOT NULL,
    cause     TEXT NOT NULL,
    text      TEXT NOT NULL,
    n         INTEGER NOT NULL,
    PRIMARY KEY (report_id, id)
) WITHOUT ROWID;
CREATE INDEX inv_whys_cause ON inv_whys(report_id, cause, n);

-- The invalidated entries of one kernel under one cause.
CREATE TABLE inv_kernels (
    report_id INTEGER NOT NULL REFERENCES inv_reports(id) ON DELETE CASCADE,
    cause     TEXT NOT NULL,
    rank      INTEGER NOT NULL,
    kernel    TEXT NOT NULL,
    entries   INTEGER NOT NULL,
    identical INTEGER NOT NULL,
    same_code INTEGER NOT NULL,
    ms        REAL NOT NULL,
    timed     INTEGER NOT NULL,
    PRIMARY KEY (report_id, cause, rank)
) WITHOUT ROWID;
