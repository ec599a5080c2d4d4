"""cachelens hook: record Triton kernel-cache hits, misses and compiles for `cachelens scan`.

Enable without code changes:  TRITON_CACHE_MANAGER=cachelens_hook:TrackingCacheManager

Triton imports this module the first time it needs a cache manager (inside the first compile()
of the process). Importing it also chains a `knobs.compilation.listener` (Triton 3.4+) for
per-stage compile times; that first compile() has already read the listener, so its stage times
come from the cache writes instead (see _manager.py).
"""
import atexit as _atexit

from ._manager import TrackingCacheManager, install_listener, _at_exit

__all__ = ["TrackingCacheManager", "install_listener"]
__version__ = "0.1.0"

install_listener()
_atexit.register(_at_exit)
