-- Live entries per machine and per machine and kernel, kept exact by triggers (issue 14): a
-- deep `offset` into `/api/v1/entries` skips whole machines and kernels by these counts instead
-- of walking every skipped index row (offset 900,000 of a 1M-entry fleet walked 900,000).
-- Triggers, as for `report_gens`, so every writer (local scan, upload ingest) keeps them in the
-- same transaction as the entries they count. Never edit once landed.
CREATE TABLE machine_counts (
    machine_id INTEGER PRIMARY KEY,
    live       INTEGER NOT NULL
);

-- `named` and `kernel` order a machine's groups as the listing orders its entries (the listing
-- index's `kernel` column, NULL first): `named` 0 holds the entries without a kernel name
-- (`kernel` '').
CREATE TABLE entry_counts (
    machine_id INTEGER NOT NULL,
    named      INTEGER NOT NULL,
    kernel     TEXT NOT NULL,
    live       INTEGER NOT NULL,
    PRIMARY KEY (machine_id, named, kernel)
) WITHOUT ROWID;

INSERT INTO entry_counts(machine_id, named, kernel, live)
    SELECT machine_id, kernel IS NOT NULL, COALESCE(kernel, ''), COUNT(*) FROM entries
    WHERE removed_at IS NULL GROUP BY 1, 2, 3;
INSERT INTO machine_counts(machine_id, live) SELECT machine_id, SUM(live) FROM entry_counts GROUP BY machine_id;

CREATE TRIGGER entry_counts_insert AFTER INSERT ON entries WHEN NEW.removed_at IS NULL BEGIN
    INSERT INTO machine_counts(machine_id, live) VALUES (NEW.machine_id, 1)
        ON CONFLICT(machine_id) DO UPDATE SET live = live + 1;
    INSERT INTO entry_counts(machine_id, named, kernel, live)
        VALUES (NEW.machine_id, NEW.kernel IS NOT NULL, COALESCE(NEW.kernel, ''), 1)
        ON CONFLICT(machine_id, named, kernel) DO UPDATE SET live = live + 1;
END;
CREATE TRIGGER entry_counts_delete AFTER DELETE ON entries WHEN OLD.removed_at IS NULL BEGIN
    UPDATE machine_counts SET live = live - 1 WHERE machine_id = OLD.machine_id;
    UPDATE entry_counts SET live = live - 1
        WHERE machine_id = OLD.machine_id AND named = (OLD.kernel IS NOT NULL) AND kernel = COALESCE(OLD.kernel, '');
END;
CREATE TRIGGER entry_counts_update AFTER UPDATE OF machine_id, kernel, removed_at ON entries
WHEN (OLD.removed_at IS NULL) IS NOT (NEW.removed_at IS NULL)
  OR OLD.kernel IS NOT NEW.kernel OR OLD.machine_id IS NOT NEW.machine_id BEGIN
    UPDATE machine_counts SET live = live - 1 WHERE OLD.removed_at IS NULL AND machine_id = OLD.machine_id;
    UPDATE entry_counts SET live = live - 1
        WHERE OLD.removed_at IS NULL AND machine_id = OLD.machine_id AND named = (OLD.kernel IS NOT NULL)
          AND kernel = COALESCE(OLD.kernel, '');
    INSERT INTO machine_counts(machine_id, live) SELECT NEW.machine_id, 1 WHERE NEW.removed_at IS NULL
        ON CONFLICT(machine_id) DO UPDATE SET live = live + 1;
    INSERT INTO entry_counts(machine_id, named, kernel, live)
        SELECT NEW.machine_id, NEW.kernel IS NOT NULL, COALESCE(NEW.kernel, ''), 1 WHERE NEW.removed_at IS NULL
        ON CONFLICT(machine_id, named, kernel) DO UPDATE SET live = live + 1;
END;
