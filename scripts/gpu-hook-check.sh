#!/usr/bin/env bash
# On a GPU machine (not CI): run real JIT launches twice with the hook enabled only through the
# environment, print what the hook recorded, and pack the cache into $OUT for scanning elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu-hook-out}; mkdir -p "$out"
cache=$(mktemp -d)/triton-cache
export TRITON_CACHE_DIR=$cache PYTHONPATH=$PWD/hook${PYTHONPATH:+:$PYTHONPATH}
export TRITON_CACHE_MANAGER=cachelens_hook:TrackingCacheManager
for run in 1 2; do
  /usr/bin/time -f "run $run: %e s wall" python scripts/gpu-hook-check.py
  python - "$cache" "$run" <<'PY'
import json, sys, glob, collections
ev = [json.loads(l) for f in glob.glob(sys.argv[1] + "/.cachelens/*.jsonl") for l in open(f)]
c = collections.Counter(e["event"] for e in ev)
ms = [e["compile_ms"] for e in ev if e["event"] == "compile" and e["compile_ms"]]
st = sum(1 for e in ev if e["event"] == "compile" and e.get("stages_ms"))
print(f"after run {sys.argv[2]}: {dict(c)}; compile_ms total {sum(ms):.0f}; compiles with stages_ms {st}")
PY
done
unset TRITON_CACHE_MANAGER
python -c "import triton; print('plain run without hook ok')" 
tar czf "$out/gpu-cache.tar.gz" -C "$(dirname "$cache")" triton-cache
head -c 2000 "$cache"/.cachelens/*.jsonl
