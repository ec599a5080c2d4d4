"""Tests of the cachelens Triton hook against the real Triton of this environment (CPU only).

Run: <venv>/bin/python -m pytest hook/tests -q   (the venv from scripts/triton-venv.sh)
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
HOOK = os.path.dirname(HERE)
REPO = os.path.dirname(HOOK)
WORKLOAD = os.path.join(REPO, "scripts", "workload.py")
sys.path.insert(0, HOOK)

from cachelens_hook import _writer  # noqa: E402

triton = pytest.importorskip("triton")

MANAGER = "cachelens_hook:TrackingCacheManager"
KERNELS = "add,softmax,layernorm"  # 15 kernels, a few seconds on a CPU
N = 15
FIELDS = {"v", "ts", "host", "pid", "key", "kernel", "event", "compile_ms", "stages_ms", "seq"}


@pytest.fixture(autouse=True)
def fresh_writer(monkeypatch):
    """In-process tests share the writer's module state: start each from a clean one."""
    monkeypatch.setattr(_writer, "_disabled", False)
    monkeypatch.setattr(_writer, "_failures", 0)
    monkeypatch.setattr(_writer, "_dirs_made", set())
    monkeypatch.delenv("CACHELENS_HOOK_DIR", raising=False)
    monkeypatch.delenv("CACHELENS_HOOK_MAX_BYTES", raising=False)


def env_for(cache, **extra):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("TRITON_", "CACHELENS_")):
            del env[k]
    env["TRITON_CACHE_DIR"] = str(cache)
    env["TRITON_CACHE_MANAGER"] = MANAGER
    env["PYTHONPATH"] = HOOK + os.pathsep + env.get("PYTHONPATH", "")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_workload(cache, *args, **extra):
    p = subprocess.run([sys.executable, WORKLOAD, "--kernels", KERNELS, *args], env=env_for(cache, **extra),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    return summary, p


def read_events(d):
    out = []
    for name in sorted(os.listdir(d)):
        if ".jsonl" in name:
            with open(os.path.join(d, name)) as f:
                for line in f:
                    out.append(json.loads(line))
    return out


def check_line(e):
    assert set(e) - {"parts"} == FIELDS, e
    assert "parts" not in e or e["event"] == "compile", e
    assert e["v"] == 1
    assert isinstance(e["ts"], float) and e["ts"] > 1.6e9
    assert isinstance(e["host"], str) and isinstance(e["pid"], int)
    assert isinstance(e["seq"], int) and e["seq"] >= 0
    assert isinstance(e["key"], str) and e["key"]
    assert e["event"] in ("hit", "miss", "compile")
    if e["event"] == "compile":
        assert isinstance(e["compile_ms"], float) and e["compile_ms"] > 0
    else:
        assert e["compile_ms"] is None and e["stages_ms"] is None


def by_event(events):
    return {k: [e for e in events if e["event"] == k] for k in ("hit", "miss", "compile")}


def test_cold_then_warm_then_always_compile(tmp_path):
    cache = tmp_path / "cache"
    hook_dir = cache / ".cachelens"

    s1, _ = run_workload(cache)
    ev1 = read_events(hook_dir)
    for e in ev1:
        check_line(e)
    b1 = by_event(ev1)
    assert len(b1["miss"]) == N and len(b1["compile"]) == N and not b1["hit"]
    assert sorted(e["key"] for e in b1["compile"]) == sorted(s1["keys"])
    assert {e["kernel"] for e in b1["compile"]} == {"add_kernel", "softmax_kernel", "layernorm_kernel"}
    for e in b1["compile"]:
        assert set(e["parts"]) == {"triton_key", "source_hash", "backend_hash", "options_hash", "env_vars", "python",
                                   "triton_dir"}, e
        st = e["stages_ms"]
        # every compile has stage times, listener (3.4+) or cache-write timing (first compile, <3.4)
        assert st and {"ttir", "ttgir", "llir", "ptx", "cubin"} <= set(st), st
        assert all(v >= 0 for v in st.values())
        assert sum(st.values()) <= e["compile_ms"] * 1.5 + 5
    # each compile follows its own miss (same pid and key)
    for c in b1["compile"]:
        assert any(m["key"] == c["key"] and m["pid"] == c["pid"] and m["ts"] <= c["ts"] for m in b1["miss"])

    s2, _ = run_workload(cache)
    ev2 = read_events(hook_dir)[len(ev1):]
    b2 = by_event(ev2)
    assert len(b2["hit"]) == N and not b2["miss"] and not b2["compile"]
    assert sorted(e["key"] for e in b2["hit"]) == sorted(s2["keys"]) == sorted(s1["keys"])

    # TRITON_ALWAYS_COMPILE=1: the entries are there, but Triton compiles anyway -> no hit
    run_workload(cache, TRITON_ALWAYS_COMPILE=1)
    ev3 = read_events(hook_dir)[len(ev1) + len(ev2):]
    b3 = by_event(ev3)
    assert not b3["hit"] and len(b3["miss"]) == N and len(b3["compile"]) == N
    assert all(e["compile_ms"] > 0 for e in b3["compile"])


def test_hook_dir_override_and_repeat(tmp_path):
    cache, other = tmp_path / "cache", tmp_path / "elsewhere"
    run_workload(cache, "--repeat", "2", "--limit", "2", CACHELENS_HOOK_DIR=other)
    assert not (cache / ".cachelens").exists()
    b = by_event(read_events(other))
    # one process, 2 kernels twice: 2 misses + 2 compiles, then 2 hits
    assert len(b["miss"]) == 2 and len(b["compile"]) == 2 and len(b["hit"]) == 2


def test_existing_listener_is_chained(tmp_path):
    cache = tmp_path / "cache"
    code = textwrap.dedent(f"""
        import sys, json
        sys.path.insert(0, {os.path.dirname(WORKLOAD)!r})
        import workload
        try:
            from triton import knobs
        except ImportError:  # Triton < 3.4: no knobs, no listener
            knobs = None
        calls = []
        def user_listener(**kw):
            calls.append(kw["cache_hit"])
        if knobs is not None and hasattr(knobs.compilation, "listener"):
            knobs.compilation.listener = user_listener
        workload.main(["--kernels", "add", "--limit", "3"])
        workload.main(["--kernels", "add", "--limit", "3"])
        l = knobs.compilation.listener if knobs is not None else None
        print(json.dumps({{"calls": calls, "ours": bool(getattr(l, "_cachelens", False)),
                          "prev_is_user": getattr(l, "_cachelens_prev", None) is user_listener}}))
    """)
    p = subprocess.run([sys.executable, "-c", code], env=env_for(cache), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout.strip().splitlines()[-1])
    b = by_event(read_events(cache / ".cachelens"))
    assert len(b["compile"]) == 3 and len(b["hit"]) == 3
    assert all(e["stages_ms"] and "ttir" in e["stages_ms"] for e in b["compile"])
    if hasattr(triton, "knobs") and hasattr(triton.knobs.compilation, "listener"):  # 3.4+
        assert all("ir_init" in e["stages_ms"] for e in b["compile"])
        assert res["ours"] and res["prev_is_user"]
        assert res["calls"] == [False, False, False, True, True, True]


def test_concurrent_writers_whole_lines(tmp_path):
    d = tmp_path / "ev"
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {HOOK!r})
        from cachelens_hook import _writer
        stages = {{"ir_init": 1.5, "ttir": 2.25, "ttgir": 3.0, "llir": 4.0, "ptx": 5.0, "cubin": 6.0, "store": 0.5}}
        for i in range(500):
            ok = _writer.emit("/nonexistent", "K" * 52, "kernel_%d_" % i + "x" * 300, "compile", 1.0 + i, stages)
            assert ok
    """)
    env = env_for(tmp_path, CACHELENS_HOOK_DIR=d)
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env) for _ in range(8)]
    assert all(p.wait(timeout=300) == 0 for p in procs)
    with open(d / os.listdir(d)[0], "rb") as f:
        raw = f.read()
    assert raw.endswith(b"\n")
    lines = raw.split(b"\n")[:-1]
    assert len(lines) == 8 * 500
    per_pid = {}
    for line in lines:
        e = json.loads(line)
        check_line(e)
        per_pid.setdefault(e["pid"], []).append(e["seq"])
    # each process numbers its lines 0, 1, 2...: (host, pid, ts, seq) identifies every line
    assert sorted(per_pid.values()) == [list(range(500))] * 8


def test_rotation_caps_size(tmp_path, monkeypatch):
    d = tmp_path / "ev"
    monkeypatch.setenv("CACHELENS_HOOK_MAX_BYTES", "5000")
    for i in range(200):
        assert _writer.write_line(str(d), _writer.format_line("KEY%d" % i, "k", "hit"))
    names = sorted(os.listdir(d))
    jsonl = [n for n in names if n.endswith(".jsonl")]
    assert len(jsonl) == 2 and any(n.endswith(".1.jsonl") for n in jsonl), names
    cur = [n for n in jsonl if not n.endswith(".1.jsonl")][0]
    line_len = len(_writer.format_line("KEY100", "k", "hit"))
    for n in jsonl:
        size = os.path.getsize(d / n)
        assert size < 5000 + line_len
        with open(d / n) as f:
            for line in f:
                check_line(json.loads(line))
    # the newest line is in the current file, the .1 file holds the lines just before it
    with open(d / cur) as f:
        assert json.loads(f.readlines()[-1])["key"] == "KEY199"


def test_concurrent_rotation_keeps_lines_whole(tmp_path):
    d = tmp_path / "ev"
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {HOOK!r})
        from cachelens_hook import _writer
        for i in range(300):
            assert _writer.emit("/nonexistent", "K%d" % i, "k" * 100, "miss")
    """)
    env = env_for(tmp_path, CACHELENS_HOOK_DIR=d, CACHELENS_HOOK_MAX_BYTES=20000)
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env) for _ in range(6)]
    assert all(p.wait(timeout=300) == 0 for p in procs)
    files = [n for n in os.listdir(d) if ".jsonl" in n]
    assert len(files) == 2
    for n in files:
        raw = open(d / n, "rb").read()
        assert raw.endswith(b"\n")
        for line in raw.split(b"\n")[:-1]:
            check_line(json.loads(line))
        assert os.path.getsize(d / n) < 2 * 20000


def test_unwritable_dir_never_raises(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a dir")
    bad = blocker / "sub"  # makedirs fails: a path component is a file (root can't write here either)
    summary, p = run_workload(tmp_path / "cache", "--limit", "4", CACHELENS_HOOK_DIR=bad)
    assert summary["compiled"] == 4
    assert p.stderr.count("cachelens_hook: disabled") <= 1
    # and the cache itself is intact: a second run is served from it
    summary2, _ = run_workload(tmp_path / "cache", "--limit", "4")
    assert summary2["keys"] == summary["keys"]
    b = by_event(read_events(tmp_path / "cache" / ".cachelens"))
    assert len(b["hit"]) == 4


def test_writer_disables_itself_after_failures(tmp_path, monkeypatch):
    blocker = tmp_path / "f"
    blocker.write_text("x")
    monkeypatch.setenv("CACHELENS_HOOK_DIR", str(blocker / "sub"))
    results = [_writer.emit(str(tmp_path), "K", "k", "miss") for _ in range(10)]
    assert results == [False] * 10
    assert _writer.disabled() and _writer._failures == _writer.MAX_FAILURES


def test_oversized_line_is_trimmed():
    line = _writer.format_line("K", "k" * 10000, "compile", 1.0, {"s%d" % i: 1.0 for i in range(500)})
    assert line is not None and len(line) <= _writer.MAX_LINE + 1
    e = json.loads(line)
    assert e["stages_ms"] is None and len(e["kernel"]) == 200


def test_compiles_record_the_key_parts(tmp_path):
    """A compile's `parts` are what Triton hashed into its key: recomposed, they give the
    entry's metadata `hash` exactly (triton_key() recomputed here, in the same Triton)."""
    import hashlib
    cache = tmp_path / "cache"
    run_workload(cache, "--limit", "2")
    code = textwrap.dedent("""
        import json, sys
        from triton import __version__
        try:
            from triton.runtime.cache import triton_key
        except ImportError:
            from triton.compiler.compiler import triton_key
        print(json.dumps({"tk": triton_key(), "v": __version__}))
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    tk = json.loads(p.stdout)["tk"]
    compiles = by_event(read_events(cache / ".cachelens"))["compile"]
    assert len(compiles) == 2
    for e in compiles:
        parts = e["parts"]
        assert parts["triton_key"] == hashlib.sha256(tk.encode()).hexdigest()
        assert parts["python"] == "%d.%d.%d" % sys.version_info[:3]
        assert os.path.isfile(os.path.join(parts["triton_dir"], "__init__.py"))
        key = f"{tk}-{parts['source_hash']}-{parts['backend_hash']}-{parts['options_hash']}-{parts['env_vars']}"
        meta = [f for f in os.listdir(cache / e["key"]) if f.endswith(".json") and not f.startswith("__grp__")]
        with open(cache / e["key"] / meta[0]) as f:
            assert hashlib.sha256(key.encode()).hexdigest() == json.load(f)["hash"]
