-- A kernel's variants grid kept from counters, not from every entry of the fleet (issue 17).
--
-- A cell of the grid (kernel, backend, arch, version, signature, shapes, warps, stages, kind) is
-- a property of a fact: it is stored once (`variants`), and each fact names its cell. Triggers on
-- `entries`, in the writer's own transaction, keep two counters: the live entries of each fact
-- (`fact_live`) and the live entries of each cell on each machine (`variant_machines`). A summary
-- update then reads the facts of the kernels a landing touched and these counters: its cost
-- follows what is distinct, not how many machines hold it. Before, it read every live entry of
-- every touched kernel on every machine, so a new node of known kernels cost more the larger the
-- fleet.
--
-- `entries_live` finds a fact's oldest and newest live entries (the cell's samples) in two seeks.
-- Never edit once landed.

CREATE TABLE variants (
    id              INTEGER PRIMARY KEY,
    -- the cell's columns as one JSON array: NULL and '' stay apart, unlike a unique index
    cell            TEXT NOT NULL UNIQUE,
    kernel          TEXT NOT NULL,
    backend         TEXT,
    arch            TEXT,
    triton_version  TEXT,
    signature       TEXT,
    shapes          TEXT,
    num_warps       INTEGER,
    num_stages      INTEGER,
    kind            TEXT NOT NULL           -- '' for kernel variants, else the entry kind
);
CREATE INDEX variants_kernel ON variants(kernel);

-- Every fact's live entries, and its cell (NULL: no kernel name).
CREATE TABLE fact_live (
    fact_id     INTEGER PRIMARY KEY REFERENCES facts(id) ON DELETE CASCADE,
    variant_id  INTEGER REFERENCES variants(id),
    live        INTEGER NOT NULL
);
CREATE INDEX fact_live_variant ON fact_live(variant_id, live) WHERE variant_id IS NOT NULL;

-- Live entries of a cell on a machine (no row at zero).
CREATE TABLE variant_machines (
    variant_id  INTEGER NOT NULL,
    machine_id  INTEGER NOT NULL,
    live        INTEGER NOT NULL,
    PRIMARY KEY (variant_id, machine_id)
) WITHOUT ROWID;

CREATE INDEX entries_live ON entries(fact_id) WHERE removed_at IS NULL;

INSERT INTO variants(cell, kernel, backend, arch, triton_version, signature, shapes, num_warps, num_stages, kind)
    SELECT DISTINCT json_array(kernel, backend, arch, triton_version, signature, shapes, num_warps, num_stages, k),
           kernel, backend, arch, triton_version, signature, shapes, num_warps, num_stages, k
    FROM (SELECT *, CASE WHEN num_warps IS NULL AND num_stages IS NULL THEN kind ELSE '' END AS k FROM facts
          WHERE kernel IS NOT NULL);
INSERT INTO fact_live(fact_id, variant_id, live)
    SELECT f.id,
           (SELECT v.id FROM variants v
            WHERE v.cell = json_array(f.kernel, f.backend, f.arch, f.triton_version, f.signature, f.shapes,
                                      f.num_warps, f.num_stages,
                                      CASE WHEN f.num_warps IS NULL AND f.num_stages IS NULL THEN f.kind ELSE '' END)),
           (SELECT COUNT(*) FROM entries e WHERE e.fact_id = f.id AND e.removed_at IS NULL)
    FROM facts f;
INSERT INTO variant_machines(variant_id, machine_id, live)
    SELECT l.variant_id, e.machine_id, COUNT(*) FROM entries e JOIN fact_live l ON l.fact_id = e.fact_id
    WHERE e.removed_at IS NULL AND l.variant_id IS NOT NULL
    GROUP BY l.variant_id, e.machine_id;

-- A new fact: its cell (made once), its counter at zero. (Facts are content: never updated.)
CREATE TRIGGER fact_live_fact_insert AFTER INSERT ON facts BEGIN
    INSERT INTO variants(cell, kernel, backend, arch, triton_version, signature, shapes, num_warps, num_stages, kind)
        SELECT json_array(NEW.kernel, NEW.backend, NEW.arch, NEW.triton_version, NEW.signature, NEW.shapes,
                          NEW.num_warps, NEW.num_stages, k),
               NEW.kernel, NEW.backend, NEW.arch, NEW.triton_version, NEW.signature, NEW.shapes,
               NEW.num_warps, NEW.num_stages, k
        FROM (SELECT CASE WHEN NEW.num_warps IS NULL AND NEW.num_stages IS NULL THEN NEW.kind ELSE '' END AS k)
        WHERE NEW.kernel IS NOT NULL
        ON CONFLICT(cell) DO NOTHING;
    INSERT INTO fact_live(fact_id, variant_id, live)
        VALUES (NEW.id,
                (SELECT id FROM variants
                 WHERE cell = json_array(NEW.kernel, NEW.backend, NEW.arch, NEW.triton_version, NEW.signature,
                                         NEW.shapes, NEW.num_warps, NEW.num_stages,
                                         CASE WHEN NEW.num_warps IS NULL AND NEW.num_stages IS NULL
                                              THEN NEW.kind ELSE '' END)),
                0);
END;

-- The counters follow an entry's life: made live, removed, deleted, or moved to another fact or
-- machine (as `entry_counts` does, 0027).
CREATE TRIGGER fact_live_entry_insert AFTER INSERT ON entries WHEN NEW.removed_at IS NULL BEGIN
    UPDATE fact_live SET live = live + 1 WHERE fact_id = NEW.fact_id;
    INSERT INTO variant_machines(variant_id, machine_id, live)
        SELECT variant_id, NEW.machine_id, 1 FROM fact_live WHERE fact_id = NEW.fact_id AND variant_id IS NOT NULL
        ON CONFLICT(variant_id, machine_id) DO UPDATE SET live = live + 1;
END;
CREATE TRIGGER fact_live_entry_delete AFTER DELETE ON entries WHEN OLD.removed_at IS NULL BEGIN
    UPDATE fact_live SET live = live - 1 WHERE fact_id = OLD.fact_id;
    UPDATE variant_machines SET live = live - 1
        WHERE machine_id = OLD.machine_id AND variant_id = (SELECT variant_id FROM fact_live WHERE fact_id = OLD.fact_id);
    DELETE FROM variant_machines
        WHERE machine_id = OLD.machine_id AND live <= 0
          AND variant_id = (SELECT variant_id FROM fact_live WHERE fact_id = OLD.fact_id);
END;
CREATE TRIGGER fact_live_entry_update AFTER UPDATE OF machine_id, fact_id, removed_at ON entries
WHEN (OLD.removed_at IS NULL) IS NOT (NEW.removed_at IS NULL)
  OR OLD.fact_id IS NOT NEW.fact_id OR OLD.machine_id IS NOT NEW.machine_id BEGIN
    UPDATE fact_live SET live = live - 1 WHERE OLD.removed_at IS NULL AND fact_id = OLD.fact_id;
    UPDATE variant_machines SET live = live - 1
        WHERE OLD.removed_at IS NULL AND machine_id = OLD.machine_id
          AND variant_id = (SELECT variant_id FROM fact_live WHERE fact_id = OLD.fact_id);
    DELETE FROM variant_machines
        WHERE OLD.removed_at IS NULL AND machine_id = OLD.machine_id AND live <= 0
          AND variant_id = (SELECT variant_id FROM fact_live WHERE fact_id = OLD.fact_id);
    UPDATE fact_live SET live = live + 1 WHERE NEW.removed_at IS NULL AND fact_id = NEW.fact_id;
    INSERT INTO variant_machines(variant_id, machine_id, live)
        SELECT variant_id, NEW.machine_id, 1 FROM fact_live
        WHERE NEW.removed_at IS NULL AND fact_id = NEW.fact_id AND variant_id IS NOT NULL
        ON CONFLICT(variant_id, machine_id) DO UPDATE SET live = live + 1;
END;
