-- A kernel's variants grid over the fleet, read at request time from the kernel's live facts:
-- one row per distinct fact however many machines hold it (`fact_live`: its live count and
-- machine-code digest, kept by triggers on `entries`), so a page's cost follows what is
-- distinct, and a landing that adds machines to known facts writes no cell. A cell's machines
-- come from its counters (`variant_machines`); its samples are its oldest and newest live
-- entries (probes of `entries_live`), named by machine and key.
WITH lf AS MATERIALIZED (
  SELECT f.id, f.key, v.id AS variant_id, l.live, f.registers, f.spills, f.shared_bytes, f.binary_sha256, l.code,
         (SELECT MIN(e.id) FROM entries e INDEXED BY entries_live WHERE e.fact_id = f.id AND e.removed_at IS NULL) AS lo,
         (SELECT MAX(e.id) FROM entries e INDEXED BY entries_live WHERE e.fact_id = f.id AND e.removed_at IS NULL) AS hi,
         -- the machines holding the fact live whose Inductor .best_config names its key (few keys have one)
         CASE WHEN f.key IN (SELECT triton_cache_hash FROM best_configs) THEN (
           SELECT COUNT(DISTINCT b.machine_id) FROM best_configs b
           WHERE b.triton_cache_hash = f.key
             AND EXISTS (SELECT 1 FROM entries e WHERE e.fact_id = f.id AND e.machine_id = b.machine_id
                                                    AND e.removed_at IS NULL)) ELSE 0 END AS best
  FROM variants v INDEXED BY variants_kernel
       CROSS JOIN fact_live l INDEXED BY fact_live_variant ON l.variant_id = v.id AND l.live > 0
       CROSS JOIN facts f ON f.id = l.fact_id
  WHERE v.kernel = ?1),
-- binaries that two or more keys of the kernel share (pure key churn)
dup_binaries AS (SELECT binary_sha256 AS sha FROM lf WHERE binary_sha256 IS NOT NULL
                 GROUP BY binary_sha256 HAVING COUNT(DISTINCT key) > 1),
-- machine code that two or more keys of the kernel share (bytes may differ in debug info only)
dup_code AS (SELECT code FROM lf WHERE code IS NOT NULL GROUP BY code HAVING COUNT(DISTINCT key) > 1),
c AS (
  SELECT variant_id, SUM(live) AS entries, MIN(registers) AS reg_min, MAX(registers) AS reg_max,
         MIN(spills) AS spill_min, MAX(spills) AS spill_max, MIN(shared_bytes) AS shared_min,
         MAX(shared_bytes) AS shared_max,
         SUM(CASE WHEN binary_sha256 IN (SELECT sha FROM dup_binaries) THEN live ELSE 0 END) AS shared_binary,
         SUM(best) AS best_config, MIN(lo) AS lo, MAX(hi) AS hi,
         SUM(CASE WHEN code IN (SELECT code FROM dup_code) THEN live ELSE 0 END) AS shared_code
  FROM lf GROUP BY variant_id)
SELECT v.backend, v.arch, v.triton_version, v.signature, v.shapes, v.num_warps, v.num_stages, v.kind, c.entries,
       COALESCE((SELECT GROUP_CONCAT(name, ',') FROM (
                   SELECT m.name FROM variant_machines vm JOIN machines m ON m.id = vm.machine_id
                   WHERE vm.variant_id = c.variant_id ORDER BY m.name)), '') AS machines,
       c.reg_min, c.reg_max, c.spill_min, c.spill_max, c.shared_min, c.shared_max, c.shared_binary, c.best_config,
       c.lo AS sample_min, c.hi AS sample_max, c.shared_code,
       (SELECT m.name || char(9) || k.key FROM entries e JOIN machines m ON m.id = e.machine_id
        JOIN keys k ON k.id = e.key_id WHERE e.id = c.lo) AS sample_min_ref,
       (SELECT m.name || char(9) || k.key FROM entries e JOIN machines m ON m.id = e.machine_id
        JOIN keys k ON k.id = e.key_id WHERE e.id = c.hi) AS sample_max_ref
FROM c JOIN variants v ON v.id = c.variant_id
ORDER BY c.variant_id
