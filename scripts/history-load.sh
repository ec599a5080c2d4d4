#!/usr/bin/env bash
# Times the history and nearest pages on a 20 x 50,000-entry fleet with hook history (figures
# only; never fails on time). Builds bench-out/history.db once: the demo corpus loaded by
# `cachelens serve --demo`, then cloned by scripts/history-load.sql (entries, compile times,
# the h100-hook machine's real events on every clone of its entries). A database built by an
# older cachelens is migrated by the first `serve` (its time is printed: the 0015 backfill).
#   scripts/history-load.sh [BIN] [DB]     BIN: a cachelens binary (default target/debug/cachelens)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-${CARGO_TARGET_DIR:-target}/debug/cachelens}
DB=${2:-bench-out/history.db}
PORT=${PORT:-18932}
RUNS=${RUNS:-3}   # requests per page, one at a time (the median is printed)
URL=http://127.0.0.1:$PORT
mkdir -p "$(dirname "$DB")"
if [ ! -e "$DB" ]; then
  "$BIN" serve --demo --db "$DB" --listen 127.0.0.1:$PORT >/dev/null 2>&1 &
  pid=$!
  until curl -sf -o /dev/null $URL/; do sleep 1; done
  kill $pid; wait $pid || true
  t=$(date +%s.%N); sqlite3 "$DB" < scripts/history-load.sql >/dev/null
  echo "cloned the fleet in $(echo "$(date +%s.%N) - $t" | bc) s"
fi
t=$(date +%s.%N)
"$BIN" serve --db "$DB" --listen 127.0.0.1:$PORT >/dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
until curl -s -o /dev/null $URL/login; do sleep 0.5; done
echo "server up (migrations included) in $(echo "$(date +%s.%N) - $t" | bc) s"
sqlite3 "$DB" "SELECT (SELECT COUNT(*) FROM entry_rows), (SELECT COUNT(*) FROM events), (SELECT COUNT(*) FROM entry_compiles)" |
  awk -F'|' '{print "entries " $1 ", events " $2 ", compile times " $3}'
KEY=$(sqlite3 "$DB" "SELECT e.key FROM entry_rows e JOIN machines m ON m.id = e.machine_id WHERE m.name = 'bench-01' AND e.kernel = 'matmul_kernel_v1' AND e.kind = 'kernel' ORDER BY e.key LIMIT 1")
for path in "/history" "/history?kernel=matmul_kernel_v1" "/history?machine=bench-01" "/history?kernel=add_kernel_v7&bucket=day" \
            "/history?machine=bench-01&bucket=minute" "/api/v1/history?bucket=hour&limit=10000" "/api/v1/history/kernels?limit=100" \
            "/entries/bench-01/$KEY/nearest" "/api/v1/nearest?entry=bench-01:$KEY"; do
  for i in $(seq "$RUNS"); do
    curl -s -o /dev/null -w "%{time_total} %{size_download} %{http_code}\n" "$URL$path"
  done | sort -n | awk -v p="$path" -v n="$RUNS" 'NR==int((n+1)/2) {printf "%-60s median of %d: %7.3f s  %8d bytes  HTTP %s\n", p, n, $1, $2, $3}'
done
# Under load: CONC concurrent clients (0: skip), N requests per page.
CONC=${CONC:-16}; N=${N:-160}
if [ "$CONC" -gt 0 ]; then
  for path in "/history" "/history?kernel=matmul_kernel_v1" "/history?machine=bench-01" \
              "/api/v1/history?bucket=hour&limit=10000" "/api/v1/history/kernels?limit=100" \
              "/entries/bench-01/$KEY/nearest" "/api/v1/nearest?entry=bench-01:$KEY"; do
    seq "$N" | xargs -P "$CONC" -I{} curl -s -o /dev/null -w "%{time_total}\n" "$URL$path" | sort -n |
      awk -v p="$path" -v c="$CONC" '{a[NR]=$1} END {printf "%-60s %d clients, %d requests: p50 %6.1f ms  p99 %6.1f ms\n", p, c, NR, a[int(NR*0.5)]*1000, a[int(NR*0.99)]*1000}'
  done
fi
