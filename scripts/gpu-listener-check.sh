#!/usr/bin/env bash
# On a GPU machine (not CI): the hook's listener mode under real JIT launches. The job sets its own
# TRITON_CACHE_MANAGER (a FileCacheManager that logs what Triton asked of it); the hook is switched
# on only by CACHELENS_HOOK=1 through the installed cachelens_hook.pth. Runs the launches of
# scripts/gpu-hook-check.py twice and prints the hook's events next to the manager's own log.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
python -m venv --system-site-packages "$work/venv"
py=$work/venv/bin/python
# A python that is itself a venv does not pass its packages on: then install into its own site dir.
"$py" -c 'import torch' 2>/dev/null || { py=$(command -v python); echo "installing into $py's site-packages"; }
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cp -r hook/cachelens_hook hook/cachelens_hook.pth "$site/"
mkdir -p "$work/mods"
cat > "$work/mods/jobmgr.py" <<'PY'
import json, os
from triton.runtime.cache import FileCacheManager
class JobManager(FileCacheManager):
    def get_group(self, filename):
        g = super().get_group(filename)
        with open(os.environ["JOB_LOG"], "a") as f:
            f.write(json.dumps({"key": self.key, "found": bool(g) and g.get(filename) is not None}) + "\n")
        return g
PY
export TRITON_CACHE_DIR=$work/cache JOB_LOG=$work/job.log PYTHONPATH=$work/mods
export TRITON_CACHE_MANAGER=jobmgr:JobManager CACHELENS_HOOK=1
for run in 1 2; do
  : > "$JOB_LOG"
  "$py" scripts/gpu-hook-check.py >/dev/null
  "$py" - "$TRITON_CACHE_DIR" "$run" "$JOB_LOG" <<'PY'
import json, sys, glob, collections
ev = [json.loads(l) for f in glob.glob(sys.argv[1] + "/.cachelens/*.jsonl") for l in open(f)]
c = collections.Counter(e["event"] for e in ev)
ms = [e["compile_ms"] for e in ev if e["event"] == "compile" and e.get("compile_ms")]
kp = sum(1 for e in ev if e["event"] == "compile" and e.get("parts"))
log = [json.loads(l) for l in open(sys.argv[3])]
m = collections.Counter("hit" if r["found"] else "miss" for r in log)
print(f"after run {sys.argv[2]}: hook events so far {dict(c)}; compile_ms total {sum(ms):.0f}; "
      f"compiles with key parts {kp}; the job's manager saw this run {dict(m)}")
PY
done
tar czf "${OUT:-$work}/gpu-listener-cache.tar.gz" -C "$work" cache
