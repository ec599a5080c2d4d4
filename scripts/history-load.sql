-- A fleet for timing the history and nearest pages (scripts/history-load.sh): 20 machines x
-- 50,000 entries cloned from the real demo corpus under new keys (as benches/load.rs does), with
-- every clone's compile time in entry_compiles (a fleet built by scans has one per entry) and the
-- h100-hook machine's real hook events cloned onto every clone of its entries, shifted by the
-- clone's compile-time shift (so each hook compile still accounts for its entry's mtime).
-- Only the .source/.ttir artifacts are cloned (what the explainer reads).
PRAGMA journal_mode = OFF;
PRAGMA synchronous = OFF;
PRAGMA cache_size = -1500000;
BEGIN;
CREATE TEMP TABLE t AS SELECT e.* FROM entry_rows e WHERE e.removed_at IS NULL;
WITH RECURSIVE m(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM m WHERE i < 20)
INSERT INTO machines(name, created_at) SELECT printf('bench-%02d', i), CAST(strftime('%s', 'now') AS INTEGER) * 1000 FROM m;
INSERT INTO scans(machine_id, client_id, scanned_at, root, entries, new_entries, changed_entries, removed_entries,
                  bytes, skipped, skipped_json, relocated, duration_ms, source)
SELECT id, 'bench-' || name, created_at, '/bench/cache', 50000, 50000, 0, 0, 0, 0, '{}', 0, 1000, 'local'
FROM machines WHERE name LIKE 'bench-%';
WITH RECURSIVE seq(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n + 1 < 50000 / (SELECT COUNT(*) FROM t) + 1),
     c AS (SELECT * FROM seq, t ORDER BY n, t.id LIMIT 50000)
INSERT INTO entries(machine_id, root, dir, key, kind, kernel, backend, arch, warp_size, num_warps, num_stages, num_ctas,
                    triton_version, meta_hash, signature, shapes, created_at, bytes, registers, spills, shared_bytes,
                    resources_json, metadata_json, group_json, relocated, partial, binary_sha256, sig, fact,
                    first_scan_id, last_scan_id, first_seen_at, last_seen_at)
SELECT s.machine_id, '/bench/cache', c.key || c.id || '-' || c.n, c.key || c.id || '-' || c.n, c.kind,
       c.kernel || '_v' || (c.n % 100), c.backend, c.arch, c.warp_size, c.num_warps, c.num_stages, c.num_ctas,
       c.triton_version, c.meta_hash, c.signature, c.shapes, c.created_at - (c.n % 30) * 86400000, c.bytes,
       c.registers, c.spills, c.shared_bytes, c.resources_json, c.metadata_json, c.group_json, c.relocated, c.partial,
       c.binary_sha256, 'bench:' || c.id, c.fact, s.id, s.id, s.scanned_at, s.scanned_at
FROM scans s JOIN machines bm ON bm.id = s.machine_id, c WHERE bm.name LIKE 'bench-%';
INSERT INTO artifacts(entry_id, name, ext, bytes, sha256)
SELECT ne.id, a.name, a.ext, a.bytes, a.sha256 FROM entry_rows ne
JOIN artifacts a ON a.entry_id = CAST(substr(ne.sig, 7) AS INTEGER)
WHERE ne.sig LIKE 'bench:%' AND a.ext IN ('source', 'ttir');
INSERT INTO entry_compiles(entry_id, compiled_at)
SELECT id, created_at FROM entry_rows WHERE sig LIKE 'bench:%' AND created_at IS NOT NULL;
INSERT INTO events(machine_id, ts, ts_us, seq, legacy, host, pid, key, kernel, event, compile_ms, stages_json, parts_json)
SELECT ne.machine_id, ev.ts + (ne.created_at - te.created_at), ev.ts_us + (ne.created_at - te.created_at) * 1000,
       ev.seq, 0, ev.host, ev.pid, ne.key, ne.kernel, ev.event, ev.compile_ms, ev.stages_json, ev.parts_json
FROM entry_rows ne JOIN entry_rows te ON te.id = CAST(substr(ne.sig, 7) AS INTEGER)
JOIN events ev ON ev.machine_id = te.machine_id AND ev.key = te.key
WHERE ne.sig LIKE 'bench:%';
COMMIT;
ANALYZE;
PRAGMA journal_mode = WAL;
