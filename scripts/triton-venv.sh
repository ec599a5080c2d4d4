#!/usr/bin/env bash
# Create (or reuse) a Python venv with Triton and pytest for the hook tests and scripts/workload.py.
#
#   scripts/triton-venv.sh [DIR]      DIR defaults to <repo>/.venv-triton (gitignored)
#
# Idempotent: an existing venv that already has the wanted Triton and pytest is left alone.
# The last line printed is the venv's python, so callers can do PY=$(scripts/triton-venv.sh | tail -1).
# TRITON_VERSION (default 3.6.0) picks another release into another DIR: scripts/test.sh also
# runs `TRITON_VERSION=3.4.0 scripts/triton-venv.sh .venv-triton-alt` (CACHELENS_PYTHON_ALT, for
# the explain test across compiler versions). Plain pip settings apply (e.g.
# PIP_FIND_LINKS=/dir/with/wheels). Triton compiles for a named target without any GPU, so this
# works on CPU-only machines. Needs only python3 >= 3.9; on Debian without python3-venv it
# installs that package (as root) or bootstraps pip from its wheel on PyPI.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${1:-$REPO/.venv-triton}"
VERSION="${TRITON_VERSION:-3.6.0}"
PY3="${PYTHON:-python3}"
PY="$DIR/bin/python"

log() { echo "triton-venv: $*" >&2; }

have_all() {
    [ -x "$PY" ] && "$PY" - "$VERSION" <<'EOF' >/dev/null 2>&1
import sys, importlib.metadata as md
import pytest  # noqa: F401
assert md.version("triton") == sys.argv[1]
EOF
}

if have_all; then
    log "reusing $DIR (triton $VERSION)"
    echo "$PY"
    exit 0
fi

command -v "$PY3" >/dev/null || { log "python3 not found"; exit 1; }

bootstrap_pip() {
    # A pip wheel runs as a zip: python pip.whl/pip install pip.whl
    "$PY" - <<'EOF' >&2
import json, os, subprocess, sys, tempfile, urllib.request
from urllib.parse import urljoin
api = "https://pypi.org/pypi/pip/json"
meta = json.load(urllib.request.urlopen(api, timeout=60))
url = urljoin(api, next(u["url"] for u in meta["urls"] if u["filename"].endswith("-py3-none-any.whl")))
with tempfile.TemporaryDirectory() as d:
    whl = os.path.join(d, url.rsplit("/", 1)[-1])
    urllib.request.urlretrieve(url, whl)
    subprocess.check_call([sys.executable, os.path.join(whl, "pip"), "install", "--quiet", "--no-index", whl])
EOF
}

make_venv() {
    if [ -x "$PY" ] && "$PY" -m pip --version >/dev/null 2>&1; then
        return 0
    fi
    if "$PY3" -m venv "$DIR" >/dev/null 2>&1; then
        return 0
    fi
    # Debian/Ubuntu ship venv's ensurepip separately (python3-venv).
    rm -rf "$DIR"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        log "python3 -m venv failed: installing python3-venv"
        ver=$("$PY3" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2 || true
        apt-get install -y -qq "python${ver}-venv" >&2 || apt-get install -y -qq python3-venv >&2 || true
        if "$PY3" -m venv "$DIR" >/dev/null 2>&1; then
            return 0
        fi
        rm -rf "$DIR"
    fi
    log "bootstrapping pip from its wheel on PyPI"
    "$PY3" -m venv --without-pip "$DIR"
    bootstrap_pip
}

log "creating $DIR with triton==$VERSION"
make_venv
"$PY" -m pip install --quiet --disable-pip-version-check "triton==$VERSION" pytest >&2
have_all || { log "triton $VERSION / pytest not importable in $DIR"; exit 1; }
echo "$PY"
