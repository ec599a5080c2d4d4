#!/usr/bin/env bash
# Uploads at fleet scale (issue 14 item 6): builds the load benchmark's fleet (scripts/load-bench.sh,
# --machines × --entries through the server's upload path), then --upload-nodes nodes upload one
# --upload-entries-entry scan each, all at once, while --readers clients time the pages and the
# API; prints the ingest rate and the read p50/p99 during it. Same binary flags as load-bench.sh
# (CACHELENS_BIN, CACHELENS_BIN_BEFORE).
#   scripts/upload-load.sh                                   # 50 nodes × 50,000 into 20 × 50,000
#   scripts/upload-load.sh --machines 4 --entries 10000 --upload-nodes 10 --upload-entries 10000
# The exactly-once check of concurrent uploads (in-process server): cargo bench --bench upload_load
set -euo pipefail
cd "$(dirname "$0")/.."
exec scripts/load-bench.sh --skip-routes --upload-nodes 50 "$@"
