#!/usr/bin/env bash
# Property-based fuzzing of the upload decoder and the cache parsers (tests/e2e/fuzz.rs) for a
# bounded time. Usage: scripts/fuzz.sh [SECONDS per round (default 300)] [CASES per property]
# Rounds repeat with fresh random seeds until the time is up. A failing case is shrunk and saved
# by proptest under proptest-regressions/ (commit it: it is replayed first on every run), and
# the script exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-300}
cases=${2:-5000}
cargo test --test e2e --no-run >/dev/null 2>&1 || cargo test --test e2e --no-run
end=$(( $(date +%s) + budget ))
round=0
while [ "$(date +%s)" -lt "$end" ]; do
    round=$((round + 1))
    left=$(( end - $(date +%s) ))
    echo "fuzz round $round: $cases cases per property (${left}s left)"
    # a round still running at the deadline is stopped: that is not a failure
    set +e
    CACHELENS_FUZZ_CASES=$cases timeout "$left" cargo test --test e2e fuzz:: -- --test-threads 2 2>&1 | grep -E "^test |panicked|minimal failing|test result"
    rc=${PIPESTATUS[0]}
    set -e
    if [ "$rc" = 124 ]; then echo "time is up"; break; fi
    if [ "$rc" != 0 ]; then echo "fuzz: a property failed (see above; the case is saved under proptest-regressions/)"; exit 1; fi
done
echo "fuzz: $round rounds, no failure"
