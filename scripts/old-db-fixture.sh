#!/usr/bin/env bash
# Makes tests/fixtures/old-db/: a database written by a previous release of cachelens and the
# answers that release's server gave for every GET route of /api/v1, for the migration test
# (tests/e2e/old_db.rs), which serves a copy with the current binary and compares.
#
#   scripts/old-db-fixture.sh OLD_CACHELENS [OUT_DIR]
#
# OLD_CACHELENS: a `cachelens` binary of the previous release (the fixture in the repo was made
# by one built from commit 585be6e: migrations up to 0031). OUT_DIR: default
# tests/fixtures/old-db. OLD_COMMIT (optional) names the commit it was built from in made-by.txt.
# Needs tar, xz, sqlite3, curl and jq.
#
# Three machines from demo/*.tar.xz, every file as Triton wrote it; two are a subset of their
# archive's entry dirs to keep the fixture small (0.86 MB with the answers); the test makes the
# same subsets (old_db.rs, `fresh`): change both together.
#   h100-hook  h100-hook-3.6.0, whole (the hook's events: history, compile times)
#   mi300-1    mi300-upgrade-1-triton-3.6.0 then -2-triton-3.9.0 into the same dir (an in-place
#              upgrade: an invalidation report with content), add/softmax/layernorm entries only
#   h100-a     h100-jit-3.6.0's triton-cache: the add_kernel entries (a source edit, debug and
#              line-info variants) and the four matmul .autotune.json entries
# The caches are unpacked at fixed paths under /tmp/cachelens-old-db-fixture/: the test scans
# them there again (a scan root is stored as its path) into a fresh database and, for h100-hook,
# into the migrated one, where it expects an unchanged scan.
# The old server then answers the routes below; the database is taken after it stopped (with the
# pair reports it stored on first visit) and compressed.
set -euo pipefail

OLD=$(realpath "${1:?usage: $0 OLD_CACHELENS [OUT_DIR]}")
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(realpath -m "${2:-$REPO/tests/fixtures/old-db}")
BASE=/tmp/cachelens-old-db-fixture
WORK=$(mktemp -d)
trap 'kill "$SERVER" 2>/dev/null || true; rm -rf "$WORK"' EXIT
SERVER=
rm -rf "$BASE"
mkdir -p "$BASE" "$OUT"
DB=$WORK/old.db

# unpack MACHINE ARCHIVE: the archive's dir at $BASE/MACHINE/cache (an in-place upgrade when
# called again for the same machine: files of the same name are replaced, others stay)
unpack() {
	mkdir -p "$BASE/$1/cache"
	tar xJf "$REPO/demo/$2.tar.xz" -C "$BASE/$1/cache" --strip-components 1
}

# keep_only DIR PATTERN: remove the entry dirs of DIR with no file name matching PATTERN (ERE)
keep_only() {
	for d in "$1"/*/; do
		ls "$d" | grep -Eq "$2" || rm -rf "$d"
	done
}

scan() { "$OLD" scan --db "$DB" --machine "$1" --hook-host '*' --json -q "$BASE/$1/cache/triton-cache" >/dev/null; }

unpack h100-hook h100-hook-3.6.0
scan h100-hook
unpack mi300-1 mi300-upgrade-1-triton-3.6.0
keep_only "$BASE/mi300-1/cache/triton-cache" '^(add|softmax|layernorm)_kernel\.'
scan mi300-1
unpack mi300-1 mi300-upgrade-2-triton-3.9.0
keep_only "$BASE/mi300-1/cache/triton-cache" '^(add|softmax|layernorm)_kernel\.'
scan mi300-1
unpack h100-a h100-jit-3.6.0
keep_only "$BASE/h100-a/cache/triton-cache" '^add_kernel\.|\.autotune\.json$'
scan h100-a

"$OLD" serve --db "$DB" --listen 127.0.0.1:0 2>"$WORK/serve.log" &
SERVER=$!
for _ in $(seq 100); do
	URL=$(grep -o 'http://[0-9.:]*' "$WORK/serve.log" | head -1 || true)
	[ -n "$URL" ] && break
	sleep 0.1
done
[ -n "$URL" ] || { cat "$WORK/serve.log"; exit 1; }
API=$URL/api/v1

ANSWERS=$WORK/answers.jsonl
: >"$ANSWERS"
# ask PATH: one line {get, status, body} (body parsed as JSON)
ask() {
	local status
	status=$(curl -s -o "$WORK/body" -w '%{http_code}' "$API$1")
	jq -c --arg get "$1" --argjson status "$status" '{get: $get, status: $status, body: .}' "$WORK/body" >>"$ANSWERS"
}
# key MACHINE KERNEL JQ_FILTER: the key of the first entry of KERNEL on MACHINE passing the filter
key() { curl -s "$API/entries?machine=$1&kernel=$2" | jq -r "[.[] | select($3)][0].key"; }

ask /machines
ask /scans
ask "/scans?machine=mi300-1"
ask "/scans?machine=mi300-1&limit=1&offset=1"
ask /kernels
ask "/kernels?machine=h100-hook"
ask "/kernels?q=soft"
ask "/kernels?backend=hip"
ask "/kernels?arch=gfx942"
ask "/kernels?triton_version=3.9.0"
ask "/kernels?limit=2&offset=1"
ask "/entries?machine=h100-hook"
ask "/entries?machine=mi300-1&kernel=add_kernel"
ask "/entries?kernel=softmax_kernel"
ask "/entries?machine=h100-a&limit=5&offset=3"
ask /autotune
ask "/autotune?machine=h100-a&kernel=matmul_kernel&limit=2&offset=1"

HOOK_ADD=$(key h100-hook add_kernel 'true')
A_ADD=$(key h100-a add_kernel '.num_warps == 4')
# the first pair of the upgrade's report: the same kernel compiled by 3.6.0 and by 3.9.0
PAIR=$(curl -s "$API/invalidations?machine=mi300-1&from=2&to=3&limit=1" | jq -r '.invalidated[0] | "\(.old_key) \(.new_key)"')
MI_OLD=${PAIR% *}
MI_NEW=${PAIR#* }
ask "/compare?a=mi300-1:$MI_OLD&b=mi300-1:$MI_NEW"
ask "/compare?a=h100-hook:$HOOK_ADD&b=h100-a:$A_ADD"
ask "/compare?a=h100-hook:$HOOK_ADD&b=mi300-1:$MI_OLD"
ask "/nearest?entry=h100-hook:$HOOK_ADD"
ask "/nearest?entry=mi300-1:$MI_NEW"
ask "/invalidations?machine=mi300-1&from=2&to=3"
ask "/invalidations?machine=mi300-1&from=2&to=3&cause=compiler&limit=3&offset=2"
ask "/invalidations?a=h100-hook&b=h100-a"
ask "/invalidations?a=mi300-1&b=h100-hook&limit=4"
ask "/history?machine=h100-hook"
ask "/history?machine=h100-hook&kernel=matmul_kernel&bucket=minute"
ask "/history?bucket=day&from=1795219200000&to=1795392000000"
ask "/history?machine=h100-hook&bucket=second&limit=5&offset=2"
ask "/history/kernels?machine=h100-hook"
ask "/history/kernels?from=1795219200000&to=1795392000000&limit=2"
# refusals: status and message
ask "/invalidations?machine=mi300-1&from=3&to=2"
ask "/entries?machine=nobody&kernel=add_kernel"
ask "/compare?a=h100-hook:$HOOK_ADD"
ask "/history?bucket=week"
ask "/no-such-route"

kill "$SERVER"
wait "$SERVER" 2>/dev/null || true
SERVER=
sqlite3 "$DB" 'PRAGMA wal_checkpoint(TRUNCATE);' >/dev/null
xz -9e -T1 -c "$DB" >"$OUT/old.sqlite.xz"
cp "$ANSWERS" "$OUT/answers.jsonl"
echo "$("$OLD" --version)${OLD_COMMIT:+ (commit $OLD_COMMIT)}" >"$OUT/made-by.txt"
ls -l "$OUT"
