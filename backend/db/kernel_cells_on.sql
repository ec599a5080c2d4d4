-- One machine's cells of a kernel's variants grid: what the summary rebuild makes for the whole
-- fleet (`db/rebuild.rs`, page_variant_cells), read for one kernel on one machine at request time.
-- The binaries and machine code two keys of the kernel share are those of its live facts on
-- every machine, as on the unfiltered page: read from the kernel's facts (`facts_kernel`) and
-- their counters (`fact_live`: live count and machine-code digest, 0050/0052), never from every
-- machine's entries (at 200 machines that read made the page's p99 290 ms). The cells read each
-- fact's live presence on the machine (`entries_fact`: fact, machine); through `entry_rows`
-- SQLite read every entry of the machine.
WITH code AS (
  SELECT f.key, f.binary_sha256, l.code AS c
  FROM facts f INDEXED BY facts_kernel JOIN fact_live l ON l.fact_id = f.id
  WHERE f.kernel = ?1 AND l.live > 0),
dup_binaries AS (SELECT binary_sha256 AS sha FROM code WHERE binary_sha256 IS NOT NULL
                 GROUP BY binary_sha256 HAVING COUNT(DISTINCT key) > 1),
dup_code AS (SELECT c FROM code WHERE c IS NOT NULL GROUP BY c HAVING COUNT(DISTINCT key) > 1)
SELECT f.backend, f.arch, f.triton_version, f.signature, f.shapes, f.num_warps, f.num_stages,
       CASE WHEN f.num_warps IS NULL AND f.num_stages IS NULL THEN f.kind ELSE '' END AS kind,
       COUNT(*) AS entries, m.name AS machines, MIN(f.registers) AS reg_min, MAX(f.registers) AS reg_max,
       MIN(f.spills) AS spill_min, MAX(f.spills) AS spill_max,
       MIN(f.shared_bytes) AS shared_min, MAX(f.shared_bytes) AS shared_max,
       SUM(f.binary_sha256 IN (SELECT sha FROM dup_binaries)) AS shared_binary,
       SUM(EXISTS(SELECT 1 FROM best_configs b WHERE b.triton_cache_hash = f.key AND b.machine_id = e.machine_id)) AS best_config,
       MIN(e.id) AS sample_min, MAX(e.id) AS sample_max,
       SUM(COALESCE((SELECT l.code FROM fact_live l WHERE l.fact_id = f.id) IN (SELECT c FROM dup_code), 0))
         AS shared_code,
       substr(MIN(printf('%020d', e.id) || m.name || char(9) || f.key), 21) AS sample_min_ref,
       substr(MAX(printf('%020d', e.id) || m.name || char(9) || f.key), 21) AS sample_max_ref
FROM facts f INDEXED BY facts_kernel
CROSS JOIN entries e INDEXED BY entries_fact
JOIN machines m ON m.id = e.machine_id
WHERE f.kernel = ?1 AND e.fact_id = f.id AND e.machine_id = (SELECT id FROM machines WHERE name = ?2)
  AND e.removed_at IS NULL
GROUP BY f.backend, f.arch, f.triton_version, f.signature, f.shapes, f.num_warps, f.num_stages, 8
