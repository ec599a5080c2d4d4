-- Every live entry of one machine with what prune's advice needs (db::advice::live_rows), read
-- from the base tables (the machine's presence rows in `entries_machine_root` order, each fact
-- by id), not through the view `entry_rows`. A fact's files are counted on the fact (`files`,
-- `group_files`: 0055); the files of rows from before facts had files, in `artifacts`, in one
-- seek that counts files and group files together (`counts`: files in the low 32 bits, groups
-- above). The hook's times are six index seeks of `events_machine_key` (first and last of each
-- event kind), never a scan of a hot key's events.
WITH live AS MATERIALIZED (
    SELECT r.path AS root, e.bytes AS entry_bytes,
           (SELECT COALESCE(SUM(1 + ((a.name GLOB '__grp__*') << 32)), 0) FROM artifacts a WHERE a.entry_id = e.id)
             + f.files + (f.group_files << 32)
             AS counts,
           COALESCE(e.dir, f.key) AS dir, f.key, f.kind, f.kernel, f.backend, f.arch, f.warp_size, f.num_warps,
           f.num_stages, f.num_ctas, f.triton_version, f.signature, f.shapes, e.created_at,
           e.relocated != 0 AS relocated,
           (SELECT MAX(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = f.key AND v.event = 'hit') AS hit_last,
           (SELECT MAX(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = f.key AND v.event = 'miss') AS miss_last,
           (SELECT MAX(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = f.key AND v.event = 'compile')
             AS compile_last,
           (SELECT MIN(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = f.key AND v.event = 'hit') AS hit_first,
           (SELECT MIN(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = f.key AND v.event = 'miss') AS miss_first,
           (SELECT MIN(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = f.key AND v.event = 'compile')
             AS compile_first
    FROM entries e INDEXED BY entries_machine_root
    JOIN facts f ON f.id = e.fact_id
    JOIN roots r ON r.id = e.root_id
    WHERE e.machine_id = ?1 AND e.removed_at IS NULL
)
-- the latest (earliest) of the three kinds' times, those present: each COALESCE starts with one
-- kind, so the greatest (least) present time is one of the three
SELECT root, entry_bytes, counts & 4294967295 AS files, counts >> 32 AS groups,
       dir, key, kind, kernel, backend, arch, warp_size, num_warps, num_stages, num_ctas, triton_version, signature,
       shapes, created_at, relocated, hit_last AS last_hit,
       MAX(COALESCE(hit_last, miss_last, compile_last), COALESCE(miss_last, compile_last, hit_last),
           COALESCE(compile_last, hit_last, miss_last)) AS last_event,
       MIN(COALESCE(hit_first, miss_first, compile_first), COALESCE(miss_first, compile_first, hit_first),
           COALESCE(compile_first, hit_first, miss_first)) AS first_event
FROM live
ORDER BY root, dir
