#!/usr/bin/env bash
# The pip package, built from a clean checkout and used from a fresh venv (called by scripts/test.sh).
#
#   scripts/wheel-ci.sh
#
# 1. maturin, and zig as its linker (`ziglang`), from PyPI into $REPO/.venv-maturin (gitignored;
#    reused when it has MATURIN_VERSION and ZIG_VERSION).
# 2. `git archive HEAD` into a temp dir (untracked and uncommitted files cannot leak in) and
#    `maturin build --release --locked --zig --compatibility manylinux2014` there. The wheel must
#    install into any venv with Python >= 3.9 on any Linux x86-64, not only on machines with this
#    build machine's glibc (a plain `maturin build` links against the build machine's glibc and
#    tags the wheel with it, manylinux_2_34 on Debian 12): zig links the binary against glibc 2.17
#    stubs, so the wheel is tagged manylinux2014 (= manylinux_2_17), the tag pip accepts on every
#    glibc distribution of the last decade. The tag is checked, and the binary's dynamic symbols
#    (objdump -T, binutils) must need no GLIBC_2.18 or newer, and it may link only libraries every
#    manylinux system has. The wheel must hold the binary as a script, the hook package and
#    `cachelens_hook.pth`. This is one more release build: zig builds for an explicit target
#    triple with its own linker, so cargo keeps its output in
#    $CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/ (and its own build-script and proc-macro
#    compiles) and reuses nothing of test.sh's `cargo build --release`; the two do not invalidate
#    each other, so a second run of either is fresh. Measured on a shared 2-core machine: the plain
#    release build from scratch 606 s, this zig build after it 518 s (+674 MiB in the target dir);
#    run again after a new commit it recompiles only the cachelens crate (110 s; the archive's
#    files carry the commit's time), with an unchanged HEAD nothing (3 s).
# 3. A fresh venv (scripts/triton-venv.sh: python3, triton==$TRITON_VERSION from PyPI, pip's cache
#    keeps it quick) and `pip install` of the wheel into it: `cachelens` lands on the venv's PATH.
# 4. From that install: scripts/workload.py twice with each hook mode, each into its own cache:
#    cache manager (TRITON_CACHE_MANAGER=cachelens_hook:TrackingCacheManager), and listener
#    (CACHELENS_HOOK=1 beside a job's own TRITON_CACHE_MANAGER); then the venv's `cachelens scan`
#    of both into a temp database. Run 1's kernels must be N misses and N compiles, run 2's N hits,
#    in the hook's files and in the database, and every entry must be in the database.
#
# Environment: WHEEL_OUT (a dir to leave the wheel in, for the hook tests: CACHELENS_WHEEL),
# TRITON_VERSION (default 3.6.0), MATURIN_VERSION (default 1.16.0), ZIG_VERSION (the `ziglang`
# package, default 0.17.1), WHEEL_WORKLOAD_ARGS (default "--kernels add,softmax").
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
log() { echo "wheel-ci: $*" >&2; }
die() { log "FAIL: $*"; exit 1; }
MATURIN_VERSION="${MATURIN_VERSION:-1.16.0}"
ZIG_VERSION="${ZIG_VERSION:-0.17.1}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"

TMP=$(mktemp -d)
trap '[ -n "${WHEEL_CI_KEEP:-}" ] || rm -rf "$TMP"' EXIT

# --- 1. maturin and zig --------------------------------------------------------------------
M="$REPO/.venv-maturin"
have=$("$M/bin/python" -c 'import importlib.metadata as m; print(m.version("maturin"), m.version("ziglang"))' 2>/dev/null || true)
if [ "$have" != "$MATURIN_VERSION $ZIG_VERSION" ]; then
    log "installing maturin $MATURIN_VERSION and ziglang $ZIG_VERSION into $M"
    [ -x "$M/bin/python" ] || python3 -m venv "$M" >&2 || { rm -rf "$M"; python3 -m venv --without-pip "$M" && curl -fsS https://bootstrap.pypa.io/get-pip.py | "$M/bin/python" - -q >&2; }
    "$M/bin/python" -m pip install --quiet --disable-pip-version-check "maturin==$MATURIN_VERSION" "ziglang==$ZIG_VERSION" >&2
fi
command -v objdump >/dev/null || die "needs objdump (Debian's binutils) for the glibc symbol check"

# --- 2. the wheel, from HEAD ----------------------------------------------------------------
mkdir "$TMP/src" "$TMP/dist"
git -C "$REPO" rev-parse --verify -q HEAD >/dev/null || die "needs a git checkout (the wheel is built from HEAD)"
git -C "$REPO" archive --format=tar HEAD | tar -x -C "$TMP/src"
t0=$(date +%s)
# $M/bin first on PATH: maturin finds zig as `python3 -m ziglang`.
(cd "$TMP/src" && PATH="$M/bin:$PATH" maturin build --release --locked --zig --compatibility manylinux2014 \
    --quiet -o "$TMP/dist" >&2)
log "maturin build (zig, manylinux2014): $(( $(date +%s) - t0 )) s"
WHEEL=$(ls "$TMP"/dist/*.whl)
log "wheel: $(basename "$WHEEL") ($(( $(stat -c %s "$WHEEL") / 1048576 )) MiB)"
case "$(basename "$WHEEL")" in
    cachelens-*-py3-none-*manylinux2014_x86_64*.whl | cachelens-*-py3-none-*manylinux_2_17_x86_64*.whl) ;;
    *) die "wheel not tagged manylinux2014 (manylinux_2_17) x86_64: $(basename "$WHEEL")" ;;
esac
python3 - "$WHEEL" <<'PY' || die "wheel contents"
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
want = {"cachelens_hook.pth", "cachelens_hook/__init__.py", "cachelens_hook/_auto.py", "cachelens_hook/_listen.py",
        "cachelens_hook/_manager.py", "cachelens_hook/_writer.py", "cachelens_hook/_keyparts.py"}
assert want <= names, want - names
assert any(n.endswith(".data/scripts/cachelens") for n in names), sorted(names)
assert not any("tests/" in n or n.endswith(".rs") for n in names), sorted(names)
PY
# The binary from the wheel: glibc symbol versions and the libraries it links.
python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); n = [n for n in z.namelist() if n.endswith(".data/scripts/cachelens")][0]; open(sys.argv[2], "wb").write(z.read(n))' \
    "$WHEEL" "$TMP/cachelens.bin"
glibc=$(objdump -T "$TMP/cachelens.bin" | grep -o 'GLIBC_[0-9][0-9.]*' | sort -uV | tr '\n' ' ')
[ -n "$glibc" ] || die "no GLIBC symbol versions in the binary (objdump -T)"
log "glibc symbol versions the binary needs: $glibc"
too_new=$(for v in $glibc; do printf '%s\n' "$v"; done | awk -F'[_.]' '$2 > 2 || ($2 == 2 && $3 > 17)')
[ -z "$too_new" ] || die "the binary needs glibc newer than 2.17: $(echo "$too_new" | tr '\n' ' ')"
libs=$(objdump -p "$TMP/cachelens.bin" | awk '$1 == "NEEDED" { print $2 }' | sort | tr '\n' ' ')
log "libraries it links: $libs"
for lib in $libs; do
    case "$lib" in # PEP 599's manylinux2014 list less X11/GL/libstdc++, and the loader
        libc.so.6 | libm.so.6 | libpthread.so.0 | libdl.so.2 | librt.so.1 | libutil.so.1 | libgcc_s.so.1 | ld-linux-x86-64.so.2) ;;
        *) die "the binary links $lib, which is not on every manylinux2014 system" ;;
    esac
done
if [ -n "${WHEEL_OUT:-}" ]; then mkdir -p "$WHEEL_OUT" && cp "$WHEEL" "$WHEEL_OUT/"; fi

# --- 3. a fresh venv with triton and the wheel ----------------------------------------------
VPY=$(bash "$REPO/scripts/triton-venv.sh" "$TMP/venv" | tail -n 1)
"$VPY" -m pip install --quiet --disable-pip-version-check "$WHEEL" >&2
V="$(dirname "$VPY")"
[ -x "$V/cachelens" ] || die "no cachelens command in the venv"
"$V/cachelens" --version >&2
SP=$("$VPY" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
[ -f "$SP/cachelens_hook.pth" ] || die "no cachelens_hook.pth in $SP"

# --- 4. both modes, then scan ---------------------------------------------------------------
ARGS=${WHEEL_WORKLOAD_ARGS:---kernels add,softmax}
run() { # cache-dir out-file env-assignments...
    local cache=$1 out=$2; shift 2
    # shellcheck disable=SC2086 # word splitting of the workload args is wanted
    (cd "$TMP" && env -i PATH="$V:/usr/bin:/bin" HOME="$HOME" TRITON_CACHE_DIR="$cache" "$@" \
        "$VPY" "$TMP/src/scripts/workload.py" $ARGS >"$out")
}
for i in 1 2; do
    run "$TMP/c-manager" "$TMP/manager$i.json" TRITON_CACHE_MANAGER=cachelens_hook:TrackingCacheManager
    run "$TMP/c-listener" "$TMP/listener$i.json" CACHELENS_HOOK=1 \
        TRITON_CACHE_MANAGER=triton.runtime.cache:FileCacheManager
done
for mode in manager listener; do # the same kernels in both caches: one machine each
    PATH="$V:$PATH" cachelens scan "$TMP/c-$mode" --db "$TMP/w.db" --machine "wheel-$mode" --json >"$TMP/scan-$mode.json"
done

"$VPY" - "$TMP" <<'PY'
import glob, json, os, sqlite3, sys
tmp = sys.argv[1]
db = sqlite3.connect(os.path.join(tmp, "w.db"))
for mode in ("manager", "listener"):
    r1, r2 = (json.load(open(os.path.join(tmp, f"{mode}{i}.json"))) for i in (1, 2))
    keys = sorted(r1["keys"])
    assert keys and sorted(r2["keys"]) == keys, mode
    cache = os.path.join(tmp, "c-" + mode)
    lines = [json.loads(l) for f in glob.glob(os.path.join(cache, ".cachelens", "*.jsonl")) for l in open(f)]
    got = {e: sorted(x["key"] for x in lines if x["event"] == e) for e in ("miss", "compile", "hit")}
    assert got == {"miss": keys, "compile": keys, "hit": keys}, (mode, got)
    first_pid = min(lines, key=lambda x: x["ts"])["pid"]
    assert all((x["event"] == "hit") == (x["pid"] != first_pid) for x in lines), mode
    scan = json.load(open(os.path.join(tmp, f"scan-{mode}.json")))["scans"][0]
    assert scan["entries"] == len(keys) and scan["events"] == 3 * len(keys), (mode, scan)
    machine = "(SELECT id FROM machines WHERE name = ?)"
    rows = db.execute(f"SELECT event, key FROM events WHERE machine_id = {machine}", ("wheel-" + mode,)).fetchall()
    in_db = {e: sorted(k for ev, k in rows if ev == e) for e in ("miss", "compile", "hit")}
    assert in_db == got, (mode, in_db)
    entries = db.execute(f"SELECT key FROM entry_rows WHERE machine_id = {machine}", ("wheel-" + mode,)).fetchall()
    assert sorted(k for (k,) in entries) == keys, (mode, entries)
    print(f"wheel-ci: {mode} mode: {len(keys)} kernels: {len(keys)} misses + compiles, then {len(keys)} hits, "
          f"scanned: {scan['entries']} entries, {scan['events']} events")
PY
log "ok"
