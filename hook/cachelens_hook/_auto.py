"""The listener mode's switch, imported by `cachelens_hook.pth` at interpreter start-up when
CACHELENS_HOOK is set: it must be cheap and can never break start-up (everything is caught).

With CACHELENS_HOOK=1 (or true/yes/on/listener) it waits for `triton` to be imported (a finder at
the front of sys.meta_path, removed after that one import) and then chains the compilation
listener (_listen.py). Nothing of Triton's is imported here. Off when TRITON_CACHE_MANAGER is
already cachelens_hook's own (that mode records everything) or CACHELENS_HOOK_DISABLE=1.
"""
import os
import sys

_ON = ("1", "true", "yes", "on", "listener")


def wanted(environ=os.environ):
    if environ.get("CACHELENS_HOOK", "").strip().lower() not in _ON:
        return False
    if environ.get("CACHELENS_HOOK_DISABLE", "").strip().lower() in ("1", "true", "yes", "on"):
        return False
    return not environ.get("TRITON_CACHE_MANAGER", "").strip().startswith("cachelens_hook")


def _installed():
    try:
        from . import _listen
        _listen.install()
    except Exception as e:
        try:
            from . import _writer
            _writer.note_failure(e)
        except Exception:
            pass


class _Loader:
    """Runs triton's own loader, then installs the listener. The module keeps the real loader."""

    def __init__(self, real):
        self.real = real

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module):
        try:
            module.__spec__.loader = self.real
            module.__loader__ = self.real
        except Exception:
            pass
        self.real.exec_module(module)
        _installed()


class _Finder:
    """At the front of sys.meta_path until `triton` is imported."""

    def find_spec(self, name, path=None, target=None):
        if name != "triton":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        try:
            import importlib.util
            spec = importlib.util.find_spec(name)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _Loader(spec.loader)
            return spec
        except Exception:
            return None


def start():
    try:
        if not wanted():
            return
        if "triton" in sys.modules:
            _installed()
        elif not any(isinstance(f, _Finder) for f in sys.meta_path):
            sys.meta_path.insert(0, _Finder())
    except Exception:
        pass


start()
