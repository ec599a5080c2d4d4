"""The parts Triton hashed into a cache key, cut out of compile()'s own locals (no Triton import).

Used by both modes: the cache manager's put_group and the listener are both called by compile().
"""
import os
import sys

# compile() builds its key as f"{triton_key()}-{src.hash()}-{backend.hash()}-{options.hash()}-{env}"
# (3.0-3.9), env being str(sorted(env_vars.items())). triton_key() is long (the version and a
# digest per compiler file) and the backend hash has dashes of its own (CUDA: "{ptxas}-{arch}"),
# so the key is cut from the right with the parts compile() holds: env_vars and backend.
_PROCESS = None


def _process_parts():
    global _PROCESS
    if _PROCESS is None:
        import triton
        _PROCESS = {
            "python": "%d.%d.%d" % sys.version_info[:3],
            "triton_dir": os.path.dirname(os.path.abspath(triton.__file__)),
        }
    return _PROCESS


def key_parts(frame):
    """The parts Triton hashed into the key, cut out of compile()'s own `key` local (nothing
    hashed again but the backend's cached hash), or None. `triton_key` is the sha256 of
    triton_key()'s text (that text is kilobytes)."""
    try:
        if frame is None or frame.f_code.co_name != "compile":
            return None
        loc = frame.f_locals
        key, backend, env_vars = loc.get("key"), loc.get("backend"), loc.get("env_vars")
        if not isinstance(key, str) or backend is None or env_vars is None:
            return None
        env = str(sorted(env_vars.items()))
        b = backend.hash()
        tail = "-" + env
        if not key.endswith(tail):
            return None
        head = key[:-len(tail)]
        opts, head = head[-64:], head[:-65]
        if not head.endswith("-" + b):
            return None
        head = head[:-(len(b) + 1)]
        src, tk = head[-64:], head[:-65]
        import hashlib
        parts = {
            "triton_key": hashlib.sha256(tk.encode("utf-8")).hexdigest(),
            "source_hash": src,
            "backend_hash": b,
            "options_hash": opts,
            "env_vars": env,
        }
        parts.update(_process_parts())
        return parts
    except Exception:
        return None
