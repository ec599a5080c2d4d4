-- One machine's cells of a kernel's variants grid: what the summary rebuild makes for the whole
-- fleet (`db/rebuild.rs`, page_variant_cells), read for one kernel on one machine at request time.
-- The binaries and machine code two keys of the kernel share are those of its live facts on
-- every machine, as on the unfiltered page: the summary update keeps them per kernel
-- (`page_kernel_shared`, 0058), never read from every machine's entries (at 200 machines that
-- made the page's p99 290 ms) nor grouped from every live fact of the kernel per request (a
-- kernel of 4,536 facts: 27 ms a page). The cells read each fact's live presence on the machine
-- (`entries_fact`: fact, machine); through `entry_rows` SQLite read every entry of the machine.
SELECT f.backend, f.arch, f.triton_version, f.signature, f.shapes, f.num_warps, f.num_stages,
       CASE WHEN f.num_warps IS NULL AND f.num_stages IS NULL THEN f.kind ELSE '' END AS kind,
       COUNT(*) AS entries, m.name AS machines, MIN(f.registers) AS reg_min, MAX(f.registers) AS reg_max,
       MIN(f.spills) AS spill_min, MAX(f.spills) AS spill_max,
       MIN(f.shared_bytes) AS shared_min, MAX(f.shared_bytes) AS shared_max,
       SUM(EXISTS (SELECT 1 FROM page_kernel_shared d WHERE d.kernel = ?1 AND d.what = 'binary' AND d.digest = f.binary_sha256))
         AS shared_binary,
       SUM(EXISTS(SELECT 1 FROM best_configs b WHERE b.triton_cache_hash = f.key AND b.machine_id = e.machine_id)) AS best_config,
       MIN(e.id) AS sample_min, MAX(e.id) AS sample_max,
       SUM(EXISTS (SELECT 1 FROM fact_live l JOIN page_kernel_shared d ON d.kernel = ?1 AND d.what = 'code' AND d.digest = l.code
                   WHERE l.fact_id = f.id))
         AS shared_code,
       substr(MIN(printf('%020d', e.id) || m.name || char(9) || f.key), 21) AS sample_min_ref,
       substr(MAX(printf('%020d', e.id) || m.name || char(9) || f.key), 21) AS sample_max_ref
FROM facts f INDEXED BY facts_kernel
CROSS JOIN entries e INDEXED BY entries_fact
JOIN machines m ON m.id = e.machine_id
WHERE f.kernel = ?1 AND e.fact_id = f.id AND e.machine_id = (SELECT id FROM machines WHERE name = ?2)
  AND e.removed_at IS NULL
GROUP BY f.backend, f.arch, f.triton_version, f.signature, f.shapes, f.num_warps, f.num_stages, 8
