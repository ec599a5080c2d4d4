-- Where compile time goes: the per-stage compile times the hook records (`stages_ms` of compile
-- events: ir_init, ttir, ttgir, llir, ptx/amdgcn, cubin/hsaco, store), summed per kernel and
-- machine as events land (db::stages), so that a kernel page reads a few rows, not its events.
CREATE TABLE kernel_stages (
    kernel      TEXT NOT NULL,
    machine_id  INTEGER NOT NULL REFERENCES machines(id),
    stage       TEXT NOT NULL,
    ms          REAL NOT NULL,               -- summed over the compiles that timed the stage
    compiles    INTEGER NOT NULL,            -- how many did
    PRIMARY KEY (kernel, machine_id, stage)
) WITHOUT ROWID;
CREATE INDEX kernel_stages_machine ON kernel_stages(machine_id);

INSERT INTO kernel_stages(kernel, machine_id, stage, ms, compiles)
SELECT e.kernel, e.machine_id, j.key, SUM(j.value), COUNT(*)
FROM events e,
     json_each(CASE WHEN json_valid(e.stages_json) AND json_type(e.stages_json) = 'object' THEN e.stages_json ELSE '{}' END) j
WHERE e.event = 'compile' AND e.kernel IS NOT NULL AND e.stages_json IS NOT NULL AND j.type IN ('integer', 'real')
GROUP BY e.kernel, e.machine_id, j.key;
