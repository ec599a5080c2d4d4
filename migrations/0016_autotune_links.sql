-- Autotune pages (issue 13 item 3): link Inductor's max-autotune choices to the Triton cache
-- entries compiled from them, and page decisions by machine without sorting the table.
--
-- entry_modules: the Inductor module (`<inductor dir>/<2 chars>/c<51 chars>.py`) an entry was
-- compiled from, read from the first line of its TTIR (`#loc = loc("<path>.py":line:col)`): the
-- module's file stem (`c` + 51 chars, the 2-char dir being its chars 2-3). Inductor names a
-- benchmarked template choice `<template>-<that stem>` (`triton_mm-cga37…`).
CREATE TABLE entry_modules (
    entry_id    INTEGER PRIMARY KEY REFERENCES entries(id) ON DELETE CASCADE,
    machine_id  INTEGER NOT NULL REFERENCES machines(id),
    module      TEXT NOT NULL
);
CREATE INDEX entry_modules_module ON entry_modules(machine_id, module);

-- One row per choice of an Inductor decision, fastest first (`rank` 0 is the winner); `module`
-- the stem the name ends with (`…-c<51 chars>`), NULL when it ends otherwise.
CREATE TABLE inductor_choices (
    decision_id INTEGER NOT NULL REFERENCES inductor_autotune(id) ON DELETE CASCADE,
    rank        INTEGER NOT NULL,
    machine_id  INTEGER NOT NULL REFERENCES machines(id),
    name        TEXT NOT NULL,
    module      TEXT,
    ms          REAL,
    PRIMARY KEY (decision_id, rank)
) WITHOUT ROWID;
CREATE INDEX inductor_choices_module ON inductor_choices(machine_id, module);
CREATE INDEX inductor_choices_name ON inductor_choices(name);

-- Pages of one machine's decisions in page order, read from the index.
CREATE INDEX inductor_autotune_page ON inductor_autotune(machine_id, op, key, precision, id);

-- What databases made before this migration hold: the same rules as the ingest's.
INSERT OR IGNORE INTO entry_modules(entry_id, machine_id, module)
SELECT entry_id, machine_id, substr(l, p - 52, 52) FROM (
    SELECT entry_id, machine_id, l, instr(l, '.py"') AS p FROM (
        SELECT a.entry_id, e.machine_id, substr(b.content, 1, instr(b.content, char(10))) AS l
        FROM artifacts a JOIN blobs b ON b.sha256 = a.sha256 JOIN entries e ON e.id = a.entry_id
        WHERE a.ext IN ('source', 'ttir')
    )
)
WHERE l LIKE '#loc = loc("%' AND p > 56 AND substr(l, p - 53, 1) = '/' AND substr(l, p - 56, 1) = '/'
  AND substr(l, p - 52, 1) = 'c' AND substr(l, p - 55, 2) = substr(l, p - 51, 2);

INSERT INTO inductor_choices(decision_id, rank, machine_id, name, module, ms)
SELECT a.id, CAST(j.key AS INTEGER), a.machine_id, json_extract(j.value, '$.name'),
       CASE WHEN length(json_extract(j.value, '$.name')) > 53
             AND substr(json_extract(j.value, '$.name'), -53, 2) = '-c'
            THEN substr(json_extract(j.value, '$.name'), -52) END,
       json_extract(j.value, '$.ms')
FROM inductor_autotune a, json_each(a.choices_json) j;
