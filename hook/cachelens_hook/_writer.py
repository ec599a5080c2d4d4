"""Appending event lines to `<dir>/events-<host>.jsonl`, safely from many processes.

No Triton import here. Every public function swallows its own errors; after MAX_FAILURES
consecutive failures the writer switches itself off for the rest of the process.

Whoever can write the cache dir controls what sits in it, so nothing below the event dir's parent
is opened by path: the event dir is opened with O_NOFOLLOW | O_DIRECTORY from its parent's
descriptor, and the event file and the rotation lock from the event dir's descriptor with
O_NOFOLLOW (created with O_EXCL, else opened as they are) and O_NONBLOCK (a FIFO never blocks the
job). A line is appended only to a regular file of one link owned by this process's uid (fstat);
anything else (a symlink to `~/.bashrc`, a hard link, a FIFO, another user's file) is refused:
nothing is recorded and the refusal counts as a failure.
"""
import itertools
import json
import logging
import os
import re
import socket
import stat
import sys
import time

MAX_FAILURES = 3
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
# One write() per line, kept below PIPE_BUF so that even where appends are only atomic up to
# that size, lines from concurrent writers never interleave.
MAX_LINE = 4000

_log = logging.getLogger("cachelens_hook")

_failures = 0
_disabled = os.environ.get("CACHELENS_HOOK_DISABLE", "").strip().lower() in ("1", "true", "yes", "on")
_host = None
_host_file = None
_dirs_made = set()

# json.dumps(..., separators=...) builds a new encoder per call; reuse one.
_encode = json.JSONEncoder(separators=(",", ":")).encode

# Numbers the lines of this process: with host, pid and ts it identifies a line exactly, so the
# scanner counts two lookups within one microsecond twice and a line read twice once.
# (next() on itertools.count is atomic under the GIL; a forked child has its own pid.)
_seq = itertools.count()

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC
# The event file and the lock: never through a symlink, never blocking on a FIFO.
_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | _NOFOLLOW | _NONBLOCK | _CLOEXEC
_LOCK_FLAGS = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC


class Refused(OSError):
    """A file or dir the hook will not write through (symlink, hard link, not ours, not regular)."""


def disabled():
    return _disabled


def note_failure(exc=None):
    """Count one failure of ours; switch off after MAX_FAILURES in a row. Never raises."""
    global _failures, _disabled
    try:
        _failures += 1
        if _failures >= MAX_FAILURES and not _disabled:
            _disabled = True
            _log.warning("cachelens_hook: disabled for this process after %d failures (last: %r)", _failures, exc)
    except Exception:
        _disabled = True


def _hostname():
    global _host, _host_file
    if _host is None:
        try:
            h = socket.gethostname() or "unknown"
        except Exception:
            h = "unknown"
        _host = h
        _host_file = re.sub(r"[^A-Za-z0-9._-]", "_", h)[:128] or "unknown"
    return _host


def event_dir(cache_root):
    return os.environ.get("CACHELENS_HOOK_DIR") or os.path.join(cache_root, ".cachelens")


def _max_bytes():
    try:
        return int(os.environ.get("CACHELENS_HOOK_MAX_BYTES", "")) or DEFAULT_MAX_BYTES
    except ValueError:
        return DEFAULT_MAX_BYTES


def format_line(key, kernel, event, compile_ms=None, stages_ms=None, ts=None, parts=None):
    rec = {
        "v": 1,
        "ts": round(time.time() if ts is None else ts, 6),
        "host": _hostname(),
        "pid": os.getpid(),
        "key": key,
        "kernel": kernel,
        "event": event,
        "compile_ms": None if compile_ms is None else round(float(compile_ms), 3),
        "stages_ms": stages_ms or None,
        "seq": next(_seq),
    }
    if parts:  # the key's parts (compiles only): explain compares them
        rec["parts"] = parts
    line = _encode(rec)
    if len(line.encode("utf-8")) > MAX_LINE:
        rec["stages_ms"] = None
        rec.pop("parts", None)
        if isinstance(kernel, str):
            rec["kernel"] = kernel[:200]
        line = _encode(rec)
        if len(line.encode("utf-8")) > MAX_LINE:
            return None
    return line + "\n"


def _open_dir(directory):
    """The event dir as a descriptor: its parent opened as given (the cache dir, or
    CACHELENS_HOOK_DIR's parent: the operator's paths, which may be symlinks), the dir itself
    created if missing and opened from the parent's descriptor with O_NOFOLLOW, so a symlink
    planted as `.cachelens` is refused (ELOOP / ENOTDIR)."""
    parent, name = os.path.split(os.path.normpath(directory))
    if not name or name in (".", ".."):
        raise Refused("not a dir name: %r" % directory)
    parent = parent or "."
    if directory not in _dirs_made:
        os.makedirs(parent, exist_ok=True)
    pfd = os.open(parent, _DIR_FLAGS)
    try:
        if directory not in _dirs_made:
            try:
                os.mkdir(name, 0o777, dir_fd=pfd)
            except FileExistsError:
                pass
        return os.open(name, _DIR_FLAGS | _NOFOLLOW, dir_fd=pfd)
    finally:
        os.close(pfd)


def _check_own_regular(fd, what):
    """Refuse `fd` unless it is a regular file of one link owned by us; closes it when refused."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.getuid():
        os.close(fd)
        raise Refused("%s is not a regular file of ours (mode %o, %d links, uid %d)"
                      % (what, st.st_mode, st.st_nlink, st.st_uid))
    return fd


def _open_in(dfd, name, flags):
    """Open `name` in the dir `dfd`: created with O_EXCL, else the existing one, never through a
    symlink; refused unless a regular file of ours."""
    # The file may vanish between the two opens (a rotation by another process). A process
    # descheduled long enough (a loaded machine) can see that more than once in a row.
    for _ in range(16):
        try:
            fd = os.open(name, flags | os.O_CREAT | os.O_EXCL, 0o666, dir_fd=dfd)
        except FileExistsError:
            try:
                fd = os.open(name, flags, dir_fd=dfd)
            except FileNotFoundError:
                continue
        return _check_own_regular(fd, name)
    raise FileNotFoundError(name)


def _rotate(dfd, name, limit):
    """The file `name` in `dfd` reached the cap: rename it to `.1` under a lock, so that of
    several processes noticing at once only one renames. Lines appended meanwhile by others land
    in the `.1` file, whole."""
    import fcntl
    stem = name[:-len(".jsonl")]
    lfd = _open_in(dfd, "." + stem + ".lock", _LOCK_FLAGS)
    try:
        fcntl.flock(lfd, fcntl.LOCK_EX)
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if st.st_size >= limit:
            os.replace(name, stem + ".1.jsonl", src_dir_fd=dfd, dst_dir_fd=dfd)
    finally:
        os.close(lfd)  # releases the lock


def write_line(directory, line):
    """Append one whole line to `<directory>/events-<host>.jsonl`. Returns True on success."""
    global _failures
    if _disabled:
        return False
    try:
        _hostname()
        data = line.encode("utf-8")
        limit = _max_bytes()
        name = "events-" + _host_file + ".jsonl"
        dfd = _open_dir(directory)
        fd = -1
        try:
            _dirs_made.add(directory)
            fd = _open_in(dfd, name, _APPEND_FLAGS)
            if os.fstat(fd).st_size >= limit:
                os.close(fd)
                fd = -1
                _rotate(dfd, name, limit)
                fd = _open_in(dfd, name, _APPEND_FLAGS)
            n = os.write(fd, data)
        finally:
            if fd >= 0:
                os.close(fd)
            os.close(dfd)
        if n != len(data):
            raise OSError("short write (%d of %d bytes)" % (n, len(data)))
        _failures = 0
        return True
    except Exception as e:  # never into the job
        _dirs_made.discard(directory)
        note_failure(e)
        return False


def emit(cache_root, key, kernel, event, compile_ms=None, stages_ms=None, parts=None):
    """Format and append one event. Never raises."""
    if _disabled:
        return False
    try:
        line = format_line(key, kernel, event, compile_ms, stages_ms, parts=parts)
        if line is None:
            return False
        return write_line(event_dir(cache_root), line)
    except Exception as e:
        note_failure(e)
        return False


def chained_listener(body, prev, marker):
    """A Triton compilation listener that runs `body(src, metadata, metadata_group, times,
    cache_hit, frame)` (`frame`: the calling compile()'s; a failure is noted, never raised), then
    calls the job's `prev` listener, if any, with the same arguments. Marked with `marker` (and
    `_cachelens_prev`) so the mode that made it can recognise it."""

    def cachelens_listener(*, src, metadata, metadata_group, times, cache_hit, **kwargs):
        try:
            body(src, metadata, metadata_group, times, cache_hit, sys._getframe(1))
        except Exception as e:
            note_failure(e)
        if prev is not None:  # chained: whatever it raises is the job's own business
            return prev(src=src, metadata=metadata, metadata_group=metadata_group, times=times, cache_hit=cache_hit,
                        **kwargs)

    setattr(cachelens_listener, marker, True)
    cachelens_listener._cachelens_prev = prev
    return cachelens_listener
