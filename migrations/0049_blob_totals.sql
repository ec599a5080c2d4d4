-- The totals of IR text kept that the machine page shows (db/blobs.rs::totals): one row kept by
-- triggers in the writer's transaction, where the page read every blob (71 of its 76 ms of SQL
-- on a 24,000-key fleet). Written to run again on a database whose `blobs` was rebuilt (the row
-- is counted afresh).
CREATE TABLE IF NOT EXISTS blob_totals (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    texts  INTEGER NOT NULL,
    bytes  INTEGER NOT NULL,   -- the texts' lengths as written
    stored INTEGER NOT NULL,   -- what they take: compressed length, or the plain length
    plain  INTEGER NOT NULL    -- texts stored before compression (0030)
);
INSERT OR REPLACE INTO blob_totals(id, texts, bytes, stored, plain)
    SELECT 1, COUNT(*), COALESCE(SUM(bytes), 0), COALESCE(SUM(COALESCE(length(z), bytes)), 0),
           COALESCE(SUM(content IS NOT NULL), 0)
    FROM blobs;
DROP TRIGGER IF EXISTS blob_totals_insert;
DROP TRIGGER IF EXISTS blob_totals_delete;
DROP TRIGGER IF EXISTS blob_totals_update;
CREATE TRIGGER blob_totals_insert AFTER INSERT ON blobs BEGIN
    UPDATE blob_totals SET texts = texts + 1, bytes = bytes + NEW.bytes,
        stored = stored + COALESCE(length(NEW.z), NEW.bytes), plain = plain + (NEW.content IS NOT NULL)
    WHERE id = 1;
END;
CREATE TRIGGER blob_totals_delete AFTER DELETE ON blobs BEGIN
    UPDATE blob_totals SET texts = texts - 1, bytes = bytes - OLD.bytes,
        stored = stored - COALESCE(length(OLD.z), OLD.bytes), plain = plain - (OLD.content IS NOT NULL)
    WHERE id = 1;
END;
CREATE TRIGGER blob_totals_update AFTER UPDATE OF bytes, z, content ON blobs BEGIN
    UPDATE blob_totals SET bytes = bytes - OLD.bytes + NEW.bytes,
        stored = stored - COALESCE(length(OLD.z), OLD.bytes) + COALESCE(length(NEW.z), NEW.bytes),
        plain = plain - (OLD.content IS NOT NULL) + (NEW.content IS NOT NULL)
    WHERE id = 1;
END;
