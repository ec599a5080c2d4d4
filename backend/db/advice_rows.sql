-- Every live entry of one machine with what prune's advice needs (db::advice::live_rows), read
-- from the base tables: the machine's presence rows in `entries_machine_root` order (grouped by
-- root: ORDER BY root_id is that index's order, no sort; unsorted within a root), each fact by
-- id, not through the view `entry_rows`. A fact's files are counted on the fact (`files`,
-- `group_files`: 0055); the files of rows from before facts had files, in `artifacts`, in one
-- seek that counts files and group files together (files in the low 32 bits, groups above). The
-- hook's times are six index seeks of `events_machine_key` (first and last of each event kind),
-- never a scan of a hot key's events, and none where the machine has no event (?2 0).
SELECT r.path AS root, e.bytes AS entry_bytes,
       (SELECT COALESCE(SUM(1 + CASE WHEN substr(a.name, 1, 7) = '__grp__' THEN 4294967296 ELSE 0 END), 0)
        FROM artifacts a WHERE a.entry_id = e.id)
         + f.files + (f.group_files << 32)
         AS counts,
       COALESCE(e.dir, f.key) AS dir, f.key, f.kind, f.kernel, f.backend, f.arch, f.warp_size, f.num_warps,
       f.num_stages, f.num_ctas, f.triton_version, f.signature, f.shapes, e.created_at,
       e.relocated != 0 AS relocated,
       CASE WHEN ?2 <> 0 THEN (SELECT MAX(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = f.key
                                                           AND v.event = 'hit') END AS hit_last,
       CASE WHEN ?2 <> 0 THEN (SELECT MAX(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = f.key
                                                           AND v.event = 'miss') END AS miss_last,
       CASE WHEN ?2 <> 0 THEN (SELECT MAX(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = f.key
                                                           AND v.event = 'compile') END AS compile_last,
       CASE WHEN ?2 <> 0 THEN (SELECT MIN(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = f.key
                                                           AND v.event = 'hit') END AS hit_first,
       CASE WHEN ?2 <> 0 THEN (SELECT MIN(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = f.key
                                                           AND v.event = 'miss') END AS miss_first,
       CASE WHEN ?2 <> 0 THEN (SELECT MIN(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = f.key
                                                           AND v.event = 'compile') END AS compile_first
FROM entries e INDEXED BY entries_machine_root
JOIN facts f ON f.id = e.fact_id
JOIN roots r ON r.id = e.root_id
WHERE e.machine_id = ?1 AND e.removed_at IS NULL
ORDER BY e.root_id
