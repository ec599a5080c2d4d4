-- Live entries per machine, kept exact by triggers (issue 14): a deep `offset` into the fleet's
-- `/api/v1/entries` skips whole machines by these counts instead of walking every skipped index
-- row (offset 900,000 of a 1M-entry fleet walked 900,000). Triggers, as for `report_gens`, so
-- every writer (local scan, upload ingest) keeps them in the same transaction as the entries
-- they count. Never edit once landed.
CREATE TABLE machine_counts (
    machine_id INTEGER PRIMARY KEY,
    live       INTEGER NOT NULL
);

INSERT INTO machine_counts(machine_id, live)
    SELECT machine_id, COUNT(*) FROM entries WHERE removed_at IS NULL GROUP BY machine_id;

CREATE TRIGGER machine_counts_insert AFTER INSERT ON entries WHEN NEW.removed_at IS NULL BEGIN
    INSERT INTO machine_counts(machine_id, live) VALUES (NEW.machine_id, 1)
        ON CONFLICT(machine_id) DO UPDATE SET live = live + 1;
END;
CREATE TRIGGER machine_counts_delete AFTER DELETE ON entries WHEN OLD.removed_at IS NULL BEGIN
    UPDATE machine_counts SET live = live - 1 WHERE machine_id = OLD.machine_id;
END;
CREATE TRIGGER machine_counts_update AFTER UPDATE OF machine_id, removed_at ON entries
WHEN (OLD.removed_at IS NULL) IS NOT (NEW.removed_at IS NULL) OR OLD.machine_id IS NOT NEW.machine_id BEGIN
    UPDATE machine_counts SET live = live - 1 WHERE OLD.removed_at IS NULL AND machine_id = OLD.machine_id;
    INSERT INTO machine_counts(machine_id, live) SELECT NEW.machine_id, 1 WHERE NEW.removed_at IS NULL
        ON CONFLICT(machine_id) DO UPDATE SET live = live + 1;
END;
