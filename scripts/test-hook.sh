#!/usr/bin/env bash
# The Python hook's own tests, against the real triton in $CACHELENS_PYTHON's environment.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CACHELENS_PYTHON:?needs a python with triton (scripts/test.sh sets it)}"
"$CACHELENS_PYTHON" -m pytest hook/tests -q
