#!/usr/bin/env python3
"""Measure what the cachelens hook costs a job whose kernels all come from a warm cache.

    <venv>/bin/python scripts/hook-overhead.py [--rounds 5] [--repeat 20] [--kernels add,softmax,...]

1. compiles the workload once into a temp cache (cold, no hook);
2. runs the warm workload (`scripts/workload.py --repeat R`: every compile() is a cache hit) in
   fresh processes, alternating without and with TRITON_CACHE_MANAGER=cachelens_hook:..., ROUNDS
   times each, and compares the medians of the in-process compile-loop time;
3. times the hook's own event write in-process (format + append of one line).
Prints a human summary and a JSON line. Needs only Triton (CPU is fine).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
HOOK = os.path.join(REPO, "hook")
WORKLOAD = os.path.join(HERE, "workload.py")


def run(cache, args, hook, hook_dir=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "CACHELENS_"))}
    env["TRITON_CACHE_DIR"] = cache
    env["PYTHONPATH"] = HOOK + os.pathsep + env.get("PYTHONPATH", "")
    if hook:
        env["TRITON_CACHE_MANAGER"] = "cachelens_hook:TrackingCacheManager"
        if hook_dir:
            env["CACHELENS_HOOK_DIR"] = hook_dir
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, WORKLOAD, *args], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(p.stderr)
    out = json.loads(p.stdout.strip().splitlines()[-1])
    return out["seconds"], wall, out["compiled"] * out["repeat"]


def writer_cost(n=20000):
    sys.path.insert(0, HOOK)
    from cachelens_hook import _writer
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        for i in range(n):
            _writer.emit(d, "K" * 52, "add_kernel", "hit")
        dt = time.perf_counter() - t0
        ok = not _writer.disabled()
    return dt / n * 1e6, ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=20, help="warm passes over the kernel set per process")
    ap.add_argument("--kernels", default="add,softmax,layernorm,matmul")
    ap.add_argument("--target", default="cuda:90")
    a = ap.parse_args()
    common = ["--kernels", a.kernels, "--target", a.target]
    with tempfile.TemporaryDirectory() as tmp:
        cache = os.path.join(tmp, "cache")
        cold, _, n = run(cache, common, hook=False)
        print(f"cold compile of {n} kernels: {cold:.1f} s", file=sys.stderr)
        base, hook, base_wall, hook_wall = [], [], [], []
        lookups = None
        for r in range(a.rounds):
            for with_hook in (False, True):
                s, wall, lookups = run(cache, common + ["--repeat", str(a.repeat)], with_hook,
                                       hook_dir=os.path.join(tmp, "events"))
                (hook if with_hook else base).append(s)
                (hook_wall if with_hook else base_wall).append(wall)
        events = sum(1 for _ in open(os.path.join(tmp, "events", os.listdir(os.path.join(tmp, "events"))[0])))
    b, h = statistics.median(base), statistics.median(hook)
    bw, hw = statistics.median(base_wall), statistics.median(hook_wall)
    per_lookup_base = b / lookups * 1e6
    per_lookup_hook = h / lookups * 1e6
    emit_us, ok = writer_cost()
    res = {
        "triton_version": None,
        "lookups_per_run": lookups,
        "rounds": a.rounds,
        "events_written": events,
        "warm_loop_s_median": {"without": round(b, 4), "with": round(h, 4)},
        "process_wall_s_median": {"without": round(bw, 3), "with": round(hw, 3)},
        "per_lookup_us": {"without": round(per_lookup_base, 1), "with": round(per_lookup_hook, 1),
                          "overhead": round(per_lookup_hook - per_lookup_base, 1)},
        "overhead_pct_of_warm_loop": round((h - b) / b * 100, 2),
        "overhead_pct_of_process_wall": round((h - b) / bw * 100, 2),
        "event_write_us": round(emit_us, 1),
        "writer_ok": ok,
    }
    try:
        import triton
        res["triton_version"] = triton.__version__
    except Exception:
        pass
    print(f"warm lookup (cache hit) without hook: {per_lookup_base:.0f} us, with hook: {per_lookup_hook:.0f} us "
          f"-> +{per_lookup_hook - per_lookup_base:.1f} us per lookup "
          f"({res['overhead_pct_of_warm_loop']:+.2f}% of the warm compile loop, "
          f"{res['overhead_pct_of_process_wall']:+.2f}% of the whole process); "
          f"one event write alone: {emit_us:.1f} us", file=sys.stderr)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
