-- A fleet for timing the history and nearest pages (scripts/history-load.sh): 20 machines x
-- 50,000 entries cloned from the real demo corpus under new keys (as benches/load.rs does; the 20
-- machines hold the same 50,000 clones, each its own fact), with every clone's compile time in
-- entry_compiles (a fleet built by scans has one per entry) and the h100-hook machine's real hook
-- events cloned onto every clone of its entries, shifted by the clone's compile-time shift (so
-- each hook compile still accounts for its entry's mtime). Only the .source/.ttir files are
-- cloned (what the explainer reads).
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
INSERT INTO roots(path) VALUES ('/bench/cache') ON CONFLICT(path) DO NOTHING;
-- the clones: (n, the entry cloned), their key, fact digest, kernel and compile time
CREATE TEMP TABLE c AS
WITH RECURSIVE seq(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n + 1 < 50000 / (SELECT COUNT(*) FROM t) + 1)
SELECT seq.n, t.id, t.fact_id, t.fact, t.relocated, t.bytes, t.key || t.id || '-' || seq.n AS ck,
       'bench:' || t.id || '-' || seq.n AS cf, t.kernel || '_v' || (seq.n % 100) AS ckernel,
       t.created_at - (seq.n % 30) * 86400000 AS ccreated
FROM seq, t ORDER BY seq.n, t.id LIMIT 50000;
INSERT INTO keys(key) SELECT ck FROM c;
INSERT INTO facts(fact, key, kind, kernel, backend, arch, warp_size, num_warps, num_stages, num_ctas, triton_version,
                  meta_hash, signature, shapes, registers, spills, shared_bytes, partial, binary_sha256,
                  resources_json, metadata_json, group_json)
SELECT c.cf, c.ck, f.kind, c.ckernel, f.backend, f.arch, f.warp_size, f.num_warps, f.num_stages, f.num_ctas,
       f.triton_version, f.meta_hash, f.signature, f.shapes, f.registers, f.spills, f.shared_bytes, f.partial,
       f.binary_sha256, f.resources_json, f.metadata_json, f.group_json
FROM c JOIN facts f ON f.id = c.fact_id;
INSERT INTO fact_texts(fact, relocated, metadata_json, resources_json, group_json)
SELECT c.cf, x.relocated, x.metadata_json, x.resources_json, x.group_json FROM c JOIN fact_texts x ON x.fact = c.fact;
INSERT OR IGNORE INTO fact_files(fact, name, ext, bytes, sha256)
SELECT c.cf, ff.name, ff.ext, ff.bytes, ff.sha256 FROM c JOIN fact_files ff ON ff.fact = c.fact
WHERE ff.ext IN ('source', 'ttir')
UNION ALL
SELECT c.cf, a.name, a.ext, a.bytes, a.sha256 FROM c JOIN artifacts a ON a.entry_id = c.id
WHERE a.ext IN ('source', 'ttir');
INSERT INTO entries(machine_id, root_id, key_id, fact_id, sig, bytes, created_at, relocated,
                    first_scan_id, last_scan_id, first_seen_at, last_seen_at)
SELECT s.machine_id, r.id, k.id, f.id, 'bench:' || c.id, c.bytes, c.ccreated, c.relocated,
       s.id, s.id, s.scanned_at, s.scanned_at
FROM scans s JOIN machines bm ON bm.id = s.machine_id JOIN roots r ON r.path = '/bench/cache',
     c JOIN keys k ON k.key = c.ck JOIN facts f ON f.fact = c.cf
WHERE bm.name LIKE 'bench-%';
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
