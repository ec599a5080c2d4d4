#!/usr/bin/env bash
# The one command that runs every test: Rust unit + integration tests (real corpus caches,
# real SQLite files, real servers on loopback; the integration tests again on PostgreSQL), the
# Python hook's tests against a real
# `pip install triton`, the hook → scan → history API round trip, and the browser tests in
# headless Chromium. Sets up what it can without root (venv, npm packages) on first use.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
passed=0; failed=0; failures=()
suite() { # name, command...
  local name=$1; shift
  echo; echo "=== $name"
  local t0=$SECONDS
  if "$@"; then passed=$((passed+1)); echo "=== $name: ok ($((SECONDS-t0)) s)"
  else failed=$((failed+1)); failures+=("$name"); echo "=== $name: FAILED ($((SECONDS-t0)) s)"; fi
}

# A Python with triton (compiles for named GPU targets on this CPU machine).
if [ -z "${CACHELENS_PYTHON:-}" ]; then
  CACHELENS_PYTHON=$(bash scripts/triton-venv.sh "$root/.venv-triton" | tail -n 1) || CACHELENS_PYTHON=""
fi
export CACHELENS_PYTHON
if [ -n "$CACHELENS_PYTHON" ]; then
  tdir=$("$CACHELENS_PYTHON" -c 'import triton, os; print(os.path.dirname(triton.__file__))' 2>/dev/null || true)
  if [ -z "${CUOBJDUMP:-}" ] && [ -x "$tdir/backends/nvidia/bin/cuobjdump" ]; then
    export CUOBJDUMP="$tdir/backends/nvidia/bin/cuobjdump"
  fi
fi
# A second Triton release, for the explain test across compiler versions (one more wheel).
if [ -z "${CACHELENS_PYTHON_ALT:-}" ]; then
  CACHELENS_PYTHON_ALT=$(TRITON_VERSION=3.4.0 bash scripts/triton-venv.sh "$root/.venv-triton-alt" | tail -n 1) \
    || CACHELENS_PYTHON_ALT=""
fi
export CACHELENS_PYTHON_ALT
# The same Triton under another Python minor version (explain_exact: other bytes, same machine code).
if [ -z "${CACHELENS_PYTHON_OTHER:-}" ] && [ -n "$CACHELENS_PYTHON" ]; then
  mine=$("$CACHELENS_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  for v in 3.12 3.11 3.13 3.10; do
    [ "$v" = "$mine" ] && continue
    other=$(ls -d "$HOME"/.pyenv/versions/"$v".*/bin/python 2>/dev/null | tail -n 1)
    [ -n "$other" ] || other=$(command -v "python$v" || true)
    [ -n "$other" ] || continue
    CACHELENS_PYTHON_OTHER=$(PYTHON="$other" bash scripts/triton-venv.sh "$root/.venv-triton-other" | tail -n 1) \
      || CACHELENS_PYTHON_OTHER=""
    break
  done
fi
export CACHELENS_PYTHON_OTHER
echo "python with triton: ${CACHELENS_PYTHON:-none} (other release: ${CACHELENS_PYTHON_ALT:-none}; other python: ${CACHELENS_PYTHON_OTHER:-none}); cuobjdump: ${CUOBJDUMP:-none}"

suite "cargo build" cargo build --release --locked
# The pip package from a clean checkout of HEAD (a second release build: zig, for manylinux2014),
# used from a fresh venv with triton; its wheel is then what the hook tests install (CACHELENS_WHEEL).
wheel_dir=$(mktemp -d)
suite "wheel (maturin build of HEAD, fresh venv with triton: both hook modes, cachelens scan)" \
  env WHEEL_OUT="$wheel_dir" bash scripts/wheel-ci.sh
CACHELENS_WHEEL=$(ls "$wheel_dir"/*.whl 2>/dev/null | head -n 1)
export CACHELENS_WHEEL
suite "style (cargo fmt --check, cargo clippy -D warnings)" \
  sh -c 'cargo fmt --check && cargo clippy --locked --all-targets -q -- -D warnings'
# A throwaway PostgreSQL for the tests of the PostgreSQL store (tests/e2e/pg_copy.rs, and the
# e2e tests run again on it below), unless CACHELENS_TEST_PG already names one.
if [ -z "${CACHELENS_TEST_PG:-}" ]; then
  pg_dir=$(mktemp -d)
  if pg_env=$(bash scripts/pg-temp.sh start "$pg_dir"); then
    eval "$pg_env"
    trap 'bash scripts/pg-temp.sh stop "$pg_dir" >/dev/null 2>&1; rm -rf "$pg_dir"' EXIT
  fi
fi
echo "test PostgreSQL: ${CACHELENS_TEST_PG:-none}"
suite "rust tests" cargo test --locked -- --test-threads 2
# The e2e tests again, each on a new PostgreSQL database of its own (tests/e2e/common.rs:
# fresh_db, fresh_db_at), the binaries they start on it too. Without a test PostgreSQL
# (scripts/pg-temp.sh could not start one; .ci/run installs postgresql) this suite fails, unless
# CACHELENS_ALLOW_SKIP=1, as a test that cannot run does.
if [ -n "${CACHELENS_TEST_PG:-}" ]; then
  suite "e2e tests on PostgreSQL" env CACHELENS_TEST_STORE=postgres cargo test --locked --test e2e -- --test-threads 2
elif [ "${CACHELENS_ALLOW_SKIP:-}" = 1 ]; then
  echo; echo "=== e2e tests on PostgreSQL: skipped: no PostgreSQL (CACHELENS_ALLOW_SKIP=1)"
else
  suite "e2e tests on PostgreSQL (no PostgreSQL: scripts/pg-temp.sh could not start one)" \
    sh -c 'echo "skipped: no PostgreSQL (install postgresql, or set CACHELENS_TEST_PG)" >&2; exit 1'
fi
suite "hook (pytest against real triton)" sh -c '"${CACHELENS_PYTHON:?needs a python with triton}" -m pytest hook/tests -q'
if [ -n "$CACHELENS_PYTHON_ALT" ]; then
  suite "hook listener mode (pytest against the other triton release)" \
    "$CACHELENS_PYTHON_ALT" -m pytest hook/tests/test_listener_mode.py -q
fi
suite "history-ci (hook -> scan -> history API)" bash scripts/history-ci.sh
suite "browser tests (headless Chromium: dashboard, explain, back/forward)" bash scripts/browser-test.sh

echo
echo "suites: ${passed} passed, ${failed} failed"
rm -rf "$wheel_dir"
[ "$failed" -eq 0 ] || { echo "failed: ${failures[*]}"; exit 1; }
