#!/usr/bin/env bash
# Scanner benchmark: a 100,000-entry Triton cache made by cloning the corpus's entries under new
# keys (artifact files are hard links, to keep disk use down: the scanner still reads and hashes
# every one of them), then, in one run:
#   1. the time to read every file: find ROOT -type f -exec cat {} + > /dev/null
#   2. a cold `cachelens scan` into a fresh database (page cache warm for both: nothing dropped)
#   3. a re-scan with nothing changed (key dirs' stamps unchanged: one fstatat per entry dir)
#   4. the same with --full (every file stat'ed, as before the dir stamp)
#   5. peak RSS of each scan (/usr/bin/time -v)
#   6. with CACHELENS_BIN_BEFORE (an older build): its cold scan and re-scan, into a database
#      of its own (an older build refuses a database migrated by a newer one), in the same run
# Targets (2-core machine): cold scan <= 1.5x the read-everything baseline, re-scan < 1 s,
# peak RSS < 300 MB.
#
# Usage: scripts/scan-bench.sh [ENTRIES]   (default 100000)
# Env: BENCH_DIR (default target/scan-bench; never in git), CACHELENS_BIN, CACHELENS_BIN_BEFORE.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100000}
BENCH_DIR=${BENCH_DIR:-$PWD/target/scan-bench}
BIN=${CACHELENS_BIN:-$PWD/target/release/cachelens}
TIME=/usr/bin/time
if [ ! -x "$TIME" ]; then
    echo "installing GNU time (Debian package 'time')" >&2
    apt-get install -y time >/dev/null
fi
if [ -z "${CACHELENS_BIN:-}" ]; then
    cargo build --release --quiet --bin cachelens
fi

CACHE=$BENCH_DIR/cache-$N
if [ ! -f "$CACHE/.complete" ]; then
    rm -rf "$BENCH_DIR/src" "$CACHE"
    mkdir -p "$BENCH_DIR/src"
    # the corpus in demo/, but for h100-hook-3.6.0 and h100-inductor-autotune (added later):
    # the scanner figures are measured on the other seven
    for a in demo/*.tar.xz; do
        case "$(basename "$a")" in
            h100-hook-*|h100-inductor-autotune-*) ;;
            *) tar xJf "$a" -C "$BENCH_DIR/src" ;;
        esac
    done
    python3 - "$BENCH_DIR/src" "$CACHE" "$N" <<'PY'
import base64, hashlib, os, re, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
key_re = re.compile(r'^([A-Z2-7]{52}|[A-Za-z0-9_-]{43}|[0-9a-f]{64})$')
entries = []
for dirpath, dirnames, filenames in os.walk(src):
    if key_re.match(os.path.basename(dirpath)) and filenames:
        entries.append((dirpath, sorted(filenames)))
entries.sort()
os.makedirs(dst)
for i in range(n):
    d, names = entries[i % len(entries)]
    key = base64.b32encode(hashlib.sha256(b"bench-%d" % i).digest()).decode().rstrip("=")
    out = os.path.join(dst, key)
    os.mkdir(out)
    for f in names:
        os.link(os.path.join(d, f), os.path.join(out, f))
open(os.path.join(dst, ".complete"), "w").close()
print(f"cloned {len(entries)} corpus entries into {n} entries", file=sys.stderr)
PY
    touch "$CACHE/.complete"
fi
FILES=$(find "$CACHE" -type f | wc -l)
MIB=$(find "$CACHE" -type f -printf '%s\n' | awk '{s+=$1} END {printf "%d", s/1048576}')
echo "cache: $CACHE: $N entries, $FILES files, $MIB MiB (logical; hard links to $(du -sh "$CACHE" | cut -f1) on disk)"

secs() { local t0 t1; t0=$(date +%s.%N); "$@"; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
# warm the page cache once, then time the baseline
find "$CACHE" -type f -exec cat {} + > /dev/null
BASE=$(secs sh -c "find '$CACHE' -type f -exec cat {} + > /dev/null")
echo "baseline  find -type f -exec cat {} + : ${BASE}s"
# what any re-scan must at least do: list every dir and stat every file (size + mtime)
STAT=$(secs sh -c "find '$CACHE' -type f -printf '%s %T@\n' > /dev/null")
echo "floor     find -type f -printf '%s %T@' (stat only): ${STAT}s"
# what a re-scan with unchanged key dirs must at least do: stat every key dir
DSTAT=$(secs sh -c "find '$CACHE' -mindepth 1 -maxdepth 1 -type d -printf '%i %T@ %C@\n' > /dev/null")
echo "floor     find -maxdepth 1 -type d -printf '%i %T@ %C@' (key dirs only): ${DSTAT}s"

DB=$BENCH_DIR/bench.db
rm -f "$DB" "$DB-wal" "$DB-shm"
run_scan() { # LABEL [BIN DB [FLAGS...]]
    local label=$1 log=$BENCH_DIR/$1.time bin=${2:-$BIN} db=${3:-$DB}
    shift $(($# < 3 ? $# : 3))
    local t0 t1
    t0=$(date +%s.%N)
    $TIME -v "$bin" scan "$CACHE" --machine bench --db "$db" --json "$@" > "$BENCH_DIR/$label.json" 2> "$log"
    t1=$(date +%s.%N)
    local rss
    rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$log")
    printf '%-12s cachelens scan: %6.2fs  peak RSS %d MB  %s\n' "$label" "$(echo "$t1 - $t0" | bc)" "$((rss / 1024))" \
        "$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["scans"][0]; print("entries=%d new=%d changed=%d unchanged=%d skipped=%s" % (s["entries"], s["new_entries"], s["changed_entries"], s["unchanged_entries"], s["skipped"]))' "$BENCH_DIR/$label.json")"
    echo "$t1 - $t0" | bc > "$BENCH_DIR/$label.secs"
}
run_scan cold
run_scan rescan
run_scan rescan-full "$BIN" "$DB" --full
if [ -n "${CACHELENS_BIN_BEFORE:-}" ]; then
    BDB=$BENCH_DIR/before.db
    rm -f "$BDB" "$BDB-wal" "$BDB-shm"
    run_scan cold-before "$CACHELENS_BIN_BEFORE" "$BDB"
    run_scan rescan-before "$CACHELENS_BIN_BEFORE" "$BDB"
fi
COLD=$(cat "$BENCH_DIR/cold.secs")
echo "cold / baseline = $(echo "scale=2; $COLD / $BASE" | bc)"
echo "database: $(du -h "$DB" | cut -f1)"
