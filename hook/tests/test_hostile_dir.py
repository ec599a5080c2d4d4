"""The hook in a cache dir that someone else can write (issue 32): a symlink, a hard link or a
FIFO planted where the hook writes must never redirect a line, create a file elsewhere or block
the job. Each case runs a real Triton job (CPU only) with the cache manager mode, then checks
the victim file and that the job compiled.

Run: <venv>/bin/python -m pytest hook/tests -q   (the venv from scripts/triton-venv.sh)
"""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from cachelens_hook import _writer  # noqa: E402
from test_hook import WORKLOAD, env_for, fresh_writer  # noqa: E402,F401

pytest.importorskip("triton")

VICTIM = "precious: the victim's own file\n"


def host_file():
    _writer._hostname()
    return "events-" + _writer._host_file + ".jsonl"


def run_job(cache, timeout=180, **extra):
    """4 kernels compiled by a real job; a hook that blocked it shows as a timeout."""
    p = subprocess.run([sys.executable, WORKLOAD, "--kernels", "add", "--limit", "4"], env=env_for(cache, **extra),
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1])["compiled"] == 4
    return p


@pytest.fixture
def victim(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    v = home / "victim"
    v.write_text(VICTIM)
    return v


def test_symlinked_event_file_is_not_followed(tmp_path, victim):
    ev = tmp_path / "cache" / ".cachelens"
    ev.mkdir(parents=True)
    os.symlink(victim, ev / host_file())
    run_job(tmp_path / "cache")
    assert victim.read_text() == VICTIM
    assert os.path.islink(ev / host_file())


def test_symlinked_event_dir_is_not_followed(tmp_path, victim):
    cache = tmp_path / "cache"
    cache.mkdir()
    os.symlink(victim.parent, cache / ".cachelens")
    run_job(cache)
    assert sorted(os.listdir(victim.parent)) == ["victim"], "nothing created in the link's target"
    assert victim.read_text() == VICTIM


@pytest.mark.parametrize("dangling", [False, True])
def test_symlinked_lock_file_is_not_followed(tmp_path, victim, dangling):
    ev = tmp_path / "cache" / ".cachelens"
    ev.mkdir(parents=True)
    target = victim.parent / "created-by-hook" if dangling else victim
    lock = ev / ("." + host_file()[:-len(".jsonl")] + ".lock")
    os.symlink(target, lock)
    # a cap of 1 byte: the second line rotates, through the lock
    run_job(tmp_path / "cache", CACHELENS_HOOK_MAX_BYTES=1)
    assert victim.read_text() == VICTIM
    assert not os.path.lexists(victim.parent / "created-by-hook"), "a file created through the lock's link"
    assert os.path.islink(lock)
    assert not any(n.endswith(".1.jsonl") for n in os.listdir(ev)), "rotated under a lock it does not own"


def test_hard_linked_event_file_is_refused(tmp_path, victim):
    ev = tmp_path / "cache" / ".cachelens"
    ev.mkdir(parents=True)
    os.link(victim, ev / host_file())
    run_job(tmp_path / "cache")
    assert victim.read_text() == VICTIM


def test_fifo_as_event_file_does_not_block_the_job(tmp_path):
    ev = tmp_path / "cache" / ".cachelens"
    ev.mkdir(parents=True)
    os.mkfifo(ev / host_file())
    run_job(tmp_path / "cache", timeout=120)


def test_refusals_in_process_never_raise(tmp_path, victim):
    d = tmp_path / "ev"
    d.mkdir()
    os.symlink(victim, d / host_file())
    line = _writer.format_line("K", "k", "hit")
    assert _writer.write_line(str(d), line) is False
    link_dir = tmp_path / "linked"
    os.symlink(victim.parent, link_dir)
    assert _writer.write_line(str(link_dir), line) is False
    assert victim.read_text() == VICTIM
    # a plain dir still works, and the file it makes is ours
    ok = tmp_path / "ok"
    assert _writer.write_line(str(ok), line)
    st = os.lstat(ok / host_file())
    assert st.st_uid == os.getuid() and st.st_nlink == 1
