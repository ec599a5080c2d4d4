#!/usr/bin/env bash
# One node's upload into a copy of a fleet database, and the server CPU it costs: the request
# (while the client runs) and the background work after it (until the server is quiet for 3 s).
# For comparing builds on one landing, alternating them in one run; the fleet benchmark
# (scripts/fleet-bench.sh) gives the figures over many nodes.
#
#   scripts/twin-cpu.sh BIN DB NODE_DIR [MACHINE]
#
# DB is a database a fleet run left (e.g. <work>/after.db of scripts/fleet-bench.sh); it is
# copied, never written. NODE_DIR a node's cache dir (e.g. <work>/nodes-*/node-027, uploaded as
# MACHINE, default twin-<pid>: a machine whose keys the fleet already holds). A server started on
# an older database migrates it and may update its summaries first: that is waited out before
# the upload. Set CACHELENS_LOG=warn,sqlx::query=debug to log each statement's time to the
# server log (printed path); TWIN_PERF=FILE to record the server's CPU samples with call graphs
# from just before the upload until it is quiet (`perf record -e cpu-clock -g`, Debian's
# linux-perf; read it with `perf report -i FILE --children --sort sym`).
set -euo pipefail
BIN=$(realpath "$1"); SRC=$2; DIR=$3; NAME=${4:-twin-$$}
WORK=$(mktemp -d); trap 'kill $SP 2>/dev/null || true; rm -rf "$WORK"' EXIT
DB=$WORK/t.db; LOG=${TWIN_LOG:-$WORK/serve.log}
cp "$SRC" "$DB"
T=$("$BIN" token create --machine "$NAME" --db "$DB" 2>/dev/null | tail -1)
PORT=$((20000 + RANDOM % 10000))
CACHELENS_LOG=${CACHELENS_LOG:-warn} "$BIN" serve --max-upload-mb 4096 --listen 127.0.0.1:$PORT --db "$DB" >"$LOG" 2>&1 &
SP=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/metrics" >/dev/null 2>&1 && break; sleep 0.3; done
cpu() { awk '{print $14+$15}' /proc/$SP/stat; }
quiet() { local prev c q=0; prev=$(cpu); while [ $q -lt 3 ]; do sleep 1; c=$(cpu); if [ "$c" = "$prev" ]; then q=$((q+1)); else q=0; prev=$c; fi; done; }
quiet
tick=$(getconf CLK_TCK)
if [ -n "${TWIN_PERF:-}" ]; then
    perf record -e cpu-clock -F 2000 -g -p "$SP" -o "$TWIN_PERF" >/dev/null 2>&1 &
    PP=$!
    sleep 0.5
fi
c0=$(cpu); t0=$(date +%s.%N)
"$BIN" scan "$DIR" --server "http://127.0.0.1:$PORT" --token "$T" --machine "$NAME" --json --quiet >/dev/null
c1=$(cpu); t1=$(date +%s.%N)
quiet
c2=$(cpu)
if [ -n "${TWIN_PERF:-}" ]; then kill -INT "$PP"; wait "$PP" || true; fi
echo "$NAME: wall $(echo "$t1 - $t0" | bc) s, server CPU request $(( (c1-c0)*1000/tick )) ms, after $(( (c2-c1)*1000/tick )) ms"
[ -n "${TWIN_LOG:-}" ] && echo "server log: $LOG"
