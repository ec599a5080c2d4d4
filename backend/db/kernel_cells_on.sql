-- One machine's cells of a kernel's variants grid: what the summary rebuild makes for the whole
-- fleet (`db/rebuild.rs`, page_variant_cells), read for one kernel on one machine at request time.
-- The binaries and machine code two keys of the kernel share are those of its live facts on
-- every machine, as on the unfiltered page: the summary update keeps them per kernel
-- (`page_kernel_shared`, 0058), never read from every machine's entries (at 200 machines that
-- made the page's p99 290 ms) nor grouped from every live fact of the kernel per request (a
-- kernel of 4,536 facts: 27 ms a page). The cells read each fact's live presence on the machine
-- (`entries_fact`: fact, machine); through `entry_rows` SQLite read every entry of the machine.
-- They are grouped by the fact's cell (`fact_live.variant_id`, an integer) and take the cell's
-- columns from `variants`, and each cell's two samples are named after grouping (sorting the
-- rows by seven text columns and naming every row's entry made it 18 ms, 10 ms so).
WITH c AS (
  SELECT l.variant_id, COUNT(*) AS entries, MIN(f.registers) AS reg_min, MAX(f.registers) AS reg_max,
         MIN(f.spills) AS spill_min, MAX(f.spills) AS spill_max,
         MIN(f.shared_bytes) AS shared_min, MAX(f.shared_bytes) AS shared_max,
         SUM(CASE WHEN EXISTS (SELECT 1 FROM page_kernel_shared d
                            WHERE d.kernel = ?1 AND d.what = 'binary' AND d.digest = f.binary_sha256) THEN 1 ELSE 0 END)
           AS shared_binary,
         SUM(CASE WHEN EXISTS (SELECT 1 FROM best_configs b
                            WHERE b.triton_cache_hash = f.key AND b.machine_id = e.machine_id) THEN 1 ELSE 0 END)
           AS best_config,
         MIN(e.id) AS sample_min, MAX(e.id) AS sample_max,
         SUM(CASE WHEN EXISTS (SELECT 1 FROM page_kernel_shared d
                            WHERE d.kernel = ?1 AND d.what = 'code' AND d.digest = l.code) THEN 1 ELSE 0 END)
           AS shared_code
  FROM facts f INDEXED BY facts_kernel
  CROSS JOIN entries e INDEXED BY entries_fact
  CROSS JOIN fact_live l ON l.fact_id = f.id
  WHERE f.kernel = ?1 AND e.fact_id = f.id AND e.machine_id = (SELECT id FROM machines WHERE name = ?2)
    AND e.removed_at IS NULL
  GROUP BY l.variant_id)
SELECT v.backend, v.arch, v.triton_version, v.signature, v.shapes, v.num_warps, v.num_stages, v.kind, c.entries,
       ?2 AS machines, c.reg_min, c.reg_max, c.spill_min, c.spill_max, c.shared_min, c.shared_max, c.shared_binary,
       c.best_config, c.sample_min, c.sample_max, c.shared_code,
       (SELECT ?2 || char(9) || k.key FROM entries x JOIN keys k ON k.id = x.key_id WHERE x.id = c.sample_min)
         AS sample_min_ref,
       (SELECT ?2 || char(9) || k.key FROM entries x JOIN keys k ON k.id = x.key_id WHERE x.id = c.sample_max)
         AS sample_max_ref
FROM c JOIN variants v ON v.id = c.variant_id
ORDER BY v.backend, v.arch, v.triton_version, v.signature, v.shapes, v.num_warps, v.num_stages, v.kind
