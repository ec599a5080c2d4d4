#!/usr/bin/env bash
# Fleet benchmark through the real client and the real HTTP API (benches/fleet/): what the
# server costs as a fleet's nodes upload caches that mostly hold the same kernels. Figures only:
# it never fails on time.
#
#   scripts/fleet-bench.sh [FLAGS]                                    # this checkout's release build
#   CACHELENS_BIN=path scripts/fleet-bench.sh                         # another build
#   CACHELENS_BIN_BEFORE=old CACHELENS_BIN=new scripts/fleet-bench.sh # both, side by side, one run
#   scripts/fleet-bench.sh --nodes 4 --entries 2000                   # a short run (~7 min)
#   scripts/fleet-bench.sh --pg postgres://USER@HOST:PORT/DB          # PostgreSQL beside SQLite
#
# What it does:
#  1. A pool of distinct real cache entries on disk, <work>/pool-*: every key dir of the H100
#     corpora in demo/ (h100-jit, h100-inductor, h100-fpfusion-off, h100-hook,
#     h100-inductor-autotune; unpacked once under target/test-corpus) cloned under new keys as
#     Triton would write them: the dir named base32(new hash), the metadata JSON's `hash` that
#     hash, its kernel `name` varied (K_v{clone % --variety}, as benches/load/fleet.rs does) and
#     the files named after the kernel renamed with it, the group file's `child_paths` naming the
#     clone's own files; every other file a hard link to the corpus's (same bytes and mtime).
#     Not true to a real clone: a cubin's kernel symbol keeps its corpus name (the scanner notes
#     `kernel_not_found` in the entry's resources and reads the first kernel's).
#  2. Node i's cache dir (<work>/nodes-*/node-NNN) is the window [i*stride, i*stride + entries)
#     of the pool, taken round a ring of --pool keys: neighbours share --overlap of their keys
#     (stride = entries × (1 − overlap)). Its files are hard links to the pool's (40 × 10,000
#     entries copy no bytes); the scanner sees no symlink. Group files (absolute paths) are, by
#     --group-files: `copy` (default) written per node with the node's own paths, as Triton
#     writes them on each machine: consistent entries, but each node's group files are texts of
#     its own (a fleet using one cache path on every node would have identical ones); the run
#     prints what writing them cost. `link`: hard links to the pool's, whose paths are the
#     pool's: identical on every node, but every entry is "relocated" to the scanner.
#     The pool and the node dirs are kept and reused by a later run of the same sizes.
#  3. Per binary: a fresh database, `BIN token create` per node, `BIN serve` on a free loopback
#     port (benches/load/server.rs) behind a counting TCP proxy (benches/fleet/proxy.rs: bytes
#     each way, HTTP headers included). Each node in turn runs the real client
#     `BIN scan NODE_DIR --server PROXY --token T --machine node-NNN --json --quiet` under
#     /usr/bin/time; measured per node: wall time, server CPU (utime + stime of
#     /proc/<pid>/stat) while the client ran and after it until the server is quiet for
#     --settle-secs (the background summary rebuild and checkpoint an upload queues), wire bytes
#     each way, the client's peak RSS and CPU.
#  4. Every node again, unchanged (the same dirs), measured the same. Then --twins nodes'
#     twins (the nodes' dirs under new names, node-001-twin..., round the nodes again past
#     --nodes: node-001-twin2...): nodes whose every key,
#     fact and file the server holds, so their server CPU is the cost of a known entry alone.
#  5. Every GET route of benches/load/routes.rs once (cold) and under --clients clients
#     (p50/p99; the route driver of benches/load/request.rs). The fleet has no upgraded machine,
#     no release pair and no Inductor autotune decisions: {up} is node-001 (its two scans, two
#     clones of one kernel for compare), the release pair is node-001 and the last node, and
#     the autotune decision route answers 404.
#  6. The server's VmRSS / VmHWM; the server stopped, the database checkpointed: file + WAL, and
#     per table and index through dbstat (the bundled SQLite has it).
#  7. A fresh database filled --parallel nodes at a time while --readers readers time every
#     route round robin (p50/p99 while nodes upload; the server's CPU then includes the reads;
#     reads of entries on nodes not landed yet answer 404 and are counted apart, not timed).
#     --readers is 4, not --clients: 16 readers on 2 cores starved the ingest (53 entries/s).
#  8. With --pg URL (a PostgreSQL server whose role may create databases): steps 3-7 again per
#     binary, each database a fresh one on that server (fleet_<name>, fleet_<name>_parallel:
#     dropped if there, created from template0, UTF8, C collation) served by the same binary
#     with --db <its URL>; the run named <name>/pg. The database measured by pg_database_size
#     (its WAL is the server's: none) and per table (pg_table_size: TOAST included, as dbstat
#     counts overflow pages) and index (pg_relation_size) of the public schema. Besides the
#     server's CPU, PostgreSQL's: utime + stime of the postgres processes whose command line
#     names the database (backends, autovacuum workers; sampled every 200 ms, a closed
#     connection's last figure kept), and the quiet wait after a node waits for them too.
# Printed: every node's row, then per binary: entries, ingest rate (entries / client wall time),
# server CPU ms per 1,000 entries (first node: every key new to the server; other nodes: keys
# earlier nodes uploaded; "+N after": the background work after the client exited), wire bytes
# per entry each way, client peak RSS, database bytes per machine-entry and per distinct key,
# the largest tables and indexes, server RSS; then the figures side by side (one column per
# binary and store)
# and every route's p50/p99 while nodes upload and after.
#
# Flags (defaults): --nodes 40 --entries 10000 (per node) --overlap 0.8 (share of a node's keys
# its neighbour also has) --pool 0 (distinct keys on the ring; 0: entries / (1 − overlap), or
# what the windows reach if less: 50,000 at the defaults) --variety 100 (kernel name variants)
# --group-files copy|link --clients 16 (step 5) --twins 4 (step 4) --parallel 4 (nodes at a
# time in step 7; 0 skips it) --readers 4 (step 7) --pass-minutes 0 (no node of a pass starts after this many
# minutes; the re-upload pass then covers the nodes the first one did; 0: no limit)
# --requests 400 (per route, step 5) --route-seconds 5 (most time per route, step 5)
# --timeout 30 (per request, s) --slow-ms 3000 (a route whose cold request is slower is not
# driven) --settle-secs 3 (quiet window after each node; 0: no wait) --rss-cap-mb 6000 (the
# server is killed above it) --tables 12 (table and index rows printed) --skip-routes (steps 5
# and 7's readers) --rebuild (make the pool and node dirs again) --work target/fleet-bench
# --pg URL (step 8; none: SQLite only)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CACHELENS_BIN:-}" ]; then
    cargo build --release --quiet --bin cachelens
    export CACHELENS_BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/cachelens
fi
exec cargo bench --quiet --bench fleet -- "$@"
