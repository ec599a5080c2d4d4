"""The listener mode (CACHELENS_HOOK=1 through the installed `cachelens_hook.pth`) beside a cache
manager the job set itself, against the real Triton of this environment (3.4+; CPU only).

Every test runs jobs in a venv that has the package installed as pip lays it out: the wheel of
$CACHELENS_WHEEL (scripts/wheel-ci.sh builds it) installed by pip, else the two things the wheel
puts in site-packages (`cachelens_hook/` and `cachelens_hook.pth`) copied there. Triton comes from
this interpreter's site-packages through a path line, so the venv is made in a second.
"""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
HOOK = os.path.dirname(HERE)
REPO = os.path.dirname(HOOK)
SCRIPTS = os.path.join(REPO, "scripts")

triton = pytest.importorskip("triton")
if not (hasattr(triton, "knobs") and hasattr(triton.knobs.compilation, "listener")):
    pytest.skip("Triton < 3.4 has no compilation listener", allow_module_level=True)

# A job's own cache manager and remote backend (a directory, so that a second process finds what
# the first stored), each logging what Triton asked of it: Triton's own view of hits and misses.
JOB_MODULES = {
    "job_manager.py": '''
import json, os
from triton.runtime.cache import FileCacheManager, RemoteCacheBackend

def _log(rec):
    with open(os.environ["JOB_LOG"], "a") as f:
        f.write(json.dumps(rec) + "\\n")

class JobManager(FileCacheManager):
    def get_group(self, filename):
        g = super().get_group(filename)
        _log({"by": "manager", "key": self.key, "found": bool(g) and g.get(filename) is not None})
        return g

class DirBackend(RemoteCacheBackend):
    def __init__(self, key):
        self.dir = os.path.join(os.environ["JOB_REMOTE"], key)
        os.makedirs(self.dir, exist_ok=True)
    def get(self, filenames):
        out = {}
        for n in filenames:
            p = os.path.join(self.dir, n)
            if os.path.exists(p):
                with open(p, "rb") as f:
                    out[n] = f.read()
        if filenames and filenames[0].startswith("__grp__"):
            _log({"by": "remote", "key": os.path.basename(self.dir), "found": bool(out)})
        return out
    def put(self, filename, data):
        with open(os.path.join(self.dir, filename), "wb") as f:
            f.write(data)
''',
    "job.py": '''
import json, sys
sys.path.insert(0, sys.argv[1])
import triton
from triton import knobs
calls = []
def job_listener(**kw):
    calls.append(kw["cache_hit"])
knobs.compilation.listener = job_listener        # after `import triton`, as jobs do
import workload
workload.main(["--kernels", "add", "--limit", "3"])
l = knobs.compilation.listener
print(json.dumps({"calls": calls, "ours": bool(getattr(l, "_cachelens_auto", False)),
                  "prev_is_job": getattr(l, "_cachelens_prev", None) is job_listener,
                  "is_job": l is job_listener}))
''',
}


def site_packages(venv):
    out = subprocess.run([os.path.join(venv, "bin", "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return out


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("venv") / "v")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", d], check=True)
    sp = site_packages(d)
    with open(os.path.join(sp, "zz_triton_here.pth"), "w") as f:  # triton from this interpreter
        f.write(os.path.dirname(os.path.dirname(os.path.abspath(triton.__file__))) + "\n")
    wheel = os.environ.get("CACHELENS_WHEEL")
    if wheel:
        subprocess.run([sys.executable, "-m", "pip", "--python", os.path.join(d, "bin", "python"), "install", "--quiet",
                        "--disable-pip-version-check", "--no-deps", "--no-index", wheel], check=True)
    else:
        shutil.copytree(os.path.join(HOOK, "cachelens_hook"), os.path.join(sp, "cachelens_hook"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(os.path.join(HOOK, "cachelens_hook.pth"), sp)
    assert os.path.isfile(os.path.join(sp, "cachelens_hook.pth"))
    return os.path.join(d, "bin", "python")


def job_env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "CACHELENS_", "PYTHON"))}
    mods = tmp_path / "mods"
    mods.mkdir(exist_ok=True)
    for name, text in JOB_MODULES.items():
        (mods / name).write_text(textwrap.dedent(text))
    env.update(PYTHONPATH=str(mods), TRITON_CACHE_DIR=str(tmp_path / "cache"), JOB_LOG=str(tmp_path / "job.log"),
               JOB_REMOTE=str(tmp_path / "remote"))
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_job(py, tmp_path, **extra):
    env = job_env(tmp_path, **extra)
    p = subprocess.run([py, str(tmp_path / "mods" / "job.py"), SCRIPTS], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    return json.loads(lines[-2]), json.loads(lines[-1])  # workload's summary, job.py's


def read_events(d):
    out = []
    if os.path.isdir(d):
        for name in sorted(os.listdir(d)):
            if ".jsonl" in name:
                with open(os.path.join(d, name)) as f:
                    out.extend(json.loads(line) for line in f)
    return out


def read_log(tmp_path, by):
    p = tmp_path / "job.log"
    lines = [json.loads(line) for line in open(p)] if p.exists() else []
    return [r for r in lines if r["by"] == by]


def counts(events):
    return {k: sorted(e["key"] for e in events if e["event"] == k) for k in ("hit", "miss", "compile")}


def check_compile_line(e):
    assert e["v"] == 1 and isinstance(e["seq"], int) and isinstance(e["pid"], int)
    assert e["kernel"] == "add_kernel"
    assert e["compile_ms"] > 0 and {"ir_init", "ttir", "ttgir", "llir", "ptx", "cubin", "store"} == set(e["stages_ms"])
    assert abs(sum(e["stages_ms"].values()) - e["compile_ms"]) < 0.01
    assert set(e["parts"]) == {"triton_key", "source_hash", "backend_hash", "options_hash", "env_vars", "python",
                               "triton_dir"}


def test_custom_manager_twice(venv, tmp_path):
    """TRITON_CACHE_MANAGER is the job's own: the listener alone records what Triton did."""
    env = dict(CACHELENS_HOOK=1, TRITON_CACHE_MANAGER="job_manager:JobManager")
    s1, j1 = run_job(venv, tmp_path, **env)
    s2, j2 = run_job(venv, tmp_path, **env)
    ev = read_events(tmp_path / "cache" / ".cachelens")
    first = [e for e in ev if e["pid"] == ev[0]["pid"]]
    c1, c2 = counts(first), counts(ev[len(first):])
    keys = sorted(s1["keys"])
    assert len(keys) == 3 and sorted(s2["keys"]) == keys
    # Triton's own behaviour, seen by the job's manager: 3 lookups not found, then 3 found
    log = read_log(tmp_path, "manager")
    assert [r["found"] for r in log] == [False] * 3 + [True] * 3
    assert sorted(r["key"] for r in log if not r["found"]) == keys
    assert c1 == {"hit": [], "miss": keys, "compile": keys}
    assert c2 == {"hit": keys, "miss": [], "compile": []}
    for e in ev:
        if e["event"] == "compile":
            check_compile_line(e)
        else:
            assert e["compile_ms"] is None and e["stages_ms"] is None and "parts" not in e
    # the job's listener, set after `import triton`, is still called, after ours, with Triton's flags
    assert j1["calls"] == [False] * 3 and j2["calls"] == [True] * 3
    assert j1["ours"] and j1["prev_is_job"]


def test_remote_cache_manager_twice(venv, tmp_path):
    """RemoteCacheManager with a job's backend: the second run is served by the backend alone
    (the local cache dir is wiped between runs), and is recorded as hits."""
    hook_dir = tmp_path / "ev" / ".cachelens"
    env = dict(CACHELENS_HOOK="1", TRITON_CACHE_MANAGER="triton.runtime.cache:RemoteCacheManager",
               TRITON_REMOTE_CACHE_BACKEND="job_manager:DirBackend", CACHELENS_HOOK_DIR=hook_dir)
    s1, j1 = run_job(venv, tmp_path, **env)
    shutil.rmtree(tmp_path / "cache")
    s2, j2 = run_job(venv, tmp_path, **env)
    keys = sorted(s1["keys"])
    log = read_log(tmp_path, "remote")
    assert [r["found"] for r in log] == [False] * 3 + [True] * 3
    ev = read_events(hook_dir)
    first = [e for e in ev if e["pid"] == ev[0]["pid"]]
    assert counts(first) == {"hit": [], "miss": keys, "compile": keys}
    assert counts(ev[len(first):]) == {"hit": keys, "miss": [], "compile": []}
    assert sorted(s2["keys"]) == keys and j1["calls"] == [False] * 3 and j2["calls"] == [True] * 3


def test_off_without_the_variable(venv, tmp_path):
    for value in (None, "0", ""):
        extra = {"TRITON_CACHE_MANAGER": "job_manager:JobManager"}
        if value is not None:
            extra["CACHELENS_HOOK"] = value
        _, j = run_job(venv, tmp_path, **extra)
        assert j["is_job"] and not j["ours"]
    assert not (tmp_path / "cache" / ".cachelens").exists()
    assert [r["found"] for r in read_log(tmp_path, "manager")] == [False] * 3 + [True] * 6


def test_with_the_manager_mode_lines_are_not_doubled(venv, tmp_path):
    env = dict(CACHELENS_HOOK=1, TRITON_CACHE_MANAGER="cachelens_hook:TrackingCacheManager")
    s1, j1 = run_job(venv, tmp_path, **env)
    run_job(venv, tmp_path, **env)
    keys = sorted(s1["keys"])
    c = counts(read_events(tmp_path / "cache" / ".cachelens"))
    assert c == {"hit": keys, "miss": keys, "compile": keys}
    assert j1["calls"] == [False] * 3


def test_startup_stays_cheap(venv, tmp_path):
    """With the variable set, start-up imports neither Triton nor the manager; a Python that
    never imports triton is left alone."""
    code = "import sys; print(sorted(m for m in sys.modules if m.startswith(('triton', 'cachelens'))))"
    for value, want in (("1", ["cachelens_hook", "cachelens_hook._auto"]), (None, [])):
        env = job_env(tmp_path)
        if value:
            env["CACHELENS_HOOK"] = value
        p = subprocess.run([venv, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert json.loads(p.stdout.replace("'", '"')) == want and p.stderr == ""


def test_listener_set_before_the_switch_is_kept(venv, tmp_path):
    """Switched on after `import triton` with a listener already set (the order a sitecustomize or
    a launcher may give): that listener stays the job's and is still called; lines are written."""
    code = textwrap.dedent(f"""
        import json, os, sys
        sys.path.insert(0, {SCRIPTS!r})
        from triton import knobs
        calls = []
        def early(**kw):
            calls.append(kw["cache_hit"])
        knobs.compilation.listener = early
        os.environ["CACHELENS_HOOK"] = "1"
        import cachelens_hook._auto
        import workload
        workload.main(["--kernels", "add", "--limit", "2", "--repeat", "2"])
        l = knobs.compilation.listener
        print(json.dumps({{"calls": calls, "prev_is_early": l._cachelens_prev is early}}))
    """)
    env = job_env(tmp_path, TRITON_CACHE_MANAGER="job_manager:JobManager")
    p = subprocess.run([venv, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    summary, res = (json.loads(x) for x in p.stdout.strip().splitlines()[-2:])
    keys = sorted(summary["keys"])
    assert len(keys) == 2
    # --repeat 2 in one process: the second round of compile() calls finds the entries: hits
    assert res["calls"] == [False, False, True, True] and res["prev_is_early"]
    assert [r["found"] for r in read_log(tmp_path, "manager")] == [False, False, True, True]
    assert counts(read_events(tmp_path / "cache" / ".cachelens")) == {"hit": keys, "miss": keys, "compile": keys}
