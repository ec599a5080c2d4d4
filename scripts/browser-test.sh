#!/usr/bin/env bash
# Headless Chromium test of the dashboard: builds cachelens, serves the bundled demo caches on a
# free port, walks the pages with playwright-core (tests/browser/dashboard.mjs) and stops the
# server. Needs Debian's chromium (apt-get install -y chromium) and node/npm; no browser download.
# Screenshots go to $SCREENSHOTS (default target/screenshots).
set -euo pipefail
cd "$(dirname "$0")/.."
export SCREENSHOTS="${SCREENSHOTS:-$PWD/target/screenshots}"
cargo build --bin cachelens
( cd tests/browser && { [ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund; } )
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
work=$(mktemp -d)
target/debug/cachelens serve --demo --db "$work/demo.db" --listen "127.0.0.1:$port" >"$work/server.log" 2>&1 &
server=$!
cleanup() { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 1 300); do
  grep -q "serving" "$work/server.log" && break
  kill -0 "$server" 2>/dev/null || { cat "$work/server.log"; exit 1; }
  sleep 0.2
done
grep -q "serving" "$work/server.log" || { echo "server did not start"; cat "$work/server.log"; exit 1; }
BASE_URL="http://127.0.0.1:$port" node tests/browser/dashboard.mjs
