-- Bytes by artifact type per fact: a machine's bytes by type (`page_machine_ext`) are summed
-- from its live entries' facts by id, a few rows per fact, instead of joining each fact's files by
-- its text (`fact_files`, ~8 rows a fact). Kept by triggers on `fact_files`; a fact's rows go with
-- the fact (cascade).
CREATE TABLE fact_exts (
    fact_id INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
    ext     TEXT NOT NULL,
    files   INTEGER NOT NULL,
    bytes   INTEGER NOT NULL,
    PRIMARY KEY (fact_id, ext)
) WITHOUT ROWID;
INSERT INTO fact_exts(fact_id, ext, files, bytes)
SELECT f.id, ff.ext, COUNT(*), SUM(ff.bytes) FROM facts f JOIN fact_files ff ON ff.fact = f.fact GROUP BY f.id, ff.ext;

CREATE TRIGGER fact_exts_insert AFTER INSERT ON fact_files BEGIN
    INSERT INTO fact_exts(fact_id, ext, files, bytes)
        SELECT id, NEW.ext, 1, NEW.bytes FROM facts WHERE fact = NEW.fact
        ON CONFLICT(fact_id, ext) DO UPDATE SET files = files + 1, bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER fact_exts_delete AFTER DELETE ON fact_files BEGIN
    UPDATE fact_exts SET files = files - 1, bytes = bytes - OLD.bytes
        WHERE fact_id = (SELECT id FROM facts WHERE fact = OLD.fact) AND ext = OLD.ext;
    DELETE FROM fact_exts
        WHERE fact_id = (SELECT id FROM facts WHERE fact = OLD.fact) AND ext = OLD.ext AND files <= 0;
END;
