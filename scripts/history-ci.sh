#!/usr/bin/env bash
# The hook -> scan -> history API round trip on a real workload (called by CI).
#
#   scripts/history-ci.sh
#
# 1. A Python with Triton: $CACHELENS_PYTHON, else the venv made by scripts/triton-venv.sh.
# 2. The hook from this checkout (PYTHONPATH=hook; scripts/wheel-ci.sh tests the pip install).
# 3. scripts/workload.py twice into a fresh temp TRITON_CACHE_DIR with
#    TRITON_CACHE_MANAGER=cachelens_hook:TrackingCacheManager (run 1 compiles, run 2 hits).
# 4. `cachelens scan` of that cache into a temp database, `cachelens serve` on a free loopback
#    port, and curl of /api/v1/history: run 1's N kernels must show as exactly N misses and N
#    compiles with the hook's compile times, run 2's as exactly N hits, and no compile counted
#    twice (all entries' compiles were seen by the hook: inferred_compiles = 0). A third run,
#    of the add kernels only, with TRITON_ALWAYS_COMPILE=1: every found entry is a compile
#    (and a miss), never a hit.
#
# Environment: CACHELENS_BIN (default: cargo build --release, target/release/cachelens),
# HISTORY_WORKLOAD_ARGS (default: none = all 45 kernels; e.g. "--kernels add,softmax"),
# HISTORY_CI_ALLOW_SKIP=1 (exit 0 with a message when no Python with Triton can be had).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
log() { echo "history-ci: $*" >&2; }
die() { log "FAIL: $*"; exit 1; }

# --- 1. Python with Triton ------------------------------------------------------------------
PY="${CACHELENS_PYTHON:-}"
if [ -z "$PY" ] && [ -f scripts/triton-venv.sh ]; then
    PY=$(bash scripts/triton-venv.sh "$REPO/.venv-triton" | tail -n 1) || PY=""
fi
if [ -z "$PY" ] || ! "$PY" -c 'import triton' >/dev/null 2>&1; then
    msg="no Python with triton (set CACHELENS_PYTHON, or provide scripts/triton-venv.sh)"
    if [ "${HISTORY_CI_ALLOW_SKIP:-}" = 1 ]; then log "SKIP: $msg"; exit 0; fi
    die "$msg"
fi
log "python: $PY (triton $("$PY" -c 'import triton; print(triton.__version__)'))"

# --- 2. the hook ----------------------------------------------------------------------------
# From this checkout, ahead of any copy installed in that Python.
export PYTHONPATH="$REPO/hook${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c 'import cachelens_hook, os, sys; assert cachelens_hook.__file__.startswith(sys.argv[1]), cachelens_hook.__file__' \
    "$REPO/hook/" || die "cachelens_hook not importable from $REPO/hook"

# --- the cachelens binary -------------------------------------------------------------------
BIN="${CACHELENS_BIN:-}"
if [ -z "$BIN" ]; then
    cargo build --release --locked --bin cachelens >&2
    BIN="$REPO/target/release/cachelens"
fi
[ -x "$BIN" ] || die "no cachelens binary at $BIN"

TMP=$(mktemp -d)
SERVER=""
cleanup() {
    if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
    rm -rf "$TMP"
}
trap cleanup EXIT

# --- 3. the workload, twice -----------------------------------------------------------------
now_ms() { "$PY" -c 'import time; print(int(time.time() * 1000))'; }
run_workload() { # out-file, extra workload args...
    local out=$1; shift
    env -u TRITON_ALWAYS_COMPILE -u CACHELENS_HOOK_DIR -u CACHELENS_HOOK_DISABLE \
        TRITON_CACHE_DIR="$TMP/cache" TRITON_CACHE_MANAGER=cachelens_hook:TrackingCacheManager \
        ${ALWAYS:+TRITON_ALWAYS_COMPILE=1} "$PY" scripts/workload.py "$@" >"$out"
}
T0=$(now_ms)
# shellcheck disable=SC2086 # word splitting of the extra args is wanted
run_workload "$TMP/run1.json" ${HISTORY_WORKLOAD_ARGS:-}
T1=$(now_ms)
# shellcheck disable=SC2086
run_workload "$TMP/run2.json" ${HISTORY_WORKLOAD_ARGS:-}
T2=$(now_ms)
ALWAYS=1 run_workload "$TMP/run3.json" --kernels add
T3=$(now_ms)
log "run 1: $(head -c 200 "$TMP/run1.json")..."

# --- 4. scan, serve, query ------------------------------------------------------------------
echo "$T2" >"$TMP/t2"
"$BIN" scan "$TMP/cache" --machine ci-worker --db "$TMP/history.db" >&2
PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN" serve --db "$TMP/history.db" --listen "127.0.0.1:$PORT" 2>"$TMP/serve.log" &
SERVER=$!
URL="http://127.0.0.1:$PORT"
for _ in $(seq 1 100); do
    curl -fsS "$URL/api/v1/machines" >/dev/null 2>&1 && break
    kill -0 "$SERVER" 2>/dev/null || { cat "$TMP/serve.log" >&2; die "cachelens serve exited"; }
    sleep 0.2
done
fetch() { curl -fsS "$URL$1" || die "GET $1"; }
Q="machine=ci-worker&limit=10000"
fetch "/api/v1/history?$Q&bucket=hour" >"$TMP/all.json"
fetch "/api/v1/history?$Q&bucket=day&from=$T0&to=$T1" >"$TMP/h1.json"
fetch "/api/v1/history?$Q&bucket=day&from=$T1&to=$T2" >"$TMP/h2.json"
fetch "/api/v1/history?$Q&bucket=day&kernel=add_kernel&from=$T0&to=$T1" >"$TMP/add1.json"
fetch "/api/v1/history?$Q&bucket=day&from=$T2&to=$T3" >"$TMP/h3.json"
fetch "/history?machine=ci-worker&bucket=hour" >"$TMP/page.html"

"$PY" - "$TMP" <<'EOF'
import glob, json, os, sys

tmp = sys.argv[1]
load = lambda n: json.load(open(os.path.join(tmp, n)))
run1, run2, run3 = load("run1.json"), load("run2.json"), load("run3.json")
n = run1["compiled"]
keys = set(run1["keys"])
assert len(keys) == n and set(run2["keys"]) == keys, "both runs compile the same kernels"

# What the hook wrote (the reference for the compile times).
events = [json.loads(l) for f in glob.glob(os.path.join(tmp, "cache/.cachelens/*.jsonl*")) for l in open(f)]
always = [e for e in events if e["key"] in set(run3["keys"]) and e["ts"] * 1000 >= int(open(os.path.join(tmp, "t2")).read())]
events = [e for e in events if e not in always]
compiles = [e for e in events if e["event"] == "compile"]
assert {e["key"] for e in compiles} == keys, "the hook saw every compile"
assert all(e["compile_ms"] and e["compile_ms"] > 0 for e in compiles), "every compile has a time"
hook_ms = sum(e["compile_ms"] for e in compiles)

def total(name):
    t = {"hits": 0, "misses": 0, "compiles": 0, "inferred_compiles": 0, "hook_events": 0, "compile_ms": None}
    for p in load(name):
        for k in ("hits", "misses", "compiles", "inferred_compiles", "hook_events"):
            t[k] += p[k]
        if p["compile_ms"] is not None:
            t["compile_ms"] = (t["compile_ms"] or 0.0) + p["compile_ms"]
    return t

def check(name, want, ms=None):
    got = total(name)
    for k, v in want.items():
        assert got[k] == v, f"{name}: {k} = {got[k]}, want {v} (all: {got})"
    if ms is not None:
        assert got["compile_ms"] is not None and abs(got["compile_ms"] - ms) < 1e-6 * max(1.0, ms), \
            f"{name}: compile_ms {got['compile_ms']} != hook's {ms}"
    else:
        assert got["compile_ms"] is None, f"{name}: compile_ms {got['compile_ms']}, want null"
    return got

r1 = check("h1.json", {"hits": 0, "misses": n, "compiles": n, "inferred_compiles": 0, "hook_events": 2 * n}, hook_ms)
r2 = check("h2.json", {"hits": n, "misses": 0, "compiles": 0, "inferred_compiles": 0, "hook_events": n})
n3 = run3["compiled"]
ms3 = sum(e["compile_ms"] for e in always if e["event"] == "compile")
r3 = check("h3.json", {"hits": 0, "misses": n3, "compiles": n3, "inferred_compiles": 0}, ms3)
check("all.json", {"hits": n, "misses": n + n3, "compiles": n + n3, "inferred_compiles": 0,
                   "hook_events": 3 * n + r3["hook_events"]}, hook_ms + ms3)
assert all(p["hit_rate"] == 1.0 for p in load("h2.json")), "run 2: hit rate 100%"
n_add = sum(1 for e in compiles if e["kernel"] == "add_kernel")
check("add1.json", {"hits": 0, "misses": n_add, "compiles": n_add, "inferred_compiles": 0}, 
      sum(e["compile_ms"] for e in compiles if e["kernel"] == "add_kernel"))
page = open(os.path.join(tmp, "page.html")).read()
assert f'<b id="total-hits">{n}</b>' in page and f'<b id="total-misses">{n + n3}</b>' in page, "page totals"
print(f"history-ci: ok — {n} kernels ({n_add} add_kernel); run 1: {r1['misses']} misses, {r1['compiles']} compiles, "
      f"{r1['compile_ms'] / 1000:.1f} s compile time; run 2: {r2['hits']} hits, 0 misses; "
      f"run 3 (TRITON_ALWAYS_COMPILE=1): {n3} compiles, 0 hits; no inferred compiles")
EOF
