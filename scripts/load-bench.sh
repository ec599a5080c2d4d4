#!/usr/bin/env bash
# Load benchmark of the dashboard: builds (once) bench-out/load.db with 20 machines × 50,000
# entries cloned from the real corpus, serves it and drives it with 16 concurrent clients,
# printing p50/p99 per page. Figures only: it never fails on time.
#   scripts/load-bench.sh [--machines N] [--entries N] [--clients N] [--requests N] [--db FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --bench load -- "$@"
