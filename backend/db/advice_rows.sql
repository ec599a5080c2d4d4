-- Every live entry of one machine with what prune's advice needs (db::advice::live_rows). Files
-- are counted in `artifacts` and `fact_files` apart: the view `entry_files` (a UNION ALL) in a
-- correlated subquery is built whole for the fleet, not sought by entry.
SELECT e.root, e.bytes AS entry_bytes,
       (SELECT COUNT(*) FROM artifacts a WHERE a.entry_id = e.id)
         + (SELECT COUNT(*) FROM fact_files f WHERE f.fact = e.fact) AS files,
       (SELECT COUNT(*) FROM artifacts a WHERE a.entry_id = e.id AND a.name GLOB '__grp__*')
         + (SELECT COUNT(*) FROM fact_files f WHERE f.fact = e.fact AND f.name GLOB '__grp__*') AS groups,
       e.dir, e.key, e.kind, e.kernel, e.backend, e.arch, e.warp_size, e.num_warps, e.num_stages,
       e.num_ctas, e.triton_version, e.signature, e.shapes, e.created_at, e.relocated != 0 AS relocated,
       (SELECT MAX(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = e.key AND v.event = 'hit')
         AS last_hit,
       (SELECT MAX(t) FROM (
          SELECT MAX(v.ts) AS t FROM events v WHERE v.machine_id = e.machine_id AND v.key = e.key AND v.event = 'hit'
          UNION ALL
          SELECT MAX(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = e.key AND v.event = 'miss'
          UNION ALL
          SELECT MAX(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = e.key AND v.event = 'compile'))
         AS last_event,
       (SELECT MIN(t) FROM (
          SELECT MIN(v.ts) AS t FROM events v WHERE v.machine_id = e.machine_id AND v.key = e.key AND v.event = 'hit'
          UNION ALL
          SELECT MIN(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = e.key AND v.event = 'miss'
          UNION ALL
          SELECT MIN(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = e.key AND v.event = 'compile'))
         AS first_event
FROM entry_rows e
WHERE e.machine_id = ?1 AND e.removed_at IS NULL
ORDER BY e.root, e.dir
