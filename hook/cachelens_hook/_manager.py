"""TrackingCacheManager: Triton's FileCacheManager that also records hits, misses and compiles.

How Triton 3.0-3.6 drive a cache manager (python/triton/compiler/compiler.py, compile()):

    fn_cache_manager = get_cache_manager(hash)       # our class, one instance per compile() call
    group = fn_cache_manager.get_group(f"{name}.json") or {}
    if not always_compile and group.get(f"{name}.json") is not None:
        return CompiledKernel(...)                   # hit
    ... make_ir -> put(name.source) (3.4+) -> for each stage: compile, put(name.<ext>)
    put(name.json); put_group(name.json, group)      # stored
    listener(..., times=..., cache_hit=False)        # 3.4+, after put_group

The same instance sees the lookup and the store, so the compile time is measured on it. The
override and dump managers (constructed with override=True / dump=True) are not tracked.
"""
import atexit
import os
import sys
import threading
import time

from triton.runtime.cache import FileCacheManager

from . import _writer
from ._keyparts import key_parts
from ._listen import stages_from_times

try:  # 3.4+
    from triton import knobs as _knobs
except Exception:  # 3.0-3.3
    _knobs = None

_perf = time.perf_counter
_tls = threading.local()

def _always_compile():
    if _knobs is not None:
        try:
            return bool(_knobs.compilation.always_compile)
        except Exception:
            pass
    return os.environ.get("TRITON_ALWAYS_COMPILE", "0") == "1"  # what 3.0-3.3 test


def _kernel_name(filename):
    return filename[:-5] if filename.endswith(".json") else filename


def _stages_from_puts(t0, puts, t_end):
    """Stage times from the cache writes Triton makes after each stage: `.source` follows make_ir
    (3.4+), `.<ext>` follows the lowering to <ext>; the rest up to the group write is `store`."""
    stages = {}
    prev = t0
    for filename, t in puts:
        if filename.startswith("__grp__") or filename.endswith(".json"):
            continue
        ext = filename.rsplit(".", 1)[-1]
        stage = "ir_init" if ext == "source" else ext
        stages[stage] = round(stages.get(stage, 0.0) + (t - prev) * 1000.0, 3)
        prev = t
    if not stages:
        return None
    stages["store"] = round((t_end - prev) * 1000.0, 3)
    return stages


def _flush_pending():
    """Write a compile event that waited for the listener and did not get it."""
    ev = getattr(_tls, "pending", None)
    if ev is not None:
        _tls.pending = None
        _writer.emit(*ev)


class TrackingCacheManager(FileCacheManager):
    """Drop-in for Triton's FileCacheManager: `TRITON_CACHE_MANAGER=cachelens_hook:TrackingCacheManager`."""

    def __init__(self, key, *args, **kwargs):
        super().__init__(key, *args, **kwargs)
        self._cl_t0 = None
        self._cl_puts = None
        self._cl_name = None
        try:
            override = kwargs.get("override", args[0] if len(args) > 0 else False)
            dump = kwargs.get("dump", args[1] if len(args) > 1 else False)
            self._cl_track = not (override or dump) and not _writer.disabled()
        except Exception:
            self._cl_track = False

    def _cl_root(self):
        return os.path.dirname(os.path.normpath(self.cache_dir))

    # --- lookups ------------------------------------------------------------------------------
    def get_group(self, filename, *args, **kwargs):
        result = super().get_group(filename, *args, **kwargs)
        if self._cl_track and not _writer.disabled():
            try:
                _flush_pending()
                name = _kernel_name(filename)
                # Triton's own test for a hit: the metadata file is in the (existing part of the) group.
                found = bool(result) and result.get(filename) is not None
                if found and not _always_compile():
                    _writer.emit(self._cl_root(), self.key, name, "hit")
                else:
                    self._cl_name = name
                    self._cl_puts = []
                    self._cl_t0 = _perf()
                    _writer.emit(self._cl_root(), self.key, name, "miss")
            except Exception as e:
                _writer.note_failure(e)
        return result

    # --- stores -------------------------------------------------------------------------------
    def put(self, data, filename, *args, **kwargs):
        path = super().put(data, filename, *args, **kwargs)
        puts = self._cl_puts
        if puts is not None:
            try:
                puts.append((filename, _perf()))
            except Exception:
                pass
        return path

    def put_group(self, filename, group, *args, **kwargs):
        ret = super().put_group(filename, group, *args, **kwargs)
        if self._cl_t0 is not None and self._cl_track:
            try:
                caller = sys._getframe(1)
                self._cl_stored(filename, caller)
            except Exception as e:
                _writer.note_failure(e)
            finally:
                self._cl_t0 = None
                self._cl_puts = None
        return ret

    def _cl_stored(self, filename, caller):
        t_end = _perf()
        compile_ms = (t_end - self._cl_t0) * 1000.0
        stages = _stages_from_puts(self._cl_t0, self._cl_puts or (), t_end)
        ev = (self._cl_root(), self.key, self._cl_name or _kernel_name(filename), "compile", compile_ms, stages,
              key_parts(caller))
        _flush_pending()
        if _listener_follows(caller):
            # Triton calls our listener right after this returns; it adds its stage times.
            _tls.pending = ev
        else:
            _writer.emit(*ev)


def _listener_follows(frame):
    """Whether the compile() that called put_group captured our listener at its start (it reads
    knobs.compilation.listener once, before the cache manager class is even imported)."""
    try:
        if frame.f_code.co_name != "compile":
            return False
        lst = frame.f_locals.get("compilation_listener")
        return bool(getattr(lst, "_cachelens", False))
    except Exception:
        return False


# --- Triton 3.4+ compilation listener ---------------------------------------------------------
def _emit_pending(src, metadata, metadata_group, times, cache_hit, frame):
    """The compile event put_group left pending, with the listener's stage times when they are
    this entry's."""
    ev = getattr(_tls, "pending", None)
    if ev is None or cache_hit:
        return
    _tls.pending = None
    root, key, name, event, compile_ms, stages, parts = ev
    try:
        json_path = metadata_group.get(name + ".json") or ""
        if os.path.basename(os.path.dirname(json_path)) == key:
            stages = stages_from_times(times) or stages
    except Exception:
        pass
    _writer.emit(root, key, name, event, compile_ms, stages, parts)


def _make_listener(prev):
    return _writer.chained_listener(_emit_pending, prev, "_cachelens")


def install_listener():
    """Chain our listener in front of any existing one (3.4+). Returns True if ours is in place."""
    if _knobs is None or _writer.disabled():
        return False
    try:
        comp = _knobs.compilation
        if not hasattr(comp, "listener"):
            return False
        cur = comp.listener
        if getattr(cur, "_cachelens", False):
            return True
        comp.listener = _make_listener(cur)
        return True
    except Exception as e:
        _writer.note_failure(e)
        return False


def _at_exit():
    try:
        _flush_pending()
    except Exception:
        pass


_ACTIVE = False


def activate():
    """Run once, when Triton (or a job) first takes TrackingCacheManager from the package."""
    global _ACTIVE
    if not _ACTIVE:
        _ACTIVE = True
        install_listener()
        atexit.register(_at_exit)
