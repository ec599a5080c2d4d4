#!/usr/bin/env bash
# Load benchmark of every GET route of the dashboard and the API (benches/load/), against a
# cachelens binary run as its own server on 127.0.0.1. The fleet is uploaded through that
# server's own upload path: --machines × --entries H100 corpus entries (clones of demo/, kernel
# names varied, hook history cloned from the real h100-hook events), a machine upgraded in place
# (A100 corpus, Triton 3.4.0 then its 3.5.1 recompile: --entries then 2× --entries), a pair of
# machines on two releases (MI300 corpus, 3.6.0 and 3.9.0). Then: the first GET / right after the
# last scan landed, every route once (cold), every route under --clients concurrent clients
# (p50/p99), the server's RSS (VmRSS / VmHWM from /proc). Figures only: it never fails on time.
#
#   scripts/load-bench.sh [FLAGS]                       # this checkout's release build
#   CACHELENS_BIN=path scripts/load-bench.sh            # another build
#   CACHELENS_BIN_BEFORE=old CACHELENS_BIN=new scripts/load-bench.sh   # before and after, one run
#   scripts/load-bench.sh --machines 4 --entries 10000  # a short run
# Flags (defaults): --machines 20 --entries 50000 --variety 100 (kernel name variants per corpus
# kernel) --events 20000 (hook events per machine) --clients 16 --requests 400 (per route)
# --route-seconds 10 (most time per route under load) --timeout 30 (per request, s)
# --first-timeout 300 --slow-ms 3000 (a route whose cold request is slower is asked once more:
# a first visit that stored its answer (an invalidation report) is then printed on its own and
# the second visit is the cold figure; still slower: not driven)
# --rss-cap-mb 6000 (the server is killed above it) --upload-nodes 0 --upload-entries 50000
# --readers 4 --skip-routes --work target/load-bench --reuse (serve <work>/<build|before|after>.db
# built by an earlier run instead of uploading the fleet again; a fleet built before the autotune
# machine gets it uploaded) --only LABEL,LABEL (time only routes whose label contains one)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CACHELENS_BIN:-}" ]; then
    cargo build --release --quiet --bin cachelens
    export CACHELENS_BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/cachelens
fi
exec cargo bench --quiet --bench load -- "$@"
