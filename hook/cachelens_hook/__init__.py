"""cachelens hook: record Triton kernel-cache hits, misses and compiles for `cachelens scan`.

Two modes, both without code changes in the job:

- cache manager: TRITON_CACHE_MANAGER=cachelens_hook:TrackingCacheManager (every 3.x). Triton imports
  this class the first time it needs a cache manager (inside the first compile() of the process);
  that also chains a `knobs.compilation.listener` (3.4+) for per-stage compile times (_manager.py).
- listener: CACHELENS_HOOK=1, for jobs whose TRITON_CACHE_MANAGER is taken (3.4+). The
  `cachelens_hook.pth` that pip puts in site-packages imports `_auto` when that variable is set;
  it chains a compilation listener as soon as `triton` is imported (_listen.py).

Importing this package imports nothing of Triton's: the manager's module is loaded on first use.
"""

__all__ = ["TrackingCacheManager", "install_listener"]
__version__ = "0.1.0"


def __getattr__(name):  # PEP 562: `cachelens_hook:TrackingCacheManager` loads the manager here
    if name in __all__:
        from . import _manager
        _manager.activate()
        return getattr(_manager, name)
    raise AttributeError("module 'cachelens_hook' has no attribute %r" % name)
