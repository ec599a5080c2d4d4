-- One machine's cells of a kernel's variants grid: what the summary rebuild makes for the whole
-- fleet (`db/rebuild.rs`, page_variant_cells), read for one kernel on one machine at request time.
-- The binaries and machine code two keys of the kernel share are those of its live entries on
-- every machine, as on the unfiltered page. Reads the kernel's live entries through
-- entries_kernel (kernel, machine_id): once fleet-wide for the shared binaries and code, once on
-- the machine for the cells.
WITH code AS (
  SELECT e.id, e.key, e.machine_id, e.binary_sha256,
         json_extract(COALESCE(e.resources_json, (SELECT t.resources_json FROM fact_texts t
                                                 WHERE t.fact = e.fact AND t.relocated = e.relocated)),
                      '$.code_sha256') AS c
  FROM entry_rows e WHERE e.kernel = ?1 AND e.removed_at IS NULL),
dup_binaries AS (SELECT binary_sha256 AS sha FROM code WHERE binary_sha256 IS NOT NULL
                 GROUP BY binary_sha256 HAVING COUNT(DISTINCT key) > 1),
dup_code AS (SELECT c FROM code WHERE c IS NOT NULL GROUP BY c HAVING COUNT(DISTINCT key) > 1)
SELECT e.backend, e.arch, e.triton_version, e.signature, e.shapes, e.num_warps, e.num_stages,
       CASE WHEN e.num_warps IS NULL AND e.num_stages IS NULL THEN e.kind ELSE '' END AS kind,
       COUNT(*) AS entries, m.name AS machines, MIN(e.registers) AS reg_min, MAX(e.registers) AS reg_max,
       MIN(e.spills) AS spill_min, MAX(e.spills) AS spill_max,
       MIN(e.shared_bytes) AS shared_min, MAX(e.shared_bytes) AS shared_max,
       SUM(e.binary_sha256 IN (SELECT sha FROM dup_binaries)) AS shared_binary,
       SUM(EXISTS(SELECT 1 FROM best_configs b WHERE b.triton_cache_hash = e.key AND b.machine_id = e.machine_id)) AS best_config,
       MIN(e.id) AS sample_min, MAX(e.id) AS sample_max,
       SUM(COALESCE(x.c IN (SELECT c FROM dup_code), 0)) AS shared_code,
       substr(MIN(printf('%020d', e.id) || m.name || char(9) || e.key), 21) AS sample_min_ref,
       substr(MAX(printf('%020d', e.id) || m.name || char(9) || e.key), 21) AS sample_max_ref
FROM entry_rows e
JOIN machines m ON m.id = e.machine_id
JOIN code x ON x.id = e.id
WHERE e.kernel = ?1 AND e.machine_id = (SELECT id FROM machines WHERE name = ?2) AND e.removed_at IS NULL
GROUP BY e.backend, e.arch, e.triton_version, e.signature, e.shapes, e.num_warps, e.num_stages, 8
