-- A kernel's grid cells follow presence by counters. A node whose keys the fleet already holds
-- changes how many live entries each fact has, not which facts are live; its kernels' cells are
-- then summed again from each fact's counters (`fact_live`), not from every live fact's entries
-- and contents (db/rebuild.rs: a kernel is summed whole only where its set of live facts moved).
--
-- Per fact: its oldest and newest live entry (`lo`, `hi`: the cells' samples; NULL where that
-- entry went and it is to be looked up again, or none is live), and whether another live key of
-- its kernel has the same binary (`dup` & 1) or the same machine code (`dup` & 2), as the last
-- whole sum of its kernel found.
ALTER TABLE fact_live ADD COLUMN lo INTEGER;
ALTER TABLE fact_live ADD COLUMN hi INTEGER;
ALTER TABLE fact_live ADD COLUMN dup INTEGER NOT NULL DEFAULT 0;
UPDATE fact_live
SET lo = (SELECT MIN(e.id) FROM entries e INDEXED BY entries_live WHERE e.fact_id = fact_live.fact_id AND e.removed_at IS NULL),
    hi = (SELECT MAX(e.id) FROM entries e INDEXED BY entries_live WHERE e.fact_id = fact_live.fact_id AND e.removed_at IS NULL)
WHERE live > 0;
-- the facts whose sample entry went, for the next summary update to look up
CREATE INDEX fact_live_unknown ON fact_live(fact_id) WHERE live > 0 AND (lo IS NULL OR hi IS NULL);

-- A mark says whether the kernel's live facts changed (1: sum it whole) or only their counts (0).
ALTER TABLE page_dirty_kernels ADD COLUMN whole INTEGER NOT NULL DEFAULT 1;

DROP TRIGGER fact_live_entry_insert;
DROP TRIGGER fact_live_entry_delete;
DROP TRIGGER fact_live_entry_update;
CREATE TRIGGER fact_live_entry_insert AFTER INSERT ON entries WHEN NEW.removed_at IS NULL BEGIN
    UPDATE fact_live SET live = live + 1,
        lo = CASE WHEN live <= 0 THEN NEW.id WHEN lo IS NULL THEN NULL ELSE MIN(lo, NEW.id) END,
        hi = CASE WHEN live <= 0 THEN NEW.id WHEN hi IS NULL THEN NULL ELSE MAX(hi, NEW.id) END
    WHERE fact_id = NEW.fact_id;
    INSERT INTO variant_machines(variant_id, machine_id, live)
        SELECT variant_id, NEW.machine_id, 1 FROM fact_live WHERE fact_id = NEW.fact_id AND variant_id IS NOT NULL
        ON CONFLICT(variant_id, machine_id) DO UPDATE SET live = live + 1;
END;
CREATE TRIGGER fact_live_entry_delete AFTER DELETE ON entries WHEN OLD.removed_at IS NULL BEGIN
    UPDATE fact_live SET live = live - 1,
        lo = CASE WHEN lo = OLD.id OR live <= 1 THEN NULL ELSE lo END,
        hi = CASE WHEN hi = OLD.id OR live <= 1 THEN NULL ELSE hi END
    WHERE fact_id = OLD.fact_id;
    UPDATE variant_machines SET live = live - 1
        WHERE machine_id = OLD.machine_id AND variant_id = (SELECT variant_id FROM fact_live WHERE fact_id = OLD.fact_id);
    DELETE FROM variant_machines
        WHERE machine_id = OLD.machine_id AND live <= 0
          AND variant_id = (SELECT variant_id FROM fact_live WHERE fact_id = OLD.fact_id);
END;
CREATE TRIGGER fact_live_entry_update AFTER UPDATE OF machine_id, fact_id, removed_at ON entries
WHEN (OLD.removed_at IS NULL) IS NOT (NEW.removed_at IS NULL)
  OR OLD.fact_id IS NOT NEW.fact_id OR OLD.machine_id IS NOT NEW.machine_id BEGIN
    UPDATE fact_live SET live = live - 1,
        lo = CASE WHEN lo = OLD.id OR live <= 1 THEN NULL ELSE lo END,
        hi = CASE WHEN hi = OLD.id OR live <= 1 THEN NULL ELSE hi END
    WHERE OLD.removed_at IS NULL AND fact_id = OLD.fact_id;
    UPDATE variant_machines SET live = live - 1
        WHERE OLD.removed_at IS NULL AND machine_id = OLD.machine_id
          AND variant_id = (SELECT variant_id FROM fact_live WHERE fact_id = OLD.fact_id);
    DELETE FROM variant_machines
        WHERE OLD.removed_at IS NULL AND machine_id = OLD.machine_id AND live <= 0
          AND variant_id = (SELECT variant_id FROM fact_live WHERE fact_id = OLD.fact_id);
    UPDATE fact_live SET live = live + 1,
        lo = CASE WHEN live <= 0 THEN NEW.id WHEN lo IS NULL THEN NULL ELSE MIN(lo, NEW.id) END,
        hi = CASE WHEN live <= 0 THEN NEW.id WHEN hi IS NULL THEN NULL ELSE MAX(hi, NEW.id) END
    WHERE NEW.removed_at IS NULL AND fact_id = NEW.fact_id;
    INSERT INTO variant_machines(variant_id, machine_id, live)
        SELECT variant_id, NEW.machine_id, 1 FROM fact_live
        WHERE NEW.removed_at IS NULL AND fact_id = NEW.fact_id AND variant_id IS NOT NULL
        ON CONFLICT(variant_id, machine_id) DO UPDATE SET live = live + 1;
END;

-- A fact that becomes live or stops being live changes its kernel's set of live facts.
CREATE TRIGGER page_dirty_fact_live AFTER UPDATE OF live ON fact_live
WHEN (OLD.live > 0) IS NOT (NEW.live > 0) AND NEW.variant_id IS NOT NULL BEGIN
    INSERT INTO page_dirty_kernels(kernel, gen, whole)
        SELECT kernel, (SELECT gen FROM page_gen WHERE id = 1), 1 FROM variants WHERE id = NEW.variant_id
        ON CONFLICT(kernel) DO UPDATE SET gen = excluded.gen, whole = 1 WHERE gen <> excluded.gen OR whole = 0;
END;

-- An entry's own change marks its kernel's counts (0): its fact's liveness marks the rest above.
DROP TRIGGER page_dirty_entry_insert;
DROP TRIGGER page_dirty_entry_update;
DROP TRIGGER page_dirty_entry_delete;
CREATE TRIGGER page_dirty_entry_insert AFTER INSERT ON entries BEGIN
    INSERT INTO page_dirty_machines(machine_id, gen) VALUES (new.machine_id, (SELECT gen FROM page_gen WHERE id = 1))
        ON CONFLICT(machine_id) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
    INSERT INTO page_dirty_kernels(kernel, gen, whole)
        SELECT f.kernel, (SELECT gen FROM page_gen WHERE id = 1), 0 FROM facts f
        WHERE f.id = new.fact_id AND f.kernel IS NOT NULL
        ON CONFLICT(kernel) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
END;
CREATE TRIGGER page_dirty_entry_update AFTER UPDATE OF machine_id, root_id, key_id, fact_id, dir, sig, bytes,
    created_at, relocated, first_scan_id, last_scan_id, first_seen_at, last_seen_at, removed_at, removed_scan_id,
    group_at, group_sha256, group_bytes ON entries BEGIN
    INSERT INTO page_dirty_machines(machine_id, gen)
        SELECT m, (SELECT gen FROM page_gen WHERE id = 1) FROM (SELECT old.machine_id AS m UNION SELECT new.machine_id)
        WHERE true
        ON CONFLICT(machine_id) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
    INSERT INTO page_dirty_kernels(kernel, gen, whole)
        SELECT f.kernel, (SELECT gen FROM page_gen WHERE id = 1), 0 FROM facts f
        WHERE f.id IN (old.fact_id, new.fact_id) AND f.kernel IS NOT NULL
        ON CONFLICT(kernel) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
END;
CREATE TRIGGER page_dirty_entry_delete AFTER DELETE ON entries BEGIN
    INSERT INTO page_dirty_machines(machine_id, gen) VALUES (old.machine_id, (SELECT gen FROM page_gen WHERE id = 1))
        ON CONFLICT(machine_id) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
    INSERT INTO page_dirty_kernels(kernel, gen, whole)
        SELECT f.kernel, (SELECT gen FROM page_gen WHERE id = 1), 0 FROM facts f
        WHERE f.id = old.fact_id AND f.kernel IS NOT NULL
        ON CONFLICT(kernel) DO UPDATE SET gen = excluded.gen WHERE gen <> excluded.gen;
END;

-- Every kernel is summed whole once, which sets its facts' `dup`.
INSERT INTO page_dirty_kernels(kernel, gen, whole)
    SELECT DISTINCT kernel, (SELECT gen FROM page_gen WHERE id = 1), 1 FROM variants WHERE true
    ON CONFLICT(kernel) DO UPDATE SET whole = 1;
