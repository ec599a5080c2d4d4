#!/usr/bin/env bash
# The browser tests, in headless Chromium: builds cachelens, serves the bundled demo caches on a
# free loopback port (a report not stored yet is always shown computing first:
# --report-wait-ms 0), runs each test of tests/browser/ (playwright-core driving Debian's
# chromium, no browser download) and stops the server. Needs `apt-get install -y chromium`
# (or $CHROMIUM) and node/npm. Screenshots go to $SCREENSHOTS (default target/screenshots).
#   scripts/browser-test.sh                 every test
#   scripts/browser-test.sh explain.mjs     one of them
set -euo pipefail
cd "$(dirname "$0")/.."
export SCREENSHOTS="${SCREENSHOTS:-$PWD/target/screenshots}"
export CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
[ -x "$CHROMIUM" ] || { echo "no chromium at $CHROMIUM (apt-get install -y chromium)" >&2; exit 1; }
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(dashboard.mjs explain.mjs backforward.mjs headline.mjs timeline.mjs kernelpage.mjs autotune.mjs whatcango.mjs hazards.mjs)
cargo build --bin cachelens
bin="${CARGO_TARGET_DIR:-target}/debug/cachelens"
( cd tests/browser && { [ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund; } )
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
work=$(mktemp -d)
"$bin" serve --demo --db "$work/demo.db" --listen "127.0.0.1:$port" --report-wait-ms 0 >"$work/server.log" 2>&1 &
server=$!
cleanup() { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 1 600); do
  grep -q "serving" "$work/server.log" && break
  kill -0 "$server" 2>/dev/null || { cat "$work/server.log"; exit 1; }
  sleep 0.2
done
grep -q "serving" "$work/server.log" || { echo "server did not start"; cat "$work/server.log"; exit 1; }
failed=0
for t in "${tests[@]}"; do
  echo "--- tests/browser/$t"
  BASE_URL="http://127.0.0.1:$port" node "tests/browser/$t" || failed=1
done
exit "$failed"
