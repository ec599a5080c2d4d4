"""The listener mode: hits, misses and compiles from Triton's compilation listener alone (3.4+).

For jobs whose TRITON_CACHE_MANAGER is already taken (RemoteCacheManager, vLLM's, their own).
Triton 3.4-3.6 call `knobs.compilation.listener` from compile() on a hit (`cache_hit=True`, right
after the lookup) and after a compile has been stored (`cache_hit=False`); a compile that fails
calls nothing. Each call becomes the same lines the cache manager writes (_writer.py): a `hit`,
or a `miss` and a `compile` (its time and stages from the listener's `times`, its key parts from
compile()'s locals). The key is the entry dir's name, `_base32(metadata["hash"])`, as Triton's
get_cache_manager() names it; the events go beside the dir that holds it (`metadata_group`'s
paths: RemoteCacheManager materializes into the local cache dir too), else the cache dir knob.

The listener is chained, not set: `compilation_knobs.listener` becomes a descriptor whose reads
give ours wrapped around the job's and whose writes set the job's, so a listener the job sets
before or after `import triton` is still called, with the same arguments, after ours.
"""
import os
import sys

from . import _writer
from ._keyparts import key_parts


def _manager_mode():
    """The cache manager records everything itself once Triton has taken it from the package."""
    m = sys.modules.get("cachelens_hook._manager")
    return bool(m is not None and getattr(m, "_ACTIVE", False))


def _where(metadata, metadata_group, name):
    from triton import knobs
    from triton.runtime.cache import _base32
    key = _base32(metadata["hash"])
    path = metadata_group.get(name + ".json") if metadata_group else None
    if path and os.path.basename(os.path.dirname(path)) == key:
        return os.path.dirname(os.path.dirname(path)), key
    return knobs.cache.dir, key


def stages_from_times(times):
    """The listener's CompileTimes (µs) as `stages_ms`, or None."""
    try:
        stages = {"ir_init": round(times.ir_initialization / 1000.0, 3)}
        for stage, us in times.lowering_stages:
            stages[stage] = round(us / 1000.0, 3)
        stages["store"] = round(times.store_results / 1000.0, 3)
        return stages
    except Exception:
        return None


def record(src, metadata, metadata_group, times, cache_hit, frame):
    if _writer.disabled() or _manager_mode():
        return
    try:
        name = src.name[:150]  # compile()'s file_name: the entry's `<name>.json`
        root, key = _where(metadata, metadata_group, name)
        if cache_hit:
            _writer.emit(root, key, name, "hit")
            return
        _writer.emit(root, key, name, "miss")
        stages = stages_from_times(times)
        total_ms = sum(stages.values()) if stages else None
        _writer.emit(root, key, name, "compile", total_ms, stages, key_parts(frame))
    except Exception as e:
        _writer.note_failure(e)


def _chain(user):
    return _writer.chained_listener(record, user, "_cachelens_auto")


class _ListenerSlot:
    """Takes the place of `compilation_knobs.listener` (a plain class attribute, None)."""

    _SLOT = "_cachelens_user_listener"

    def __init__(self):
        self._last = (None, _chain(None))

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        user = obj.__dict__.get(self._SLOT)
        if self._last[0] is not user:  # one wrapper per job listener: reads give the same object
            self._last = (user, _chain(user))
        return self._last[1]

    def __set__(self, obj, value):
        obj.__dict__[self._SLOT] = value

    def __delete__(self, obj):
        obj.__dict__.pop(self._SLOT, None)


def install():
    """Chain the listener (Triton 3.4+; `triton` is imported). Returns True if it is in place."""
    try:
        from triton import knobs
    except Exception:  # 3.0-3.3: no knobs, no listener
        return False
    comp = knobs.compilation
    cls = type(comp)
    if isinstance(cls.__dict__.get("listener"), _ListenerSlot):
        return True
    if "listener" not in cls.__dict__:
        return False
    user = comp.__dict__.pop("listener", None)  # a listener set before us stays the job's
    cls.listener = _ListenerSlot()
    if user is not None:
        comp.listener = user
    return True
