#!/usr/bin/env bash
# Headless Chromium test of the explainer pages against `cachelens serve --demo`.
#   scripts/browser-test-explain.sh        (needs node, /usr/bin/chromium or $CHROMIUM)
# Screenshots land in target/screenshots/.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
[ -x "$CHROMIUM" ] || { echo "no chromium at $CHROMIUM (apt-get install -y chromium)" >&2; exit 1; }
cargo build --quiet
(cd tests/browser-explain && [ -d node_modules/playwright-core ] || npm install --no-audit --no-fund --silent)

PORT="${PORT:-$((20000 + RANDOM % 20000))}"
LOG="$(mktemp)"
target/debug/cachelens serve --demo --listen "127.0.0.1:$PORT" >"$LOG" 2>&1 &
PID=$!
trap 'kill "$PID" 2>/dev/null || true; rm -f "$LOG"' EXIT
for _ in $(seq 1 600); do
    grep -q "serving" "$LOG" && break
    kill -0 "$PID" 2>/dev/null || { cat "$LOG" >&2; exit 1; }
    sleep 0.5
done
grep -q "serving" "$LOG" || { echo "server did not start" >&2; cat "$LOG" >&2; exit 1; }
BASE="http://127.0.0.1:$PORT" SCREENSHOTS="$REPO/target/screenshots" CHROMIUM="$CHROMIUM" \
    node tests/browser-explain/explain.mjs
